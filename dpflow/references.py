"""Citations of the privacy rules: a paper reference and, where the rule is derived in one of the
repository's algorithm specifications, the spec file and section under ``docs/spec/``.

A node's ``reference`` (and the ledger's reference column) is a :class:`Reference`; ``str()`` gives the
ledger text.  ``tests/test_references.py`` checks that every cited spec section exists as a heading.

>>> r = Reference("KLSU 2019 Alg. 1 sensitivity", "gaussian.md", "0.4")
>>> str(r)
'KLSU 2019 Alg. 1 sensitivity (docs/spec/gaussian.md §0.4)'
>>> Reference("", "sparse_discrete_heavy.md", "4.5-4.6").sections
('4.5', '4.6')
"""

from __future__ import annotations

import re

import attrs

__all__ = ["SPEC_DIR", "SPEC_FILES", "Reference", "spec"]

SPEC_DIR = "docs/spec"
"""Where the algorithm specifications live, relative to the repository root."""

SPEC_FILES = ("accounting.md", "gaussian.md", "mixtures.md", "sparse_discrete_heavy.md")
"""The specification files the code may cite (copies under :data:`SPEC_DIR`)."""

_SECTION = re.compile(r"\d+(\.\d+)*(-\d+(\.\d+)*)?")


def _check_spec(inst: Reference, attr: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and value not in SPEC_FILES:
        raise ValueError(f"unknown spec file {value!r}; cite one of {', '.join(SPEC_FILES)}")


def _check_section(inst: Reference, attr: attrs.Attribute[str | None], value: str | None) -> None:
    if (value is None) != (inst.spec is None):
        raise ValueError("a spec citation needs both the file and the section")
    if value is not None and not _SECTION.fullmatch(value):
        raise ValueError(f"section {value!r} must be a number such as '0.4' or a range such as '3.2-3.4'")


@attrs.frozen
class Reference:
    """Where a rule comes from: ``text`` (paper, theorem, argument) and optionally the section of a spec
    file in ``docs/spec/`` that derives it (``section`` is ``"0.4"`` or a range ``"3.2-3.4"``).

    >>> str(Reference("McSherry 2009 (PINQ)"))
    'McSherry 2009 (PINQ)'
    >>> Reference("x", "gaussian.md", "0.4").where
    'docs/spec/gaussian.md §0.4'
    """

    text: str
    spec: str | None = attrs.field(default=None, validator=_check_spec)
    section: str | None = attrs.field(default=None, validator=_check_section)

    @property
    def where(self) -> str:
        """The spec citation, ``docs/spec/<file> §<section>`` (``""`` without one)."""
        return "" if self.spec is None else f"{SPEC_DIR}/{self.spec} §{self.section}"

    @property
    def sections(self) -> tuple[str, ...]:
        """The cited section numbers: both ends of a range (``()`` without a spec citation)."""
        return () if self.section is None else tuple(self.section.split("-"))

    def __str__(self) -> str:
        if not self.where:
            return self.text
        return f"{self.text} ({self.where})" if self.text else self.where


def spec(file: str, section: str) -> str:
    """The checked citation text of a spec section, for free-text notes and parameter descriptions.

    >>> spec("gaussian.md", "1.2")
    'docs/spec/gaussian.md §1.2'
    """
    return Reference("", file, section).where
