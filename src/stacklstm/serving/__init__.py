"""Forecast from an exported model with jax and numpy only: no Flax, Optax, Orbax or pandas.

``stacklstm export RUN_DIR --output FILE`` (:func:`stacklstm.train.export.export_run`) writes
one self-contained file: a ``jax.export`` program (StableHLO, a symbolic batch dimension,
lowered for CPU and CUDA) that maps raw input windows in the run's original units to forecasts
in original units, with the fitted scaling, the differencing and the window normalisation
inside. :func:`load` reads it back; ``predict`` runs it.

The input contract (``ExportedForecaster.input_shape``):

- ``windows`` ``(batch, input_steps, n_columns)``: the run's columns in order (targets first,
  then features), in original units, oldest row first, as ``stacklstm predict`` reads the
  table (after its gap filling: a NaN in gives NaN out). ``input_steps`` is the run's
  ``window``, plus one when the run models first differences (the row before the window is
  needed to difference its first step).
- ``phase`` ``(batch,)`` integers, only for a run trained deseasonalised (``deseasonalize``,
  metadata ``seasonal`` not null): the seasonal phase of each window's **last row** (the
  forecast origin), ``0 .. season - 1``: the number of time steps from the metadata's
  ``seasonal.reference`` (phase 0: the first training row of the series) to that row, modulo
  ``season``. :meth:`ExportedForecaster.predict` takes it as ``phase=`` or computes it from the
  origin's time stamp, ``last_time=`` (the ``origin`` column ``stacklstm predict`` writes).
- Returns ``(batch, horizon, n_targets)`` float64 forecasts of the rows after each window's
  last row: what ``stacklstm predict`` writes for the origin at that row (within float32
  rounding of the network; the scaling is done in float64).

The file (layout version :data:`LAYOUT_VERSION`; version 1 files, written before the
``seasonal`` metadata key existed, are read too), all integers little-endian::

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
