"""history/run.py's backfill (--rev, --last): each commit's package, this checkout's suite. A tiny
repository of a fake ``bnpmix`` (laid out like ours by pyproject.toml's package-dir) and a tiny
suite stand in for the real ones, so the records are checked without running the real suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
PYPROJECT = """[tool.setuptools]
package-dir = { "bnpmix" = "src/bnpmix", "bnpmix.storage" = "storage" }
"""
SUITE = """import bnpmix
from bnpmix.storage import MARK


def time_nothing():
    pass


def track_mark():
    return float(MARK)


track_mark.unit = "mark"
"""


@pytest.fixture(scope="module")
def run():
    sys.path.insert(0, str(BENCHMARKS))
    from history import run

    return run


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, mark: str) -> str:
    """Commit a fake bnpmix whose storage package's MARK is ``mark`` (any Python source)."""
    (repo / "storage" / "__init__.py").write_text(f"MARK = {mark}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"MARK {mark}")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src" / "bnpmix").mkdir(parents=True)
    (repo / "storage").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "src" / "bnpmix" / "__init__.py").write_text("")
    _git(repo, "init", "-q")
    return repo


def test_the_import_root_makes_bnpmix_the_checkouts_before_the_installed_one(run, repo,
                                                                              tmp_path):
    """PYTHONPATH on the import root comes before the installed package's editable finder:
    ``bnpmix`` and its mapped subpackage are the checkout's, entered through the root."""
    from history.checkouts import build_import_root

    _commit(repo, "7")
    root = build_import_root(repo, tmp_path / "root")
    assert (root / "bnpmix" / "storage").is_symlink() and (root / "bnpmix").is_dir()
    code = "import bnpmix.storage as s; print(s.__file__, s.MARK)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    path, mark = done.stdout.split()
    assert Path(path).is_relative_to(root) and mark == "7"


def test_each_record_names_its_commit_and_was_measured_with_its_package(run, repo, tmp_path):
    """Two commits give two records, each naming its commit and date, never dirty, with the
    figure of its own package; a commit whose package fails and a name of no commit are
    skipped with the reason; the temporary worktrees are gone afterwards."""
    first, second = _commit(repo, "1"), _commit(repo, "2")
    broken = _commit(repo, "undefined_name")
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE)
    history = tmp_path / "history.json"
    records, skipped = run.backfill([first, "HEAD~1", broken, "no-such-rev"], suite, 1,
                                    history, repo=repo)
    assert [r["commit"] for r in records] == [first, second]
    assert [r["track"]["track_mark"] for r in records] == [1.0, 2.0]
    assert all(not r["dirty"] and r["date"] == _git(repo, "log", "-1", "--format=%cI",
                                                    r["commit"]) for r in records)
    assert run.load(history) == records
    assert len(skipped) == 2 and "NameError" in skipped[0] and "names no commit" in skipped[1]
    assert len(_git(repo, "worktree", "list").splitlines()) == 1


def test_last_takes_first_parent_commits_oldest_first(run, repo):
    from history.checkouts import first_parent

    commits = [_commit(repo, str(i)) for i in range(3)]
    assert first_parent(2, repo) == commits[1:]


@pytest.mark.skipif(not (BENCHMARKS.parent / ".git").exists(), reason="not a git checkout")
def test_the_command_line_backfills_this_repository(run, tmp_path):
    """``run.py --rev HEAD --suite S``: the real layout's import root, the record of HEAD in the
    history file and in --json (a tiny suite: the real one takes minutes)."""
    suite = tmp_path / "suite.py"
    suite.write_text("import bnpmix.storage\n\n\ndef track_one():\n    return 1.0\n\n\n"
                     "track_one.unit = 'one'\n")
    history, out = tmp_path / "history.json", tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "history" / "run.py"), "--rev", "HEAD",
                           "--suite", str(suite), "--repeat", "1", "--history", str(history),
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    head = _git(BENCHMARKS.parent, "rev-parse", "HEAD")
    records = json.loads(out.read_text())["records"]
    assert [r["commit"] for r in records] == [head] and run.load(history) == records
