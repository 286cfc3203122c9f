"""A run report's sections on its components: their means and covariances (dense data) or
their top words (text)."""

from __future__ import annotations

import numpy as np

from . import figures as F
from .page import Section, paragraph, table
from .rundata import TOP, RunData
from .sections import cluster_titles, heaviest, image

COVARIANCE_PANELS = 12  # full covariance matrices drawn (the heaviest components)
MAX_MATRIX_D = 400  # larger covariance matrices are not drawn
MAX_HEATMAP_D = 400  # means of more dimensions are not drawn as a heatmap


def components_section(data: RunData) -> Section | None:
    """Means and covariances: as images when an item is a square image, else a heatmap or (two
    dimensions) points; covariance matrices for full-covariance Gaussians."""
    if data.means is None or not len(data.means) or data.text:  # text: see words_section
        return None
    section = Section("Components", anchor="components")
    n = min(TOP, len(data.means))
    which = heaviest(data)
    side = data.image_side
    titles = cluster_titles(data, n)
    zero_means = not np.any(data.means)
    if side and not zero_means:
        images = data.means[:n].reshape(n, side, side)
        section.images.append(image(
            "means.png", lambda: F.image_grid_figure(
                images, titles, f"Component means as {side}×{side} images ({which})",
                colorbar_label="mean value"),
            "component means as images", f"E[μ_k] of {which}, one shared gray scale."))
    elif data.D == 2 and not zero_means:
        section.images.append(image(
            "means.png", lambda: F.means_scatter_figure(
                data.means, data.weights, data.ids, f"Component means (K = {len(data.ids)})"),
            "component means", "E[μ_k] of every component; area follows the weight."))
    elif 2 < data.D <= MAX_HEATMAP_D and not zero_means:
        section.images.append(image(
            "means.png", lambda: F.heatmap_figure(
                data.means[:n], titles, f"Component means ({which})", "dimension",
                "mean value"),
            "component means", f"E[μ_k] of {which}, one row each."))
    elif zero_means:
        section.html.append(paragraph("Zero-mean components: they differ only in covariance."))
    variances = data.variances
    if variances is None and data.covariances is not None:
        variances = np.diagonal(data.covariances, axis1=1, axis2=2)
    if side and variances is not None:
        std = np.sqrt(np.maximum(variances[:n], 0)).reshape(n, side, side)
        section.images.append(image(
            "stddev.png", lambda: F.image_grid_figure(
                std, titles, f"Per-pixel standard deviation √E[Σ_dd] ({which})",
                cmap="viridis", colorbar_label="standard deviation"),
            "per-pixel standard deviations as images",
            f"The diagonal of E[Σ_k] as {side}×{side} images of standard deviations."))
    if data.covariances is not None and data.D <= MAX_MATRIX_D:
        m = min(COVARIANCE_PANELS, len(data.covariances))
        section.images.append(image(
            "covariances.png", lambda: F.matrix_grid_figure(
                data.covariances[:m], cluster_titles(data, m),
                f"Covariance matrices E[Σ_k] of the {m} heaviest components"),
            "covariance matrices as images",
            "Each panel on its own color scale, symmetric about zero (red positive, blue "
            "negative); rows and columns are dimensions" +
            (f" (pixels in reading order of the {side}×{side} image)." if side else ".")))
    elif data.covariances is not None:
        section.html.append(paragraph(f"Covariance matrices not drawn: D = {data.D} > "
                                      f"{MAX_MATRIX_D}."))
    return section if section.images or section.html else None


def words_section(data: RunData) -> Section | None:
    """Text runs: each heavy cluster's top words, as a table and as bars."""
    if not data.top_words and data.vocab_note is None:
        return None
    section = Section("Top words per cluster", anchor="words")
    if not data.top_words:
        section.html.append(paragraph(f"Words not shown: {data.vocab_note}."))
        return section
    K = len(data.ids)
    section.html.append(paragraph(
        f"The ten most probable words of {heaviest(data, 'clusters')} (vocabulary of "
        f"{len(data.vocab or [])} words)" + ("." if K <= TOP else f"; {K - TOP} more not shown.")))
    rows = [(t.cluster, t.weight, ", ".join(t.words)) for t in data.top_words]
    section.html.append(table(rows, ("cluster", "weight", "top words"), "top-words"))
    shown = data.top_words[:12]
    section.images.append(image(
        "top_words.png", lambda: F.top_words_figure(
            [(f"#{t.cluster}  w={t.weight:.3f}", [F.literal(w) for w in t.words], t.probs)
             for t in shown],
            f"Top words of the {len(shown)} heaviest clusters"),
        "top words per cluster", "Word probabilities E[θ_kw] of each cluster's ten most "
        "probable words."))
    return section
