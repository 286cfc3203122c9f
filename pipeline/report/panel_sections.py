"""A run report's panels that its engine declares (Declared.panels): chains over epochs
(tdpm) and sequences (ddcrp), drawn by epoch_figures."""

from __future__ import annotations

import numpy as np

from . import epoch_figures as E
from .page import Section, paragraph
from .rundata import RunData
from .sections import image


def chains_section(data: RunData) -> Section | None:
    """Temporal runs: durations, popularity, chains alive, lifespans."""
    c = data.chains
    if c is None:
        return None
    section = Section("Chains over epochs", anchor="chains")
    if not len(c.ids):
        section.html.append(paragraph("The run has no chains."))
        return section
    members = c.counts.sum(0)
    keep = np.sort(np.argsort(-members, kind="stable")[:60])
    more = len(c.ids) - len(keep)
    note = f" (the 60 with the most members of {len(c.ids)})" if more > 0 else ""
    section.images.append(image(
        "chain_durations.png", lambda: E.chain_durations_figure(
            c.ids[keep], c.first[keep], c.last[keep], members[keep], c.times,
            f"Chain durations{note}"),
        "chain durations", "Each chain from its first to its last epoch with members, in "
        "order of birth; the darker the bar, the more members."))
    section.images.append(image(
        "chain_popularity.png", lambda: E.chain_popularity_figure(
            c.counts, c.ids, c.times, "Popularity: members per epoch"),
        "chain popularity per epoch", "Members of the ten largest chains at each epoch, "
        "stacked; the others as one grey band."))
    section.images.append(image(
        "chains_alive.png", lambda: E.alive_figure(
            c.times, (c.counts > 0).sum(1), c.alive, c.alive_mean, "Chains alive per epoch"),
        "chains alive per epoch", "Chains alive (with members now or in the last W epochs) "
        "and chains with members at each epoch."))
    section.images.append(image(
        "chain_lifespans.png", lambda: E.histogram_figure(
            c.last - c.first + 1, f"Lifespans of the {len(c.ids)} chains",
            "lifespan (epochs from first to last member)", "chains"),
        "chain lifespan histogram", "Epochs from each chain's first to its last member."))
    return section


def sequences_section(data: RunData) -> Section | None:
    """ddcrp runs: tables and ELBO per item of each sequence."""
    s = data.sequences
    if s is None or s.empty:
        return None
    section = Section("Sequences", anchor="sequences")
    items, tables = s["items"].to_numpy(float), s["tables"].to_numpy(float)
    section.images.append(image(
        "sequences.png", lambda: E.sequences_figure(
            items, tables, s["elbo"].to_numpy(float),
            f"{len(s)} sequences: tables and ELBO per item against length"),
        "tables and ELBO per item of each sequence", "One point per sequence."))
    return section
