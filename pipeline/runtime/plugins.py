"""Dask worker plugins a run registers on its cluster."""

from __future__ import annotations

from typing import Any

import dask.config
from distributed.diagnostics.plugin import WorkerPlugin


class StorageOptions(WorkerPlugin):
    """A job's ``[storage]`` options as the worker's Dask config ``bnpmix.storage-options``, on
    every worker including those that join later (storage.objectstore reads them). The
    scheduler keeps the plugin in memory while it runs (on a cluster reached without TLS the
    options travel in clear); nothing writes it to disk."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def setup(self, worker: Any) -> None:
        dask.config.set({"bnpmix.storage-options": self.options})
