"""The ddcrp engine end to end: sequences of a corpus fitted one task each, the run directory's
tables (sequences.parquet, links.parquet, assignments) and the summary's ELBO, determinism across
runs and executors, the engine's flags beside tdpm's same-named ones, held-out scoring through
``bnpmix.load``, a corpus without sequences, a sequence split between partitions, checkpoint and
resume, and real Dask processes on loopback.

The data: 8 sequences of 30..60 items, each drawing from 2 or 3 of five well-separated unit
Gaussians in 2-D, its items sorted by component (so each component is one run of items).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

import bnpmix
from bnpmix.algorithms.ddcrp import heldout
from bnpmix.algorithms.ddcrp.links import decay
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.pipeline.config import resolve
from bnpmix.pipeline.engines import ddcrp as ddcrp_engine
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.runtime import checkpoint
from bnpmix.storage import BnpmixError, Corpus, Manifest, RunDir
from bnpmix.storage.writer import new_corpus
from helpers import cli

CENTRES = np.array([[0.0, 0.0], [6.0, 6.0], [6.0, -6.0], [-6.0, 6.0], [-6.0, -6.0]])
N_SEQUENCES = 8


def make_data(seed: int = 0) -> pd.DataFrame:
    """Rows x, y, sequence, label: sequence s (ids 100 + 7 s, not 0..S-1, so that an id is
    never mistaken for an ordinal) has 30..60 items from 2..3 components, sorted by component."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(N_SEQUENCES):
        n = int(rng.integers(30, 61))
        comps = np.sort(rng.choice(len(CENTRES), int(rng.integers(2, 4)), replace=False))
        sizes = np.diff(np.linspace(0, n, len(comps) + 1).round().astype(int))
        z = np.repeat(comps, sizes)
        X = CENTRES[z] + rng.standard_normal((n, 2))
        parts.append(pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "sequence": 100 + 7 * s,
                                   "label": z}))
    return pd.concat(parts, ignore_index=True)



def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def failed(proc: subprocess.CompletedProcess[str]) -> str:
    """The one-line error of a refused command (no traceback)."""
    detail = f"exit {proc.returncode}\nstdout: {proc.stdout!r}\nstderr: {proc.stderr!r}"
    assert proc.returncode != 0, detail
    assert "Traceback" not in proc.stderr, detail
    return proc.stderr


def sequences_of(run: Path) -> pd.DataFrame:
    return pd.read_parquet(run / "sequences.parquet")


def links_of(run: Path) -> pd.DataFrame:
    return pd.read_parquet(run / "links.parquet")


def assignments_of(run: Path) -> pd.DataFrame:
    return RunDir(run).load_assignments().sort_values("item", ignore_index=True)


