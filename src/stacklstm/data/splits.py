"""How many rows each split of a series gets, and the fewest rows a run needs.

Row counts are taken on the rows of each prepared series (after gap filling, before
differencing); a window belongs to the split that holds all of its targets."""

from __future__ import annotations

from ..config import DataConfig

__all__ = ["fewest_rows", "input_text", "split_problem", "split_rows", "window_text"]


def split_rows(n_rows: int, cfg: DataConfig) -> tuple[int, int, int]:
    """Rows ``(n_train, n_val, n_test)`` of a series of ``n_rows`` rows, in time order.

    ``test_size``/``val_size`` give the rows themselves; otherwise ``round(fraction *
    n_rows)`` (Python's ``round``, half to even), raised to ``horizon`` where that is fewer (a
    split shorter than one horizon scores no window: a short series then still gets one
    validation and one test window, where it has the rows).

    Example:
        >>> split_rows(20, DataConfig(val_fraction=0.2, test_fraction=0.2))
        (12, 4, 4)
        >>> split_rows(20, DataConfig(val_size=3, test_size=5))
        (12, 3, 5)
        >>> split_rows(20, DataConfig(horizon=6, test_size=0))  # round(0.15 * 20) = 3 -> 6
        (14, 6, 0)
    """
    n_test = _rows(cfg.test_size, cfg.test_fraction, n_rows, cfg.horizon)
    n_val = _rows(cfg.val_size, cfg.val_fraction, n_rows, cfg.horizon)
    return n_rows - n_val - n_test, n_val, n_test


def _rows(size: int | None, fraction: float, n_rows: int, horizon: int) -> int:
    """One split's rows: ``size``, else ``round(fraction * n_rows)``, at least ``horizon``
    unless the fraction is 0."""
    if size is not None:
        return size
    rows = round(fraction * n_rows)
    return max(rows, horizon) if fraction > 0 else rows


def input_text(cfg: DataConfig) -> str:
    """The input rows one window needs, in words: ``"window (8)"``, or with padding ``"one
    input row (start_padding)"``."""
    return "one input row (start_padding)" if cfg.padded else f"window ({cfg.window})"


def window_text(cfg: DataConfig) -> str:
    """The rows one training window needs, in words: ``"window (8) + horizon (3)"``, or with
    padding ``"one input row (start_padding) + horizon (3)"`` (``+ 1 (difference)`` after)."""
    extra = " + 1 (difference)" if cfg.difference else ""
    return f"{input_text(cfg)} + horizon ({cfg.horizon}){extra}"


def fewest_rows(cfg: DataConfig) -> int:
    """The fewest rows of a series whose training split holds one window: ``window +
    horizon`` (+1 with ``difference``) training rows, then its validation and test rows.

    Example:
        >>> fewest_rows(DataConfig(window=8, horizon=1, val_size=14, test_size=14))
        37
        >>> fewest_rows(DataConfig(window=8, horizon=1)), split_rows(13, DataConfig())
        (13, (9, 2, 2))
    """
    needed = cfg.window_rows
    n_rows = needed
    while split_rows(n_rows, cfg)[0] < needed:  # fractions below 1 in all: it ends
        n_rows += 1
    return n_rows


def split_problem(n_rows: int, rows: tuple[int, int, int], cfg: DataConfig) -> str | None:
    """Why a series of ``n_rows`` rows split as ``rows`` gives no training window, or None."""
    n_train, n_val, n_test = rows
    h, needed = cfg.horizon, cfg.window_rows
    if n_train < needed:
        given = ", ".join(
            f"{split}_size={getattr(cfg, split + '_size')}"
            if getattr(cfg, split + "_size") is not None
            else f"{split}_fraction={getattr(cfg, split + '_fraction')}"
            for split in ("val", "test")
        )
        fewest = fewest_rows(cfg)
        if n_train < 1:  # no training row at all: the series itself is too short
            return (
                f"the series has {n_rows} row{'s' if n_rows != 1 else ''} but the run needs at "
                f"least {fewest}: {window_text(cfg)} = {needed} for one "
                f"training window, then the validation and test rows ({given})"
            )
        return (
            f"the training split has {n_train} of {n_rows} rows ({given}) but "
            f"{window_text(cfg)} = {needed} rows are needed; the series needs at least "
            f"{fewest} rows"
        )
    for name, count, split in (("validation", n_val, "val"), ("test", n_test, "test")):
        if 0 < count < h:  # only a size given in rows: a fraction gives at least horizon
            return (
                f"the {name} split has {count} rows, fewer than horizon ({h}); raise "
                f"`{split}_size` or set it to 0"
            )
    return None
