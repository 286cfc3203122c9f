"""A real batch scheduler: a single-node SLURM (Debian's slurm-wlm: ``slurmctld`` and ``slurmd``
on this machine, on loopback ports, with a ``munged`` of their own and a key made here) that
``bnpmix fit --cluster`` submits its Dask worker jobs to through dask-jobqueue, with a profile
derived from cluster-configs/slurm.yaml. The fit equals the threaded fit, and a worker job
cancelled mid-run (``scancel``) costs time, not correctness, as a killed worker does
(tests/test_distributed.py).

The daemons come from Debian's packages (``apt-get install slurm-wlm munge``; .ci/run installs
them before the slow tests). A test run never installs software: without them the tests skip,
saying so, except in CI (``CI`` set), where they fail."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from test_distributed import assert_same_run, make_corpus, start_bnpmix

from helpers import ENV, cli, free_port, stop

pytestmark = pytest.mark.slow  # daemons of their own, jobs through a real scheduler

EXAMPLE = Path(__file__).parents[2] / "cluster-configs" / "slurm.yaml"
COMMANDS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
SBIN = os.pathsep.join((os.environ.get("PATH", ""), "/usr/sbin", "/sbin"))  # the daemons


@dataclass
class Slurm:
    """A running single-node SLURM: its folder, its slurm.conf (SLURM_CONF) and its daemons."""

    folder: Path
    conf: Path
    daemons: list[subprocess.Popen]

    def run(self, *args: str) -> str:
        """A SLURM command's output (it reaches this cluster through SLURM_CONF)."""
        done = subprocess.run(args, capture_output=True, text=True, timeout=30,
                              env={**os.environ, "SLURM_CONF": str(self.conf)})
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def jobs(self, states: str | None = None) -> list[str]:
        """The ids of the jobs in ``states`` (squeue's --states; None: squeue's default, the
        jobs pending, running or completing)."""
        only = [f"--states={states}"] if states else []
        return self.run("squeue", "--noheader", "--format=%i", *only).split()

    def log(self) -> str:
        return (self.folder / "slurmctld.log").read_text(errors="replace")


def slurm_conf(folder: Path, node: str, memory_mb: int) -> str:
    """One node (this machine, as ``node``, on 127.0.0.1) in one partition ``debug``; munge
    authentication through the socket in ``folder``; every file the daemons write in ``folder``;
    no cgroups, accounting or MPI (none exist in a container)."""
    return "\n".join([
        "ClusterName=bnpmix-test",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge.socket'}",
        "SlurmUser=root",  # CI runs as root; the daemons run as whoever started them
        "SlurmdUser=root",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "MailProg=/bin/true",
        "ProctrackType=proctrack/linuxproc",  # no cgroups
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",  # each job its cores and memory (--mem)
        "ReturnToService=2",
        "KillWait=5",  # scancel: SIGTERM, then SIGKILL 5 s later
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory={memory_mb} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ""])