def assert_same_fit(a: Path, b: Path) -> None:
    """Two runs with identical per-sequence results (everything but the timings)."""
    sa, sb = sequences_of(a), sequences_of(b)
    for column in ("sequence", "elbo", "iterations", "converged", "n_tables", "items",
                   "tables"):
        np.testing.assert_array_equal(sa[column], sb[column], err_msg=column)
    assert [list(r) for r in sa["restart_elbos"]] == [list(r) for r in sb["restart_elbos"]]
    pd.testing.assert_frame_equal(links_of(a), links_of(b))
    pd.testing.assert_frame_equal(assignments_of(a), assignments_of(b))
    assert RunDir(a).load_summary()["elbo"] == RunDir(b).load_summary()["elbo"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The CSV and its corpus, ingested with --sequence-column (partitions of ~100 rows, so
    several sequences share a partition)."""
    root = tmp_path_factory.mktemp("ddcrp")
    df = make_data()
    csv = root / "data.csv"
    df.to_csv(csv, index=False, float_format="%.17g")
    corpus = root / "corpus"
    ok(cli("ingest", csv, corpus, "--sequence-column", "sequence", "--label-column", "label",
           "--partition-rows", 100))
    c = Corpus(corpus)
    assert 1 < c.n_partitions < N_SEQUENCES  # several sequences per partition
    assert c.read_all().columns["sequence"].tolist() == df["sequence"].tolist()
    return SimpleNamespace(root=root, df=df, csv=csv, corpus=corpus)


FIT = ("--algorithm", "ddcrp", "--restarts", 3, "--seed", 0)


@pytest.fixture(scope="module")
def default_run(data):
    run = data.root / "default"
    ok(cli("fit", data.corpus, "--out", run, *FIT))
    return run


DECAY = ("--decay", "exponential", "--decay-a", 5, "--window", 10, "--alpha", 0.5)


@pytest.fixture(scope="module")
def decay_run(data):
    run = data.root / "decay"
    ok(cli("fit", data.corpus, "--out", run, "--algorithm", "ddcrp", "--restarts", 2, *DECAY))
    return run


# 1. the run directory ---------------------------------------------------------------------------


def test_a_fit_writes_one_row_per_sequence_and_per_item(data, default_run):
    df, run = data.df, default_run
    n = len(df)
    summary = RunDir(run).load_summary()
    seqs = sequences_of(run)

    # one row per sequence, the summary's ELBO their sum
    assert summary["algorithm"] == "ddcrp" and summary["n_items"] == n
    assert summary["sequences"] == N_SEQUENCES == len(seqs)
    assert sorted(seqs["sequence"]) == sorted(df["sequence"].unique())
    assert summary["elbo"] == pytest.approx(float(seqs["elbo"].sum()), rel=1e-9)
    assert summary["K"] == int(seqs["tables"].sum())
    sizes = df.groupby("sequence").size()
    assert seqs["items"].sum() == n
    assert seqs.set_index("sequence")["items"].to_dict() == sizes.to_dict()
    assert (seqs["iterations"] >= 1).all()
    for elbo, restarts in zip(seqs["elbo"], seqs["restart_elbos"], strict=True):
        assert len(restarts) == 3
        assert max(restarts) == elbo

    # links: one per item, each to an earlier (or the same) item of its own sequence
    links = links_of(run).sort_values("item", ignore_index=True)
    assert links["item"].tolist() == list(range(n))
    seq_of = df["sequence"].to_numpy()
    np.testing.assert_array_equal(links["sequence"], seq_of)
    link = links["link"].to_numpy()
    assert (link >= 0).all() and (link <= links["item"]).all()
    np.testing.assert_array_equal(seq_of[link], seq_of)
    for column in ("link_prob", "self_prob"):
        assert links[column].between(0, 1).all(), column
    first = np.flatnonzero(np.r_[True, seq_of[1:] != seq_of[:-1]])  # each sequence's first item
    np.testing.assert_array_equal(link[first], first)  # it can only open a table
    np.testing.assert_allclose(links["self_prob"].to_numpy()[first], 1.0)

    # assignments: the tables recover each sequence's components; no table spans sequences
    assign = assignments_of(run)
    assert assign["item"].tolist() == list(range(n))
    cluster = assign["cluster"].to_numpy()
    assert assign["prob"].between(0, 1 + 1e-12).all()  # Z's rows sum to 1 up to rounding
    aris, tables = [], {}
    for s, rows in df.groupby("sequence").indices.items():
        aris.append(adjusted_rand_index(df["label"].to_numpy()[rows], cluster[rows]))
        tables[s] = set(cluster[rows].tolist())
        assert len(tables[s]) <= int(seqs.set_index("sequence").loc[s, "tables"])
    assert np.mean(aris) >= 0.9 and min(aris) >= 0.7, aris
    all_tables = [t for ts in tables.values() for t in ts]
    assert len(all_tables) == len(set(all_tables)), tables


def test_info_show_and_report_say_the_tables_are_per_sequence(default_run):
    """K counts each sequence's own tables: info, show and the report's weights and subtitle
    say so, with the sequences and the tables per sequence (issue 48: 83 "components" for 4
    regimes shared by 30 sequences read as 83 clusters); so does fit's own closing text."""
    import html

    from bnpmix.pipeline.cli import format_fit
    from bnpmix.pipeline.report.contents import run_subtitle, weights_section
    from bnpmix.pipeline.report.rundata import load_run

    tables = sequences_of(default_run)["tables"]
    note = (f"tables are per sequence, not clusters shared across sequences: {N_SEQUENCES} "
            f"sequences with {tables.min()}-{tables.max()} tables each (mean "
            f"{tables.mean():.2f}); K = {tables.sum()} counts every sequence's own tables")
    assert f"local         {note}" in ok(cli("info", default_run)).stdout
    shown = ok(cli("show", default_run)).stdout.splitlines()
    assert shown[0].startswith(f"ddcrp (gauss): {tables.sum()} tables of ")
    assert f"note: {note}" in shown
    fitted = format_fit(json.loads((default_run / "summary.json").read_text()), default_run)
    assert fitted.startswith(f"ddcrp: K = {tables.sum()} tables (") and note in fitted
    data = load_run(default_run)
    assert f"K = {tables.sum()} tables, each of one sequence," in run_subtitle(data)
    assert any(html.escape(note) in text for text in weights_section(data).html)


# 2. determinism -------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_fit_and_another_seed_another(data, default_run,
                                                                 tmp_path):
    """(The synchronous executor against threads:
    tests/pipeline/runtime/test_engine_contract.py.)"""
    ok(cli("fit", data.corpus, "--out", tmp_path / "again", *FIT))
    assert_same_fit(default_run, tmp_path / "again")
    # and the seed matters (the equality above is not that of a seedless fit)
    ok(cli("fit", data.corpus, "--out", tmp_path / "seed1", "--algorithm", "ddcrp",
           "--restarts", 3, "--seed", 1))
    a, b = sequences_of(default_run), sequences_of(tmp_path / "seed1")
    assert [list(r) for r in a["restart_elbos"]] != [list(r) for r in b["restart_elbos"]]


