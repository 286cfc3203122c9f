"""The documentation site's pages, checked without a build (the build itself is .ci/run's
``sphinx-build -W``): the estimator's API page (its public path, short signature and option
tables whose defaults are the ones a fit gets), the engine contract's page and example, the
Benchmarks page's order and the gallery's examples."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from bnpmix.pipeline.estimator import OPTIONS, BayesianMixture
from bnpmix.pipeline.fit import job_config
from bnpmix.pipeline.runtime import ENGINES, engine_class, engine_names

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def ext() -> Any:
    """docs/_ext/bnpmix_docs.py, the site's extension, imported as the build imports it."""
    spec = importlib.util.spec_from_file_location("bnpmix_docs", DOCS / "_ext" / "bnpmix_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flat(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config's values by option name (nested dataclasses' fields as ``prefix_name``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        out.update(flat(value, f"{name}_") if isinstance(value, dict) and key != "prior"
                   else {name: value})
    return out


def sections(text: str, underline: str) -> list[str]:
    """The titles of an reStructuredText page's sections underlined with ``underline``."""
    lines = text.splitlines()
    return [lines[i - 1] for i, line in enumerate(lines)
            if i and re.fullmatch(re.escape(underline) + "{3,}", line)
            and len(line) == len(lines[i - 1])]


# -- the estimator's API page ----------------------------------------------------------------

def test_the_estimator_is_documented_at_its_public_path() -> None:
    api = (DOCS / "api.rst").read_text()
    block = api[api.index(".. currentmodule:: bnpmix\n"):]
    names = block[block.index(":nosignatures:\n\n") + 16:].split("\n\n")[0].split()
    assert "BayesianMixture" in names  # documented as bnpmix.BayesianMixture, its title
    assert "pipeline.estimator" not in api


def test_its_signature_is_the_named_parameters_and_options(ext: Any) -> None:
    assert len(inspect.signature(BayesianMixture).parameters) > 50  # get_params sees them all
    sig, _ = ext.short_signature(None, "class", "bnpmix.BayesianMixture", BayesianMixture, {},
                                 None, None)
    assert sig == "(algorithm='memo', obs=None, random_state=None, **options)"
    assert ext.short_signature(None, "class", "x", dict, {}, None, None) is None


def test_a_parameter_without_a_written_default_gets_the_signatures(ext: Any) -> None:
    lines = inspect.cleandoc(BayesianMixture.__doc__).splitlines()
    ext.signature_defaults(None, "class", "bnpmix.BayesianMixture", BayesianMixture, {}, lines)
    assert "algorithm : str, default 'memo'" in lines
    assert "obs : str or None, default None" in lines  # written ones stay as written
    assert not any("DEFAULT_ENGINE" in line for line in lines)


def test_the_option_tables_go_after_the_parameters(ext: Any) -> None:
    lines = [":Parameters:", "", "    **algorithm**", "", ":Attributes:", "", "   x"]
    ext.option_tables(None, "class", "bnpmix.BayesianMixture", BayesianMixture, {}, lines)
    at = lines.index(".. bnpmix-estimator-options::")
    assert lines.index(":Parameters:") < at < lines.index(":Attributes:")


def test_each_engines_table_shows_the_defaults_a_fit_gets(ext: Any) -> None:
    groups = {name: (title, rows) for name, title, rows in ext.estimator_groups()}
    assert list(groups)[:2] == ["every engine", "memo"]  # the default engine first
    assert set(groups) == {"every engine", *engine_names()}
    for name in engine_names():
        job = job_config(algorithm=name)
        truth = {**flat(job.to_dict()["engine"]), "restarts": job.run.restarts,
                 "wave": engine_class(name).default_wave}
        title, rows = groups[name]
        assert title == f'algorithm="{name}": {ENGINES[name].summary}'
        shown = {row[0]: row[1] for row in rows}
        assert set(shown) == set(truth) & set(OPTIONS) == set(truth), name
        assert shown == {key: ext.shown(value) for key, value in truth.items()}, name
    common = {row[0]: row[1] for row in groups["every engine"][1]}
    job = job_config()
    both = {**dataclasses.asdict(job.run), **dataclasses.asdict(job.model)}
    assert set(common) == set(both) & set(OPTIONS) - {"restarts", "wave", "obs"}
    assert common == {key: ext.shown(both[key]) for key in common}


# -- the engine contract ---------------------------------------------------------------------

