"""Config files: TOML and YAML read into a RunConfig; messages name the file."""

import pytest

from stacklstm.config import RunConfig
from stacklstm.train import load_config


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
