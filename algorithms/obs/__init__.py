"""Observation models behind one interface (bnpmix.algorithms.obs)."""

from __future__ import annotations

from typing import Any

from .base import ObsModel

# the models' names (--obs), each its class's ``name``, in the order help lists them
OBS_NAMES = ("gauss", "zm-gauss", "diag-gauss", "tied-gauss", "mfa", "mult")
# `--obs auto`'s candidates: the Gaussian covariance structures (mclust's choice among them,
# made by the variational evidence bound of memo runs on the corpus; pipeline.auto.choose_obs,
# which takes however many are listed, in this order)
AUTO_CANDIDATES = ("gauss", "tied-gauss", "diag-gauss")


def obs_class(name: str) -> type[ObsModel]:
    """The observation model class called ``name`` (one of OBS_NAMES)."""
    from .diag_gauss import DiagGauss
    from .gauss import Gauss
    from .mfa import MFA
    from .mult import Mult
    from .tied_gauss import TiedGauss
    from .zm_gauss import ZeroMeanGauss

    classes: dict[str, type[ObsModel]] = {
        c.name: c for c in (Gauss, ZeroMeanGauss, DiagGauss, TiedGauss, MFA, Mult)
    }
    if name not in classes:
        raise ValueError(f"unknown observation model {name!r}; choose from {sorted(classes)}")
    return classes[name]


def default_obs(kind: str) -> str:
    """The model a corpus of ``kind`` (dense, bow) gets when none is named: the one whose
    class says it is that kind's default."""
    return next(n for n in OBS_NAMES if obs_class(n).default_for == kind)


def obs_from_prior(name: str, prior: dict[str, Any]) -> ObsModel:
    """Rebuild a saved observation model from its name and ``prior()`` dict."""
    return obs_class(name)(**prior)


__all__ = ["AUTO_CANDIDATES", "OBS_NAMES", "ObsModel", "default_obs", "obs_class", "obs_from_prior"]
