"""Configs: one home for defaults, help texts, field checks and the older spellings."""

import dataclasses
import inspect
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import _JSON, raises_one_line
from stacklstm import LSTMModel, StackedLSTM
from stacklstm.checks import SettingError, SettingTypeError
from stacklstm.config import (
    ALIASES,
    SECTIONS,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainConfig,
    _legacy_values,
    describe,
    setting,
)
from stacklstm.forecaster import build_model
from stacklstm.train import load_config

#: Every key a layout-2 config.json holds. A field added later must carry `legacy=` (the
#: behaviour before it existed), so that older run folders keep meaning what they meant.
LAYOUT_2_KEYS = {
    "data": {"target", "features", "time_column", "window", "horizon", "stride",
             "val_fraction", "test_fraction", "scaler", "normalize", "difference", "gaps",
             "season"},
    "model": {"lstm_hidden_size", "num_lstm_layers", "linear_layer_sizes", "mean_aggregation",
              "bidirectional", "dropout_rate"},
    "train": {"epochs", "batch_size", "lr", "weight_decay", "warmup_fraction", "clip_norm",
              "loss", "patience", "seed", "log_every", "checkpoint_every", "skip_nonfinite"},
}  # fmt: skip


def test_model_config_defaults_are_lstm_models():
    model_defaults = {
        name: p.default
        for name, p in inspect.signature(LSTMModel).parameters.items()
        if name in {f.name for f in dataclasses.fields(ModelConfig)}
    }
    config_defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    assert config_defaults == model_defaults
    assert build_model(ModelConfig(), output_size=1) == LSTMModel()


def test_every_field_has_help():
    for cls in SECTIONS.values():
        for name, text in describe(cls).items():
            assert isinstance(text, str) and len(text) > 10, (cls.__name__, name)


def test_new_fields_say_what_older_runs_meant():
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f.name in LAYOUT_2_KEYS[section] or "legacy" in f.metadata, (section, f.name)
    added = {
        (section, f.name): f.metadata["legacy"]
        for section, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
        if f.name not in LAYOUT_2_KEYS[section]
    }
    # what each newer field meant before it existed: older reports scored the naive baselines;
    # older runs read one series, split by fractions, refused nothing for being short, and
    # gave point forecasts without intervals; older models read past-only features and no
    # calendar; they kept the seasonal pattern and the values themselves, and trained for the
    # epochs given, one model each
    assert added == {
        ("data", "deseasonalize"): False,
        ("data", "target_transform"): "none",
        ("train", "min_steps"): 0,
        ("train", "baselines"): "naive",
        ("data", "id_column"): None,
        ("data", "val_size"): None,
        ("data", "test_size"): None,
        ("data", "strict"): False,
        ("train", "quantiles"): (),
        ("train", "interval_levels"): (),
        ("train", "conformal"): False,
        ("data", "future_features"): (),
        ("data", "static_features"): (),
        ("data", "calendar"): "none",
        ("train", "ensemble"): 1,
    }


def test_older_spellings_are_aliases():
    old = RunConfig.from_dict(
        {"model": {"hidden_size": 8, "num_layers": 3, "dropout": 0.5}, "train": {"season": 12}}
    )
    assert old.model == ModelConfig(lstm_hidden_size=8, num_lstm_layers=3, dropout_rate=0.5)
    assert old.data.season == 12
    assert set(ALIASES) == {("model", "hidden_size"), ("model", "num_layers"),
                            ("model", "dropout"), ("train", "season")}  # fmt: skip
    assert RunConfig().replace({"model": {"hidden_size": 4}}).model.lstm_hidden_size == 4


def test_a_field_given_under_both_names_is_refused():
    with pytest.raises(
        SettingError, match=r"^hidden_size and lstm_hidden_size are the same setting; give one$"
    ):
        RunConfig.from_dict({"model": {"hidden_size": 8, "lstm_hidden_size": 9}})
    with pytest.raises(
        SettingError, match=r"^\[train\] season and \[data\] season are the same setting"
    ):
        RunConfig.from_dict({"data": {"season": 7}, "train": {"season": 12}})


