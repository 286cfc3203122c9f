"""`bnpmix evaluate` on a run of every engine (issue 13): tiny fits through the CLI, each scored
on a held-out corpus with labels, its JSON checked field by field and its held-out figure against
the model's own scorer through ``bnpmix.load`` (``score_samples``; ddcrp: with each item's
sequence and positions) to 1e-12, its clustering scores against scikit-learn and a brute-force
majority-label count. Then the kinds' own rules: a tdpm model predicts only the next epoch, a
ddcrp model scores items within their sequence.

The data: three sequences (ids 10, 20, 30) of 20 items from three well-separated 2-D Gaussians
(or three topics over 12 words), times 0..3 within each sequence; held out, 6 more items per
sequence at time 4 (the next epoch), and a second held-out set at times 0..3.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

import bnpmix
from bnpmix.algorithms.ddcrp.heldout import heldout_links
from bnpmix.algorithms.ddcrp.links import decay
from bnpmix.algorithms.metrics import variation_of_information
from bnpmix.algorithms.obs.mult import log_multinomial_coefficient
from bnpmix.storage import Corpus, Manifest, ingest_array
from bnpmix.storage.writer import new_corpus
from helpers import SEQUENCES, cli, sequence_items

V = 12

# run name -> (training corpus, fit flags); one engine of each model kind on dense and on
# bag-of-words data, and ddcrp with positions and on a corpus that is one sequence (every
# engine's held-out figure against its loaded model: tests/pipeline/runtime/test_engine_contract.py)
RUNS = {
    "memo": ("dense", ("--algorithm", "memo", "--laps", 5)),
    "tdpm": ("dense", ("--algorithm", "tdpm", "--sweeps", 8, "--burn-in", 4, "--thin", 1)),
    "ddcrp": ("dense", ("--algorithm", "ddcrp", "--restarts", 2, "--iterations", 20)),
    "ddcrp-time": ("dense", ("--algorithm", "ddcrp", "--restarts", 2, "--iterations", 20,
                             "--position-column", "time", "--decay", "exponential",
                             "--decay-a", 2)),
    "ddcrp-one": ("one", ("--algorithm", "ddcrp", "--restarts", 2, "--iterations", 20,
                          "--position-column", "time", "--decay", "exponential")),
    "memo-bow": ("bow", ("--algorithm", "memo", "--laps", 5)),
    "ep-bow": ("bow", ("--algorithm", "ep", "--passes", 2)),
    "tdpm-bow": ("bow", ("--algorithm", "tdpm", "--sweeps", 6, "--burn-in", 3, "--thin", 1)),
    "ddcrp-bow": ("bow", ("--algorithm", "ddcrp", "--restarts", 2, "--iterations", 20)),
}



def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def failed(proc: subprocess.CompletedProcess[str]) -> str:
    """The one-line error of a refused command (no traceback)."""
    detail = f"exit {proc.returncode}\nstdout: {proc.stdout!r}\nstderr: {proc.stderr!r}"
    assert proc.returncode != 0, detail
    assert "Traceback" not in proc.stderr, detail
    return proc.stderr


def evaluate(run: Path, heldout: Path, *flags: object) -> dict:
    return json.loads(ok(cli("evaluate", run, "--heldout", heldout, *flags)).stdout)


def write_bow(path: Path, rng: np.random.Generator, n: int, times: np.ndarray) -> None:
    """Documents of 30 words, topic k putting most mass on words 4k..4k+3; one partition per
    sequence (a ddcrp sequence is whole in one partition)."""
    manifest = Manifest(kind="bow", dim=V, dtype="int32", columns=("label", "sequence", "time"),
                        vocab=[f"w{j}" for j in range(V)])
    with new_corpus(path, manifest) as writer:
        for s in SEQUENCES:
            z = np.sort(rng.integers(0, 3, n))
            p = np.full((3, V), 0.02)
            for k in range(3):
                p[k, 4 * k:4 * k + 4] = 1.0
            B = sp.csr_matrix(np.stack([rng.multinomial(30, p[k] / p[k].sum()) for k in z]))
            writer.add_bow(B.indptr, B.indices, B.data,
                           {"label": z, "sequence": np.full(n, s),
                            "time": np.sort(rng.choice(times, n))})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The corpora (dense ones through `bnpmix ingest`) and one fitted run per RUNS entry."""
    root = tmp_path_factory.mktemp("evaluate")
    rng = np.random.default_rng(0)
    frames = {"train": sequence_items(rng, 20, np.arange(4)),
              "held": sequence_items(rng, 6, np.array([4])),
              "mid": sequence_items(rng, 6, np.arange(4))}
    corpora = {}
    for name, df in frames.items():
        df.to_csv(root / f"{name}.csv", index=False, float_format="%.17g")
        corpora[name] = root / name
        ok(cli("ingest", root / f"{name}.csv", corpora[name], "--label-column", "label",
               "--sequence-column", "sequence", "--time-column", "time",
               "--partition-rows", 20))
    corpora["dense"] = corpora["train"]
    # the same items without the sequence column (positions: their index in the corpus)
    for name, held in (("one", "train"), ("one-held", "held")):
        df = frames[held]
        offset = 0 if name == "one" else len(frames["train"])
        corpora[name] = root / name
        ingest_array(df[["x", "y"]].to_numpy(), corpora[name], partition_rows=20,
                     columns={"label": df["label"].to_numpy(),
                              "time": offset + np.arange(len(df))})
    corpora["bow"], corpora["bow-held"] = root / "bow", root / "bow-held"
    write_bow(corpora["bow"], rng, 20, np.arange(4))
    write_bow(corpora["bow-held"], rng, 6, np.array([4]))
    out = {name: root / f"run-{name}" for name in RUNS}

    def fit(name: str) -> None:
        corpus, flags = RUNS[name]
        ok(cli("fit", corpora[corpus], "--out", out[name], "--seed", 0, *flags))

    for name in RUNS:  # one at a time: the CLI runs in this process (helpers.cli)
        fit(name)
    return SimpleNamespace(root=root, corpora=corpora, runs=out)


