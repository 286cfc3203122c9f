"""`bnpmix report` and `bnpmix compare` as a user runs them: real fits through the CLI (a memo
run on scikit-learn's 8x8 digits and a text run), the pictures checked as PNGs that are not
blank, and the pages opened in headless Chromium (installed from Debian's packages when absent)
with every image loaded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pytest

from helpers import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TOPICS = {
    "sport": "ball goal team match player score coach league",
    "money": "stock market price bank trade money fund share",
    "weather": "rain cloud storm wind sunny weather snow cold",
    "code": "code python bug compile test server data model",
}
# screenshots are also copied here when the variable is set (to look at them)
SHOTS = os.environ.get("BNPMIX_REPORT_SHOTS")


@pytest.fixture
def plotting() -> None:
    """Reports need matplotlib (the `plot` extra); without it only the error is tested."""
    pytest.importorskip("matplotlib", reason="matplotlib (pip install matplotlib) is not "
                        "installed")


def ok(*args: str) -> subprocess.CompletedProcess:
    done = cli(*args)
    assert done.returncode == 0, f"bnpmix {' '.join(args)}: {done.stderr}"
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Digits (memo, diagonal Gaussians, births from K = 1; and vb) and text (memo, mult)."""
    from sklearn.datasets import load_digits

    tmp = tmp_path_factory.mktemp("report")
    digits = load_digits()
    X, y = digits.data[:500], digits.target[:500]
    header = ",".join([*(f"p{i}" for i in range(64)), "label"])
    rows = [",".join([*(f"{v:g}" for v in x), str(t)]) for x, t in zip(X, y, strict=True)]
    (tmp / "digits.csv").write_text(header + "\n" + "\n".join(rows) + "\n")
    ok("ingest", str(tmp / "digits.csv"), str(tmp / "digits"), "--label-column", "label",
       "--partition-rows", "100")
    ok("fit", str(tmp / "digits"), "--out", str(tmp / "run-digits"), "--obs", "diag-gauss",
       "--laps", "8")
    ok("fit", str(tmp / "digits"), "--out", str(tmp / "run-digits-vb"), "--algorithm", "vb",
       "--obs", "diag-gauss", "--K", "10", "--laps", "5")
    rng = np.random.default_rng(0)
    every = " ".join(TOPICS.values()).split()
    lines = []
    for i in range(300):
        words = TOPICS[list(TOPICS)[i % 4]].split()
        lines.append(" ".join([*rng.choice(words, 12), *rng.choice(every, 2)]))
    (tmp / "docs.txt").write_text("\n".join(lines) + "\n")
    ok("ingest", str(tmp / "docs.txt"), str(tmp / "text"), "--partition-rows", "100")
    ok("fit", str(tmp / "text"), "--out", str(tmp / "run-text"), "--laps", "4")
    return {"tmp": tmp, "digits": tmp / "run-digits", "vb": tmp / "run-digits-vb",
            "text": tmp / "run-text", "corpus": tmp / "digits"}


def check_png(path: Path) -> None:
    """A valid PNG of more than 1 KB whose pixels are not all one color."""
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name}: not a PNG"
    assert len(data) > 1024, f"{path.name}: only {len(data)} bytes"
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and min(pixels.shape[:2]) > 100, f"{path.name}: {pixels.shape}"
    assert float(pixels[..., :3].var()) > 0, f"{path.name}: blank"


def img_files(page: str) -> list[str]:
    return re.findall(r'<img [^>]*data-file="([^"]+)"', page)


def test_report_of_a_digits_run(runs, plotting):
    done = ok("report", str(runs["digits"]))
    page_path = runs["digits"] / "report" / "index.html"
    assert str(page_path) in done.stdout
    expected = {"trace.png", "weights.png", "means.png", "stddev.png"}
    files = {p.name for p in page_path.parent.glob("*.png")}
    assert files == expected
    for name in files:
        check_png(page_path.parent / name)
    page = page_path.read_text(encoding="utf-8")
    assert sorted(img_files(page)) == sorted(expected)
    assert page.count('src="data:image/png;base64,') == len(expected)  # self-contained
    assert 'id="config-table"' in page and 'id="figures-table"' in page
    assert "engine.birth.tau" in page and "diag-gauss" in page
    assert "observation prior" in page and "prior a0_max" in page
    assert 'alt="component means as images"' in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from outside
    from matplotlib.image import imread

    means = imread(page_path.parent / "means.png")
    assert means.shape[1] > means.shape[0]  # a row of digit images, not one


