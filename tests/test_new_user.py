"""What a new user meets first (issue 33, section 3): usage errors exit 2 naming the flag typed,
each engine's own defaults in `fit --help`, quiet ends of piped output, the messages that say
what to do next."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import cli

# Refused before Dask is imported: then the names of Dask's modules are not in sys.modules.
NO_DASK = """
import sys
from bnpmix.pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(code, sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")))
"""


@pytest.mark.parametrize(("flags", "message"), [
    (("--laps", "0"), "--laps: 0 is not in [1, inf)"),
    (("--wave", "0"), "--wave: 0 is not in [1, inf)"),
    (("--threads", "0"), "--threads: 0 is not in [1, inf)"),
    (("--K", "-1"), "--K: -1 is not in [0, inf)"),
    (("--algorithm", "vb", "--passes", "3"), "--passes: does not apply to --algorithm vb"),
    (("--prior", "ig"), "--prior ig: does not apply to --algorithm memo"),
])
def test_a_bad_option_is_a_usage_error_naming_the_flag_before_dask_is_imported(tmp_path, flags,
                                                                              message):
    argv = ["fit", str(tmp_path / "corpus"), "--out", str(tmp_path / "run"), *flags]
    done = cli(*argv)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_an_option_of_another_engine_is_refused_before_dask_is_imported(tmp_path):
    argv = ["fit", str(tmp_path / "corpus"), "--out", str(tmp_path / "run"), "--algorithm",
            "vb", "--passes", "3"]
    out = subprocess.run([sys.executable, "-c", NO_DASK, *argv], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split(None, 1) == ["2", "[]\n"], out.stdout + out.stderr
    assert "--passes: does not apply to --algorithm vb" in out.stderr


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A memo run of three blobs."""
    from bnpmix.storage import ingest_array
    from helpers import blobs

    root = tmp_path_factory.mktemp("run")
    X, _ = blobs(450, 0)
    ingest_array(X, root / "corpus", partition_rows=150)
    done = cli("fit", root / "corpus", "--out", root / "run", "--laps", "6", "--seed", "0")
    assert done.returncode == 0, done.stderr
    return root / "run"


@pytest.mark.parametrize("command", [("info",), ("show", "--json"), ("info", "--json")])
def test_a_reader_that_leaves_early_ends_the_command_quietly(run_dir, command):
    """`bnpmix info RUN | head -1`: stdout's reader gone before anything is written (its end of
    the pipe closed at once), the command ends as `ls | head` does: exit 0, nothing on stderr."""
    p = subprocess.Popen([sys.executable, "-m", "bnpmix", command[0], str(run_dir), *command[1:]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(timeout=120) == 0 and err == "", err


def test_ingest_counts_partitions_in_good_english(tmp_path):
    import numpy as np

    np.save(tmp_path / "a.npy", np.ones((5, 2)))
    done = cli("ingest", tmp_path / "a.npy", tmp_path / "c")
    assert done.returncode == 0 and "into 1 partition at" in done.stdout, done.stdout
    done = cli("ingest", tmp_path / "a.npy", tmp_path / "c", "--append")
    assert done.returncode == 0, done.stderr
    assert f"appended 1 partition to {tmp_path / 'c'} (now 2 partitions)" in done.stdout


@pytest.mark.slow  # the full demo
def test_the_demo_keeps_its_run_with_out_and_says_what_to_try_next(tmp_path):
    """`bnpmix demo --out DIR`: the corpus and run stay, and every command it suggests runs on
    them (report left out: it needs matplotlib, a test extra tested in
    tests/pipeline/test_report.py)."""
    out = tmp_path / "demo"
    done = cli("demo", "--n", "800", "--laps", "4", "--out", out)
    assert done.returncode == 0, done.stderr
    suggested = [line.split("#")[0].split() for line in done.stdout.splitlines()
                 if line.startswith("  bnpmix ")]
    assert [words[1] for words in suggested] == ["info", "show", "report", "evaluate", "fit"]
    for words in suggested:
        if words[1] != "report":
            ran = cli(*words[1:])
            assert ran.returncode == 0, (words, ran.stderr)
    assert f"run directory: {out / 'run'}" in done.stdout
    again = cli("demo", "--n", "800", "--out", out)  # never into a directory with files
    assert again.returncode == 2 and "not empty" in again.stderr


def test_fit_help_gives_each_engines_own_default():
    """Every option several engines share shows, in `fit --help`, each engine's own default as
    its Config has it (sovb runs 20 laps, memo and vb 100)."""
    import dataclasses
    import re

    from bnpmix.pipeline.config import ENGINES, options

    done = cli("fit", "--help")
    text = " ".join(done.stdout.split())  # argparse's line breaks undone
    checked = 0
    for row in options():
        if len(row.engines) < 2 or row.variants or None in (row.within, row.default):
            continue
        own = {e: next(f.default for f in dataclasses.fields(ENGINES[e].Config)
                       if f.name == row.name) for e in row.engines}
        entry = re.search(re.escape(row.flag) + r" [A-Z_]+ (.*?) --[a-z]", text).group(1)
        shown = re.search(r"\(default (.*), in ", entry).group(1)
        for engine, default in own.items():
            assert (shown == str(default) if len(set(own.values())) == 1
                    else f"{default} (" in shown and engine in shown), (row.name, shown, own)
        checked += 1
    assert checked >= 2
    assert "(default 100 (memo), 20 (sovb), 500 (vb)" in text


def test_fit_help_and_the_engines_rows_give_each_engines_own_meaning():
    """An option the engines read differently (vb's K is a truncation in [1, inf), memo's an
    initial K in [0, inf)) is described per engine in `fit --help`, and each engine's row (the
    docs' tables, the range checked at resolve) is its own."""
    from bnpmix.pipeline.config import options, resolve
    from bnpmix.storage import BnpmixError

    text = " ".join(cli("fit", "--help").stdout.split())
    assert "memo: initial number of components" in text
    assert "vb: truncation: the components the fit may use" in text
    K = next(r for r in options() if r.name == "K")
    assert K.for_engine("vb").help.startswith("truncation") and K.for_engine("vb").within == \
        "[1, inf)"
    assert K.for_engine("memo").within == "[0, inf)"
    assert resolve({"algorithm": "memo", "K": 0}, "flags") is not None
    with pytest.raises(BnpmixError, match=r"K: 0 is not in \[1, inf\)"):
        resolve({"algorithm": "vb", "K": 0}, "flags")


def test_every_place_a_user_sees_a_cluster_gives_it_one_label(run_dir):
    """assignments/, predict, the estimator's labels_, `info`, `show` and the report call a
    cluster by one label: 0..K-1 by decreasing weight (the engine's ids stay internal)."""
    import json

    import numpy as np

    import bnpmix
    from bnpmix.pipeline.report.rundata import load_run
    from bnpmix.storage import Corpus, RunDir
    from helpers import blobs

    X, _ = blobs(450, 0)
    model = bnpmix.load(run_dir)
    K = model.n_components_
    assert np.all(np.diff(model.weights_) <= 0)
    assert not np.array_equal(model.component_ids_, np.arange(K))  # ids other than labels
    assigned = RunDir(run_dir).load_assignments().sort_values("item")["cluster"].to_numpy()
    np.testing.assert_array_equal(assigned, model.predict(X))
    sizes = np.bincount(assigned, minlength=K)
    info = json.loads(cli("info", run_dir, "--json").stdout)
    np.testing.assert_array_equal(info["sizes"], sizes)
    np.testing.assert_allclose(info["weights"], model.weights_, rtol=1e-12)
    shown = json.loads(cli("show", run_dir, "--json").stdout)["clusters"]
    for row in shown:
        label = row["cluster"]
        assert row["size"] == sizes[label]
        assert row["weight"] == pytest.approx(model.weights_[label], rel=1e-12)
        np.testing.assert_allclose(row["mean"], model.means_[label], atol=1e-4)
    assert [row["cluster"] for row in shown] == list(range(K))
    data = load_run(run_dir)  # the report's figures and tables
    np.testing.assert_allclose(data.weights, model.weights_[data.ids], rtol=1e-12)
    np.testing.assert_allclose(data.means, model.means_[data.ids], rtol=1e-12)
    summary = RunDir(run_dir).load_summary()
    np.testing.assert_allclose(summary["weights"], model.weights_, rtol=1e-12)
    assert summary["sizes"] == sizes.tolist()
    est = bnpmix.BayesianMixture(laps=6, random_state=0).fit(Corpus(run_dir.parent / "corpus")
                                                              .path)
    np.testing.assert_array_equal(est.labels_, est.predict(X))


def test_a_temporal_runs_figures_are_named_and_agree_with_the_report(tmp_path):
    """tdpm: `info` and `show` name their weights (next-epoch chain probabilities) and give each
    chain's fraction of the items, the figure the report plots, for the same labels."""
    import json

    import numpy as np

    from bnpmix.pipeline.report.rundata import load_run
    from bnpmix.storage import RunDir, ingest_array

    rng = np.random.default_rng(0)  # chain A in all 6 epochs, B dies after epoch 2
    E = np.repeat(np.arange(6), 30)
    alive_b = (E < 3) & (np.arange(len(E)) % 2 == 1)
    X = np.where(alive_b[:, None], [5.0, 0.0], [-5.0, 0.0]) + 0.3 * rng.standard_normal((180, 2))
    ingest_array(X, tmp_path / "corpus", partition_rows=60, columns={"time": E})
    done = cli("fit", tmp_path / "corpus", "--out", tmp_path / "run", "--algorithm", "tdpm",
               "--sweeps", "20", "--burn-in", "10", "--thin", "5")
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    info = json.loads(cli("info", run, "--json").stdout)
    assert info["weights_are"].startswith("next-epoch chain probabilities")
    assert "next-epoch chain probabilities" in cli("info", run).stdout
    assigned = RunDir(run).load_assignments()["cluster"].to_numpy()
    fractions = np.bincount(assigned, minlength=info["K"]) / len(assigned)
    np.testing.assert_allclose(info["fractions"], fractions, rtol=1e-12)
    assert min(w for w, f in zip(info["weights"], fractions, strict=True) if f > 0.1) < 0.01
    shown = json.loads(cli("show", run, "--json").stdout)
    assert shown["weights_are"] == info["weights_are"]
    data = load_run(run)
    assert data.weight_label == "fraction of the items"
    report = dict(zip(data.ids.tolist(), data.weights, strict=True))
    for row in shown["clusters"]:
        assert row["fraction"] == pytest.approx(report[row["cluster"]], rel=1e-12)
        assert row["fraction"] == pytest.approx(fractions[row["cluster"]], rel=1e-12)


@pytest.mark.parametrize("role", ["--sequence-column", "--time-column"])
def test_a_position_like_integer_feature_of_sequences_is_warned_about(tmp_path, role):
    """With --sequence-column or --time-column, an integer feature named like a position (t,
    pos, step, time) is kept as a feature with a warning naming it, as a label-like one is;
    a real-valued one, or any without sequences or epochs, is not warned about."""
    rows = [f"{s},{i},{0.5 * i + s:.3f},{i % 3}" for s in range(3) for i in range(4)]
    src = tmp_path / "seq.csv"
    src.write_text("seq,step,x,pos\n" + "\n".join(rows) + "\n")
    done = cli("ingest", src, tmp_path / "c", role, "seq")
    assert done.returncode == 0, done.stderr
    for name in ("step", "pos"):
        assert f"column {name!r} holds integers and is named like a position in time" \
            in done.stderr
    assert "'x'" not in done.stderr
    plain = cli("ingest", src, tmp_path / "d")  # no sequences, no epochs: no warning
    assert plain.returncode == 0 and "position" not in plain.stderr


def test_csv_time_values_keep_every_digit(tmp_path):
    """int64 epochs beyond 2^53 are read exactly (before, through float64, 2^53 + 1 became
    2^53); a float form beyond 2^53 is refused naming the line, one below it accepted."""
    from bnpmix.storage import Corpus

    times = [2**53 + 1, 2**53 + 3, -(2**62) - 1]
    src = tmp_path / "t.csv"
    src.write_text("x,t\n" + "".join(f"{i}.5,{t}\n" for i, t in enumerate(times)))
    done = cli("ingest", src, tmp_path / "c", "--time-column", "t")
    assert done.returncode == 0, done.stderr
    assert Corpus(tmp_path / "c").read_all().columns["time"].tolist() == times
    src.write_text("x,t\n1.5,3.0e2\n2.5,1.2345678901234567e17\n")
    done = cli("ingest", src, tmp_path / "d", "--time-column", "t")
    assert done.returncode == 1 and "line 3" in done.stderr and "beyond 2^53" in done.stderr
    src.write_text("x,t\n1.5,3.0e2\n")
    assert cli("ingest", src, tmp_path / "e", "--time-column", "t").returncode == 0
    assert Corpus(tmp_path / "e").read_all().columns["time"].tolist() == [300]


@pytest.mark.parametrize("algorithm", ["memo", "vb", "adf"])
def test_a_warm_start_from_another_vocabulary_of_the_same_size_is_refused(tmp_path, algorithm):
    """Its components' word probabilities would silently pass to other words: refused before
    anything is written, naming the field; the same vocabulary warm-starts."""
    for name, words in (("a", "apple bread cheese dates"), ("b", "eggs figs grapes honey")):
        w = words.split()
        (tmp_path / f"{name}.txt").write_text(
            f"{w[0]} {w[1]} {w[2]}\n{w[1]} {w[3]} {w[0]}\n" * 20)
        assert cli("ingest", tmp_path / f"{name}.txt", tmp_path / name).returncode == 0
    laps = () if algorithm == "adf" else ("--laps", "2")
    assert cli("fit", tmp_path / "a", "--out", tmp_path / "ra", "--algorithm", algorithm,
               "--obs", "mult", *laps).returncode == 0
    done = cli("fit", tmp_path / "b", "--out", tmp_path / "rb", "--algorithm", algorithm,
               "--obs", "mult", "--warm-start", tmp_path / "ra", *laps)
    assert done.returncode == 1 and "field 'vocab' differs" in done.stderr, done.stderr
    assert not (tmp_path / "rb").exists()
    again = cli("fit", tmp_path / "a", "--out", tmp_path / "ra2", "--algorithm", algorithm,
                "--obs", "mult", "--warm-start", tmp_path / "ra", *laps)
    assert again.returncode == 0, again.stderr


def test_of_two_ingests_into_one_new_path_the_later_is_refused(tmp_path):
    """Two plain ingests racing into one new corpus path both pass the emptiness check; the one
    that publishes second must not replace the first's corpus (without --overwrite)."""
    import numpy as np

    from bnpmix.storage import BnpmixError, Corpus, ingest_array
    from bnpmix.storage.atomic import staged_directory

    out = tmp_path / "c"
    with (pytest.raises(BnpmixError, match="another writer filled it"),
          staged_directory(out) as tmp):  # the slower writer, past its check
        ingest_array(np.zeros((5, 2)), out, partition_rows=5)  # the faster one publishes
        (tmp / "mine.txt").write_text("the slower writer's output")
    assert Corpus(out).n_items == 5 and not (out / "mine.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["c"]  # its staging directory removed
    with staged_directory(out, overwrite=True) as tmp:  # --overwrite replaces, as before
        (tmp / "mine.txt").write_text("replaced")
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_overwrite_waits_for_an_append_under_way(tmp_path):
    """`ingest --overwrite` of a corpus another process is appending to replaces it only when
    the append has finished (it holds the corpus lock), never in the middle of it."""
    import threading

    import numpy as np

    from bnpmix.storage import Corpus, ingest_array
    from bnpmix.storage.append import corpus_lock

    out = tmp_path / "c"
    ingest_array(np.zeros((5, 2)), out, partition_rows=5)
    appending, done = threading.Event(), threading.Event()

    def append_under_way():
        with corpus_lock(out):
            appending.set()
            done.wait(30)

    holder = threading.Thread(target=append_under_way)
    holder.start()
    appending.wait(30)
    writer = threading.Thread(target=ingest_array, args=(np.ones((7, 2)), out),
                              kwargs={"partition_rows": 7, "overwrite": True})
    writer.start()
    writer.join(2.0)
    assert writer.is_alive() and Corpus(out).n_items == 5  # still waiting for the lock
    done.set()
    holder.join(30)
    writer.join(60)
    assert Corpus(out).n_items == 7


def test_a_constant_column_is_fitted_with_a_warning_naming_it(tmp_path):
    """A constant column carries no cluster information: `bnpmix fit` and the estimator fit it
    (as a quantised column: each component's likelihood there the same) with one warning
    naming it and the corpus (or X), and find the clusters of the other columns alone. On
    main a continuous constant column shrank each component's variance with its size and
    merged every cluster (K = 1); one far from 0 (adf with full covariances failed with
    "LinAlgError: Matrix is not positive definite") was refused."""
    import numpy as np

    from bnpmix import BayesianMixture
    from bnpmix.algorithms.metrics import adjusted_rand_index
    from bnpmix.storage import DataWarning, RunDir

    rng = np.random.default_rng(1)
    X = rng.normal(size=(800, 3)) * [1, 2, 0.5] + 3.0 * rng.integers(0, 5, 800)[:, None]
    alone = BayesianMixture(obs="gauss", random_state=0).fit(X)
    assert alone.n_components_ == 5
    np.savetxt(tmp_path / "data.csv", np.c_[X[:, :1], np.full(800, 123456.789), X[:, 1:]],
               delimiter=",", header="a,b,c,d", comments="")
    assert cli("ingest", tmp_path / "data.csv", tmp_path / "corpus").returncode == 0
    done = cli("fit", tmp_path / "corpus", "--out", tmp_path / "run", "--obs", "gauss")
    assert done.returncode == 0, done.stderr
    assert (f"bnpmix: warning: {tmp_path / 'corpus'}: column 1 (0-based, of 4) is constant (= "
            "123457): a constant column carries no cluster information") in done.stderr
    assert done.stderr.count("is constant") == 1, done.stderr
    auto = cli("fit", tmp_path / "corpus", "--out", tmp_path / "auto")  # three candidates
    assert auto.returncode == 0 and auto.stderr.count("is constant") == 1, auto.stderr
    labels = RunDir(tmp_path / "run").load_assignments().sort_values("item")["cluster"]
    assert RunDir(tmp_path / "run").load_summary()["K"] == alone.n_components_
    assert adjusted_rand_index(alone.labels_, labels.to_numpy()) == 1.0
    far = np.c_[X, np.full(800, 3e5 + 0.5)]
    with pytest.warns(DataWarning, match=r"X: column 3 \(0-based, of 4\) is constant \(= "
                                         r"300000\).*floored"):
        est = BayesianMixture(obs="gauss", random_state=0).fit(far)
    assert adjusted_rand_index(alone.labels_, est.labels_) == 1.0
    assert np.all(np.linalg.eigvalsh(est.covariances_) > 0)
    np.testing.assert_allclose(est.means_[:, 3], 3e5 + 0.5, rtol=1e-12)


def test_a_docword_nnz_beyond_int32_is_a_count_checked_against_the_triples(tmp_path):
    """NNZ is a count, not an id: a header NNZ beyond int32 is not refused for its size (a
    corpus may hold more triples than int32 counts) but compared with the triples the file has;
    D and W, which number ids, stay within int32."""
    src = tmp_path / "docword.t.txt"
    src.write_text(f"2\n3\n{2**31}\n1 1 2\n1 3 1\n2 2 4\n")
    done = cli("ingest", src, tmp_path / "c")
    assert done.returncode == 1 and f"header says NNZ={2**31} but the file has 3" \
        in done.stderr, done.stderr
    src.write_text(f"2\n{2**31}\n3\n1 1 2\n1 3 1\n2 2 4\n")
    done = cli("ingest", src, tmp_path / "d")
    assert done.returncode == 1 and "beyond the int32 range" in done.stderr, done.stderr