# 3. flags ----------------------------------------------------------------------------------------


def test_decay_flags_reach_the_engine_and_are_recorded(data, default_run, decay_run):
    expected = {"decay": "exponential", "decay_a": 5.0, "window": 10, "alpha": 0.5}
    job = json.loads((decay_run / "job.json").read_text())
    summary = RunDir(decay_run).load_summary()
    for config in (job["config"], summary["config"]):
        assert config["algorithm"] == "ddcrp"
        assert {k: config["engine"][k] for k in expected} == expected
    hyper = bnpmix.load(decay_run).model.hyper
    assert {k: hyper[k] for k in expected} == expected
    # they change the fit (a window of 10 and alpha 0.5 are another prior)
    assert not np.array_equal(sequences_of(decay_run)["elbo"],
                              sequences_of(default_run)["elbo"])


def test_a_bad_decay_is_refused_before_anything_is_written(data, tmp_path):
    err = failed(cli("fit", data.corpus, "--out", tmp_path / "bad", "--algorithm", "ddcrp",
                     "--decay", "bogus"))
    assert "decay" in err and "bogus" in err, err
    assert not (tmp_path / "bad").exists()
    err = failed(cli("fit", data.corpus, "--out", tmp_path / "bad", "--algorithm", "ddcrp",
                     "--window", 0))
    assert "window" in err, err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("value", ["bogus", "0.8"])
def test_a_bad_ddcrp_decay_names_the_ddcrp_choices(data, tmp_path, value):
    err = failed(cli("fit", data.corpus, "--out", tmp_path / "bad", "--algorithm", "ddcrp",
                     "--decay", value))
    assert "exponential" in err and "logistic" in err, err


def test_decay_keeps_its_meaning_for_each_engine():
    tdpm = resolve({"algorithm": "tdpm", "decay": "0.8"}, "test")
    assert tdpm.engine.decay == 0.8 and isinstance(tdpm.engine.decay, float)
    ddcrp = resolve({"algorithm": "ddcrp", "decay": "exponential", "decay_a": "5",
                     "window": "10", "alpha": "0.5"}, "test")
    assert ddcrp.engine.decay == "exponential"
    assert (ddcrp.engine.decay_a, ddcrp.engine.window, ddcrp.engine.alpha) == (5.0, 10, 0.5)
    assert resolve({"algorithm": "ddcrp"}, "test").engine.decay == "none"
    with pytest.raises(BnpmixError, match="decay"):
        resolve({"algorithm": "ddcrp", "decay": "bogus"}, "test")
    with pytest.raises(BnpmixError, match="decay"):
        resolve({"algorithm": "tdpm", "decay": "exponential"}, "test")
    with pytest.raises(BnpmixError, match=r"decay_a.*ddcrp"):
        resolve({"algorithm": "tdpm", "decay_a": "5"}, "test")


