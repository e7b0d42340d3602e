"""What a search writes besides its trials: ``best.toml`` (or ``best.yaml``) from the best
trial's settings.

Example:
    >>> print(to_toml({"data": {"window": 8, "id_column": None}}))
    [data]
    window = 8
    <BLANKLINE>
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..checks import SettingError
from ..config import SECTIONS, RunConfig
from ..configfile import DATA_FILE_KEY
from ..rundir.files import BEST_CONFIG
from ..rundir.folder import atomic_write_text

log = logging.getLogger("stacklstm.tune")


def write_best(cfg: RunConfig, out_dir: Path, data_path: str | Path | None = None) -> Path:
    """``best.toml``, or ``best.yaml`` when a setting is None (which TOML cannot spell).

    The file names the search's table (``[data] file``, absolute; none for the bundled
    data), so that ``stacklstm train --config best.toml`` trains on what the trials did.
    """

    settings = cfg.to_dict()
    if data_path is not None:
        settings["data"] = {DATA_FILE_KEY: str(Path(data_path).absolute()), **settings["data"]}
    try:
        text, path = to_toml(settings), out_dir / BEST_CONFIG
    except SettingError:
        import yaml

        text, path = yaml.safe_dump(settings, sort_keys=False), out_dir / "best.yaml"
        log.info("the best config holds a None setting, which TOML cannot write: %s", path)
    atomic_write_text(path, text)
    return path


def to_toml(config: Mapping[str, Mapping[str, Any]]) -> str:
    """A nested ``{"section": {key: value}}`` config as TOML (what ``--config`` reads).

    A None value whose field defaults to None (``id_column``, say) is left out: read back,
    it takes that default.

    Raises:
        SettingError: Any other None value (``time_column=None``), which TOML cannot spell.

    Example:
        >>> print(to_toml({"model": {"lstm_hidden_size": 8, "linear_layer_sizes": [8]}}))
        [model]
        lstm_hidden_size = 8
        linear_layer_sizes = [8]
        <BLANKLINE>
    """
    lines = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        fields = (
            {f.name: f for f in dataclasses.fields(SECTIONS[section])}
            if (section in SECTIONS)
            else {}
        )
        for key, value in values.items():
            if value is None and key in fields and fields[key].default is None:
                continue  # the default: leaving it out reads back the same
            if value is None:
                raise SettingError(
                    f"[{section}] {key} is None, which TOML cannot write; use a YAML config for it"
                )
            lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)


__all__ = ["to_toml", "write_best"]
