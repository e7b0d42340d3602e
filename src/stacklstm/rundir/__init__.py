"""The run folder: its file names, its lock, creating it, what it holds, writing outputs.

Example:
    >>> from stacklstm.rundir import CONFIG_FILE
    >>> CONFIG_FILE
    'config.json'
"""

from .files import CONFIG_FILE as CONFIG_FILE
from .folder import atomic_write as atomic_write
from .folder import atomic_write_text as atomic_write_text
from .folder import creating_run_dir as creating_run_dir
from .folder import is_resumable as is_resumable
from .info import RunInfo as RunInfo
from .info import read_run_info as read_run_info
from .info import write_run_info as write_run_info
from .lock import RunInUseError as RunInUseError
from .lock import RunLock as RunLock