HELD = {"dense": "held", "one": "one-held", "bow": "bow-held"}
SCORING = {"memo": "posterior predictive", "ep": "NRM predictive rule",
           "tdpm": "tdpm next epoch (time 4)",
           "ddcrp": "ddcrp Eq. 7 within each item's sequence ('sequence' column), uniform",
           "ddcrp-time": "ddcrp Eq. 7 within each item's sequence ('sequence' column), links "
                         "by the run's exponential decay (a = 2) from 'time'",
           "ddcrp-one": "ddcrp Eq. 7 within the run's one sequence, links by the run's "
                        "exponential decay (a = 10) from 'time'"}


def independent(run: Path, heldout: Path) -> tuple[np.ndarray, np.ndarray, Corpus]:
    """Each held-out item's log p(x | fit) by the model's own scorer and its most probable
    component, computed from the whole held-out corpus at once (fine for a test)."""
    batch = Corpus(heldout).read_all()
    m = bnpmix.load(run)
    model = m.model
    if not hasattr(model, "score_sequences"):
        return m.score_samples(batch.X), m.component_ids_[m.predict(batch.X)], batch
    h = model.hyper
    seqs = (batch.columns[h["sequence_column"]] if h["sequence_column"] is not None
            else np.full(len(batch), model.sequences[0]))
    pos = (None if h["position_column"] is None
           else np.asarray(batch.columns[h["position_column"]], float))
    logp = m.score_samples(batch.X, sequence=seqs, positions=pos)
    # each item's most probable table of its sequence, item by item
    best = np.empty(len(batch), np.int64)
    f = decay("none") if pos is None else decay(h["decay"], h["decay_a"])
    for i in range(len(batch)):
        s = model.index[int(seqs[i])]
        lo, hi = model.item_offsets[s], model.item_offsets[s + 1]
        train = model.positions[lo:hi]
        at = train[-1] if pos is None else pos[i]
        link = heldout_links(train, np.array([at]), f, None if pos is None else h["window"])
        k0, k1 = model.table_offsets[s], model.table_offsets[s + 1]
        share = (link @ model.block(s))[0]
        post = {k: v[k0:k1] for k, v in model.post.items()}
        dens = model.obs.predictive_logpdf(batch.X[i:i + 1], post)[0]
        with np.errstate(divide="ignore"):
            best[i] = model.uids[k0 + int(np.argmax(np.log(share) + dens))]
    return logp, best, batch


def majority_accuracy(clusters: np.ndarray, labels: np.ndarray) -> float:
    right = 0
    for c in np.unique(clusters):
        _, counts = np.unique(labels[clusters == c], return_counts=True)
        right += counts.max()
    return right / len(clusters)


@pytest.mark.parametrize("name", list(RUNS))
def test_evaluate_every_engine(runs, name):
    corpus = RUNS[name][0]
    run, heldout = runs.runs[name], runs.corpora[HELD[corpus]]
    out = evaluate(run, heldout, "--label-column", "label")
    logp, best, batch = independent(run, heldout)
    bow = corpus == "bow"
    expected = {"heldout_loglik_per_item", "K", "n_items", "scoring",
                "multinomial_coefficient_included", "ari", "nmi", "vi", "accuracy",
                "heldout_kind", "scored", "corpus"}
    assert set(out) == expected | ({"heldout_loglik_per_item_with_coefficient"} if bow
                                   else set()), out
    assert (out["scored"], out["corpus"]) == ("heldout", str(heldout))
    assert out["n_items"] == len(batch) == 18
    assert out["K"] == bnpmix.load(run).n_components_
    assert out["scoring"].startswith(SCORING[name.removesuffix("-bow")]), out["scoring"]
    assert out["heldout_loglik_per_item"] == pytest.approx(logp.mean(), rel=1e-12)
    assert out["heldout_kind"] == "plain"  # these corpora hold no integer-valued column
    if bow:
        assert out["multinomial_coefficient_included"] is False
        assert out["heldout_loglik_per_item_with_coefficient"] == pytest.approx(
            (logp + log_multinomial_coefficient(batch.X)).mean(), rel=1e-12)
    else:
        assert out["multinomial_coefficient_included"] is None
    y = batch.columns["label"]
    assert out["ari"] == pytest.approx(adjusted_rand_score(y, best), abs=1e-12)
    assert out["nmi"] == pytest.approx(normalized_mutual_info_score(y, best), abs=1e-12)
    assert out["vi"] == pytest.approx(variation_of_information(y, best), abs=1e-12)
    assert out["accuracy"] == pytest.approx(majority_accuracy(best, y), rel=1e-12)
    # well-separated components: clusters agree with the labels beyond chance
    assert out["accuracy"] >= 0.6 and out["ari"] > 0.2, out