def wait_until(ready, what: str, daemons: list[subprocess.Popen], seconds: float = 60) -> None:
    """Poll ``ready()`` until true; a daemon that exits, or ``seconds`` passing, fails."""
    deadline = time.time() + seconds
    while not ready():
        for proc in daemons:
            assert proc.poll() is None, f"{proc.args[0]} exited with code {proc.returncode}"
        assert time.time() < deadline, f"{what} within {seconds:g} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def slurm() -> Iterator[Slurm]:
    """munged, slurmctld and slurmd started here (their PIDs kept, each stopped by its PID at
    the end), in a folder of their own; SLURM_CONF names its slurm.conf in this process's
    environment and in helpers.ENV (the `bnpmix` subprocesses') while the module runs."""
    missing = [c for c in COMMANDS if shutil.which(c, path=SBIN) is None]
    if missing:
        why = (f"no SLURM ({', '.join(missing)} not found); `apt-get install slurm-wlm munge` "
               "to run these tests")
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{why} (CI: .ci/run installs them)")
        pytest.skip(why)
    # munged wants its socket's folder open to all (not 0700 as pytest's tmp_path is)
    folder = Path(tempfile.mkdtemp(prefix="bnpmix-slurm-"))
    folder.chmod(0o755)
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    subprocess.run([shutil.which("mungekey", path=SBIN), "--create", "--keyfile", str(key)],
                   check=True, capture_output=True)
    key.chmod(0o400)
    node = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, node, memory_mb=4096))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons: list[subprocess.Popen] = []
    cluster = Slurm(folder, conf, daemons)

    def start(name: str, *args: str) -> None:
        with open(folder / f"{name}.out", "wb") as out:
            daemons.append(subprocess.Popen([shutil.which(name, path=SBIN), *args], stdout=out,
                                            stderr=subprocess.STDOUT, env=env))

    try:
        start("munged", "--foreground", f"--key-file={key}",
              f"--socket={folder / 'munge.socket'}", f"--pid-file={folder / 'munged.pid'}",
              f"--seed-file={folder / 'munged.seed'}", f"--log-file={folder / 'munged.log'}")
        wait_until((folder / "munge.socket").exists, "munged made no socket", daemons)
        start("slurmctld", "-D", "-i")  # -D: in the foreground, a child of this process
        start("slurmd", "-D", "-N", node)

        def idle() -> bool:
            done = subprocess.run(["sinfo", "--noheader", "--format=%T"], capture_output=True,
                                  text=True, env=env)
            return done.returncode == 0 and done.stdout.split() == ["idle"]

        wait_until(idle, "the node was not idle", daemons)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SLURM_CONF", str(conf))  # sbatch and scancel of in-process fits
            mp.setitem(ENV, "SLURM_CONF", str(conf))  # those of `bnpmix` subprocesses
            yield cluster
    finally:
        try:
            for job in cluster.jobs() if all(d.poll() is None for d in daemons) else []:
                cluster.run("scancel", job)  # a failed test's jobs; a fit cancels its own
            if daemons and daemons[-1].poll() is None:
                wait_until(lambda: not cluster.jobs(), "jobs still ran", daemons, seconds=30)
        finally:
            stop(*reversed(daemons))  # slurmd, slurmctld, munged: each by its handle's PID
            shutil.rmtree(folder, ignore_errors=True)


