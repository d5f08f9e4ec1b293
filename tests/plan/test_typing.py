"""mypy tells Sensitive and Released handles apart (ARCHITECTURE.md section 3)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

CASES = Path(__file__).parent / "typing_cases"


def _mypy(name: str) -> tuple[str, int]:
    out, err, status = api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(CASES / name)])
    return out + err, status


def test_mypy_rejects_sensitive_values_in_post_processing_and_mechanisms() -> None:
    out, status = _mypy("bad_postprocess.py")
    assert status == 1
    assert "bad_postprocess.py:9: error" in out and "Sensitive[Stat]" in out
    assert "bad_postprocess.py:10: error" in out and "Sensitive[Rows]" in out


def test_mypy_accepts_a_well_typed_plan() -> None:
    out, status = _mypy("good_plan.py")
    assert status == 0, out
