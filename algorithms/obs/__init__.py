"""Observation models behind one interface (bnpmix.algorithms.obs)."""

from __future__ import annotations

from typing import Any

from .base import ObsModel


def obs_class(name: str) -> type[ObsModel]:
    """The observation model class called ``name`` (gauss, zm-gauss, diag-gauss, tied-gauss,
    mult)."""
    from .diag_gauss import DiagGauss
    from .gauss import Gauss
    from .mult import Mult
    from .tied_gauss import TiedGauss
    from .zm_gauss import ZeroMeanGauss

    classes: dict[str, type[ObsModel]] = {
        c.name: c for c in (Gauss, ZeroMeanGauss, DiagGauss, TiedGauss, Mult)
    }
    if name not in classes:
        raise ValueError(f"unknown observation model {name!r}; choose from {sorted(classes)}")
    return classes[name]


def obs_from_prior(name: str, prior: dict[str, Any]) -> ObsModel:
    """Rebuild a saved observation model from its name and ``prior()`` dict."""
    return obs_class(name)(**prior)


__all__ = ["ObsModel", "obs_class", "obs_from_prior"]
