"""Side-by-side LSTM benchmark: ``python benchmarks/run.py [--workloads S,M,L] [--peers ...]``.

A thin wrapper around ``stacklstm.bench.harness.main``; see ``benchmarks/README.md``.
"""

import sys
from pathlib import Path

try:
    from stacklstm.bench.harness import main
except ImportError:  # a checkout that is not installed: use its src/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from stacklstm.bench.harness import main

if __name__ == "__main__":
    sys.exit(main())