def test_tdpm_still_takes_a_numeric_decay_on_the_command_line(tmp_path):
    # a tdpm corpus: two epochs of two clusters
    rng = np.random.default_rng(1)
    rows = [(*(CENTRES[k] + 0.3 * rng.standard_normal(2)), t) for t in (0, 1) for k in (1, 2)
            for _ in range(15)]
    pd.DataFrame(rows, columns=["x", "y", "t"]).to_csv(tmp_path / "t.csv", index=False)
    ok(cli("ingest", tmp_path / "t.csv", tmp_path / "c", "--time-column", "t"))
    ok(cli("fit", tmp_path / "c", "--out", tmp_path / "run", "--algorithm", "tdpm",
           "--decay", "0.8", "--sweeps", 4, "--burn-in", 2, "--thin", 1))
    assert RunDir(tmp_path / "run").load_summary()["config"]["engine"]["decay"] == 0.8


def test_start_and_table_move_flags_reach_the_engine(data, default_run, tmp_path):
    """--starts drawn --table-rounds 0 is the ascent alone from drawn starts; --starts mixed's
    restart 1 (a drawn start from the same stream, then table moves) never ends lower."""
    run, mixed = tmp_path / "plain", tmp_path / "mixed"
    ok(cli("fit", data.corpus, "--out", run, *FIT, "--starts", "drawn", "--table-rounds", 0))
    ok(cli("fit", data.corpus, "--out", mixed, *FIT, "--starts", "mixed"))
    engine = json.loads((run / "job.json").read_text())["config"]["engine"]
    assert engine["starts"] == "drawn" and engine["table_rounds"] == 0
    plain, moved = sequences_of(run), sequences_of(mixed)
    assert plain["sequence"].tolist() == moved["sequence"].tolist()
    for a, b in zip(plain["restart_elbos"], moved["restart_elbos"], strict=True):
        assert b[1] >= a[1] - 1e-9 * abs(a[1])


def test_fit_help_lists_the_ddcrp_flags():
    text = ok(cli("fit", "--help")).stdout
    for flag in ("--decay-a", "--sequence-column", "--position-column", "--decay", "--window",
                 "--starts", "--table-rounds"):
        assert flag in text, flag
    assert "exponential" in text  # the ddcrp meaning of --decay is documented


# 4. held-out scoring -----------------------------------------------------------------------------


def near(centre: np.ndarray, n: int = 4, seed: int = 0) -> np.ndarray:
    return centre + 0.3 * np.random.default_rng(seed).standard_normal((n, 2))


def test_held_out_items_score_by_their_sequence(data, default_run):
    df, m = data.df, bnpmix.load(default_run)
    mm = m.model
    for s, rows in df.groupby("sequence").indices.items():
        used = sorted(set(df["label"].to_numpy()[rows].tolist()))
        unused = sorted(set(range(len(CENTRES))) - set(used))
        inside = np.vstack([near(CENTRES[c], seed=c) for c in used])
        outside = np.vstack([near(CENTRES[c], seed=c) for c in unused])
        got_in = m.score_samples(inside, sequence=s)
        got_out = m.score_samples(outside, sequence=s)
        assert got_in.min() > got_out.max() + 5, (s, got_in, got_out)

        # exactly Eq. 7 on the model's block for s, links uniform over its training items
        k = mm.index[s]
        train = mm.positions[mm.item_offsets[k]:mm.item_offsets[k + 1]]
        np.testing.assert_array_equal(train, np.arange(len(rows)))  # index in the sequence
        post = {name: v[mm.table_offsets[k]:mm.table_offsets[k + 1]]
                for name, v in mm.post.items()}
        link = heldout.heldout_links(train, np.full(len(inside), train[-1]), decay("none"))
        np.testing.assert_array_equal(
            got_in, heldout.heldout_logpdf(inside, link, mm.block(k), post, mm.obs))
        # the same density written as a mixture of the tables by their mean responsibility
        mix = logsumexp(np.log(mm.block(k).mean(0)) + mm.obs.predictive_logpdf(inside, post),
                        axis=1)
        np.testing.assert_allclose(got_in, mix, rtol=1e-12)

    # one sequence id per item: each item scored by its own sequence
    ids = df["sequence"].unique()
    X = near(CENTRES[0], n=len(ids))
    each = m.score_samples(X, sequence=ids)
    np.testing.assert_array_equal(
        each, [m.score_samples(X[i:i + 1], sequence=int(s))[0] for i, s in enumerate(ids)])
    assert m.score(X, sequence=ids) == pytest.approx(each.mean())