def test_layout_1_config_json_reads_as_it_was_written():
    """A config.json written before the rename (hidden_size, train.season) keeps its values."""
    v1 = RunConfig().to_dict()
    v1["model"] = {"hidden_size": 16, "num_layers": 1, "linear_layer_sizes": [8],
                   "mean_aggregation": True, "bidirectional": False, "dropout": 0.1}  # fmt: skip
    season = v1["data"].pop("season")
    v1["train"]["season"] = 12
    cfg = RunConfig.from_dict(json.loads(json.dumps(v1)), saved=True)
    assert (cfg.model.lstm_hidden_size, cfg.model.dropout_rate, cfg.data.season) == (16, 0.1, 12)
    assert season == "auto"


def test_a_saved_config_missing_a_key_without_legacy_is_refused():
    saved = RunConfig().to_dict()
    del saved["train"]["lr"]
    with pytest.raises(SettingError, match=r"lacks \[train\] lr"):
        RunConfig.from_dict(saved, saved=True)
    del saved["train"]  # a config file (not saved) may leave anything out
    RunConfig.from_dict({k: v for k, v in saved.items() if k != "model"})


def test_a_missing_key_with_legacy_takes_the_legacy_value_not_the_default():
    @dataclasses.dataclass(frozen=True)
    class Later:
        old: int = setting(1, help="a field every run has")
        new: int = setting(5, help="added later; older runs behaved as 0", legacy=0)

    assert _legacy_values(Later, {"old": 1}, "x") == {"new": 0}
    with pytest.raises(SettingError, match=r"lacks \[x\] old"):
        _legacy_values(Later, {"new": 1}, "x")


def test_one_exception_type_and_message_per_kind_of_mistake():
    """The model and the config reject the same value the same way."""
    for bad, kind in (("32,16", SettingTypeError), ([32, 0], SettingError)):
        with pytest.raises(kind) as from_model:
            LSTMModel(linear_layer_sizes=bad)
        with pytest.raises(kind) as from_config:
            ModelConfig(linear_layer_sizes=bad)
        assert str(from_model.value) == str(from_config.value)
    with pytest.raises(SettingTypeError, match="bidirectional must be true or false"):
        StackedLSTM(4, bidirectional="yes")
    with pytest.raises(SettingTypeError, match="bidirectional must be true or false"):
        ModelConfig(bidirectional="yes")
    # a type mistake is both a TypeError and a ValueError
    assert issubclass(SettingTypeError, TypeError) and issubclass(SettingTypeError, ValueError)


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (DataConfig, {"window": 0}, "window must be an integer >= 1, got 0"),
        (ModelConfig, {"dropout_rate": 1.0}, r"dropout_rate must be a number in \[0.0, 1.0\)"),
        (TrainConfig, {"lr": 0.0}, r"lr must be a number in \(0.0, inf\), got 0.0"),
        (
            TrainConfig,
            {"loss": "l3"},
            "loss must be one of 'mse', 'mae', 'huber', 'quantile', 'normal', 'student_t', "
            "got 'l3'",
        ),
        (TrainConfig, {"quantiles": (0.5, 1.0)}, r"quantiles must lie strictly between 0 and 1"),
        (
            TrainConfig,
            {"quantiles": (0.9, 0.1), "loss": "quantile"},
            r"quantiles must be ascending without repeats, got \(0.9, 0.1\)",
        ),
        (
            TrainConfig,
            {"quantiles": (0.1, 0.1, 0.9), "loss": "quantile"},
            "quantiles must be ascending without repeats",
        ),
        (TrainConfig, {"quantiles": (0.1, 0.9)}, "quantiles apply to `loss=quantile`"),
        (TrainConfig, {"interval_levels": (0.0,)}, "interval_levels must lie strictly between"),
        (TrainConfig, {"interval_levels": ("0.8",)}, "interval_levels must hold numbers"),
        (TrainConfig, {"conformal": "yes"}, "conformal must be true or false"),
    ],
)
def test_setting_errors_name_the_field(cls, kwargs, message):
    with pytest.raises(SettingError, match=message) as err:
        cls(**kwargs)
    assert err.value.field == next(iter(kwargs))


