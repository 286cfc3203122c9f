"""Every profile in cluster-configs/ against the installed library that would run it.

For each profile file (a new file is tested automatically), every key of its ``cluster:`` mapping,
and of the mappings inside it that the library hands on (``scheduler_options``, ...), must be a
keyword the installed library accepts: found by following ``**kwargs`` through the signatures of
the functions that finally receive them, not from a hand list; a name the library has renamed or
refuses at run time is an error. ``CLUSTER_KEYS`` (what bnpmix lets a profile set) is checked the
same way. SLURM profiles render their job script without SLURM; Kubernetes profiles render their
DaskCluster resource without a Kubernetes API.

A missing library is a skip naming the pip command, unless the package is in the ``test`` extra
of pyproject.toml: then it is a failure (CI installs that extra; a skip there would hide a broken
environment).
"""

from __future__ import annotations

import ast
import getpass
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import pytest
import yaml

from bnpmix.pipeline.clusters import CLUSTER_KEYS, LIBRARIES, cluster_class, load_profile
from bnpmix.storage import BnpmixError

ROOT = Path(__file__).parents[2]
PROFILES = sorted([*ROOT.glob("cluster-configs/*.yaml"), *ROOT.glob("cluster-configs/*.yml")])
NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _test_extra() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = meta["project"].get("optional-dependencies", {}).get("test", [])
    return {_norm(re.match(r"[A-Za-z0-9._-]+", r).group(0)) for r in requirements}


def _kind_of(path: Path) -> Any:
    """The profile's kind, read without validation (at collection time)."""
    try:
        return (yaml.safe_load(path.read_text()) or {}).get("kind")
    except (OSError, yaml.YAMLError, AttributeError):
        return None


def profiles_of(kind: str) -> list[Any]:
    found = [pytest.param(p, id=p.name) for p in PROFILES if _kind_of(p) == kind]
    return found or [pytest.param(None, id=f"no-{kind}-profile",
                                  marks=pytest.mark.skip(reason=f"no {kind} profile"))]


def library(kind: str) -> Any:
    """The kind's cluster class, after importing every module it needs (asyncssh for ssh)."""
    module, name, package = LIBRARIES[kind]
    try:
        for mod in dict.fromkeys([module, package.replace("-", "_")]):
            importlib.import_module(mod)
    except ImportError as exc:
        if _norm(package) in _test_extra():
            pytest.fail(f"{package} is in the test extra of pyproject.toml but does not import "
                        f"({exc}): pip install -e '.[test]'")
        pytest.skip(f"{kind} profiles are checked against {package}, which is not installed: "
                    f"pip install {package} (add it to the test extra of pyproject.toml to check "
                    "them in CI)")
    return getattr(importlib.import_module(module), name)


# ---------------------------------------------------------------- keywords, from the real code

@dataclass
class Keywords:
    where: dict[str, str] = field(default_factory=dict)    # keyword -> function that takes it
    renamed: dict[str, str] = field(default_factory=dict)  # old keyword -> new ("" = dropped)
    refused: dict[str, str] = field(default_factory=dict)  # keyword -> what the library says

    def problems(self, keys: Any, what: str) -> list[str]:
        out = []
        for key in sorted(keys):
            if key in self.renamed:
                new = self.renamed[key]
                out.append(f"{what}: {key!r} is " + (f"renamed {new!r}" if new else "dropped"))
            elif key in self.refused:
                out.append(f"{what}: {key!r} is refused: {self.refused[key]}")
            elif key not in self.where:
                usable = sorted(set(self.where) - set(self.renamed) - set(self.refused))
                out.append(f"{what}: {key!r} is not accepted (accepted: {usable})")
        return out