def profile_for(slurm: Slurm, folder: Path, processes: int = 1) -> Path:
    """cluster-configs/slurm.yaml as a user would adapt it to this node: the same kind, keys and
    settings, with the partition, job size and walltime this node has, ``processes``
    single-threaded workers per job and two workers in all, the scheduler and workers on
    loopback, the jobs' logs and scratch space in ``folder``."""
    profile = yaml.safe_load(EXAMPLE.read_text())
    assert profile["kind"] == "slurm"
    options = profile["dask-config"]["jobqueue.slurm.scheduler-options"]
    profile["dask-config"]["jobqueue.slurm.scheduler-options"] = {
        **options, "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    # a job whose workers left is replaced after this long (the default 15 s, shortened here)
    profile["dask-config"]["distributed.deploy.lost-worker-timeout"] = "2s"
    profile["cluster"].update(
        queue="debug", cores=processes, processes=processes, memory=f"{processes}GB",
        walltime="00:10:00",
        job_extra_directives=[],  # the example's --exclusive: one job at a time on one node
        interface="lo", local_directory=str(folder / "scratch"),
        log_directory=str(folder / "logs"))
    profile["scale"] = 2  # workers: two jobs of one, or one of two
    path = folder / "slurm.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def worker_logs(folder: Path) -> dict[str, str]:
    """Each job's dask-jobqueue log (stderr of its worker), by SLURM job id."""
    return {re.search(r"-(\d+)\.err$", p.name).group(1): p.read_text(errors="replace")
            for p in sorted((folder / "logs").glob("*.err"))}


def joined(folder: Path) -> list[str]:
    """The jobs whose worker registered with a scheduler."""
    return [job for job, log in worker_logs(folder).items() if "Registered to:" in log]


FIT = ("--K", "1", "--laps", "5", "--moves", "birth,merge", "--seed", "7")


def test_a_fit_on_slurm_jobs_equals_the_threaded_fit(slurm, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    profile = profile_for(slurm, tmp_path)
    local = cli("fit", str(corpus), "--out", str(tmp_path / "threads"), *FIT)
    assert local.returncode == 0, local.stderr
    dist = cli("fit", str(corpus), "--out", str(tmp_path / "slurm"), *FIT,
               "--cluster", str(profile))
    assert dist.returncode == 0, dist.stderr
    assert_same_run(tmp_path / "threads", tmp_path / "slurm")
    # the workers ran in SLURM jobs that dask-jobqueue submitted, and were cancelled at the end
    scheduler = re.search(r"dask at (tcp://127\.0\.0\.1:\d+)", dist.stderr).group(1)
    logs = worker_logs(tmp_path)
    assert len(logs) == 2, logs
    for job, log in logs.items():
        assert f"Registered to:      {scheduler}" in log, log
        assert f"_slurm_rpc_submit_batch_job: JobId={job} " in slurm.log()
        assert f"sched: Allocate JobId={job} " in slurm.log()
    wait_until(lambda: not slurm.jobs(), "the fit's jobs outlived it", slurm.daemons)


def test_a_worker_job_cancelled_mid_run_costs_time_not_correctness(slurm, tmp_path):
    """As tests/test_distributed.py's worker killed mid-lap: the fit, once it has a mid-lap
    checkpoint and both workers, loses one job to `scancel` and still gives the threaded fit."""
    # three times the corpus of the killed-worker test (in as many visits per lap): the fit
    # goes on for seconds after the cancel, during which the lost job's replacement may join
    corpus = make_corpus(tmp_path / "corpus", n=60000, D=6, partitions=30)
    profile = profile_for(slurm, tmp_path)
    # the model named: --obs auto's race would run all but the last lap before the first
    # checkpoint, and the job would be cancelled as the fit ends
    args = ("--obs", "gauss", "--K", "1", "--laps", "6", "--moves", "birth,merge", "--seed", "3",
            "--checkpoint-every", "5", "--wave", "1", "--ahead", "0")
    ref = cli("fit", str(corpus), "--out", str(tmp_path / "ref"), *args)
    assert ref.returncode == 0, ref.stderr
    proc = start_bnpmix("fit", str(corpus), "--out", str(tmp_path / "faulty"), *args,
                        "--cluster", str(profile))
    run = tmp_path / "faulty"
    try:
        wait_until(lambda: (run / "checkpoint.npz").exists() and len(joined(tmp_path)) == 2,
                   "no mid-lap checkpoint with two workers", [proc], seconds=120)
        victim = joined(tmp_path)[0]
        slurm.run("scancel", victim)
        assert not (run / "summary.json").exists(), "the run finished before a job was cancelled"
        _, err = proc.communicate(timeout=300)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    wait_until(lambda: f"JOB {victim} ON" in worker_logs(tmp_path)[victim],  # slurmstepd's
               "the cancelled job's log does not say so", slurm.daemons)  # *** CANCELLED ***
    assert_same_run(tmp_path / "ref", run)


@pytest.mark.parametrize("processes", [1, 2])
def test_jobs_that_end_under_a_running_cluster_are_replaced(slurm, tmp_path, processes):
    """Every worker job ends while the cluster is open (as at their walltime, or by `scancel`):
    new jobs are submitted and their workers join, up to the profile's scale, where
    dask-jobqueue alone leaves the cluster without workers and a fit waiting forever. With
    one worker per job and with two (whose names are not the job's)."""
    from bnpmix.pipeline.clusters import open_client

    profile = profile_for(slurm, tmp_path, processes)
    with open_client(profile_path=str(profile)) as client:
        client.wait_for_workers(2, timeout=60)
        first = set(client.scheduler_info()["workers"])
        ended = slurm.jobs()
        assert len(ended) == 2 // processes, ended
        for job in ended:
            slurm.run("scancel", job)

        def replaced() -> bool:
            workers = set(client.scheduler_info()["workers"])
            return len(workers) == 2 and not workers & first

        wait_until(replaced, "no new workers joined", slurm.daemons)
        running = slurm.jobs("RUNNING")  # the cancelled ones may still be completing
        assert len(running) == len(ended) and not set(running) & set(ended), (running, ended)
        assert len(joined(tmp_path)) == 2 * len(ended)
