"""The report of a run: the test split's scores beside the baselines', the table, the plots.

Example:
    >>> from stacklstm.report import evaluate_run
    >>> report = evaluate_run("runs/co2")  # doctest: +SKIP
    >>> print(report.table)  # doctest: +SKIP
"""

from .evaluate import Report as Report
from .evaluate import evaluate_run as evaluate_run
from .evaluate import format_table as format_table
