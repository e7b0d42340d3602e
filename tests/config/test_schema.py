"""The schema: every field's help, and the value older run folders meant for fields added later."""

import dataclasses

from stacklstm.config import SECTIONS, describe

#: Every key a layout-2 config.json holds. A field added later must carry `legacy=` (the
#: behaviour before it existed), so that older run folders keep meaning what they meant.
LAYOUT_2_KEYS = {
    "data": {
        "target",
        "features",
        "time_column",
        "window",
        "horizon",
        "stride",
        "val_fraction",
        "test_fraction",
        "scaler",
        "normalize",
        "difference",
        "gaps",
        "season",
    },
    "model": {
        "lstm_hidden_size",
        "num_lstm_layers",
        "linear_layer_sizes",
        "mean_aggregation",
        "bidirectional",
        "dropout_rate",
    },
    "train": {
        "epochs",
        "batch_size",
        "lr",
        "weight_decay",
        "warmup_fraction",
        "clip_norm",
        "loss",
        "patience",
        "seed",
        "log_every",
        "checkpoint_every",
        "skip_nonfinite",
    },
}


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
    # calendar, and no hybrid, and no window started before its series; they kept the seasonal
    # pattern, untested and fitted on every row, and the values themselves, and trained for
    # the epochs given, one model each; their combination was the weighted one, and none was
    # retrained on its validation rows, and every window weighed alike in the loss, from
    # random parameters
    assert added == {
        ("data", "deseasonalize"): False,
        ("data", "season_test"): False,
        ("data", "season_window"): None,
        ("data", "target_transform"): "none",
        ("data", "start_padding"): "none",
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
        ("model", "hybrid"): False,
        ("train", "combination"): "weighted",
        ("train", "retrain"): "off",
        ("train", "loss_weight"): "none",
        ("train", "init"): "random",
    }
