"""Every citation of an algorithm specification resolves (issue 13, item 5; REVIEW.md P12).

The specs the code cites are copied into ``docs/spec/``.  A citation is a :class:`Reference` (node
``reference``, estimators' ``REF_*``), a :func:`dpflow.references.spec` call in a ledger note or parameter
description, or free text ``<spec>.md <section>`` in a docstring.  Each cited file must be under
``docs/spec/`` and each cited section number must be a heading of that file.  Ledger text always says
``docs/spec/<file> §<section>``, so the spec ``gaussian.md`` cannot be mistaken for ``docs/gaussian.md``.
Citations in docs/, benchmarks/ and tests/ are checked too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import dpflow as dp
from dpflow import estimators as E
from dpflow import nodes as N
from dpflow.estimators.gaussian import coinpress, klsu, kv
from dpflow.planner.certify import certify
from dpflow.references import SPEC_DIR, SPEC_FILES, Reference, spec

REPO = Path(__file__).resolve().parents[1]
SPECS = "|".join(re.escape(f.removesuffix(".md")) for f in SPEC_FILES)
NUMBER = r"\d+(?:\.\d+)*"
SECTION = rf"{NUMBER}(?:\s*[-–]\s*{NUMBER})?"
# "gaussian.md 0.4", "``docs/spec/accounting.md`` §1.1-1.7", "accounting.md Sec. 1.5", "accounting.md section 3"
PROSE = re.compile(rf"(?<![\w/])(?:docs/spec/)?({SPECS})\.md(?:``)?\s+(?:Sec\.\s*|section\s+|§)?({SECTION})(?![\w.])")
# Reference("...", "gaussian.md", "0.4") and spec('gaussian.md', '1.2')
TYPED = re.compile(r"""["']([a-z_]+\.md)["'],\s*["']([\d.\-]+)["']\)""")
# any other markdown file named with a path: it must exist in the repository
PATHS = re.compile(r"(?<![\w/])((?:docs|benchmarks)/[\w/]+\.md)")