def positions_case(df: pd.DataFrame, m, s: int, rows: np.ndarray):
    """For sequence s: its first and last components' centres, a position just after it (which
    links to its last 10 items), and the model's link weights and table posteriors."""
    mm = m.model
    labels = df["label"].to_numpy()[rows]
    k = mm.index[s]
    train = mm.positions[mm.item_offsets[k]:mm.item_offsets[k + 1]]
    post = {name: v[mm.table_offsets[k]:mm.table_offsets[k + 1]] for name, v in mm.post.items()}
    after = np.array([float(len(rows))])
    link = heldout.heldout_links(train, after, decay("exponential", 5.0), 10)
    return (CENTRES[labels[0]][None, :], CENTRES[labels[-1]][None, :], after, link,
            mm.block(k), post)


def test_held_out_positions_use_the_runs_decay_and_window(data, decay_run):
    df, m = data.df, bnpmix.load(decay_run)
    for s, rows in df.groupby("sequence").indices.items():
        first, last, after, link, Z, post = positions_case(df, m, s, rows)
        assert (link[0, :len(rows) - 10] == 0).all() and link[0, -1] > link[0, -10] > 0
        for x in (first, last):
            with np.errstate(invalid="ignore"):
                np.testing.assert_array_equal(
                    m.score_samples(x, sequence=s, positions=after),
                    heldout.heldout_logpdf(x, link, Z, post, m.model.obs))


def test_held_out_positions_favour_the_recent_tables(data, decay_run):
    df, m = data.df, bnpmix.load(decay_run)
    for s, rows in df.groupby("sequence").indices.items():
        first, last, after, *_ = positions_case(df, m, s, rows)
        by_position = m.score_samples(np.vstack([first, last]), sequence=s,
                                      positions=np.repeat(after, 2))
        uniform = m.score_samples(np.vstack([first, last]), sequence=s)
        assert np.isfinite(by_position).all(), (s, by_position)
        # the first component is far behind: by position much less likely than uniformly
        assert by_position[0] < uniform[0] - 5, (s, by_position, uniform)
        assert by_position[1] >= uniform[1], (s, by_position, uniform)


def test_unknown_sequences_and_models_without_sequences_are_refused(data, default_run,
                                                                    tmp_path):
    m = bnpmix.load(default_run)
    X = near(CENTRES[0])
    with pytest.raises(ValueError, match=r"\b999\b"):
        m.score_samples(X, sequence=999)
    with pytest.raises(ValueError, match="sequence"):
        m.score_samples(X, positions=np.arange(len(X)))
    with pytest.raises(ValueError):
        m.score_samples(X, sequence=[100, 107])  # 2 ids for 4 items
    # without a sequence: the pooled tables of every sequence (a finite density)
    assert np.isfinite(m.score_samples(X)).all()

    fit(data.corpus, tmp_path / "vb", job_config(algorithm="vb", laps=2))
    vb = bnpmix.load(tmp_path / "vb")
    assert np.isfinite(vb.score_samples(X)).all()
    with pytest.raises(ValueError, match="sequence"):
        vb.score_samples(X, sequence=100)


# 5. a corpus without sequences -------------------------------------------------------------------


