"""Cluster profiles (cluster-configs/*.yaml): how a fit reaches or starts a Dask cluster.

A profile is loaded explicitly, never dropped into Dask's own configuration search path::

    kind: local | address | ssh | slurm | kubernetes
    address: tcp://HOST:PORT        # kind address only
    dask-config: {distributed.comm.timeouts.connect: 5s, ...}   # set while the run lasts
    cluster: {...}                  # keyword arguments of the library's cluster class
    scale: 4                        # slurm / kubernetes: workers (or jobs) to ask for
    security:                       # TLS with mutual certificates (paths relative to the file)
      ca_file: certs/ca.pem         #   the CA that signed every certificate of the cluster
      cert: certs/client.pem        #   this client's certificate (the scheduler checks it)
      key: certs/client-key.pem     #   and its private key

With ``security``, every connection is TLS and encryption is required: the client refuses a
scheduler whose certificate the CA did not sign, and the scheduler refuses a client without
one. Whoever can reach a scheduler's port without TLS can run code on its workers.

The optional libraries (dask-jobqueue, dask-kubernetes; asyncssh for ssh) are imported only
when such a profile is opened, with a clear message when missing.

A cluster that bnpmix starts with ``scale`` (a SLURM profile: one batch job per ``processes``
workers) is kept at that scale while the fit runs: a job whose workers all left (``scancel``,
its walltime, a lost node) is replaced by a new one after Dask's
``distributed.deploy.lost-worker-timeout``. dask-jobqueue alone never resubmits it, and a fit
that lost every job would wait for workers forever.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bnpmix.storage import BnpmixError

from .addresses import CURRENT_CLIENT
from .configfile import read_config_file
from .settings import setting

# the keys each kind's cluster class accepts (a subset of each library's documented arguments)
CLUSTER_KEYS: dict[str, set[str]] = {
    "local": {"n_workers", "threads_per_worker", "processes", "memory_limit", "host",
              "scheduler_port", "dashboard_address", "silence_logs", "local_directory"},
    "address": set(),
    "ssh": {"hosts", "connect_options", "worker_options", "scheduler_options", "worker_class",
            "remote_python"},
    "slurm": {"queue", "account", "cores", "memory", "processes", "walltime", "interface",
              "job_extra_directives", "job_script_prologue", "local_directory",
              "log_directory", "name", "job_name", "worker_extra_args"},
    "kubernetes": {"name", "image", "n_workers", "resources", "env", "namespace",
                   "worker_command", "port_forward_cluster_ip"},
}
LIBRARIES = {  # kind -> (module, class, pip package)
    "local": ("distributed", "LocalCluster", "distributed"),
    "ssh": ("distributed", "SSHCluster", "asyncssh"),
    "slurm": ("dask_jobqueue", "SLURMCluster", "dask-jobqueue"),
    "kubernetes": ("dask_kubernetes.operator", "KubeCluster", "dask-kubernetes"),
}


@dataclass
class ClusterProfile:
    path: str
    kind: str
    cluster: dict[str, Any] = field(default_factory=dict)
    dask_config: dict[str, Any] = field(default_factory=dict)
    address: str | None = None
    scale: int | None = None
    security: dict[str, str] | None = None  # ca_file, cert, key: absolute paths


def load_profile(path: str | Path) -> ClusterProfile:
    """Read and validate a profile; errors name the file and the field."""
    path = Path(path)
    obj = read_config_file(path, yaml.safe_load, yaml.YAMLError, "YAML cluster profile")
    if not isinstance(obj, dict):
        raise BnpmixError(f"{path}: a cluster profile is a mapping")
    unknown = set(obj) - {"kind", "cluster", "dask-config", "address", "scale", "security"}
    if unknown:
        raise BnpmixError(f"{path}: unknown fields {sorted(unknown)}")
    kind = obj.get("kind")
    if kind not in CLUSTER_KEYS:
        raise BnpmixError(f"{path}: field 'kind' must be one of {sorted(CLUSTER_KEYS)}")
    cluster = obj.get("cluster") or {}
    bad = set(cluster) - CLUSTER_KEYS[kind]
    if bad:
        raise BnpmixError(f"{path}: field 'cluster' has keys {sorted(bad)} that {kind} does not "
                          f"accept (allowed: {sorted(CLUSTER_KEYS[kind])})")
    if kind == "address" and not str(obj.get("address", "")).startswith(("tcp://", "tls://")):
        raise BnpmixError(f"{path}: field 'address' must be tcp://HOST:PORT or "
                          "tls://HOST:PORT")
    dask_config = obj.get("dask-config") or {}
    if "distributed.comm.timeouts.connect" not in dask_config:
        raise BnpmixError(f"{path}: set dask-config 'distributed.comm.timeouts.connect' (5-10 s: "
                          "the default 30 s stalls recovery after a worker dies)")
    security = _security_paths(path, obj.get("security"))
    if kind == "kubernetes" and security is not None:
        raise BnpmixError(f"{path}: field 'security' is not supported for kind kubernetes "
                          "(KubeCluster takes no security argument)")
    if kind == "address" and str(obj["address"]).startswith("tls://") and security is None:
        raise BnpmixError(f"{path}: field 'security' (ca_file, cert, key) is needed for a "
                          "tls:// address")
    return ClusterProfile(str(path), kind, cluster, dask_config, obj.get("address"),
                          obj.get("scale"), security)


SECURITY_KEYS = ("ca_file", "cert", "key")


def _security_paths(path: Path, section: Any) -> dict[str, str] | None:
    """The profile's TLS files, resolved against the profile's folder."""
    if section is None:
        return None
    if not isinstance(section, dict) or set(section) != set(SECURITY_KEYS):
        raise BnpmixError(f"{path}: field 'security' must give exactly {list(SECURITY_KEYS)}")
    return {key: str((path.parent / str(section[key])).resolve()) for key in SECURITY_KEYS}


def security_of(profile: ClusterProfile | None) -> Any:
    """distributed's Security for the profile's TLS files (encryption required), or None;
    each file must exist when the cluster is opened."""
    if profile is None or profile.security is None:
        return None
    from distributed.security import Security

    files = profile.security
    for key, file in files.items():
        if not Path(file).is_file():
            raise BnpmixError(f"{profile.path}: field 'security.{key}': no file {file} (see "
                              "README, Trust and safety)")
    return Security(require_encryption=True, tls_ca_file=files["ca_file"],
                    tls_client_cert=files["cert"], tls_client_key=files["key"],
                    tls_scheduler_cert=files["cert"], tls_scheduler_key=files["key"],
                    tls_worker_cert=files["cert"], tls_worker_key=files["key"])


def cluster_class(profile: ClusterProfile) -> type:
    """The library class of the profile's kind, imported now."""
    module, name, package = LIBRARIES[profile.kind]
    try:
        importlib.import_module(package.replace("-", "_"))  # asyncssh: SSHCluster imports it late
        return getattr(importlib.import_module(module), name)
    except ImportError:
        raise BnpmixError(f"{profile.path}: kind {profile.kind!r} needs the package {package!r} "
                          f"(pip install {package})") from None


