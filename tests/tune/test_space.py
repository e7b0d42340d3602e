"""Search spaces: choices and ranges decoded, the default space, bad entries named."""

import pytest

from stacklstm.checks import SettingError
from stacklstm.config import RunConfig
from stacklstm.tune import SearchSpace, default_space

optuna = pytest.importorskip("optuna")


def test_search_space_decodes_choices_and_ranges():
    space = SearchSpace.from_dict(
        {
            "model": {
                "linear_layer_sizes": [[], [32, 16]],
                "num_lstm_layers": {"low": 1, "high": 3},
            },
            "train": {"lr": {"low": 1e-4, "high": 1e-2, "log": True}},
        },
        RunConfig(),
    )
    trial = optuna.trial.FixedTrial(
        {"model.linear_layer_sizes": "32,16", "model.num_lstm_layers": 2, "train.lr": 5e-3}
    )
    overrides = space.suggest(trial)
    assert overrides == {
        "model": {"linear_layer_sizes": [32, 16], "num_lstm_layers": 2},
        "train": {"lr": 5e-3},
    }
    cfg = RunConfig().replace(overrides)
    assert (cfg.model.linear_layer_sizes, cfg.model.num_lstm_layers, cfg.train.lr) == (
        (32, 16),
        2,
        5e-3,
    )
    empty = space.suggest(
        optuna.trial.FixedTrial(
            {"model.linear_layer_sizes": "()", "model.num_lstm_layers": 1, "train.lr": 1e-3}
        )
    )
    assert empty["model"]["linear_layer_sizes"] == []


def test_default_space_is_valid_and_centred_on_the_window():
    assert "window" not in default_space(RunConfig())["data"]  # "auto": 2 seasons of the data
    base = RunConfig().replace({"data": {"window": 10}})
    space = SearchSpace.from_dict(default_space(base), base)
    [window] = [d for d in space.dimensions if d.key == "data.window"]
    assert window.choices == (5, 10, 20)
    assert {d.key for d in space.dimensions} >= {
        "model.lstm_hidden_size",
        "model.num_lstm_layers",
        "model.dropout_rate",
        "model.linear_layer_sizes",
        "train.lr",
        "data.window",
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"modle": {"x": [1]}}, "unknown \\[tune\\] section 'modle'"),
        ({"model": {"hidden": [1]}}, "\\[tune.model\\] hidden: unknown setting"),
        ({"model": {"lstm_hidden_size": []}}, "must not be empty"),
        ({"model": {"lstm_hidden_size": [8, 8]}}, "repeat a value"),
        ({"model": {"lstm_hidden_size": [8, 0]}}, "lstm_hidden_size: 0 is not allowed"),
        ({"train": {"lr": {"low": 1e-2, "high": 1e-3}}}, "needs numbers low < high"),
        ({"train": {"lr": {"low": 0.0, "high": 1.0, "log": True}}}, "log = true needs low > 0"),
        ({"train": {"lr": {"min": 0.1}}}, "a range is \\{low = ..., high = ...\\}"),
        ({"train": {"lr": 0.1}}, "expected a list of choices or a range"),
        ({"model": {"dropout_rate": {"low": 0.0, "high": 1.5}}}, "dropout_rate: 1.5 is not"),
    ],
)
def test_bad_search_spaces_are_refused_naming_the_entry(raw, message):
    with pytest.raises(SettingError, match=message):
        SearchSpace.from_dict(raw, RunConfig())


@pytest.mark.parametrize(
    ("section", "name", "spec", "why"),
    [
        ("train", "loss", ["mse", "mae", "student_t"], "changes what the validation loss"),
        ("data", "scaler", ["standard", "robust"], "changes the units of the validation loss"),
        ("data", "horizon", [3, 6], "changes the rows the validation loss"),
        ("train", "ensemble", [2], "tune with ensemble = 1"),
    ],
)
def test_settings_whose_trials_would_not_compare_are_refused(section, name, spec, why):
    said = rf"\[tune\.{section}\] {name} cannot be searched: .*{why}"
    with pytest.raises(SettingError, match=said):
        SearchSpace.from_dict({section: {name: spec}}, RunConfig())