@cache
def headings(name: str) -> frozenset[str]:
    """The section numbers of the headings of ``docs/spec/<name>`` ("## 1. ...", "### 0.4 ...")."""
    text = (REPO / SPEC_DIR / name).read_text(encoding="utf-8")
    return frozenset(re.findall(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", text, flags=re.M))


def missing(name: str, section: str) -> list[str]:
    """What does not resolve in the citation of ``section`` (a number or a range) of spec ``name``."""
    if name not in SPEC_FILES or not (REPO / SPEC_DIR / name).is_file():
        return [f"{SPEC_DIR}/{name} does not exist"]
    ends = [s.strip() for s in re.split(r"[-–]", section)]
    return [f"{SPEC_DIR}/{name} has no heading {s}" for s in ends if s not in headings(name)]


def citations(text: str) -> list[tuple[str, str]]:
    """Every (spec file, section) cited in ``text``, in prose or as typed arguments."""
    found = [(f"{m[1]}.md", m[2]) for m in PROSE.finditer(text)]
    return found + [(m[1], m[2]) for m in TYPED.finditer(text)]


SOURCES = sorted((REPO / "dpflow").rglob("*.py"))


def source_citations() -> list[tuple[str, str, str]]:
    return [(str(p.relative_to(REPO)), f, s) for p in SOURCES for f, s in citations(p.read_text(encoding="utf-8"))]


# --------------------------------------------------------------------------- the checker itself


def test_the_spec_files_are_in_the_repository_and_reasonably_small() -> None:
    for name in SPEC_FILES:
        path = REPO / SPEC_DIR / name
        assert path.is_file(), f"{path} is missing"
        assert 1_000 < path.stat().st_size < 100_000, f"{path} has an unexpected size"
        assert path.read_text(encoding="utf-8").startswith("> Algorithm specification cited by dpflow")


def test_the_checker_finds_headings_and_refuses_wrong_sections() -> None:
    assert {"0.4", "1.2", "3.6"} <= headings("gaussian.md")
    assert {"1", "1.1", "4.5", "5.1.1"} <= headings("sparse_discrete_heavy.md")
    assert missing("gaussian.md", "0.4") == []
    assert missing("gaussian.md", "3.2-3.4") == []
    assert missing("gaussian.md", "0.9") == ["docs/spec/gaussian.md has no heading 0.9"]
    assert missing("gaussian.md", "3.2-3.9") == ["docs/spec/gaussian.md has no heading 3.9"]
    assert missing("accounting.md", "9") == ["docs/spec/accounting.md has no heading 9"]
    assert missing("plans.md", "1") == ["docs/spec/plans.md does not exist"]


def test_the_citation_regex_reads_every_form() -> None:
    text = ('(gaussian.md 0.4) ``docs/spec/accounting.md`` §1.1-1.7 accounting.md Sec. 1.5 '
            'accounting.md section 3 sparse_discrete_heavy.md 1 (x) docs/gaussian.md; '
            'Reference("x", "mixtures.md", "2.4") spec(\'gaussian.md\', \'1.2\')')
    assert citations(text) == [("gaussian.md", "0.4"), ("accounting.md", "1.1-1.7"), ("accounting.md", "1.5"),
                               ("accounting.md", "3"), ("sparse_discrete_heavy.md", "1"), ("mixtures.md", "2.4"),
                               ("gaussian.md", "1.2")]


# --------------------------------------------------------------------------- the Reference value


def test_reference_renders_the_ledger_text() -> None:
    r = Reference("KLSU 2019 Alg. 1", "gaussian.md", "0.4")
    assert str(r) == "KLSU 2019 Alg. 1 (docs/spec/gaussian.md §0.4)"
    assert r.where == "docs/spec/gaussian.md §0.4" == spec("gaussian.md", "0.4")
    assert str(Reference("McSherry 2009")) == "McSherry 2009"
    assert Reference("x", "gaussian.md", "3.2-3.4").sections == ("3.2", "3.4")
    assert Reference("x").sections == ()


@pytest.mark.parametrize(("args", "match"), [
    (("x", "docs/gaussian.md", "1"), "unknown spec file"),
    (("x", "gaussian", "1"), "unknown spec file"),
    (("x", "gaussian.md", None), "both the file and the section"),
    (("x", None, "0.4"), "both the file and the section"),
    (("x", "gaussian.md", "sec. 0.4"), "must be a number"),
    (("x", "gaussian.md", "0.4 [RECON]"), "must be a number"),
])
def test_reference_refuses_malformed_citations(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Reference(*args)


# --------------------------------------------------------------------------- every citation resolves


@pytest.mark.parametrize("kind", sorted(N.NODE_KINDS))
def test_node_references_resolve(kind: str) -> None:
    ref = N.NODE_KINDS[kind].reference
    if isinstance(ref, Reference):
        assert ref.spec is not None, f"{kind}: a typed reference without a spec citation should stay text"
        assert missing(ref.spec, str(ref.section)) == [], kind
    else:
        assert ".md" not in ref, f"{kind} cites a spec in free text; use Reference(text, spec, section)"


def test_mechanisms_queries_and_transforms_cite_a_reference() -> None:
    empty = [k for k, c in N.NODE_KINDS.items()
             if issubclass(c, (N.Mechanism, N.Query, N.Transform)) and not str(c.reference).strip()]
    assert empty == []


def test_typed_node_references_are_the_spec_citing_ones() -> None:
    """The kinds that cite a spec section (a change of kind or count here is deliberate)."""
    typed = {k: (c.reference.spec, c.reference.section) for k, c in N.NODE_KINDS.items()
             if isinstance(c.reference, Reference)}
    assert typed == {
        "SecondMoment": ("gaussian.md", "0.4"),
        "SubsampleAggregate": ("sparse_discrete_heavy.md", "5.1.1-5.1.2"),
        "PairDifferences": ("gaussian.md", "0.4"),
        "PartitionByBall": ("mixtures.md", "2.4"),
        "Piece": ("accounting.md", "1.5"),
        "BinCounts": ("sparse_discrete_heavy.md", "1"),
        "StabilityHistogram": ("sparse_discrete_heavy.md", "1.1-1.2"),
        "DyadicCounts": ("sparse_discrete_heavy.md", "4.5-4.6"),
        "IntervalCounts": ("sparse_discrete_heavy.md", "4.3"),
        "TruncatedBinaryMean": ("gaussian.md", "0.4"),
        "GradientStep": ("sparse_discrete_heavy.md", "3.4-3.5"),
        "AboveThreshold": ("mixtures.md", "2.7"),
        "CellCounts": ("mixtures.md", "2.5"),
        "GridMaxCounts": ("mixtures.md", "3.2"),
        "ShellCounts": ("mixtures.md", "4.3"),
        "TerrificScores": ("mixtures.md", "4.2"),
        "BallCounts": ("mixtures.md", "5.3"),
        "PartitionByProjectedBall": ("mixtures.md", "2.4"),
        "Gram": ("mixtures.md", "2.9"),
        "GaussianStabilityHistogram": ("sparse_discrete_heavy.md", "1"),
        "TupleCellCounts": ("mixtures.md", "8"),
        "PartitionByNearest": ("mixtures.md", "2.4"),
    }


def test_estimator_references_resolve() -> None:
    for ref in (coinpress.REF_MEAN, coinpress.REF_COV, klsu.REF_PME, klsu.REF_PCE, kv.REF):
        assert ref.spec is not None and missing(ref.spec, str(ref.section)) == [], ref


def test_every_source_citation_resolves() -> None:
    found = source_citations()
    assert len(found) > 60, "the citation regex no longer sees the code's citations"
    bad = [(p, f, s, m) for p, f, s in found for m in missing(f, s)]
    assert bad == []


OTHERS = sorted([*(REPO / "docs").glob("*.md"), *(REPO / "benchmarks").glob("*.py"), *(REPO / "tests").rglob("*.py"),
                 REPO / "README.md"])


def test_citations_in_docs_benchmarks_and_tests_resolve() -> None:
    found = [(str(p.relative_to(REPO)), f, s) for p in OTHERS for f, s in citations(p.read_text(encoding="utf-8"))
             if p.name != "test_references.py"]
    assert len(found) > 10
    assert [(p, f, s, m) for p, f, s in found for m in missing(f, s)] == []


def test_every_markdown_path_in_the_source_exists() -> None:
    paths = {m for p in SOURCES for m in PATHS.findall(p.read_text(encoding="utf-8"))}
    assert "docs/gaussian.md" in paths
    assert sorted(p for p in paths if not (REPO / p).is_file()) == []


def test_spec_files_are_named_with_a_section_or_their_docs_spec_path() -> None:
    """A bare ``gaussian.md`` without a section could be read as ``docs/gaussian.md``."""
    bare = re.compile(rf"(?<![\w/\"'])(?:{SPECS})\.md(?!(?:``)?\s+(?:Sec\.\s*|section\s+|§)?\d)")
    assert bare.findall("gaussian.md; gaussian.md 0.4 docs/spec/gaussian.md \"gaussian.md\"") == ["gaussian.md"]
    found = [(str(p.relative_to(REPO)), m) for p in SOURCES for m in bare.findall(p.read_text(encoding="utf-8"))]
    assert found == []


def _value_partition(budget: Any) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, neighbors="replace")
    X = b.source("X", dp.Vectors(d=2))
    inside, _ = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=1.0))
    return b.build(a=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(inside))))


