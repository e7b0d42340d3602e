"""Tables to forecasting windows: read, clean, split by time, scale, index windows, batch.

numpy and pandas only; nothing here imports JAX. One idea per file, in the order the data
flows, each inverted exactly before metrics by :meth:`WindowSet.to_original`::

    table.read_table -> clean.prepare_series   check columns and types, parse and sort time,
                                               insert missing time stamps, fill (or reject)
                                               gaps; one series, or a panel of many (an id
                                               column)     -> Series (rows, columns)
                     -> windows.make_splits    split by time (per series), difference
                                               (optional) -> scale.Scaler / PanelScaler
                                               (fitted on each series' training rows) ->
                                               HeldSeries (the scaled series, held once) ->
                                               WindowSets: one origin per window
                     -> WindowSet.gather       a batch of windows built on demand, window-
                                               relative normalisation applied
                     -> batches                shuffled index batches, per-process slices

Row counts of the splits are taken on the rows of each prepared series (after gap filling,
before differencing): with ``T`` rows, ``n_test = round(test_fraction * T)`` (or
``test_size``), ``n_val = round(val_fraction * T)`` (or ``val_size``) (Python's ``round``,
half to even) and the first ``n_train = T - n_val - n_test`` rows are the training rows. A
window belongs to the split that holds all of its targets; its inputs may reach back into
earlier splits but never forward, and never into another series.

Memory: the series are held once as float64 ``(rows, columns)`` (the values and the scaled
model-space values); a window set adds a few numbers per window. No step needs every window
at once: :meth:`WindowSet.gather` builds the batch asked for.

Example:
    >>> import numpy as np, pandas as pd
    >>> frame = pd.DataFrame({"date": pd.date_range("2000-01-01", periods=40, freq="W"),
    ...                       "co2": np.arange(40.0)})
    >>> cfg = DataConfig(window=4, horizon=2, season=52)  # weekly: a season of 52
    >>> splits, scaler = make_splits(prepare_series(frame, cfg), cfg)
    >>> x, y = splits.train.gather(np.arange(2))
    >>> len(splits.train), x.shape, y.shape, splits.test.origin.tolist()
    (23, (2, 4, 1), (2, 2, 1), [33, 34, 35, 36, 37])
"""

from ..checks import DataError as DataError
from ..config import DataConfig as DataConfig
from ..config import GapPolicy as GapPolicy
from ..config import NormalizeKind as NormalizeKind
from ..config import ScalerKind as ScalerKind
from .batches import iterate_batches as iterate_batches
from .batches import process_slice as process_slice
from .batches import steps_per_epoch as steps_per_epoch
from .clean import Series as Series
from .clean import prepare_series as prepare_series
from .covariates import covariate_sizes as covariate_sizes
from .fitting import fit_static_scaler as fit_static_scaler
from .scale import PanelScaler as PanelScaler
from .scale import Scaler as Scaler
from .scale import scaler_from_dict as scaler_from_dict
from .splits import split_rows as split_rows
from .table import bundled_dataset_path as bundled_dataset_path
from .table import bundled_panel_path as bundled_panel_path
from .table import read_table as read_table
from .windows import Splits as Splits
from .windows import make_inference_windows as make_inference_windows
from .windows import make_splits as make_splits
from .windows import select_series as select_series
from .windows import unforecastable as unforecastable
from .windowset import HeldSeries as HeldSeries
from .windowset import WindowSet as WindowSet