def _forwarded(holder: Callable, callee: Callable, expr: str | None = None) -> set[str]:
    """The parameters of ``callee`` that ``holder`` fills itself in the call where it hands on
    ``**expr`` (default: its own ``**kwargs``), which therefore cannot be passed again."""
    expr = expr or next((p.name for p in inspect.signature(holder).parameters.values()
                         if p.kind is inspect.Parameter.VAR_KEYWORD), "")
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(holder)))
    except (OSError, TypeError, SyntaxError):
        return set()
    params = [p for p in inspect.signature(callee).parameters if p != "self"]
    owner = callee.__qualname__.split(".")[0]
    filled: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and any(
                k.arg is None and ast.unparse(k.value) == expr for k in node.keywords)):
            continue
        filled |= {k.arg for k in node.keywords if k.arg}
        func = ast.unparse(node.func)
        args = [ast.unparse(a) for a in node.args]
        if func.endswith(".__init__") and not func.startswith("super()") and args[:1] == ["self"]:
            args = args[1:]  # ServerNode.__init__(self, ...)
        elif func not in (owner, "super().__init__", "self.job_cls"):
            continue  # a call of something else (a factory, ...): its positionals are unknown
        filled |= set(params[:len(args)])
    return filled


_RENAMED = [  # how the libraries word it when they warn about an old keyword
    re.compile(r"(\w+) has been renamed to (\w+)"),                          # dask-jobqueue
    re.compile(r"The `(\w+)` parameter has been deprecated(?:\. Please use `(\w+)`)?"),  # dask
]
_REFUSED = re.compile(r"Please pass '(\w+)' through '(\w+)'")                # dask-jobqueue


def keywords(*chain: Callable, via: dict[Callable, tuple[Callable, str]] | None = None
             ) -> Keywords:
    """What a call of ``chain[0]`` accepts: its named parameters, and while a function takes
    ``**kwargs``, those of the next one (which receives them), minus what it fills itself.
    ``via[f] = (g, expr)``: f stores its **kwargs and g hands them on as ``**expr``."""
    via = via or {}
    kw = Keywords()
    filled: set[str] = set()
    for caller, callee in zip(chain, [*chain[1:], None], strict=True):
        params = inspect.signature(caller).parameters.values()
        for p in params:
            if p.kind in NAMED and p.name != "self" and p.name not in filled:
                kw.where.setdefault(p.name, caller.__qualname__)
        try:
            source = inspect.getsource(caller)
        except (OSError, TypeError):
            source = ""
        for pattern in _RENAMED:
            for old, new in pattern.findall(source):
                kw.renamed.setdefault(old, new)
        for key, instead in _REFUSED.findall(source):
            kw.refused[key] = f"{caller.__qualname__} asks for it in {instead!r}"
        if callee is None or not any(p.kind is p.VAR_KEYWORD for p in params):
            break
        holder, expr = via.get(caller, (caller, None))
        filled = _forwarded(holder, callee, expr)
    return kw


def server_chain(cls: type) -> list[Callable]:
    """Where a distributed server's keywords go: Nanny -> Worker -> Server, Scheduler -> Server."""
    from distributed import Nanny, Scheduler, Worker
    from distributed.core import Server

    if issubclass(cls, Nanny):
        return [cls.__init__, *server_chain(Worker)]
    if issubclass(cls, Worker | Scheduler):
        return [cls.__init__, Server.__init__]
    return [cls.__init__]


