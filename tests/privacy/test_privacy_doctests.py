"""Run the ``>>>`` examples of every dpflow.privacy module, so that the documented examples stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "dpflow.privacy.rounding",
    "dpflow.privacy.measures",
    "dpflow.privacy.conversions",
    "dpflow.privacy.composition",
    "dpflow.privacy.calibration",
]


@pytest.mark.parametrize("name", MODULES)
def test_privacy_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_every_public_name_has_a_sourced_example() -> None:
    import dpflow.privacy as privacy

    objects = [(name, getattr(privacy, name)) for name in privacy.__all__]
    objects += [(f"Cost.{m}", getattr(privacy.Cost, m)) for m in vars(privacy.Cost) if not m.startswith("_")]
    checked = 0
    for name, obj in objects:
        if not callable(obj) or name == "Measure":
            continue
        doc = obj.__doc__ or ""
        assert ">>>" in doc, f"{name} has no example"
        # a source is cited before the example: an author-year or a theorem number
        assert any(ch.isdigit() for ch in doc.split(">>>")[0]), f"{name} cites no source"
        checked += 1
    assert checked >= 40
