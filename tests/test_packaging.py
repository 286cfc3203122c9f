"""The distribution: every subpackage is packaged, and nothing installs at the top level."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_every_subpackage_on_disk_is_packaged_and_importable():
    """A package folder missing from pyproject's list is absent from a non-editable install
    (bnpmix.algorithms.obs once was): the list must match the folders."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = set()
    for name, folder in setup["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([name, *rel.parts]))
    assert on_disk == set(setup["packages"])
    for name in sorted(on_disk):
        assert importlib.import_module(name).__name__ == name


def test_no_top_level_storage_or_pipeline_modules():
    # a fresh interpreter outside the repository: the root folders must not be importable as
    # top-level packages (they would collide with users' own "storage"/"pipeline")
    code = (
        "import importlib.util, bnpmix.storage, bnpmix.pipeline.cli\n"
        "print([n for n in ('storage', 'pipeline', 'algorithms') "
        "if importlib.util.find_spec(n) is not None])"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                         check=True)
    assert res.stdout.strip() == "[]"