def test_report_of_a_text_run_shows_top_words(runs, plotting):
    ok("report", str(runs["text"]))
    out = runs["text"] / "report"
    expected = {"trace.png", "weights.png", "top_words.png"}
    assert {p.name for p in out.glob("*.png")} == expected
    for name in expected:
        check_png(out / name)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert 'id="top-words"' in page and 'id="config-table"' in page
    table = page[page.index('id="top-words"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr><td[^>]*>(\d+)</td><td[^>]*>[^<]*</td><td>([^<]*)</td></tr>", table)
    assert len(rows) >= 4
    found = set()
    for _, words in rows:  # each topic is some cluster's top words
        top = set(words.split(", ")[:8])
        found |= {name for name, text in TOPICS.items() if len(top & set(text.split())) >= 6}
    assert found == set(TOPICS), rows


def test_the_vocabulary_kept_in_the_run_directory_is_preferred(runs, tmp_path):
    from bnpmix.pipeline.inspect import run_vocabulary
    from bnpmix.storage import Corpus, RunDir

    run = RunDir(tmp_path / "run")
    shutil.copytree(runs["text"], run.path, ignore=shutil.ignore_patterns("report"))
    summary = run.load_summary()
    words = Corpus(runs["tmp"] / "text").manifest.vocab
    assert run_vocabulary(run, summary, len(words)) == (words, str(run.vocab_path))
    summary["config"]["run"]["corpus"] = str(tmp_path / "gone")
    assert run_vocabulary(run, summary, len(words)) == (words, str(run.vocab_path))
    run.vocab_path.unlink()  # without vocab.txt: the corpus's, while it is there
    assert run_vocabulary(run, summary, len(words))[0] is None
    summary["config"]["run"]["corpus"] = str(runs["tmp"] / "text")
    assert run_vocabulary(run, summary, len(words))[0] == words
    run.write_vocab(list(reversed(words)))
    words2, why = run_vocabulary(run, summary, len(words))
    assert words2 is None and "SHA-256" in why  # another vocabulary: no wrong words shown


def test_compare_puts_both_runs_side_by_side(runs, plotting):
    out = runs["tmp"] / "compare"
    done = ok("compare", str(runs["digits"]), str(runs["vb"]), "--out", str(out),
              "--heldout", str(runs["corpus"]), "--label-column", "label")
    assert "comparison of 2 runs" in done.stdout
    page = (out / "index.html").read_text(encoding="utf-8")
    assert sorted(img_files(page)) == ["compare_traces.png", "compare_weights.png"]
    for name in img_files(page):
        check_png(out / name)
    table = page[page.index('id="compare-table"'):]
    table = table[:table.index("</table>")]
    assert "run-digits</td>" in table and "run-digits-vb</td>" in table
    assert "held-out ari" in table and "held-out heldout_loglik_per_item" in table
    assert 'id="config-diff-table"' in page and "algorithm" in page
    assert cli("compare", str(runs["digits"]), "--out", str(out)).returncode == 2


def test_report_of_a_temporal_run_has_the_chain_panels(tmp_path, plotting):
    rng = np.random.default_rng(0)
    rows = ["x,y,day"]
    for day in range(10):  # chain 0 dies after day 6, chain 2 is born on day 3
        for c in (0, 1, 2):
            if (c == 0 and day > 6) or (c == 2 and day < 3):
                continue
            rows += [f"{5 * c + 0.2 * day + rng.normal(0, 0.3):.4f},"
                     f"{3 * c + rng.normal(0, 0.3):.4f},{day}" for _ in range(12)]
    (tmp_path / "points.csv").write_text("\n".join(rows) + "\n")
    ok("ingest", str(tmp_path / "points.csv"), str(tmp_path / "corpus"), "--time-column", "day")
    run = tmp_path / "run"
    ok("fit", str(tmp_path / "corpus"), "--out", str(run), "--algorithm", "tdpm", "--sweeps",
       "20", "--burn-in", "10", "--thin", "5")
    ok("report", str(run))
    chains = {"chain_durations.png", "chain_popularity.png", "chains_alive.png",
              "chain_lifespans.png"}
    files = {p.name for p in (run / "report").glob("*.png")}
    assert chains <= files and "trace.png" in files and "weights.png" in files
    for name in files:
        check_png(run / "report" / name)
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert "Chains over epochs" in page and "log joint per item" in page


def test_the_panels_are_the_ones_the_run_declares_not_the_files_it_holds(runs, tmp_path):
    """The report reads what the run's summary declares (Declared.panels): a memo run holding
    a sequences.parquet (ddcrp's table) is not reported as a ddcrp run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bnpmix.pipeline.report.rundata import load_run

    run = tmp_path / "run"
    shutil.copytree(runs["digits"], run)
    pq.write_table(pa.table({"sequence": [0], "items": [500], "tables": [3], "elbo": [-1.0]}),
                   run / "sequences.parquet")
    data = load_run(run)
    assert data.sequences is None and data.chains is None and data.trace is not None


def test_errors_name_the_path_and_leave_nothing(runs, tmp_path, plotting):
    missing = tmp_path / "no-such-run"
    done = cli("report", str(missing))
    assert done.returncode == 1 and str(missing) in done.stderr
    assert not missing.exists()
    not_run = tmp_path / "plain"
    not_run.mkdir()
    done = cli("report", str(not_run))
    assert done.returncode == 1 and "nor a run directory (no summary.json)" in done.stderr
    assert list(not_run.iterdir()) == []
    other = tmp_path / "mine"  # a directory that is not a report is never replaced
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    done = cli("report", str(runs["text"]), "--out", str(other))
    assert done.returncode == 1 and "not a bnpmix report" in done.stderr
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_missing_matplotlib_is_a_clear_error(runs):
    code = ("import sys; sys.modules['matplotlib'] = None  # `import matplotlib` now fails\n"
            "from bnpmix.pipeline.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "report", str(runs["text"]), "--out",
                           str(runs["tmp"] / "no-plot")], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    # what works for any install: bnpmix is not on PyPI, so `bnpmix[plot]` would find nothing
    assert "pip install matplotlib" in done.stderr and "bnpmix[plot]" not in done.stderr
    assert "pip install '.[plot]'" in done.stderr  # from a clone: the extra pyproject.toml has
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["plot"] == ["matplotlib>=3.7"]
    assert not (runs["tmp"] / "no-plot").exists()


def test_a_failed_write_keeps_the_old_report(runs, tmp_path, monkeypatch, plotting):
    from bnpmix.pipeline.report import report
    from bnpmix.storage import BnpmixError

    out = tmp_path / "rep"
    page = report(runs["text"], out)
    before = page.read_bytes()

    def disk_full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(BnpmixError, match=re.escape(str(out))):
        report(runs["text"], out)
    monkeypatch.undo()
    assert page.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # no staging left


# ---- headless Chromium ----------------------------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="module")
def browser() -> str:
    """The headless browser's command; the test skips, saying why, where there is none (a test
    run never installs software: .ci/run installs Debian's chromium before the tests)."""
    path = find_browser()
    if path is None:
        pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) on PATH; "
                    "`apt-get install chromium` to run this test")
    return path