def process_client(scheduler: str) -> Any:
    """For ``scheduler`` "distributed", the distributed.Client this process made current
    (``Client(...)`` or ``with Client(...)``: ``distributed.default_client()``), as Dask's own
    ``scheduler="distributed"`` means; None for any other scheduler."""
    if scheduler != CURRENT_CLIENT:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        raise BnpmixError(f"scheduler {CURRENT_CLIENT!r} runs on this process's current "
                          "distributed.Client, and there is none: create one "
                          "(distributed.Client(...)) or name a scheduler address") from None


@contextlib.contextmanager
def open_client(scheduler: str | None = None, profile_path: str | None = None,
                worker_wait: float | None = None) -> Iterator[Any]:
    """A distributed.Client for a scheduler address or for a cluster profile (started here and
    closed at the end when the profile starts one), once at least one worker has joined: a
    scheduler without workers is an error after ``worker_wait`` seconds (None: Dask config
    ``bnpmix.worker-wait``), not a silent hang."""
    import dask
    from distributed import Client

    profile = load_profile(profile_path) if profile_path else None
    settings = profile.dask_config if profile else {
        "distributed.comm.timeouts.connect": setting("connect-timeout")}
    # imported before the profile's settings are set: a library's first import adds its own
    # defaults (dask-jobqueue's jobqueue.*), which would go with the settings at the end
    cls = cluster_class(profile) if profile is not None and profile.kind != "address" else None
    with dask.config.set(settings):
        if profile is None or profile.kind == "address":
            address = scheduler if profile is None else profile.address
            try:
                client = Client(address, timeout=setting("scheduler-timeout"),
                                security=security_of(profile))
            except OSError as exc:
                raise BnpmixError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
            with client:
                wait_for_a_worker(client, address, worker_wait)
                yield client
            return
        extra = {"security": security_of(profile)} if profile.security else {}
        with cls(**profile.cluster, **extra) as cluster:
            if profile.scale:
                cluster.scale(profile.scale)
            with Client(cluster) as client, JobKeeper.around(cluster, profile.scale):
                wait_for_a_worker(client, profile_path, worker_wait)
                yield client


def wait_for_a_worker(client: Any, where: str | None, seconds: float | None = None) -> None:
    """Return once a worker has joined the client's scheduler; an error naming ``where`` after
    ``seconds`` (None: Dask config ``bnpmix.worker-wait``)."""
    from dask.distributed import TimeoutError as DaskTimeoutError

    seconds = setting("worker-wait", seconds)
    try:
        client.wait_for_workers(1, timeout=seconds)
    except (TimeoutError, DaskTimeoutError):
        raise BnpmixError(f"{where}: no Dask worker joined the scheduler within {seconds:g} s "
                          "(start workers with `dask worker ADDRESS`, or raise --worker-wait or "
                          "the Dask config bnpmix.worker-wait)") from None