def _import(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _job_classes(cls: Any) -> list[type]:
    """A jobqueue cluster's job class and its bases that define __init__ in Python."""
    return [k for k in cls.job_cls.__mro__ if inspect.isfunction(vars(k).get("__init__"))]


def top_keywords(kind: str, cls: Any, cluster: dict[str, Any]) -> Keywords:
    """The keywords the kind's cluster class accepts, following its **kwargs."""
    if kind == "local":
        from distributed import Nanny, Worker

        worker = cluster.get("worker_class") or (Nanny if cluster.get("processes", True)
                                                 else Worker)
        return keywords(cls.__init__, *server_chain(_import(worker) if isinstance(worker, str)
                                                    else worker))
    if kind == "ssh":
        from distributed import SpecCluster
        from distributed.deploy import ssh

        kw = keywords(inspect.unwrap(cls), SpecCluster.__init__)
        for key in ssh.old_cluster_kwargs:  # as extra keywords they select the old SSHCluster
            if kw.where.get(key, "").startswith("SpecCluster"):
                kw.refused[key] = "routes SSHCluster to its deprecated old implementation"
        return kw
    if kind == "slurm":
        job_inits = [k.__init__ for k in _job_classes(cls)]
        # the cluster keeps **job_kwargs and makes each job as in its _dummy_job property
        return keywords(cls.__init__, *job_inits,
                        via={cls.__init__: (cls._dummy_job.fget, "self._job_kwargs")})
    if kind == "kubernetes":
        from distributed.deploy.cluster import Cluster

        return keywords(cls.__init__, Cluster.__init__)
    raise AssertionError(f"no rule for kind {kind!r}")


def nested_keywords(kind: str, cluster: dict[str, Any]) -> dict[str, Keywords]:
    """Keywords of the mappings the class hands on to another function."""
    from distributed import Scheduler

    if kind == "ssh":
        import asyncssh
        from distributed.deploy import ssh

        worker = keywords(*server_chain(_import(cluster.get("worker_class")
                                                or "distributed.Nanny")))
        if '"n_workers"' in inspect.getsource(ssh.Worker.__init__):  # popped there: per host
            worker.where["n_workers"] = ssh.Worker.__init__.__qualname__
        return {"scheduler_options": keywords(*server_chain(Scheduler)),
                "worker_options": worker,
                "connect_options": keywords(asyncssh.connect,
                                            asyncssh.SSHClientConnectionOptions.prepare)}
    if kind == "local":
        return {"scheduler_kwargs": keywords(*server_chain(Scheduler))}
    if kind == "slurm":
        return {"scheduler_options": keywords(*server_chain(Scheduler))}
    return {}


# ---------------------------------------------------------------------------------- the tests

def test_profiles_are_found():
    assert PROFILES, "no cluster profile found in cluster-configs/"
    kinds = {_kind_of(p) for p in PROFILES}
    assert kinds >= set(LIBRARIES), f"a kind without a shipped profile: {set(LIBRARIES) - kinds}"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in PROFILES])
def test_profile_keys_are_what_the_installed_library_accepts(path):
    profile = load_profile(path)
    if profile.kind not in LIBRARIES:  # e.g. address: bnpmix starts nothing, only connects
        assert not profile.cluster, f"{path.name}: kind {profile.kind} takes no 'cluster' keys"
        return
    cls = library(profile.kind)
    assert cluster_class(profile) is cls
    problems = top_keywords(profile.kind, cls, profile.cluster).problems(
        profile.cluster, "cluster")
    for key, kw in nested_keywords(profile.kind, profile.cluster).items():
        values = profile.cluster.get(key) or {}
        for value in values if isinstance(values, list) else [values]:  # per-host lists
            problems += kw.problems(value, f"cluster.{key}")
    if profile.kind == "slurm":  # scheduler options can also come from the Dask config
        with dask.config.set(profile.dask_config):
            name = cls.job_cls.config_name
            options = dask.config.get(f"jobqueue.{name}.scheduler-options", {})
        problems += nested_keywords("slurm", {})["scheduler_options"].problems(
            options, f"dask-config jobqueue.{name}.scheduler-options")
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in PROFILES])
def test_profile_dask_config_names_existing_settings(path):
    """A misspelt dask-config key would silently do nothing: each must name a setting that
    exists once the profile's library is imported (its defaults register the names)."""
    profile = load_profile(path)
    if profile.kind in LIBRARIES:
        library(profile.kind)
    import distributed  # noqa: F401  (registers distributed.*)

    unknown = []
    for key in profile.dask_config:
        try:
            dask.config.get(key)
        except KeyError:
            unknown.append(key)
    assert not unknown, f"{path.name}: dask-config keys that are no Dask setting: {unknown}"


