"""Commits of the repository, for run.py's records and its backfill (asv's way: this checkout's
suite, each commit's package): git's answers, a commit checked out in a temporary git worktree,
an import root that makes ``import bnpmix`` that checkout's package, and the suite run in a
child process on it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Skipped(Exception):
    """A commit whose package could not run the suite (the message says why)."""


def git(*args: str, repo: Path) -> str:
    """A git command's output in ``repo``."""
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


def resolve(rev: str, repo: Path) -> str:
    """The full hash of the commit ``rev`` names; Skipped when it names none."""
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", repo=repo)
    except subprocess.CalledProcessError:
        raise Skipped(f"{rev!r} names no commit") from None


def first_parent(n: int, repo: Path) -> list[str]:
    """The last ``n`` first-parent commits of HEAD, oldest first."""
    return git("rev-list", "--first-parent", f"--max-count={n}", "HEAD", repo=repo).split()[::-1]


def package_dirs(checkout: Path) -> dict[str, str]:
    """The checkout's setuptools package-dir (package -> folder, from its pyproject.toml)."""
    try:
        with open(checkout / "pyproject.toml", "rb") as f:
            dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise Skipped(f"no [tool.setuptools] package-dir in pyproject.toml ({exc!r})") from None
    return dict(dirs)


def build_import_root(checkout: Path, root: Path) -> Path:
    """A folder that, first on PYTHONPATH, makes the checkout's packages importable under their
    installed names: a package of the package-dir mapping is a symlink to its folder, or, when
    mapped packages sit inside it, a folder of symlinks to its folder's entries beside them."""
    dirs = package_dirs(checkout)
    for name in sorted(dirs, key=lambda n: len(n.split(".")) if n else 0):
        parts = name.split(".") if name else []
        inner = {m.split(".")[len(parts)] for m in dirs
                 if m != name and (not parts or m.split(".")[:len(parts)] == parts)}
        target, source = root.joinpath(*parts), (checkout / dirs[name]).absolute()
        if not source.is_dir():
            raise Skipped(f"package {name!r}: no folder {dirs[name]!r}")
        if parts and not inner:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source, target_is_directory=True)
            continue
        target.mkdir(parents=True, exist_ok=True)
        for entry in source.iterdir():
            if entry.name not in inner and entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
    return root


@contextlib.contextmanager
def worktree(commit: str, repo: Path) -> Iterator[Path]:
    """The commit's files in a temporary detached git worktree, removed afterwards (and the
    repository's record of it, were the removal to fail)."""
    try:
        with tempfile.TemporaryDirectory(prefix="bnpmix-history-") as tmp:
            checkout = Path(tmp) / "checkout"
            try:
                git("worktree", "add", "--detach", "--quiet", str(checkout), commit, repo=repo)
            except subprocess.CalledProcessError as exc:
                raise Skipped(f"git worktree add failed: {exc.stderr.strip()}") from None
            try:
                yield checkout
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(checkout)],
                               cwd=repo, capture_output=True, check=False)
    finally:
        subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True, check=False)


def measure_commit(commit: str, child: list[str], repo: Path) -> dict[str, Any]:
    """The figures the child command (run.py's ``--figures PATH``, appended here) measures with
    the package of ``commit``; Skipped when the child fails or imports another bnpmix."""
    with worktree(commit, repo) as checkout:
        root = build_import_root(checkout, checkout.parent / "root")
        out = checkout.parent / "figures.json"
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run([*child, "--figures", str(out)], env=env, capture_output=True,
                              text=True, check=False)
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-12:])
            raise Skipped(f"the suite failed (exit {done.returncode}):\n{tail}")
        figures = json.loads(out.read_text())
    if not Path(figures.pop("bnpmix")).is_relative_to(root):
        raise Skipped(f"the suite imported bnpmix from outside {root}")
    return figures
