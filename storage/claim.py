"""The claim of a run directory: ``.claim`` holds the host and PID of the one process (a fit or
a resume) writing the directory; it is taken atomically and replaced only when its process is
known to be gone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any, NamedTuple

from .atomic import pid_alive
from .errors import BnpmixError
from .runsummary import is_int


class Claimed(NamedTuple):
    """What RunDir.claim did: whether it created the directory, and whose claim it replaced
    (a description of a process that is gone; None when there was none)."""

    created: bool
    replaced: str | None = None


LEFTOVER = re.compile(r"\..+\.tmp|\.claim\.\d+\.replaced")  # atomic writes' temporary files
CLAIM_TMP = re.compile(r"\.claim\.(\d+)\.tmp")  # a claim being written (_create_claim)


def parse_claim(text: str) -> dict[str, Any]:
    """A claim's holder: {"host", "pid"}; an older bnpmix's bare PID gives {"pid"} alone
    (its host unknown); {} when unreadable."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return {}
    if isinstance(obj, int) and not isinstance(obj, bool):
        return {"pid": obj}
    if not (isinstance(obj, dict) and isinstance(obj.get("host"), str) and is_int(obj.get("pid"))):
        return {}
    return {"host": obj["host"], "pid": int(obj["pid"])}


def claim_is_stale(holder: dict[str, Any]) -> bool:
    """Whether a claim's process is known to be gone: it ran on this host and no process has
    its PID (a process elsewhere cannot be checked: its claim stands)."""
    return (holder.get("host") == socket.gethostname() and "pid" in holder
            and not pid_alive(holder["pid"]))


def describe_claim(holder: dict[str, Any]) -> str:
    """A claim's holder in words, for the messages that refuse a directory."""
    if "pid" not in holder:
        return "another fit (an unreadable claim)"
    return f"process {holder['pid']}" + (f" on {holder['host']}" if "host" in holder else "")


class Claimable:
    """The claim methods of a directory at ``self.path`` (RunDir's)."""

    path: Path

    @property
    def claim_path(self) -> Path:
        return self.path / ".claim"

    def claim(self) -> Claimed:
        """Take the directory for one new fit before any work, atomically: the ``.claim`` file
        (this host and PID) is created exclusively (O_EXCL), so of two fits racing for one
        empty or missing directory exactly one wins. A directory holding anything else is
        refused, except what a fit leaves that stopped before its first checkpoint (its claim,
        job.json, temporary files) once its process is gone: that is taken over (a process on
        another host cannot be checked, so its claim stands). Returns whether this call created
        the directory (``release`` then removes it) and whose claim it replaced."""
        try:
            self.path.mkdir(parents=True)
            created = True
        except FileExistsError:
            if not self.path.is_dir():
                raise BnpmixError(f"{self.path}: the output exists and is not a directory; "
                                  "choose another --out") from None
            created = False
        replaced = None
        if not self._create_claim():
            text = self._claim_text()
            holder = parse_claim(text)
            if not (self._leftovers_only() and claim_is_stale(holder)
                    and self._replace_claim(text)):
                raise BnpmixError(f"{self.path}: the output directory {self._held(holder)}; "
                                  "choose another --out")
            self._remove_leftovers()
            replaced = describe_claim(holder)
        self._remove_dead_claim_files()
        others = [p.name for p in self.path.iterdir() if p.name != self.claim_path.name
                  and not CLAIM_TMP.fullmatch(p.name)]
        if others:
            self.claim_path.unlink()
            what = "holds a run (use `bnpmix resume`)" if "job.json" in others else "is not empty"
            raise BnpmixError(f"{self.path}: the output directory {what}; choose another --out")
        return Claimed(created, replaced)

    def reclaim(self) -> None:
        """Take the claim of a run that is being resumed: refused while the process holding it
        runs on this host (another process's fit or resume is writing the directory); a claim
        whose process is gone, this process's own, or another host's (which cannot be
        checked) is replaced."""
        if self._create_claim():
            return
        text = self._claim_text()
        holder = parse_claim(text)
        if holder.get("host") == socket.gethostname() and holder.get("pid") != os.getpid() \
                and not claim_is_stale(holder):
            raise BnpmixError(f"{self.path}: {describe_claim(holder)} is working in this run; "
                              "wait for it to end, or stop it, then resume")
        if not self._replace_claim(text):
            raise BnpmixError(f"{self.path}: another process claimed the run meanwhile")

    def _create_claim(self) -> bool:
        """Create ``.claim`` with this host and PID, exclusively; False if one exists. The
        text is written to a temporary file first and hard-linked into place (the link fails
        if ``.claim`` exists), so no process ever sees a claim without its holder: a fit
        killed between an exclusive create and its write left an empty claim, which no later
        fit could judge stale."""
        tmp = self.path / f".claim.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}) + "\n",
                           encoding="utf-8")
            os.link(tmp, self.claim_path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def _claim_text(self) -> str:
        try:
            return self.claim_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:  # released meanwhile: nobody's
            return ""

    def _replace_claim(self, text: str) -> bool:
        """Replace the claim read as ``text`` by this process's: it is renamed aside first (of
        two processes replacing it, one renames it), checked to be the claim that was judged,
        then ours is created exclusively. False when another process got there first."""
        aside = self.path / f".claim.{os.getpid()}.replaced"
        try:
            os.rename(self.claim_path, aside)
        except FileNotFoundError:
            return self._create_claim()
        if aside.read_text(encoding="utf-8", errors="replace") != text:
            with contextlib.suppress(OSError):  # a newer claim: put it back unless replaced
                os.link(aside, self.claim_path)
            aside.unlink()
            return False
        aside.unlink()
        return self._create_claim()

    def _leftovers_only(self) -> bool:
        """Whether the directory holds only what a fit writes before its first checkpoint."""
        return all(p.name in (".claim", "job.json") or LEFTOVER.fullmatch(p.name)
                   for p in self.path.iterdir())

    def _remove_dead_claim_files(self) -> None:
        """The temporary claim files of fits killed before linking theirs (a live racer's
        file is its own to remove)."""
        for p in self.path.iterdir():
            m = CLAIM_TMP.fullmatch(p.name)
            if m and not pid_alive(int(m.group(1))):
                p.unlink(missing_ok=True)

    def _remove_leftovers(self) -> None:
        for p in self.path.iterdir():
            if p.name == "job.json" or LEFTOVER.fullmatch(p.name):
                p.unlink(missing_ok=True)

    def _held(self, holder: dict[str, Any]) -> str:
        """Why the directory cannot be taken, for the refusal."""
        if (self.path / "job.json").exists() and not claim_is_stale(holder):
            if holder.get("host") == socket.gethostname() and "pid" in holder:
                return f"is being written by {describe_claim(holder)}"
            return (f"is claimed by {describe_claim(holder)} (if that process is gone, "
                    f"`bnpmix resume {self.path}` continues the run)")
        if (self.path / "job.json").exists():
            return f"holds a run that stopped (continue it: `bnpmix resume {self.path}`)"
        if claim_is_stale(holder) or not holder:
            return "is not empty"
        return f"is claimed by {describe_claim(holder)}"

    def release(self, created: bool = False) -> None:
        """Drop the claim: after a finished fit, or for a fit that failed before writing
        anything (then also the directory if claim() made it and nothing else is in it)."""
        self.claim_path.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):  # something else was written into it: keep it
                self.path.rmdir()


__all__ = ["CLAIM_TMP", "LEFTOVER", "Claimable", "Claimed", "claim_is_stale", "describe_claim",
           "parse_claim"]