class JobKeeper:
    """Keeps a started ``distributed.SpecCluster`` (dask-jobqueue's clusters are ones) at the
    ``scale`` it was given: every ``period`` seconds, a job (a SpecCluster "worker", which runs
    one or a group of Dask workers) a worker of which has joined the scheduler, and all of
    whose workers have been gone for ``grace`` seconds (None: Dask config
    ``distributed.deploy.lost-worker-timeout``), is closed (dask-jobqueue: ``scancel``, which a
    job that already ended ignores) and ``scale`` asked for again, which submits a job in its
    place. A job none of whose workers ever joined (still queued, or failing at start) is left
    alone, so a job that cannot start is not resubmitted forever.

    SpecCluster itself forgets a lost job only when its worker's name is the job's name (one
    worker per job), and even then submits no new one: dask-jobqueue's jobs ended by
    ``scancel`` or their walltime stay gone, and a fit on them waits for workers forever."""

    def __init__(self, cluster: Any, scale: int, period: float = 1.0,
                 grace: float | None = None) -> None:
        import dask
        from dask.utils import parse_timedelta

        self.cluster, self.scale, self.period = cluster, scale, period
        self.grace = parse_timedelta(
            grace if grace is not None
            else dask.config.get("distributed.deploy.lost-worker-timeout"), "s")
        self._seen = _worker_names()  # the name of every worker that joined, however briefly
        self._gone: dict[str, float] = {}  # job -> when its workers were first seen gone
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bnpmix-job-keeper",
                                        daemon=True)

    @classmethod
    @contextlib.contextmanager
    def around(cls, cluster: Any, scale: int | None) -> Iterator[JobKeeper | None]:
        """A keeper running while the block runs, for a SpecCluster given a ``scale`` (None
        for any other cluster: nothing to keep). Stopped before the block's cluster closes,
        so that closing it submits nothing."""
        from distributed import Scheduler, SpecCluster

        if not scale or not isinstance(cluster, SpecCluster):
            yield None
            return
        keeper = cls(cluster, scale)
        if isinstance(cluster.scheduler, Scheduler):  # in this process (dask-jobqueue's is)
            cluster.scheduler.add_plugin(keeper._seen)
        keeper._thread.start()
        try:
            yield keeper
        finally:
            keeper._stop.set()
            keeper._thread.join()

    def _run(self) -> None:
        warned = False
        while not self._stop.wait(self.period):
            try:
                self.cluster.sync(self.check)  # on the cluster's event loop: no races
            except Exception as exc:  # the fit goes on without it; said once
                if not warned and not self._stop.is_set():
                    logging.getLogger(__name__).warning(
                        "bnpmix: lost jobs of %s are not replaced: %r", self.cluster, exc)
                    warned = True

    async def check(self) -> None:
        """One pass: close the jobs whose workers are gone, and scale back up if any was."""
        cluster = self.cluster
        present = {str(info.get("name")) for info in
                   cluster.scheduler_info.get("workers", {}).values()}
        self._seen.names |= present
        now = time.monotonic()
        for job in list(cluster.workers):
            spec = cluster.worker_spec.get(job)
            if spec is None:  # being scaled down
                continue
            names = self._names(job)
            if names & present or not names & self._seen.names:  # working, or not yet started
                self._gone.pop(job, None)
            elif now - self._gone.setdefault(job, now) >= self.grace:
                await self._close(job)
        lost = set(cluster.worker_spec) - set(cluster.workers)  # closed here or by SpecCluster
        if lost:
            for job in lost:  # a job's replacement takes its name, and its workers theirs
                self._seen.names -= self._names(job)
                self._gone.pop(job, None)
            cluster.scale(self.scale)  # submits a job for each spec without one

    def _names(self, job: str) -> set[str]:
        """The names of a job's workers (its own, or its group's)."""
        spec = self.cluster.worker_spec.get(job, {})
        return {f"{job}{suffix}" for suffix in spec.get("group", [""])}

    async def _close(self, job: str) -> None:
        worker = self.cluster.workers.pop(job, None)
        if worker is not None:
            with contextlib.suppress(Exception):  # a job that ended is closed already
                await worker.close()


def _worker_names() -> Any:
    """A scheduler plugin whose ``names`` holds the name of each worker that joins (its
    ``add_worker`` hook: a worker that joins and leaves between two looks is still seen)."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class WorkerNames(SchedulerPlugin):
        name = "bnpmix-worker-names"

        def __init__(self) -> None:
            self.names: set[str] = set()

        def add_worker(self, scheduler: Any, worker: str) -> None:
            state = scheduler.workers.get(worker)
            if state is not None:
                self.names.add(str(state.name))

    return WorkerNames()