def headless(browser: str, page: Path, *action: str, height: int = 4000) -> str:
    with tempfile.TemporaryDirectory(prefix="bnpmix-chromium-") as profile:
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-extensions", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--window-size=1280,{height}",
             "--virtual-time-budget=5000", *action, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow  # a real browser, twice per page
@pytest.mark.parametrize("which", ["digits", "text"])
def test_the_report_opens_in_headless_chromium(runs, plotting, browser, which, tmp_path):
    ok("report", str(runs[which]))
    page = runs[which] / "report" / "index.html"
    n_images = len(img_files(page.read_text(encoding="utf-8")))
    dom = headless(browser, page, "--dump-dom")
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert f'data-images-loaded="{n_images}/{n_images}"' in body, body
    assert 'data-all-images-loaded="yes"' in body
    imgs = re.findall(r"<img [^>]*>", dom)
    assert len(imgs) == n_images and all('data-loaded="yes"' in i for i in imgs)
    shot = tmp_path / f"report-{which}.png"
    headless(browser, page, f"--screenshot={shot}")
    check_png(shot)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[1] == 1280
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(SHOTS) / shot.name)


def test_the_report_of_a_one_pass_adf_run_draws_the_pass_item_by_item(tmp_path, plotting):
    """A corpus of one partition: the ADF trace has one row (main drew it as a dot per panel on
    empty axes); the report draws the pass item by item from progress.parquet instead."""
    from bnpmix.pipeline.report import figures as F
    from bnpmix.pipeline.report.contents import trace_section
    from bnpmix.pipeline.report.rundata import load_run
    from bnpmix.storage import RunDir

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.5, (100, 2)) for c in ([0, 0], [6, 6], [-6, 6])])
    np.save(tmp_path / "x.npy", rng.permutation(X))
    ok("ingest", str(tmp_path / "x.npy"), str(tmp_path / "corpus"))
    run = tmp_path / "run"
    ok("fit", str(tmp_path / "corpus"), "--out", str(run), "--algorithm", "adf", "--obs",
       "gauss")
    summary = RunDir(run).load_summary()
    assert len(RunDir(run).load_trace()) == 1
    data = load_run(run)
    p = data.progress
    assert len(p.K) == 32 and p.items_seen[0] == 1 and p.items_seen[-1] == 300
    assert np.all(np.diff(p.K) >= 0) and p.K[0] == 1 and p.K[-1] >= 3
    assert p.objective[-1] * 300 == pytest.approx(summary["loglik"])
    section = trace_section(data)
    assert [image.file for image in section.images] == ["pass.png"]
    fig = F.trace_figure([F.Series("run", p.items_seen, p.objective, p.K, p.objective_name)],
                         "pass")
    top, bottom = fig.axes
    assert len(top.lines[0].get_xdata()) == 32 and bottom.get_ylim()[1] >= p.K[-1]