def test_without_labels_no_clustering_scores(runs):
    out = evaluate(runs.runs["memo"], runs.corpora["held"])
    assert "ari" not in out and "accuracy" not in out and out["n_items"] == 18


def test_ddcrp_items_placed_among_the_training_items(runs):
    """Held-out items at times 0..3 link back, by the decay, to the training items of their
    sequence at or before them."""
    run, heldout = runs.runs["ddcrp-time"], runs.corpora["mid"]
    out = evaluate(run, heldout, "--label-column", "label")
    logp, best, _ = independent(run, heldout)
    assert out["heldout_loglik_per_item"] == pytest.approx(logp.mean(), rel=1e-12)
    assert out["ari"] == pytest.approx(
        adjusted_rand_score(Corpus(heldout).read_all().columns["label"], best), abs=1e-12)


def test_ddcrp_needs_the_sequence_column(runs):
    err = failed(cli("evaluate", runs.runs["ddcrp"], "--heldout", runs.corpora["one-held"]))
    assert "within its sequence" in err and "'sequence'" in err


def test_ddcrp_refuses_a_sequence_it_was_not_fitted_to(runs):
    df = pd.read_csv(runs.root / "held.csv")
    df.loc[df["sequence"] == 30, "sequence"] = 99
    df.to_csv(runs.root / "other.csv", index=False, float_format="%.17g")
    ok(cli("ingest", runs.root / "other.csv", runs.root / "other", "--label-column", "label",
           "--sequence-column", "sequence", "--time-column", "time"))
    err = failed(cli("evaluate", runs.runs["ddcrp"], "--heldout", runs.root / "other"))
    assert "sequence 99" in err and "not one the model was fitted to" in err


def test_tdpm_scores_only_the_next_epoch(runs):
    """Items of the training epochs are refused (the model has no predictive for them); a
    corpus without the time column is scored as of the next epoch, and says so."""
    err = failed(cli("evaluate", runs.runs["tdpm"], "--heldout", runs.corpora["mid"]))
    assert "predicts only the epoch after its last, time 4" in err
    df = pd.read_csv(runs.root / "held.csv")
    ingest_array(df[["x", "y"]].to_numpy(), runs.root / "untimed", partition_rows=20,
                 columns={"label": df["label"].to_numpy()})
    out = evaluate(runs.runs["tdpm"], runs.root / "untimed")
    timed = evaluate(runs.runs["tdpm"], runs.corpora["held"])
    assert "no 'time' column" in out["scoring"]
    assert out["heldout_loglik_per_item"] == pytest.approx(timed["heldout_loglik_per_item"],
                                                           rel=1e-12)


def test_a_model_kind_scores_held_out_items_by_its_own_heldout_scores():
    """evaluate knows no model kind: each partition is scored by the model's ``heldout_scores``
    (ddcrp's and tdpm's live with their models), a ValueError of it named by partition and
    rows."""
    from bnpmix.algorithms.mixture import PredictiveMixture
    from bnpmix.algorithms.obs import obs_class
    from bnpmix.pipeline.evaluate import HeldoutPlan, score_partition
    from bnpmix.storage import Batch, BnpmixError

    class Toy(PredictiveMixture):
        obs = obs_class("gauss").default(np.eye(2))

        def heldout_scores(self, X, columns, plan, start=0):
            if plan.scoring == "refuse":
                raise ValueError(f"row {start} refused")
            return np.asarray(columns["score"], float), np.arange(len(X))

    batch = Batch(np.zeros((3, 2)), 1, 10, {"score": np.array([-1.0, -2.0, -4.0])})
    total, n, best, _, _ = score_partition(batch, Toy(), None, HeldoutPlan("toy"))
    assert (total, n, list(best)) == (-7.0, 3, [0, 1, 2])
    with pytest.raises(BnpmixError, match=r"held-out partition 1 \(rows 10..12\): row 10"):
        score_partition(batch, Toy(), None, HeldoutPlan("refuse"))