def test_a_corpus_without_a_sequence_column_is_one_sequence(data, tmp_path):
    df = data.df[data.df["sequence"].isin(data.df["sequence"].unique()[:3])]
    df[["x", "y", "label"]].to_csv(tmp_path / "one.csv", index=False, float_format="%.17g")
    corpus = tmp_path / "corpus"
    ok(cli("ingest", tmp_path / "one.csv", corpus, "--label-column", "label",
           "--partition-rows", 40))
    assert Corpus(corpus).n_partitions > 1 and Corpus(corpus).manifest.columns == ("label",)
    run = tmp_path / "run"
    ok(cli("fit", corpus, "--out", run, "--algorithm", "ddcrp", "--restarts", 2))
    n = len(df)
    seqs = sequences_of(run)
    assert len(seqs) == 1 and int(seqs["items"][0]) == n
    assert RunDir(run).load_summary()["elbo"] == pytest.approx(float(seqs["elbo"][0]), rel=1e-12)
    links = links_of(run).sort_values("item", ignore_index=True)
    assert links["item"].tolist() == list(range(n))
    assert (links["link"] <= links["item"]).all() and links["link"].iloc[0] == 0
    cluster = assignments_of(run)["cluster"].to_numpy()
    assert adjusted_rand_index(df["label"].to_numpy(), cluster) >= 0.9
    m = bnpmix.load(run)
    s = int(seqs["sequence"][0])
    assert np.isfinite(m.score_samples(near(CENTRES[0]), sequence=s)).all()

    # asking for a sequence column the corpus lacks names the option and the columns it has
    err = failed(cli("fit", corpus, "--out", tmp_path / "bad", "--algorithm", "ddcrp",
                     "--sequence-column", "sequence"))
    assert "sequence_column" in err and "label" in err, err
    assert not (tmp_path / "bad").exists()


# 6. a sequence split between partitions ----------------------------------------------------------


def test_a_sequence_in_two_partitions_is_refused_naming_both(data, tmp_path):
    # the public route: integer ids ingested as `time` (which ingestion does not keep whole),
    # then fitted with --sequence-column time
    corpus = tmp_path / "by_time"
    ok(cli("ingest", data.csv, corpus, "--time-column", "sequence", "--label-column", "label",
           "--partition-rows", 20))
    c = Corpus(corpus)
    a, b = c.read(0).columns["time"], c.read(1).columns["time"]
    assert a[-1] == b[0]  # the first sequence straddles partitions 0 and 1
    err = failed(cli("fit", corpus, "--out", tmp_path / "run", "--algorithm", "ddcrp",
                     "--sequence-column", "time", "--restarts", 1))
    assert f"sequence {a[-1]} lies in partitions 0 and 1" in err, err
    assert not (tmp_path / "run").exists()

    # the storage writer: a `sequence` column whose id 7 ends partition 0 and begins partition 2
    X = data.df[["x", "y"]].to_numpy()[:30]
    written = tmp_path / "written"
    with new_corpus(written, Manifest(kind="dense", dim=2, dtype="float64",
                                      columns=("sequence",))) as w:
        w.add_dense(X[:10], {"sequence": np.array([1] * 5 + [7] * 5)})
        w.add_dense(X[10:20], {"sequence": np.array([3] * 10)})
        w.add_dense(X[20:], {"sequence": np.array([7] * 4 + [9] * 6)})
    err = failed(cli("fit", written, "--out", tmp_path / "run", "--algorithm", "ddcrp",
                     "--restarts", 1))
    assert "sequence 7 lies in partitions 0 and 2" in err, err
    assert not (tmp_path / "run").exists()


def test_positions_that_go_back_or_are_not_numbers_are_refused_naming_the_row(data, tmp_path):
    """Links point back in the stored order: a position column that decreases within a sequence
    (or holds NaN) would silently give negative distances; the fit is refused instead, naming
    the sequence and the corpus rows, and nothing is written."""
    X = data.df[["x", "y"]].to_numpy()[:30]
    time_ = np.arange(30.0)
    time_[17] = 12.5  # sequence 3 (rows 10..19): 16 -> 12.5
    written = tmp_path / "written"
    with new_corpus(written, Manifest(kind="dense", dim=2, dtype="float64",
                                      columns=("sequence", "time"))) as w:
        w.add_dense(X[:10], {"sequence": np.array([1] * 10), "time": time_[:10]})
        w.add_dense(X[10:], {"sequence": np.array([3] * 10 + [9] * 10), "time": time_[10:]})
    err = failed(cli("fit", written, "--out", tmp_path / "run", "--algorithm", "ddcrp",
                     "--restarts", 1, "--position-column", "time"))
    assert "sequence 3: 'time' goes back from 16 (row 16) to 12.5 (row 17)" in err, err
    assert not (tmp_path / "run").exists()

    # the whole corpus as one sequence: a NaN position
    time_[17] = np.nan
    one = tmp_path / "one"
    with new_corpus(one, Manifest(kind="dense", dim=2, dtype="float64", columns=("time",))) as w:
        w.add_dense(X[:10], {"time": time_[:10]})
        w.add_dense(X[10:], {"time": time_[10:]})
    err = failed(cli("fit", one, "--out", tmp_path / "run", "--algorithm", "ddcrp",
                     "--restarts", 1, "--position-column", "time"))
    assert "the corpus: 'time' is nan at row 17" in err, err
    assert not (tmp_path / "run").exists()


