"""``ESHybrid``: the smoothing against a per-step numpy loop, the model against its pieces
(``LSTMModel`` on the normalised window, multiplied back), and a hybrid run end to end:
its settings, a bit-identical resume, ``export`` equal to ``predict``, refused settings."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from helpers import TINY_RUN, _leaves, _main
from stacklstm import serving
from stacklstm.checks import DataError, SettingError
from stacklstm.config import ModelConfig, RunConfig
from stacklstm.forecaster import build_model
from stacklstm.forecasting import predict
from stacklstm.forecasting.export import export_run
from stacklstm.forecasting.inference import load_run, load_series
from stacklstm.hybrid import ESHybrid, smooth
from stacklstm.model import LSTMModel
from stacklstm.run import fit
from stacklstm.rundir.info import read_run_info


def _smooth_loop(y, alpha, gamma, m):
    """Multiplicative Holt-Winters without trend, one step at a time (float64)."""
    y = np.asarray(y, np.float64)
    batch, time, n = y.shape
    levels, factors, ahead = (
        np.zeros((batch, n)),
        np.zeros((batch, time, n)),
        np.zeros((batch, m, n)),
    )
    for b in range(batch):
        for j in range(n):
            seen = y[b, :m, j]
            level = seen.mean()
            season = list(seen / level) + [1.0] * (m - len(seen)) if m > 1 else [1.0]
            for t in range(time):
                s = season[t % m]
                factors[b, t, j] = s
                level = alpha[j] * y[b, t, j] / s + (1 - alpha[j]) * level
                if m > 1:
                    season[t % m] = gamma[j] * y[b, t, j] / level + (1 - gamma[j]) * s
            levels[b, j] = level
            ahead[b, :, j] = [season[(time + k) % m] for k in range(m)]
    return levels, factors, ahead


@pytest.mark.parametrize(("time", "m"), [(12, 4), (9, 4), (5, 4), (3, 4), (7, 1)])
def test_smoothing_equals_a_per_step_loop(time, m):
    rng = np.random.default_rng(time + m)
    y = rng.uniform(0.5, 3.0, size=(3, time, 2))
    alpha, gamma = np.array([0.3, 0.8]), np.array([0.1, 0.6])
    got = smooth(jnp.asarray(y), jnp.asarray(alpha), jnp.asarray(gamma), m)
    for a, b in zip(got, _smooth_loop(y, alpha, gamma, m), strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=2e-6)


def test_a_pure_multiplicative_season_is_forecast_exactly_by_a_zero_head():
    # a season of 4 whose level doubles: 1, 2, 3, 2 times 10
    model = ESHybrid(lstm_hidden_size=4, linear_layer_sizes=(), output_size=6, season=4)
    x = jnp.tile(jnp.array([10.0, 20.0, 30.0, 20.0]), 3)[None, :, None]
    params = model.init(jax.random.key(0), x)["params"]
    params = jax.tree.map(jnp.zeros_like, params)  # o = 0: the smoothing alone
    y = model.apply({"params": params}, x)
    np.testing.assert_allclose(np.asarray(y[0]), [10.0, 20.0, 30.0, 20.0, 10.0, 20.0], rtol=1e-5)


def test_the_model_is_an_lstm_model_on_the_normalised_window_multiplied_back():
    rng = np.random.default_rng(0)
    x = jnp.asarray(np.concatenate([rng.uniform(1, 5, (4, 10, 2)), rng.normal(size=(4, 10, 1))], 2))
    kw = dict(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(5,), output_size=6)
    hybrid = ESHybrid(**kw, season=3, n_targets=2)
    params = hybrid.init(jax.random.key(1), x)["params"]
    params = {
        **params,
        "level_logit": jnp.array([0.4, -0.3]),
        "season_logit": jnp.array([-1.2, 0.5]),
    }
    got = np.asarray(hybrid.apply({"params": params}, x))

    alpha, gamma = jax.nn.sigmoid(params["level_logit"]), jax.nn.sigmoid(params["season_logit"])
    level, factors, ahead = _smooth_loop(
        np.asarray(x[:, :, :2]), np.asarray(alpha), np.asarray(gamma), 3
    )
    normal = np.log(np.asarray(x[:, :, :2]) / (level[:, None] * factors))
    inputs = jnp.asarray(np.concatenate([normal, np.asarray(x[:, :, 2:])], 2), jnp.float32)
    lstm = {"lstm": params["lstm"], "head": params["head"]}
    o = np.asarray(LSTMModel(**kw).apply({"params": lstm}, inputs)).reshape(4, 3, 2)
    want = level[:, None] * ahead[:, [0, 1, 2]] * np.exp(o)
    np.testing.assert_allclose(got, want.reshape(4, 6), rtol=2e-5)


def test_the_smoothing_is_learnt_jit_and_vmap_agree():
    model = ESHybrid(lstm_hidden_size=4, linear_layer_sizes=(), output_size=2, season=2)
    x = 1.0 + jax.random.uniform(jax.random.key(2), (5, 6, 1))
    params = model.init(jax.random.key(0), x)

    def loss(p):
        return jnp.mean((model.apply(p, x) - 1.5) ** 2)

    grads = jax.grad(loss)(params)["params"]
    assert all(np.isfinite(g).all() for g in _leaves(grads))
    assert float(jnp.abs(grads["level_logit"]).sum()) > 0
    assert float(jnp.abs(grads["season_logit"]).sum()) > 0
    eager = model.apply(params, x)
    np.testing.assert_allclose(jax.jit(model.apply)(params, x), eager, rtol=1e-6)
    one = jax.vmap(lambda row: model.apply(params, row[None])[0])(x)
    np.testing.assert_allclose(one, eager, rtol=1e-5)


def test_build_model_builds_the_hybrid_and_refuses_covariates():
    model = build_model(ModelConfig(hybrid=True), 4, season=12, n_targets=2)
    assert isinstance(model, ESHybrid) and (model.season, model.n_targets) == (12, 2)
    with pytest.raises(ValueError, match="no covariates"):
        build_model(ModelConfig(hybrid=True), 4, 2, n_future=1)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"train": {"loss": "quantile"}}, "loss"),
        ({"data": {"static_features": ("size",)}}, "static_features"),
        ({"data": {"calendar": "auto"}}, "calendar"),
    ],
)
def test_the_hybrid_refuses_interval_losses_and_future_or_static_covariates(overrides, field):
    with pytest.raises(SettingError, match="hybrid") as err:
        RunConfig.from_dict({"model": {"hybrid": True}, **overrides})
    assert err.value.field == field


HYBRID_RUN = TINY_RUN.replace({"model": {"hybrid": True}})


@pytest.fixture(scope="module")
def hybrid_run(tmp_path_factory):
    return fit(HYBRID_RUN, tmp_path_factory.mktemp("hybrid") / "run", quiet=True)


def test_a_hybrid_run_records_the_data_settings_it_needs(hybrid_run):
    saved = json.loads((hybrid_run.out_dir / "config.json").read_text())["config"]
    assert saved["model"]["hybrid"] is True
    data = saved["data"]
    assert (data["scaler"], data["normalize"], data["deseasonalize"]) == ("mean", "none", False)
    assert (data["target_transform"], data["difference"]) == ("none", False)
    run = load_run(hybrid_run.out_dir)
    assert isinstance(run.model, ESHybrid) and run.model.season == 52
    # the scaler divides by the training rows' mean and centres nothing
    assert run.info.scaler.center[0] == 0.0 and 300 < run.info.scaler.scale[0] < 400


def test_a_hybrid_resume_is_bit_identical(hybrid_run, tmp_path):
    stopped = fit(HYBRID_RUN, tmp_path / "split", quiet=True, stop_after_steps=30)
    assert stopped.step == 30
    resumed = fit(HYBRID_RUN, tmp_path / "split", quiet=True, resume=True)
    assert resumed.step == hybrid_run.step and resumed.best_val_loss == hybrid_run.best_val_loss
    whole = _leaves(load_run(hybrid_run.out_dir).params)
    for a, b in zip(whole, _leaves(load_run(resumed.out_dir).params), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_hybrid_run_exports_and_equals_predict(hybrid_run, tmp_path):
    pytest.importorskip("flatbuffers")
    path = tmp_path / "hybrid.stacklstm"
    export_run(hybrid_run.out_dir, path)
    forecaster = serving.load(path)
    frame = predict(hybrid_run.out_dir)
    values = load_series(read_run_info(hybrid_run.out_dir), None)[1].values
    got = forecaster.predict(forecaster.windows(values))
    want = frame[forecaster.forecast_columns].to_numpy().reshape(got.shape)
    # float32 model outputs near 1 (divided by the training mean): a few ulps, relative
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert 300 < np.median(want) < 450


def test_a_hybrid_on_targets_that_are_not_positive_is_a_data_error(tmp_path):
    table = tmp_path / "t.csv"
    y = 5 + np.sin(np.arange(120) / 3)
    y[40] = 0.0
    pd.DataFrame({"date": pd.date_range("2000-01-03", periods=120, freq="W-MON"), "co2": y}).to_csv(
        table, index=False
    )
    with pytest.raises(DataError, match="positive targets"):
        fit(HYBRID_RUN, tmp_path / "run", data_path=table, quiet=True)


def test_cli_hybrid_with_an_interval_loss_is_one_line_exit_2(tmp_path):
    code, _, err = _main("train", "--hybrid", "--loss", "quantile", "--out", tmp_path / "r")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "hybrid" in err


@pytest.mark.slow  # a hybrid panel fit: about 13 s
def test_the_dataframe_api_trains_the_hybrid_on_a_panel():
    from helpers import TINY, _panel
    from stacklstm.estimator import LSTMForecaster

    df = _panel()
    df["y"] = df["y"] - df["y"].min() + 1.0  # positive targets
    model = LSTMForecaster(**TINY, hybrid=True).fit(df)
    assert isinstance(load_run(model.run_dir).model, ESHybrid)
    out = model.predict()
    wide = predict(model.run_dir).groupby("id", sort=False).tail(1)
    for _, row in wide.iterrows():
        mine = out[out["unique_id"] == row["id"]]["stacklstm"].to_numpy()
        np.testing.assert_array_equal(mine, [row[f"y_h{k}"] for k in (1, 2, 3)])
        assert np.all(mine > 0)