def test_config_round_trip_and_defaults():
    cfg = RunConfig.from_dict({"model": {"linear_layer_sizes": [4]}, "train": {"lr": 1}})
    assert cfg.model.linear_layer_sizes == (4,)
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert RunConfig().model == ModelConfig(64, 2, (32, 16), False, False, 0.0)
    assert (RunConfig().train.batch_size, RunConfig().train.seed) == ("auto", 0)
    assert RunConfig().data.season == "auto" and RunConfig().train.skip_nonfinite is False


def test_config_diff_names_fields():
    a = RunConfig()
    b = a.replace({"train": {"epochs": 7}, "data": {"window": 3}})
    assert a.diff(b) == ["data.window: 'auto' != 3", "train.epochs: 'auto' != 7"]
    assert a.diff(a) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"modle": {}}, "unknown config section(s) 'modle'"),
        ({"train": {"epoch": 3}}, "unknown [train] key(s) 'epoch'; expected some of: epochs"),
        ({"model": {"hidden_size": 0}}, "lstm_hidden_size must be an integer >= 1, got 0"),
        ({"model": {"linear_layer_sizes": [3, "x"]}}, "linear_layer_sizes must hold integers >= 1"),
        ({"model": {"dropout": 1.0}}, "dropout_rate must be a number in [0.0, 1.0), got 1.0"),
        ({"train": {"lr": 0}}, "lr must be a number in (0.0, inf), got 0.0"),
        (
            {"train": {"loss": "l2"}},
            "loss must be one of 'mse', 'mae', 'huber', 'quantile', 'normal', 'student_t', "
            "got 'l2'",
        ),
        ({"train": {"batch_size": True}}, "batch_size must be an integer >= 1, got True"),
        ({"data": {"window": 0}}, "window must be an integer >= 1, got 0"),
    ],
)
def test_config_rejects_bad_settings_in_one_line(raw, message):
    with pytest.raises(ValueError) as info:
        RunConfig.from_dict(raw)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_load_config_reads_toml_and_yaml(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('[data]\ntarget = ["co2"]\nwindow = 12\n[train]\nepochs = 4\n')
    yaml = tmp_path / "run.yaml"
    yaml.write_text("data:\n  window: 12\ntrain:\n  epochs: 4\n")
    expected = RunConfig().replace({"data": {"window": 12}, "train": {"epochs": 4}})
    assert load_config(toml) == expected
    assert load_config(yaml) == expected
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nepochs = 4\n")
    with pytest.raises(ValueError, match=r"cannot parse .*bad\.toml"):
        load_config(bad)
    with pytest.raises(ValueError, match="config file not found"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ValueError, match=r"must end in \.toml, \.yaml or \.yml"):
        load_config(tmp_path / "run.json")
    yaml.write_text("train:\n  epochs: [\n")
    with pytest.raises(ValueError, match=r"cannot parse .*run\.yaml"):
        load_config(yaml)


_FIELDS = {
    section: [f.name for f in dataclasses.fields(cls)]
    for section, cls in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig))
}


