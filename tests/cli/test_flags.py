"""The flags: made from the config fields, one per setting, no defaults of their own."""

import dataclasses

from stacklstm.cli import build_parser
from stacklstm.cli.commands import _overrides
from stacklstm.data import DataConfig
from stacklstm.train import ModelConfig, TrainConfig


def test_flags_map_onto_config_fields_without_defaults_of_their_own():
    parser = build_parser()
    assert _overrides(parser.parse_args(["train"])) == {"data": {}, "model": {}, "train": {}}
    args = parser.parse_args(
        [
            "train",
            "--target",
            "a,b",
            "--features",
            "",
            "--time-column",
            "none",
            "--linear-layer-sizes",
            "",
            "--mean-aggregation",
            "--no-skip-nonfinite",
            "--lr",
            "1e-3",
            "--loss",
            "huber",
            "--val-fraction",
            "0.2",
        ]
    )
    assert _overrides(args) == {
        "data": {"target": ("a", "b"), "features": (), "time_column": None, "val_fraction": 0.2},
        "model": {"linear_layer_sizes": (), "mean_aggregation": True},
        "train": {"skip_nonfinite": False, "lr": 1e-3, "loss": "huber"},
    }
    flags = {a.dest for a in parser._subparsers._group_actions[0].choices["train"]._actions}
    for section, cls in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
        for field in dataclasses.fields(cls):
            assert f"{section}.{field.name}" in flags  # every setting has a flag
