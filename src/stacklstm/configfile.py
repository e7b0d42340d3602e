"""Config files: TOML or YAML with the sections ``[data]``, ``[model]`` and ``[train]`` of
:mod:`stacklstm.config` (and ``[tune]``, a search space), read into a ``RunConfig``.

A file may also name its table, ``file = "sales.csv"`` in ``[data]`` (read from the file's
folder): what ``--data`` gives, which a run folder records apart from its settings. A list
setting given as one value is answered in the file's own syntax (TOML ``["y"]``, YAML ``[y]``).

Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.toml"
    >>> _ = path.write_text('[data]\\nfile = "sales.csv"\\nwindow = 24\\n')
    >>> found = read_config(path)
    >>> found.config.data.window, found.data_path.name
    (24, 'sales.csv')
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import SettingError, SettingTypeError
from .config import ALIASES, SECTIONS, RunConfig


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The raw nested table of a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file.

    Raises:
        SettingError: Missing file, unknown suffix, a syntax error (with its line), or not a
            table.
    """
    path = Path(path)
    if not path.is_file():
        raise SettingError(f"config file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            with path.open("rb") as fh:
                raw = tomllib.load(fh)
        elif suffix in (".yaml", ".yml"):
            import yaml

            with path.open("r", encoding="utf-8") as fh:
                raw = yaml.safe_load(fh)
            raw = {} if raw is None else raw
        else:
            raise SettingError(f"config file must end in .toml, .yaml or .yml, got {path.name!r}")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise SettingError(f"cannot parse {path}: {err}") from err
    except Exception as err:  # yaml.YAMLError, without importing yaml at module level
        if type(err).__module__.startswith("yaml"):
            raise SettingError(f"cannot parse {path}: {err}") from err
        raise
    if not isinstance(raw, dict):
        raise SettingError(f"{path}: expected a table of run settings, got {type(raw).__name__}")
    return raw


#: The key of a config file's ``[data]`` table that names the table to train on (what
#: ``--data`` gives): not a setting of the run (a run folder records its table on its own),
#: so no ``DataConfig`` field. A relative path is read from the config file's folder.
DATA_FILE_KEY = "file"


@dataclass(frozen=True)
class ConfigFile:
    """What a config file holds besides the usual sections' settings.

    Attributes:
        config: The run settings of ``[data]``, ``[model]`` and ``[train]``.
        space: The ``[tune]`` section (the search space of ``stacklstm tune``), or None.
        data_path: The table ``[data] file`` names (made absolute from the file's folder),
            or None without one: the command line's ``--data``, or the bundled data.
    """

    config: RunConfig
    space: Any
    data_path: Path | None


def load_config(path: str | Path) -> RunConfig:
    """Read a ``RunConfig`` from a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file.

    Its sections are ``[data]``, ``[model]`` and ``[train]``; a ``[tune]`` section (the
    search space of ``stacklstm tune``) and ``[data] file`` (the table, see
    :func:`read_config`) are allowed and ignored here.

    Raises:
        SettingError: Missing file, unknown suffix, a syntax error (with its line), or bad
            settings; the message starts with the file's path.
    """
    return read_config(path).config


def load_config_and_space(path: str | Path) -> tuple[RunConfig, Any]:
    """:func:`load_config`, and the file's ``[tune]`` section (None without one), from one
    read of the file."""
    loaded = read_config(path)
    return loaded.config, loaded.space


def read_config(path: str | Path) -> ConfigFile:
    """Everything a TOML or YAML config file holds: settings, ``[tune]`` and the table.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "run.toml").write_text('[data]\\nfile = "sales.csv"\\ntarget = ["y"]')
        >>> loaded = read_config(folder / "run.toml")
        >>> loaded.data_path == folder.absolute() / "sales.csv", loaded.config.data.target
        (True, ('y',))

    Raises:
        SettingError: As :func:`load_config`; also a ``[data] file`` that is not a path.
    """
    path = Path(path)
    raw = read_config_file(path)
    space = raw.pop("tune", None)
    syntax = "toml" if path.suffix.lower() == ".toml" else "yaml"
    try:
        data_path = _pop_data_file(raw, path)
        _check_file_lists(raw, syntax)
        return ConfigFile(RunConfig.from_dict(raw), space, data_path)
    except SettingError as err:
        raise type(err)(f"{path}: {err}", err.field) from err


def _pop_data_file(raw: dict[str, Any], path: Path) -> Path | None:
    """Take ``[data] file`` out of ``raw`` (which then holds settings only)."""
    section = raw.get("data")
    if not isinstance(section, Mapping) or DATA_FILE_KEY not in section:
        return None
    section = dict(section)
    value = section.pop(DATA_FILE_KEY)
    raw["data"] = section
    if not isinstance(value, str) or not value.strip():
        raise SettingTypeError(
            f"[data] {DATA_FILE_KEY} must be the path of a CSV/Parquet table, got {value!r}",
            DATA_FILE_KEY,
        )
    return (path.parent / Path(value).expanduser()).absolute()


def _check_file_lists(raw: Mapping[str, Any], syntax: str) -> None:
    """Refuse a list setting given as one value (``target = "y"``), suggesting the list to
    write in the file's own syntax (TOML ``["y"]``, YAML ``[y]``): Python's own checks would
    suggest a Python tuple."""
    for section, values in raw.items():
        if section not in SECTIONS or not isinstance(values, Mapping):
            continue  # from_dict names what is wrong with it
        for key, value in values.items():
            home, name = ALIASES.get((section, key), (section, key))
            kind = next((f.type for f in dataclasses.fields(SECTIONS[home]) if f.name == name), "")
            if not kind.startswith("tuple[") or isinstance(value, list):
                continue
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                continue  # the field's check says what it holds
            names = kind == "tuple[str, ...]"
            items: list[Any] = [str(value) if names else value]
            if isinstance(value, str):  # a comma-separated list, as the flag takes it
                items = [part.strip() for part in value.split(",") if part.strip()]
                if not names:
                    items = [_number(part) for part in items]
            what = {"tuple[str, ...]": "column names", "tuple[int, ...]": "integers"}.get(
                kind, "numbers"
            )
            raise SettingTypeError(
                f"[{section}] {key} must be a list of {what}, got {_in_syntax(value, syntax)}; "
                f"write {_assignment(key, items, syntax)}",
                name,
            )


def _number(text: str) -> Any:
    """``text`` as an int or float if it is one, else unchanged."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _in_syntax(value: Any, syntax: str) -> str:
    """``value`` as the config file spells it."""
    if syntax == "toml":
        return json.dumps(value)
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


def _assignment(key: str, value: Any, syntax: str) -> str:
    """``key = value`` (TOML) or ``key: value`` (YAML)."""
    return f"{key}{' =' if syntax == 'toml' else ':'} {_in_syntax(value, syntax)}"