@settings(max_examples=150, deadline=None)
@given(
    raw=st.dictionaries(
        st.sampled_from(["data", "model", "train", "extra"]),
        st.one_of(
            _JSON,
            st.sampled_from(["data", "model", "train"]).flatmap(
                lambda s: st.dictionaries(st.sampled_from([*_FIELDS[s], "junk"]), _JSON, max_size=4)
            ),
        ),
        max_size=3,
    )
)
def test_run_config_from_dict_accepts_a_valid_config_or_says_why_not(raw):
    try:
        cfg = RunConfig.from_dict(raw)
    except (ValueError, TypeError) as err:
        assert str(err) and "\n" not in str(err), str(err)
        return
    cfg.validate()
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"window": 0}, "window must be an integer >= 1, got 0"),
        ({"horizon": 1.5}, "horizon must be an integer >= 1, got 1.5"),
        ({"stride": True}, "stride must be an integer >= 1, got True"),
        ({"val_fraction": 1.0}, r"val_fraction must be a number in \[0.0, 1.0\), got 1.0"),
        ({"test_fraction": -0.1}, r"test_fraction must be a number in \[0.0, 1.0\), got -0.1"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "below 1 .* got 0.5 \\+ 0.5"),
        ({"target": ()}, "target must name at least one column"),
        ({"target": "co2"}, "got the string 'co2'; write \\('co2',\\)"),
        ({"features": ("co2",)}, "'co2' is in both target and features"),
        ({"features": ("t", "t")}, "features names column 't' more than once"),
        ({"time_column": "co2"}, "time_column 'co2' is also listed"),
        ({"scaler": "zscore"}, "scaler must be one of 'standard', 'minmax', 'robust', 'none'"),
        ({"normalize": "revin"}, "normalize must be one of 'none', 'window', got 'revin'"),
        ({"gaps": "drop"}, "gaps must be one of 'interpolate', 'reject', got 'drop'"),
        ({"difference": "yes"}, "difference must be true or false, got 'yes'"),
        ({"future_features": ("co2",)}, "'co2' is in both target and future_features; give each"),
        (
            {"features": ("p",), "static_features": ("p",)},
            "'p' is in both features and static_features",
        ),
        (
            {"future_features": ("p",), "static_features": ("p",)},
            "'p' is in both future_features and static_features",
        ),
        ({"future_features": ("p", "p")}, "future_features names column 'p' more than once"),
        ({"static_features": "size"}, "static_features must be a tuple of column names"),
        ({"future_features": ("date",)}, "time_column 'date' is also listed"),
        ({"calendar": "yes"}, "calendar must be one of 'auto', 'none', got 'yes'"),
        ({"calendar": "auto", "time_column": None}, "calendar='auto' needs a time column"),
        (
            {"calendar": "auto", "future_features": ("calendar_x",)},
            "column 'calendar_x' starts with 'calendar_', the prefix of the calendar columns",
        ),
    ],
)
def test_config_rejects_bad_values(overrides, match):
    raises_one_line(match, DataConfig, error=SettingError, **overrides)


def test_config_dict_round_trip_and_unknown_keys():
    cfg = DataConfig(target=("a", "b"), features=("c",), window=24, difference=True)
    assert DataConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert DataConfig.from_dict({}) == DataConfig()
    assert DataConfig(window=np.int64(5)).to_dict()["window"] == 5
    raises_one_line(
        "unknown DataConfig key\\(s\\) 'windw'; expected some of: target",
        DataConfig.from_dict,
        {"windw": 3},
        error=SettingError,
    )
    raises_one_line(
        "window must be an integer", DataConfig.from_dict, {"window": "3"}, error=SettingError
    )


def test_a_section_is_checked_once_when_built_and_again_when_replaced(monkeypatch):
    cfg = DataConfig(window=12, horizon=3)
    calls = []

    def counted(self):
        calls.append(self.horizon)
        raise SettingError("checked again")

    monkeypatch.setattr(DataConfig, "_check", counted)
    cfg.validate()  # built and checked already: frozen, so still valid
    RunConfig(data=cfg).validate()
    assert calls == []
    with pytest.raises(SettingError, match="checked again"):
        dataclasses.replace(cfg, horizon=4)  # a new section: checked
    with pytest.raises(SettingError, match="checked again"):
        RunConfig(data=cfg).replace({"data": {"horizon": 5}})
    assert calls == [4, 5]
    RunConfig(data=cfg).replace({"train": {"epochs": 2}})  # [data] untouched: not rebuilt
    assert calls == [4, 5]


def test_replace_builds_only_the_sections_it_changes_and_checks_them_in_order():
    cfg = RunConfig(DataConfig(window=12), ModelConfig(lstm_hidden_size=8))
    new = cfg.replace({"train": {"epochs": 3}, "model": {"hidden_size": 4}})
    assert new.data is cfg.data and (new.model.lstm_hidden_size, new.train.epochs) == (4, 3)
    assert new == RunConfig.from_dict({**cfg.to_dict(), "model": new.model.to_dict(),
                                       "train": new.train.to_dict()})  # fmt: skip
    # two bad sections: [data]'s error first, as from_dict checks data, model, train
    with pytest.raises(SettingError, match="horizon must be an integer >= 1, got 0"):
        cfg.replace({"train": {"epochs": 0}, "data": {"horizon": 0}})
    with pytest.raises(SettingError, match="unknown config section 'bogus'"):
        cfg.replace({"data": {"horizon": 0}, "bogus": {}})
    with pytest.raises(SettingError, match="conformal calibrates the intervals"):
        cfg.replace({"data": {"val_fraction": 0.0}, "train": {"conformal": True}})