@pytest.mark.parametrize("kind", [k for k in CLUSTER_KEYS if k in LIBRARIES])
def test_bnpmix_accepts_only_keys_the_library_accepts(kind):
    """CLUSTER_KEYS[kind] must be a subset of today's keywords: none renamed, dropped, refused."""
    cls = library(kind)
    kw = top_keywords(kind, cls, {})
    problems = kw.problems(CLUSTER_KEYS[kind], f"CLUSTER_KEYS[{kind!r}]")
    if kind == "slurm":  # each job keyword defaults to a jobqueue.slurm.* setting that exists
        jobs = _job_classes(cls)
        source = "".join(inspect.getsource(k.__init__) for k in jobs)
        defaults = dict(re.findall(r"if (\w+) is None:\s+\1 = dask\.config\.get\(\s*"
                                   r"\"jobqueue\.%s\.([\w-]+)\"", source))
        config = f"jobqueue.{cls.job_cls.config_name}"
        for key in sorted(CLUSTER_KEYS[kind]):
            if kw.where.get(key, "").rpartition(".")[0] in {k.__qualname__ for k in jobs}:
                try:
                    dask.config.get(f"{config}.{defaults[key]}")
                except KeyError:
                    problems.append(f"{key!r}: no default from a {config}.* setting")
    assert not problems, "\n  ".join(["", *problems])
    renamed = {k: v for k, v in kw.renamed.items() if k in kw.where}
    print(f"{kind}: keywords the library renamed or dropped: {renamed or 'none'}")


@pytest.mark.parametrize("kind", [k for k in CLUSTER_KEYS if k in LIBRARIES])
def test_a_security_section_reaches_a_class_that_takes_it(kind, tmp_path):
    """open_client passes security= to the class of every kind whose profile may have one."""
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump({
        "kind": kind, "dask-config": {"distributed.comm.timeouts.connect": "5s"},
        "security": {"ca_file": "ca.pem", "cert": "c.pem", "key": "k.pem"}}))
    try:
        load_profile(profile)
    except BnpmixError:
        return  # refused with a message naming the field: fine
    assert "security" in top_keywords(kind, library(kind), {}).where


@pytest.mark.parametrize("path", profiles_of("slurm"))
def test_slurm_profile_renders_its_job_script_without_slurm(path, tmp_path):
    """The cluster object is built as bnpmix builds it (its scheduler on 127.0.0.1 here), and
    nothing is submitted: the job script carries the profile's directives and settings."""
    import psutil

    profile = load_profile(path)
    cls = library("slurm")
    cluster = dict(profile.cluster)
    if "log_directory" in cluster:  # the job object creates it
        cluster["log_directory"] = str(tmp_path / "logs")
    name = cls.job_cls.config_name
    with dask.config.set(profile.dask_config):
        options = dict(dask.config.get(f"jobqueue.{name}.scheduler-options", {}))
        with dask.config.set({f"jobqueue.{name}.scheduler-options": {**options,
                                                                      "host": "127.0.0.1"}}), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with cls(**cluster) as slurm:
                script = slurm.job_script()
                dashboard = slurm.scheduler_info["services"]["dashboard"]
                listening = {c.laddr.ip for c in psutil.Process().net_connections(kind="tcp")
                             if c.status == psutil.CONN_LISTEN and c.laddr.port == dashboard}
                address = slurm.scheduler_address
                assert not slurm.workers, "a job was submitted"
    print(script)
    old = [str(w.message) for w in caught if "dask_jobqueue" in w.filename
           and issubclass(w.category, FutureWarning | DeprecationWarning)]
    assert not old, old
    assert listening and listening <= {"127.0.0.1", "::1"}, f"dashboard listens on {listening}"
    header = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    for directive in cluster.get("job_extra_directives", []):
        assert f"#SBATCH {directive}" in header
    for key in ("queue", "account", "walltime"):
        if key in cluster:
            assert any(line.endswith(f" {cluster[key]}") for line in header), (key, header)
    body = script.split("\n".join(header), 1)[1]
    command = next(line for line in body.splitlines() if "distributed.cli.dask_worker" in line)
    for line in cluster.get("job_script_prologue", []):
        assert line in body.split(command)[0], line
    assert command.split()[3] == address  # PYTHON -m distributed.cli.dask_worker ADDRESS
    assert " ".join(map(str, cluster.get("worker_extra_args", []))) in command
    processes = cluster.get("processes", 1)
    if processes > 1:
        assert f"--nworkers {processes}" in command
    if "cores" in cluster:
        assert f"--nthreads {cluster['cores'] // processes}" in command


