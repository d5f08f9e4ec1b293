r"""Text that may come from users (plan, source, output and column names, category labels, dataset ids)
shown safely: the one escaping for the terminal, Markdown and HTML.

Every renderer passes every piece of text it did not write itself through one of these functions:

- :func:`visible`: each character Python does not call printable (newlines, terminal escapes, bidi
  overrides, zero-width and other format characters, lone surrogates) becomes its Python escape, so a
  name can neither add a line, nor reorder or hide what is shown, nor fail to encode;
- :func:`markdown`: :func:`visible`, then every character that could start Markdown (CommonMark and
  GitHub) markup is escaped: the text renders as itself, inline, in a table cell or after a list marker;
- :func:`html`: :func:`visible`, then HTML-escaped (quotes too: safe in an attribute).

>>> print(markdown("x\n# <b>a|b</b>"))
x\\n\# &lt;b>a\|b&lt;/b>
>>> print(html('a\u202e"b"'))
a\u202e&quot;b&quot;
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["OVERVIEW_WIDTH", "html", "markdown", "overview_html", "overview_text", "shorten", "visible"]

_MD_INLINE = re.compile(r"[\\`*\[\]#|~$<]|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
"""Inline markup: a backslash escape, code span, emphasis, link or image, heading mark, table cell break,
strikethrough, math, raw HTML or autolink, entity; ``_`` only where it could open or close emphasis (not
inside a word, so ``gaussian_mech_3`` stays as it is)."""

_MD_BLOCK_START = re.compile(r"^(?:>|[-+](?=[\s-]|$)|\d{1,9}(?=[.)](?:\s|$))| )")
"""What could start a block where the text begins a line's content (e.g. after ``- ``): a quote, a bullet
list or thematic break, an ordered list marker, indented code (a leading space, kept as ``&#32;``, as is
a trailing one)."""

_MD_ENTITIES = {"<": "&lt;", "&": "&amp;"}

OVERVIEW_WIDTH = 110
"""The widest line of an overview (:func:`overview_text`): a ``repr`` stays short whatever the names."""


def visible(text: Any) -> str:
    r"""``str(text)`` with every non-printable character as its Python escape (``\n``, ``\x1b``,
    ``\u202e``): one line, shown as it is stored, whatever the terminal or viewer.

    >>> print(visible("a\nb\x1b[31m\u202ec"))
    a\nb\x1b[31m\u202ec
    """
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


def markdown(text: Any) -> str:
    r"""``text`` as Markdown that renders as :func:`visible` ``(text)``, inline: no heading, HTML, link,
    image, code, emphasis, math or table cell break can come from it, and it may begin a list item.

    >>> print(markdown("[a](javascript:x) *b* gaussian_mech_3"))
    \[a\](javascript:x) \*b\* gaussian_mech_3
    >>> print(markdown("- 1. x"), markdown("12) x"))
    \- 1. x 12\) x
    """
    s = _MD_INLINE.sub(lambda m: _MD_ENTITIES.get(m[0], "\\" + m[0]), visible(text))
    s = _MD_BLOCK_START.sub(lambda m: "&#32;" if m[0] == " " else f"{m[0]}\\" if m[0][0].isdigit()
                            else "\\" + m[0], s, count=1)
    return s[:-1] + "&#32;" if s.endswith(" ") else s  # a table cell would drop it


def html(text: Any) -> str:
    """``text`` as HTML text or a quoted attribute value (:func:`visible`, then escaped).

    >>> html("<img src=x onerror='alert(1)'>")
    '&lt;img src=x onerror=&#x27;alert(1)&#x27;&gt;'
    """
    return _html.escape(visible(text), quote=True)


def shorten(text: Any, width: int) -> str:
    """:func:`visible` ``(text)``, cut to at most ``width`` characters (ending in ``...`` when cut).

    >>> shorten("a" * 50, 10)
    'aaaaaaa...'
    """
    s = visible(text)
    return s if len(s) <= width else s[:max(width - 3, 0)] + "..."


def _overview_rows(rows: Iterable[tuple[Any, Any]]) -> list[tuple[str, str]]:
    return [(shorten(k, OVERVIEW_WIDTH // 2), shorten(v, OVERVIEW_WIDTH)) for k, v in rows]


def overview_text(kind: str, rows: Iterable[tuple[Any, Any]]) -> str:
    """A short readable ``repr``: ``<kind`` then one ``label: value`` line per row (each cut to
    :data:`OVERVIEW_WIDTH`), closed by ``>``.

    >>> print(overview_text("Ledger", [("plan", "p"), ("budget", "rho=1/2")]))
    <Ledger
      plan: p
      budget: rho=1/2>
    """
    lines = [shorten(f"{k}: {v}", OVERVIEW_WIDTH) for k, v in _overview_rows(rows)]
    return f"<{kind}" + "".join(f"\n  {line}" for line in lines) + ">"


def overview_html(kind: str, rows: Iterable[tuple[Any, Any]]) -> str:
    """The same overview as a compact HTML table (for Jupyter's ``_repr_html_``), every cell escaped.

    >>> page = overview_html("Ledger", [("plan", "<p>")])
    >>> page.startswith("<table><caption>Ledger</caption><tr>"), ">&lt;p&gt;</td>" in page
    (True, True)
    """
    left = ' style="text-align:left"'  # Jupyter aligns cells right
    body = "".join(f"<tr><th{left}>{html(k)}</th><td{left}>{html(v)}</td></tr>" for k, v in _overview_rows(rows))
    return f"<table><caption>{html(kind)}</caption>{body}</table>"