def test_the_engine_contract_has_its_page_in_the_api_reference() -> None:
    page = (DOCS / "engine_contract.rst").read_text()
    listed = page[page.index(".. autosummary::"):].split()
    import bnpmix.pipeline.runtime as runtime

    for name in ("Engine", "Step", "Fitted", "Declared", "register"):
        assert name in listed and hasattr(runtime, name)
    assert "auto_examples/plot_custom_engine" in page
    assert "   engine_contract" in (DOCS / "api.rst").read_text().splitlines()
    guide = (DOCS / "user_guide" / "python_api.rst").read_text()
    assert "ARCHITECTURE.md" not in guide and ":doc:`../engine_contract`" in guide


def test_the_custom_engine_example_registers_fits_and_leaves_the_registry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    before = dict(ENGINES)
    runpy.run_path(str(DOCS / "examples" / "plot_custom_engine.py"), run_name="__main__")
    plt.close("all")
    assert before == ENGINES  # its engine is gone again: the build's later pages list ours
    out = capsys.readouterr().out
    assert "4 components after" in out and "converged: True" in out


# -- the Benchmarks page ---------------------------------------------------------------------

def test_the_benchmarks_page_opens_on_what_users_compare() -> None:
    text = (DOCS / "benchmarks.rst").read_text()
    order = sections(text, "-")
    assert order[0] == "Plain ``fit`` against scikit-learn on real data"
    first = text[text.index(order[0]):text.index(order[1])]
    assert ".. bnpmix-benchmark:: real_data" in first and "mclust_ari" in first
    for later, earlier in (("Reproductions of the papers", "Speed"),
                           ("Reproductions of the papers", "Text"),
                           ("Acceptance checks", "Reproductions of the papers")):
        assert order.index(earlier) < order.index(later)
    assert order[-2:] == ["Acceptance checks", "Every script"]


def test_the_acceptance_tables_are_folded(ext: Any) -> None:
    text = (DOCS / "benchmarks.rst").read_text()
    folded = text[text.index(".. bnpmix-collapsed::"):text.index("Every script\n")]
    for rows in (":rows: checks", ":rows: criteria\n", ":rows: criteria_issue45"):
        assert text.count(rows) == 1 and rows in folded
    html: list[str] = []
    translator = type("Translator", (), {"body": html})()
    node = ext.details(summary="Show the tables")
    ext.visit_details(translator, node)
    ext.depart_details(translator, node)
    assert "".join(html) == ('<details class="bnpmix-details"><summary>Show the tables'
                             "</summary></details>")


# -- the gallery -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, says", [
    ("plot_interrupt_resume", ("SIGINT", "resume run", "evaluate run", "report run")),
    ("plot_dask_cluster", ("kind: local", "--cluster local.yaml", "--threads 2")),
    ("plot_custom_engine", ("@register", "BayesianMixture(")),
])
def test_the_gallery_holds_the_new_examples(name: str, says: tuple[str, ...],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = DOCS / "examples" / f"{name}.py"
    monkeypatch.setattr(sys, "path", list(sys.path))  # conf.py adds docs/_ext to it
    conf = runpy.run_path(str(DOCS / "conf.py"))["sphinx_gallery_conf"]
    assert re.search(conf["filename_pattern"], str(path))  # the build runs it
    assert path.parent.name == conf["examples_dirs"]
    source = path.read_text()
    title = source.split('"""')[1].strip().splitlines()
    assert len(title) > 2 and set(title[1]) == {"="} and len(title[1]) == len(title[0])
    assert all(word in source for word in says)


def test_the_benchmark_history_is_drawn_as_a_trend(ext: Any, tmp_path: Path) -> None:
    """The Benchmarks page plots the history commit by commit: every time, the ARIs of the
    tracked figures (an ELBO's scale would flatten them), a gap where a record lacks one."""
    records = [{"commit": f"{i}" * 40, "time": {"time_memo_iris": 1.0 + i},
                "track": {"track_memo_iris_ari": 0.5, "track_memo_iris_elbo": -3.0}
                | ({"track_vb_iris_ari": 0.6} if i else {})} for i in range(3)]
    assert ext.history_series(records, "time") == {"time_memo_iris": [1.0, 2.0, 3.0]}
    track = ext.history_series(records, "track")
    assert list(track) == ["track_memo_iris_ari", "track_vb_iris_ari"]
    assert track["track_memo_iris_ari"] == [0.5] * 3 and track["track_vb_iris_ari"][1:] == [0.6] * 2
    assert track["track_vb_iris_ari"][0] != track["track_vb_iris_ari"][0]  # NaN: no figure
    png = ext.history_figure(records, "track", tmp_path / "history" / "track.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
