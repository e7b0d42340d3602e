"""A griffe extension for the API reference (mkdocs.yml loads it), so that the docstrings read
as written without touching the source:

- the code's Google-style docstrings head their doctests ``Example:``, which griffe reads as
  an admonition (whose ``>>>`` lines render as nested quotes): a bare ``Example:`` line is
  read as the ``Examples:`` section, so the doctests render as code;
- Sphinx roles (``:func:`fit```, ``:class:`~stacklstm.data.WindowSet```) would render with
  their role name in front: each becomes a code span of its target (its last name with
  ``~``, as Sphinx shows it).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# A line holding only "Example:" (a titled "Example: ..." stays an admonition).
_EXAMPLE = re.compile(r"^(?P<indent>[ \t]*)Example:[ \t]*$", re.MULTILINE)
# A Sphinx cross-reference role: :func:`name`, :class:`~a.b.Name`, :meth:`title <target>`.
_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):`(?P<ref>[^`]+)`")


def _code_span(match: re.Match[str]) -> str:
    ref = match["ref"].strip()
    title = re.fullmatch(r"(?P<title>.+?)\s*<[^>]+>", ref)
    if title:
        ref = title["title"]
    elif ref.startswith("~"):
        ref = ref[1:].rsplit(".", 1)[-1]
    return f"`{ref}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` as the reference renders it.

    Example:
        >>> rewrite("Calls :func:`fit`, see :class:`~stacklstm.data.WindowSet`.")
        'Calls `fit`, see `WindowSet`.'
        >>> rewrite("Text.\\n\\n    Example:\\n        >>> 1\\n")
        'Text.\\n\\n    Examples:\\n        >>> 1\\n'
    """
    text = _EXAMPLE.sub(r"\g<indent>Examples:", text)
    return _ROLE.sub(_code_span, text)


class ReadableDocstrings(griffe.Extension):
    """Applies :func:`rewrite` to every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
