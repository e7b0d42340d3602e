"""The commands' own lines: what `stacklstm export` says its program takes."""

from stacklstm.cli.commands import _export_inputs


def test_export_names_every_input_beyond_the_windows():
    meta = {
        "ids": ["a", "b", "c", "d"],
        "horizon": 2,
        "future_columns": ["promo", "price"],
        "static_columns": ["size"],
        "quantiles": [0.1, 0.5, 0.9],
    }
    assert _export_inputs(meta) == [
        "and each window's series: predict(windows, ids=...), one of 4 (a, b, c, ...)",
        "and the known-future values over the horizon: future=(batch, 2, 2) of promo, price",
        "and the static values: static=(batch, 1) of size",
        "predict_quantiles(...) gives the quantiles 0.1, 0.5, 0.9",
    ]
    assert _export_inputs({"ids": ["x", "y"]}) == [
        "and each window's series: predict(windows, ids=...), one of 2 (x, y)"
    ]
    # a one-series run without covariates or quantiles: nothing beyond the windows
    assert _export_inputs({"ids": None, "future_columns": [], "quantiles": []}) == []


def test_a_preset_sets_its_settings_under_the_flags_given():
    from stacklstm.cli.commands import _overrides
    from stacklstm.cli.parser import build_parser
    from stacklstm.config import RunConfig

    parse = build_parser().parse_args
    cfg = RunConfig().replace(_overrides(parse(["train", "--preset", "accurate"])))
    assert (cfg.train.baselines, cfg.train.combination) == ("all", "median_and_weighted")
    given = parse(["train", "--preset", "accurate", "--combination", "median", "--epochs", "3"])
    cfg = RunConfig().replace(_overrides(given))
    assert (cfg.train.baselines, cfg.train.combination, cfg.train.epochs) == ("all", "median", 3)
    # without it: the defaults
    assert _overrides(parse(["train"]))["train"] == {}
