"""Reports of finished runs (``bnpmix report RUN_DIR``) and comparisons of several
(``bnpmix compare RUN1 RUN2 ...``): PNG plots and one self-contained HTML page.

A report is written to ``RUN_DIR/report/`` (or ``out``): ``index.html`` with every picture
embedded as a data URI, and the same pictures as PNG files beside it. The directory is staged
beside its final place and renamed into it when complete, so a reader sees the old report or
the new one, never half of one; a directory that is not a bnpmix report is never replaced.
matplotlib is an optional dependency (``pip install 'bnpmix[plot]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bnpmix.storage import BnpmixError
from bnpmix.storage.atomic import staged_directory
from bnpmix.storage.errors import is_url

from ..usage import LABEL_NAMES, renamed_keyword
from .page import GENERATOR, Image, render

INDEX = "index.html"
GENERATOR_MARK = f'<meta name="generator" content="{GENERATOR}">'
# what installs matplotlib whichever way bnpmix was installed (it is not on PyPI, so
# `pip install 'bnpmix[plot]'` finds nothing); from a clone, its `plot` extra
PLOT_INSTALL = "pip install matplotlib (from a clone of bnpmix: pip install '.[plot]')"


def require_matplotlib() -> None:
    """matplotlib importable, else an error saying how to install it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BnpmixError(f"reports need matplotlib, which is not installed: "
                          f"{PLOT_INSTALL}") from None


def is_report_dir(path: Path) -> bool:
    """Whether ``path`` is absent, empty, or a report this package wrote (its index.html
    carries the generator mark): the only directories a report may replace."""
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    if not any(path.iterdir()):
        return True
    try:
        with open(path / INDEX, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return GENERATOR_MARK in head


def check_output(out: Path) -> Path:
    """``out`` if a report may be written there, else an error naming it."""
    if not is_report_dir(out):
        raise BnpmixError(f"{out}: exists and is not a bnpmix report; choose another output "
                          "directory")
    return out


def publish_to_store(url: str, page: str, images: Sequence[Image]) -> str:
    """The PNG files, then index.html last, under ``url`` (object storage has no rename: a
    reader of index.html finds its pictures); only an earlier report there is replaced."""
    from bnpmix.storage.objectstore import list_objects, read_object, write_object

    url = url.rstrip("/")
    names = list_objects(url)
    if names and (INDEX not in names or GENERATOR_MARK not in read_object(url, INDEX)
                  .decode("utf-8", "replace")[:4096]):
        raise BnpmixError(f"{url}: holds objects and is not a bnpmix report; choose another "
                          "output")
    for image in images:
        write_object(url, image.file, image.png)
    write_object(url, INDEX, page.encode("utf-8"))
    return f"{url}/{INDEX}"


def publish(out: Path | str, page: str, images: Sequence[Image]) -> Path | str:
    """Write the page and its PNG files into ``out`` atomically (a URL: publish_to_store);
    returns the page's path."""
    if is_url(out):
        return publish_to_store(str(out), page, images)
    check_output(out)
    try:
        with staged_directory(out, overwrite=True) as tmp:
            for image in images:
                (tmp / image.file).write_bytes(image.png)
            (tmp / INDEX).write_text(page, encoding="utf-8")
    except OSError as exc:
        raise BnpmixError(f"{out}: cannot write the report ({exc.strerror or exc})") from None
    return out / INDEX


def report(run_dir: str | Path, out: str | Path | None = None,
           heldout: str | Path | None = None, label_column: str | None = None, *,
           labels_column: str | None = None) -> Path | str:
    """Write the report of a finished run (default ``RUN_DIR/report/``; ``out`` may be a URL);
    returns the path of its index.html. ``heldout``: a corpus whose held-out figures the report
    adds (``label_column``: its labels; ``labels_column`` is its deprecated name)."""
    label_column = renamed_keyword(label_column, labels_column, LABEL_NAMES)
    from ..inspect import finished_run  # here: numpy, which listing the commands does not need

    run = finished_run(run_dir)  # the path's own errors first, then what is missing
    target = out if is_url(out) else check_output(
        Path(out) if out is not None else run.path / "report")
    require_matplotlib()
    from .contents import run_sections, run_subtitle
    from .rundata import load_run

    data = load_run(run.path, heldout, label_column)
    sections = run_sections(data)
    images = [image for section in sections for image in section.images]
    page = render(f"bnpmix report: {data.name}", run_subtitle(data), sections)
    return publish(target, page, images)


def compare(run_dirs: Sequence[str | Path], out: str | Path,
            heldout: str | Path | None = None, label_column: str | None = None, *,
            labels_column: str | None = None) -> Path | str:
    """Write one page comparing runs (their figures, traces and weights side by side) into
    ``out`` (a directory or a URL); returns the path of its index.html. ``heldout`` and
    ``label_column`` as ``report``'s."""
    label_column = renamed_keyword(label_column, labels_column, LABEL_NAMES)
    if not run_dirs:
        raise BnpmixError("compare needs run directories")
    from ..inspect import finished_run

    for run_dir in run_dirs:
        finished_run(run_dir)
    target = out if is_url(out) else check_output(Path(out))
    require_matplotlib()
    from .contents import compare_sections, compare_subtitle
    from .rundata import load_run

    runs = [load_run(r, heldout, label_column) for r in run_dirs]
    sections = compare_sections(runs)
    images = [image for section in sections for image in section.images]
    page = render(f"bnpmix comparison of {len(runs)} runs", compare_subtitle(runs), sections)
    return publish(target, page, images)


def __getattr__(name: str) -> object:
    """``RunData`` and ``load_run``, imported on first use (pandas, pyarrow, the evaluator):
    the ``bnpmix`` command line imports this package to list its sub-commands."""
    if name not in ("RunData", "load_run"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import rundata

    return getattr(rundata, name)


__all__ = ["RunData", "compare", "load_run", "report"]
