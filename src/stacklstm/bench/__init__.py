"""Side-by-side speed benchmark of stacklstm against the other LSTMs a JAX user can pick.

Run it with ``python benchmarks/run.py`` (see ``benchmarks/README.md``). Importing this package is
cheap: the peers' libraries are imported only inside the worker processes that need them.
"""

from .harness import main as main
from .workloads import WORKLOADS as WORKLOADS
from .workloads import Workload as Workload
from .workloads import forward_flops as forward_flops
from .workloads import train_flops as train_flops
