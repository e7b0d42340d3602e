"""RunConfig: aliases, saved config.json of older layouts, round trips, diff and replace."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import _JSON
from stacklstm.checks import SettingError
from stacklstm.config import (
    ALIASES,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainConfig,
    _legacy_values,
    setting,
)


def test_older_spellings_are_aliases():
    old = RunConfig.from_dict(
        {"model": {"hidden_size": 8, "num_layers": 3, "dropout": 0.5}, "train": {"season": 12}}
    )
    assert old.model == ModelConfig(lstm_hidden_size=8, num_lstm_layers=3, dropout_rate=0.5)
    assert old.data.season == 12
    assert set(ALIASES) == {
        ("model", "hidden_size"),
        ("model", "num_layers"),
        ("model", "dropout"),
        ("train", "season"),
    }
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
    v1["model"] = {
        "hidden_size": 16,
        "num_layers": 1,
        "linear_layer_sizes": [8],
        "mean_aggregation": True,
        "bidirectional": False,
        "dropout": 0.1,
    }
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


def test_replace_builds_only_the_sections_it_changes_and_checks_them_in_order():
    cfg = RunConfig(DataConfig(window=12), ModelConfig(lstm_hidden_size=8))
    new = cfg.replace({"train": {"epochs": 3}, "model": {"hidden_size": 4}})
    assert new.data is cfg.data and (new.model.lstm_hidden_size, new.train.epochs) == (4, 3)
    assert new == RunConfig.from_dict(
        {**cfg.to_dict(), "model": new.model.to_dict(), "train": new.train.to_dict()}
    )
    # two bad sections: [data]'s error first, as from_dict checks data, model, train
    with pytest.raises(SettingError, match="horizon must be an integer >= 1, got 0"):
        cfg.replace({"train": {"epochs": 0}, "data": {"horizon": 0}})
    with pytest.raises(SettingError, match="unknown config section 'bogus'"):
        cfg.replace({"data": {"horizon": 0}, "bogus": {}})
    with pytest.raises(SettingError, match="conformal calibrates the intervals"):
        cfg.replace({"data": {"val_fraction": 0.0}, "train": {"conformal": True}})
