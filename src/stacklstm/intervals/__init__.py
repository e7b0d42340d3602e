"""Prediction intervals: quantile and distribution heads, conformal calibration, scores.

The forecaster's network is the plain ``LSTMModel``; only its ``output_size`` grows. For each
(horizon step, target) it outputs ``P`` raw numbers, laid out horizon-major, then target, then
parameter: ``raw (batch, horizon * n_targets * P)`` reshapes to ``(batch, horizon, n_targets,
P)``. :class:`OutputHead` maps them, outside the module, to what each loss means:

- ``mse``, ``mae``, ``huber``: ``P = 1``, the point forecast itself (the layout of older runs).
- ``quantile``: ``P = Q`` quantiles at ``levels`` (0.5 always among them). They cannot cross:
  the 0.5 quantile is its raw output, each higher one adds ``softplus`` of its raw output to
  the one below, each lower one subtracts ``softplus`` from the one above. Trained with the
  pinball loss; the point forecast is the 0.5 quantile.
- ``normal``: ``P = 2``, mean ``mu`` and scale ``sigma = softplus(raw) + MIN_SCALE``; trained
  with the Gaussian negative log-likelihood; the point forecast is ``mu``.
- ``student_t``: ``P = 3``, location, scale as above and degrees of freedom ``df = MIN_DF +
  softplus(raw)``, learnt per output (``df > 2``: the variance always exists). The point
  forecast is the location, the median of the distribution; since ``df > 1`` it is also the
  mean (with few degrees of freedom the median is the robust choice, and here both agree).

Quantile levels come from interval levels symmetrically: a level ``l`` is the interval from
the ``(1 - l) / 2`` to the ``(1 + l) / 2`` quantile (0.8 -> 0.1 and 0.9). Distribution
quantiles are read off the distribution (``scipy.special``) in model space, then mapped to
original units by the windows' own inverse transform (monotone: scaling by a positive factor
and adding the window anchor). With ``difference=True`` the per-step quantiles are summed
along the horizon like the point forecast, which treats the steps as perfectly dependent (the
intervals of later steps are then too wide or too narrow): calibrate them with ``conformal``.

Conformal calibration (:func:`conformal_offsets`), split conformal on the validation windows,
per horizon step and target: for each interval ``[lo, hi]`` the conformity score of a target
``y`` is ``max(lo - y, y - hi)`` (conformalised quantile regression, CQR; for a point forecast
``lo = hi`` and the score is ``|y - point|``). With ``n`` scores, the offset is the
``ceil((n + 1) * l)``-th smallest (the finite-sample correction), and the calibrated interval
is ``[lo - offset, hi + offset]`` (an offset may be negative: the interval shrinks). After
adjusting, the quantiles are sorted again so that the intervals stay nested. Quantiles
without a symmetric partner are left as they are.

Ensembles combine members by averaging their quantiles level by level
(:func:`average_quantiles`, "Vincentisation"), which keeps them non-crossing.

Example:
    >>> import numpy as np
    >>> levels_to_quantiles((0.8,))
    (0.1, 0.5, 0.9)
    >>> head = OutputHead("quantile", (0.1, 0.5, 0.9))
    >>> head.output_size(horizon=2, n_targets=1)
    6
    >>> raw = np.array([[0.0, 1.0, 0.0, 0.0, 2.0, 0.0]])  # (batch, horizon * n_targets * P)
    >>> np.round(head.quantiles_at(raw, 2, 1, head.quantiles), 3).tolist()  # (batch, h, nt, Q)
    [[[[0.307, 1.0, 1.693]], [[1.307, 2.0, 2.693]]]]
"""

from .conformal import Calibration as Calibration
from .conformal import calibrate as calibrate
from .conformal import conformal_offsets as conformal_offsets
from .conformal import conformal_quantile as conformal_quantile
from .heads import INTERVAL_LOSSES as INTERVAL_LOSSES
from .heads import MIN_DF as MIN_DF
from .heads import MIN_SCALE as MIN_SCALE
from .heads import Forecast as Forecast
from .heads import OutputHead as OutputHead
from .heads import average_quantiles as average_quantiles
from .heads import interval_pairs as interval_pairs
from .heads import level_key as level_key
from .heads import levels_to_quantiles as levels_to_quantiles
from .heads import model_has_intervals as model_has_intervals
from .heads import non_crossing as non_crossing
from .heads import normal_nll as normal_nll
from .heads import pinball_loss as pinball_loss
from .heads import report_quantiles as report_quantiles
from .heads import student_t_nll as student_t_nll
from .heads import to_forecast as to_forecast
from .heads import with_median as with_median
from .scores import interval_scores as interval_scores
from .scores import pinball as pinball