# 7. checkpoint and resume ------------------------------------------------------------------------


@pytest.mark.slow  # kill/resume of a real process
def test_an_interrupted_fit_resumes_to_the_uninterrupted_result(data, tmp_path, monkeypatch):
    options = ("--algorithm", "ddcrp", "--restarts", 2, "--seed", 4, "--checkpoint-every", 1)
    ok(cli("fit", data.corpus, "--out", tmp_path / "whole", *options))

    monkeypatch.setattr(ddcrp_engine, "WAVE", 3)  # three sequences a step in this process
    job = job_config(algorithm="ddcrp", restarts=2, seed=4, checkpoint_every=1)
    steps = []

    def stop(engine, step):
        steps.append(step.visits)
        raise KeyboardInterrupt  # after the first step and its checkpoint

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        fit(data.corpus, run, job, on_step=stop)
    assert steps == [3]
    assert not (run / "summary.json").exists()
    with checkpoint.open_checkpoint(RunDir(run), "ddcrp") as ckpt:
        assert ckpt.meta["state"]["done"] == 3
        kept = ckpt.meta["state"]["seconds"]
        assert len(kept) == 3
    # resumed by the command line (its steps are whole waves of 32): the same sequences
    ok(cli("resume", run))
    assert not (run / "checkpoint.npz").exists()
    assert_same_fit(tmp_path / "whole", run)
    # the first three were restored from the checkpoint, not fitted again (a refit would give
    # the same ELBOs: each sequence's starts come from the seed and its ordinal alone)
    assert sequences_of(run)["seconds"][:3].tolist() == kept
    assert "already finished" in ok(cli("resume", run)).stdout


# 8. real Dask processes --------------------------------------------------------------------------


@pytest.fixture
def cluster(dask_cluster):
    """The session's cluster (tests/conftest.py)."""
    return dask_cluster


@pytest.mark.slow  # real Dask processes, two fits each
@pytest.mark.parametrize("partition_rows", [
    1,  # one sequence per partition
    100,  # several sequences per partition: one task each (task keys must not collide)
])
def test_a_dask_cluster_gives_the_threads_result(data, cluster, tmp_path, partition_rows):
    corpus = tmp_path / "corpus"
    ok(cli("ingest", data.csv, corpus, "--sequence-column", "sequence", "--label-column",
           "label", "--partition-rows", partition_rows))
    ok(cli("fit", corpus, "--out", tmp_path / "threads", *FIT))
    res = ok(cli("fit", corpus, "--out", tmp_path / "dask", *FIT,
                 "--scheduler", cluster.address))
    assert "running on" in res.stderr
    assert cluster.address.removeprefix("tcp://") in \
        RunDir(tmp_path / "dask").load_summary()["executor"]
    assert_same_fit(tmp_path / "threads", tmp_path / "dask")


def test_a_run_written_before_its_engine_declared_panels_keeps_them(default_run, tmp_path):
    """A ddcrp run whose summary.json predates Declared.panels and local_to (written by an
    earlier bnpmix) takes what its engine declares now: the report keeps its sequences panel
    and info its per-sequence note, rather than losing them."""
    import shutil

    from bnpmix.pipeline.declared import Declared
    from bnpmix.pipeline.report.rundata import load_run

    old = tmp_path / "old"
    shutil.copytree(default_run, old)
    summary = json.loads((old / "summary.json").read_text())
    for key in ("panels", "local_to", "component_noun"):
        del summary["declared"][key]
    (old / "summary.json").write_text(json.dumps(summary))
    assert Declared.of(summary).panels == ("sequences",)
    assert load_run(old).sequences is not None
    assert "tables are per sequence" in ok(cli("info", old)).stdout