@pytest.mark.parametrize("path", profiles_of("kubernetes"))
def test_kubernetes_profile_renders_its_cluster_resource_without_an_api(path):
    """make_cluster_spec is what KubeCluster submits to the operator (unless a custom spec is
    configured); it is called here with the profile's values, no Kubernetes API contacted."""
    profile = load_profile(path)
    kube = library("kubernetes")
    from dask_kubernetes.operator import make_cluster_spec
    from dask_kubernetes.operator.validation import validate_cluster_name

    cluster = profile.cluster
    with dask.config.set(profile.dask_config):
        assert dask.config.get("kubernetes.custom-cluster-spec") is None, "not checked here"
        name = dask.config.get("kubernetes.name", override_with=cluster.get("name"))
        mode = str(dask.config.get("kubernetes.create-mode"))
        shutdown = dask.config.get("kubernetes.shutdown-on-close")
    spec_keys = set(inspect.signature(make_cluster_spec).parameters)
    assert set(cluster) - spec_keys <= set(inspect.signature(kube.__init__).parameters)

    def formatted() -> str:  # as KubeCluster formats it
        return name.format(user=getpass.getuser(), uuid=str(uuid.uuid4())[:10], **os.environ)

    validate_cluster_name(formatted())
    if "CONNECT" in mode and shutdown:
        assert formatted() != formatted(), (
            f"name {name!r}: with create-mode {mode} two runs would share one cluster and the "
            "first to finish would delete it; put {uuid} in the name")
    spec = make_cluster_spec(**{**{k: v for k, v in cluster.items() if k in spec_keys},
                                "name": formatted()})
    resources = cluster.get("resources")
    assert set(resources or {}) <= {"limits", "requests"}  # KubeCluster refuses anything else
    for role in ("worker", "scheduler"):
        (container,) = spec["spec"][role]["spec"]["containers"]
        if "image" in cluster:
            assert container["image"] == cluster["image"], role
        if resources:
            assert container["resources"] == resources, role
    if "n_workers" in cluster:
        assert spec["spec"]["worker"]["replicas"] == cluster["n_workers"]


@pytest.mark.parametrize("path", profiles_of("slurm"))
def test_a_slurm_profile_opens_twice_in_one_process(path, tmp_path):
    """dask-jobqueue adds its settings (jobqueue.slurm.*) to Dask's configuration when first
    imported; imported inside the profile's dask-config they went when the run's settings were
    taken back, and the process's next SLURM cluster failed (KeyError 'interface'). In a fresh
    interpreter (dask_jobqueue not yet imported): two opens, each ending as a cluster without
    workers does (no job submitted: no scale; no SLURM needed)."""
    library("slurm")
    profile = yaml.safe_load(path.read_text())
    profile.pop("scale", None)
    profile["dask-config"]["jobqueue.slurm.scheduler-options"] = {
        "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    if "log_directory" in profile["cluster"]:
        profile["cluster"]["log_directory"] = str(tmp_path / "logs")
    copy = tmp_path / "slurm.yaml"
    copy.write_text(yaml.safe_dump(profile))
    code = textwrap.dedent(f"""
        import sys
        import dask
        from bnpmix.pipeline.clusters import open_client
        from bnpmix.storage import BnpmixError
        assert "dask_jobqueue" not in sys.modules
        for _ in range(2):
            try:
                with open_client(profile_path={str(copy)!r}, worker_wait=0.1):
                    raise AssertionError("a worker joined")
            except BnpmixError as exc:
                assert "no Dask worker joined" in str(exc), exc
            dask.config.get("jobqueue.slurm.interface")  # still there
        print("ok")
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr[-3000:]
