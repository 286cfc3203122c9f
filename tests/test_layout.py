"""Engines, model kinds and observation models plug in without editing shared files: no module of
pipeline/ outside pipeline/engines/ holds a string literal that is an engine's name, a saved
model's kind or an observation model's name (what such a module needs of them, the engine or the
model class declares). Parsed with `ast`, never imported: a docstring that mentions an engine in
a sentence is prose, a literal equal to its name is a decision. And every module of the three
source trees is short enough to read in one sitting (400 lines; a function, 60)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from test_imports import import_graph

from bnpmix.algorithms.mixture import MODEL_KINDS
from bnpmix.algorithms.obs import OBS_NAMES
from bnpmix.pipeline.runtime.engine import engine_class, engine_names, load_entry_points


def pipeline_files() -> list[Path]:
    spec = importlib.util.find_spec("bnpmix.pipeline")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    return [p for p in sorted(root.rglob("*.py"))
            if p.relative_to(root).parts[0] != "engines"]


def named(path: Path, names: set[str]) -> list[str]:
    """``path:line: 'literal'`` for each string literal of the file that is one of ``names``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in names]


def test_no_engine_model_kind_or_observation_model_is_named_outside_its_own_modules():
    load_entry_points()  # the engines' modules register the model kinds they write
    names = set(engine_names()) | set(MODEL_KINDS) | set(OBS_NAMES)
    assert {"memo", "adf", "tdpm", "ddcrp", "mixture", "gauss", "mult"} <= names
    files = pipeline_files()
    assert len(files) > 30 and any(p.name == "cli.py" for p in files)
    found = [hit for path in files for hit in named(path, names)]
    assert found == []


def test_the_option_parsers_are_a_leaf_that_engines_import_instead_of_the_option_table():
    """Engines take their parsers from pipeline/options.py, which imports nothing of bnpmix: the
    option table (config.py) imports the engines, never the other way round (an engine's
    tuner, which builds jobs, may)."""
    load_entry_points()
    graph = import_graph()
    assert graph["bnpmix.pipeline.options"] == set()
    engines = {cls.__module__ for cls in map(engine_class, engine_names())}
    assert "bnpmix.pipeline.engines.memo" in engines and len(engines) >= 6
    assert [m for m in engines if "bnpmix.pipeline.config" in graph[m]] == []
    assert all("bnpmix.pipeline.options" in graph[m] for m in engines)


def test_no_engine_module_is_imported_from_outside_the_engines():
    """What the rest of bnpmix needs of an engine it asks the engine class (the registry, the
    contract's attributes): only the package ``pipeline.engines`` (DEFAULT_ENGINE, DEFAULT_TUNED)
    is imported from outside it, never ``pipeline.engines.NAME``."""
    graph = import_graph()
    inside = "bnpmix.pipeline.engines."
    found = sorted(f"{m} imports {t}" for m, targets in graph.items() if not m.startswith(inside)
                   for t in targets if t.startswith(inside))
    assert found == []


def test_the_built_in_engines_tuners_live_with_them():
    """An engine's ``bnpmix tune`` search is its own (pipeline/engines/), not pipeline/tune.py's,
    which holds only what the searches share."""
    load_entry_points()
    inside = "bnpmix.pipeline.engines."
    tuners = {cls.name: cls.tuner for cls in map(engine_class, engine_names())
              if cls.tuner and cls.__module__.startswith(inside)}
    assert {"memo", "adf", "ep"} <= set(tuners)
    assert {n: t for n, t in tuners.items() if not t.startswith(inside)} == {}


def package_sources() -> list[Path]:
    """Every module of the three installed source trees (algorithms/, storage/, pipeline/)."""
    found = []
    for name in ("bnpmix.algorithms", "bnpmix.storage", "bnpmix.pipeline"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations
        found += sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.py"))
    return found


def test_no_module_is_over_400_lines_and_no_function_over_60():
    """A newcomer reads a module in one sitting and a function on one screen: no file of
    algorithms/, storage/ or pipeline/ is longer than 400 lines, no def (method or nested
    included) longer than 60, decorators and docstring counted."""
    files = package_sources()
    assert len(files) > 100
    long_files = [f"{p}: {n}" for p in files
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400]
    long_defs = [f"{p}:{d.lineno} {d.name}: {length}" for p in files
                 for d in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                 if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)
                 and (length := d.end_lineno - min([d.lineno, *(x.lineno for x in
                                                                 d.decorator_list)]) + 1) > 60]
    assert long_files == [] and long_defs == []
