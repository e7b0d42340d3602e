"""Forecast from an exported model with jax and numpy only: no Flax, Optax, Orbax or pandas.

``stacklstm export RUN_DIR --output FILE`` (:func:`stacklstm.forecasting.export.export_run`) writes
one self-contained file: a ``jax.export`` program (StableHLO, a symbolic batch dimension,
lowered for CPU and CUDA) that maps raw input windows in the run's original units to forecasts
in original units, with the fitted scaling, the differencing and the window normalisation
inside. :func:`load` reads it back; ``predict`` runs it.

The input contract (``ExportedForecaster.input_shape``):

- ``windows`` ``(batch, input_steps, n_columns)``: the run's columns in order (targets first,
  then features), in original units, oldest row first, as ``stacklstm predict`` reads the
  table (after its gap filling: a NaN in gives NaN out). ``input_steps`` is the run's
  ``window``, plus one when the run models first differences (the row before the window is
  needed to difference its first step). A run with padded windows (``start_padding``
  ``"repeat"`` in its ``config.json``, a panel's default) takes a series shorter than that
  with NaN in the rows before its first row: the program repeats the first complete row in
  their place, as training did (a NaN after it still gives NaN out). So a caller tells a
  padded window from a bad one before the call: padding is NaN in every column of the
  leading rows only (``np.isnan(w).all(axis=1)`` true for rows ``0 .. k-1`` and false
  after); any other NaN is a missing value and gives a NaN forecast. Infinite values are
  refused with a ``ValueError`` (as ``stacklstm predict`` refuses them).
- ``phase`` ``(batch,)`` integers, only for a run trained deseasonalised (``deseasonalize``,
  metadata ``seasonal`` not null): the seasonal phase of each window's **last row** (the
  forecast origin), ``0 .. season - 1``: the number of time steps from the metadata's
  ``seasonal.reference`` (phase 0: the first training row of the series) to that row, modulo
  ``season``. :meth:`ExportedForecaster.predict` takes it as ``phase=`` or computes it from the
  origin's time stamp, ``last_time=`` (the ``origin`` column ``stacklstm predict`` writes).
  For a panel run, the phase counts from the first series' phase 0 (``seasonal.reference``);
  the program shifts it to each series' own.
- ``ids`` ``(batch,)`` integers, only for a panel run (metadata ``ids`` not null): the
  position in ``ids`` of each window's series; :meth:`ExportedForecaster.predict` takes the
  names (``ids=``) and refuses one the run was not trained on.
- ``future`` ``(batch, horizon, n_future)``, only for a run with known-future columns
  (metadata ``future_columns``: its ``future_features``, then its calendar columns): their
  raw values on the ``horizon`` rows after each window's last row (``future=``).
- ``static`` ``(batch, n_static)``, only for a run with static columns (metadata
  ``static_columns``): each window's series' raw values (``static=``).
- Returns ``(batch, horizon, n_targets)`` float64 forecasts of the rows after each window's
  last row: what ``stacklstm predict`` writes for the origin at that row (within float32
  rounding of the network; the scaling is done in float64); for a run with quantiles
  (metadata ``quantiles`` not null: a quantile or distribution loss, or ``conformal``, whose
  offsets are applied inside) also ``(batch, horizon, n_targets, Q)`` quantiles at those
  levels (:meth:`ExportedForecaster.predict_quantiles`, :meth:`ExportedForecaster.forecast`).

The metadata's ``inputs`` lists the program's inputs in that order (``windows`` first).

The file (layout version :data:`LAYOUT_VERSION`; files of versions 1 and 2, written before
the ``seasonal`` key, or the ``inputs``, ``ids``, ``future_columns``, ``static_columns`` and
``conformal`` keys existed, are read too), all integers little-endian::

    16 bytes  MAGIC, b"stacklstm-export"
     4 bytes  layout version (uint32)
     8 bytes  length of the metadata (uint64)
     8 bytes  length of the program (uint64)
    32 bytes  SHA-256 of the metadata and the program, in that order
              metadata: UTF-8 JSON (columns, targets, window, horizon, input_steps, ...)
              program: ``jax.export.Exported.serialize()`` (needs the ``flatbuffers`` package)

Example:
    >>> from stacklstm import serving
    >>> forecaster = serving.load("runs/co2/model.stacklstm")  # doctest: +SKIP
    >>> forecaster.input_shape, forecaster.output_shape  # doctest: +SKIP
    (('batch', 10, 1), ('batch', 1, 1))
    >>> forecaster.predict(windows).shape  # doctest: +SKIP
    (5, 1, 1)
"""

from ._format import INPUT_NAMES as INPUT_NAMES
from ._format import LAYOUT_VERSION as LAYOUT_VERSION
from ._format import MAGIC as MAGIC
from ._format import METADATA_KEYS as METADATA_KEYS
from ._format import READ_VERSIONS as READ_VERSIONS
from ._format import SEASONAL_KEYS as SEASONAL_KEYS
from ._format import origin_steps as origin_steps
from ._format import pack as pack
from ._format import unpack as unpack
from ._runtime import ExportedForecaster as ExportedForecaster
from ._runtime import from_bytes as from_bytes
from ._runtime import load as load

#: The older name of :class:`ExportedForecaster` (kept so that code written for it runs;
#: ``stacklstm.Forecaster`` is the Flax module, a different thing).
Forecaster = ExportedForecaster