G = E.gaussian
PLANS: dict[str, Callable[[Any], dp.Plan]] = {
    "gaussian_mean_coinpress": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0),
    "gaussian_mean_kv": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0, method="kv"),
    "gaussian_mean_pme": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0, method="pme"),
    "gaussian_univariate_unknown": lambda b: G.univariate_mean(n=2000, budget=b, R=10.0, sigma_bounds=(0.1, 10.0)),
    "gaussian_cov_pce": lambda b: G.covariance(d=3, n=4000, budget=b, K=30.0, method="pce", lower=1.0),
    "gaussian_gaussian": lambda b: G.gaussian(d=3, n=4000, budget=b, R=10.0, K=30.0),
    "naive_pce": lambda b: E.naive_pce(d=3, n=2000, budget=b, kappa=4.0),
    "noisy_gd": lambda b: E.regression.noisy_gd(d=3, n=2000, budget=b, x_bound=1.0, coef_bound=2.0),
    "merr": lambda b: E.discrete.merr(N=64, n=1000, budget=b, T=4),
    "ppde": lambda b: E.product.ppde(d=4, n=1000, budget=b, rounds=2),
    "value_partition": _value_partition,
}


@cache
def ledger_text(name: str) -> str:
    return json.dumps(certify(PLANS[name](dp.ZCDP(0.5))).ledger.to_data(), ensure_ascii=False)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_ledger_citations_resolve_and_name_docs_spec(name: str) -> None:
    text = ledger_text(name)
    found = citations(text)
    assert found, f"{name}: the ledger cites no spec section"
    assert [m for f, s in found for m in missing(f, s)] == []
    bare = [m.group(0) for m in re.finditer(r"(?<![\w/])[\w/]*\.md", text) if not m.group(0).startswith("docs/")]
    assert bare == [], f"{name}: a ledger cites a markdown file without its docs/ path"


def test_the_ledger_shows_the_typed_references() -> None:
    text = ledger_text("merr")
    assert "DHS 2015 Fig. 2 scores; one record per level (docs/spec/sparse_discrete_heavy.md §4.5-4.6)" in text
    text = ledger_text("value_partition")
    assert "(docs/spec/accounting.md §1.5)" in text and "(docs/spec/mixtures.md §2.4)" in text
