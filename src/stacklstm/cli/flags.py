"""The setting flags, made from the config fields, their value parsers, and the translation of
the library's field names into the flags a user typed."""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from collections.abc import Sequence
from typing import Any, Literal

from ..config import ALIASES, SECTIONS, describe

PROG = "stacklstm"


#: Arguments of ``fit``, ``initialize`` and friends -> the flags that set them.
_ARGUMENT_FLAGS = {
    "out_dir": "--out",
    "resume": "--resume",
    "data_path": "--data",
    "output": "--output",
    "coordinator": "--coordinator",
    "num_processes": "--num-processes",
    "process_id": "--process-id",
    "trials": "--trials",
    "heartbeat": "--heartbeat",
    "folds": "--folds",
    "step": "--step",
    "refit": "--refit",
    "ids": "--ids",
    "h": "--horizon",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _setting_flags() -> dict[str, list[str]]:
    """``{field: [flag, alias flags...]}`` for every config field."""
    flags = {f.name: [_flag(f.name)] for cls in SECTIONS.values() for f in dataclasses.fields(cls)}
    for (_, old), (_, new) in ALIASES.items():
        if _flag(old) not in flags[new]:
            flags[new].append(_flag(old))
    return flags


def typed_flags(argv: Sequence[str]) -> dict[str, str]:
    """``{field: flag}`` for the setting flags as ``argv`` spells them (an alias included)."""
    typed = {}
    for name, flags in _setting_flags().items():
        for flag in flags:
            if any(arg == flag or arg.startswith(flag + "=") for arg in argv):
                typed[name] = flag
    return typed


def in_flag_words(err: BaseException, typed: dict[str, str] | None = None) -> str:
    """The one-line message of a library error, with Python names turned into flags.

    The library writes a name it suggests changing in backticks (`` `batch_size` ``,
    `` `resume=True` ``); a :class:`~stacklstm.checks.SettingError` about one field starts
    with that field's name. Each becomes the flag the user typed (``--hidden-size`` for
    ``lstm_hidden_size`` if that is what they typed).

    Example:
        >>> in_flag_words(ValueError("lower `batch_size` or pass `resume=True`"))
        'lower --batch-size or pass --resume'
    """
    typed = typed or {}
    known = {name: flags[0] for name, flags in _setting_flags().items()} | _ARGUMENT_FLAGS

    def flag(name: str) -> str | None:
        return typed.get(name) or known.get(name)

    def replace(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        if flag(name) is None:
            return match.group(0)
        if value == "True":
            return flag(name)
        if value == "False":
            return "--no-" + flag(name).removeprefix("--")
        return flag(name) if value is None else f"{flag(name)} {value}"

    message = " ".join(str(err).split()) or type(err).__name__
    message = re.sub(r"`([a-z_]+)(?:=([^`]*))?`", replace, message)
    field = getattr(err, "field", None)
    if field is not None and flag(field) and message.startswith(field + " "):
        message = flag(field) + message[len(field) :]
    return message


class UsageError(Exception):
    """A command-line usage error (printed as one line, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:  # one line instead of usage + message
        raise UsageError(f"{self.prog}: {message}")


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if text.strip() and not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _ints(text: str) -> tuple[int, ...]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        return tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 32,16, got {text!r}"
        ) from None


def _floats(text: str) -> tuple[float, ...]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        return tuple(float(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers such as 0.1,0.5,0.9, got {text!r}"
        ) from None


def _column_or_none(text: str) -> str | None:
    return None if text.strip().lower() in ("", "none") else text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _int_or_none(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none") else _int(text)


def _int_or_auto(text: str) -> int | str:
    return "auto" if text.strip().lower() == "auto" else _int(text)


def _int_auto_or_none(text: str) -> int | str | None:
    return None if text.strip().lower() in ("", "none") else _int_or_auto(text)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _refit(text: str) -> str | int:
    if text in ("every", "never"):
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected every, never or an integer, got {text!r}"
        ) from None


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "''"
    return str(value)


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per config field; defaults are SUPPRESSed so only given flags override."""
    flags = _setting_flags()
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(f"{section} settings")
        hints = typing.get_type_hints(cls)
        helps = describe(cls)
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            default = field.default
            aliases = flags[field.name][1:]
            also = f"; also {', '.join(aliases)}" if aliases else ""
            kwargs: dict[str, Any] = {
                "dest": f"{section}.{field.name}",
                "default": argparse.SUPPRESS,
                "help": f"{helps[field.name]} (default: {_shown(default)}{also})",
            }
            if kind is bool:
                kwargs["action"] = argparse.BooleanOptionalAction
            elif kind is int:
                kwargs.update(type=_int, metavar="N")
            elif kind is float:
                kwargs.update(type=_float, metavar="X")
            elif typing.get_origin(kind) is Literal:
                kwargs["choices"] = typing.get_args(kind)
            elif kind == tuple[str, ...]:
                kwargs.update(type=_names, metavar="A,B")
            elif kind == tuple[int, ...]:
                kwargs.update(type=_ints, metavar="N,M")
            elif kind == tuple[float, ...]:
                kwargs.update(type=_floats, metavar="X,Y")
            elif kind == (str | None):
                kwargs.update(type=_column_or_none, metavar="NAME")
            elif kind == (int | None):
                kwargs.update(type=_int_or_none, metavar="N")
            elif kind == (int | Literal["auto"]):
                kwargs.update(type=_int_or_auto, metavar="N|auto")
            elif kind == (int | Literal["auto"] | None):
                kwargs.update(type=_int_auto_or_none, metavar="N|auto|none")
            else:  # a new field type: teach this function about it
                raise TypeError(f"no flag type for {cls.__name__}.{field.name}: {kind}")
            group.add_argument(*flags[field.name], **kwargs)
