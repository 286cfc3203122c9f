"""The tests exercise the installed distribution under the bnpmix namespace."""

from __future__ import annotations

import subprocess
import sys


def test_subpackages_live_under_bnpmix():
    import bnpmix.algorithms
    import bnpmix.pipeline
    import bnpmix.storage

    for mod in (bnpmix.algorithms, bnpmix.pipeline, bnpmix.storage):
        assert mod.__name__.startswith("bnpmix.")


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
