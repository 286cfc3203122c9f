"""An exclusive lease on an object in S3 (the lock of scheduled runs whose directory is an
``s3://`` URL), by conditional writes: S3 has no flock and no rename, but a PUT with
``If-None-Match: *`` succeeds for exactly one writer, and one with ``If-Match: ETAG`` only if
the object is still the version that writer read.

acquire: create the lock object (token, host, pid, expiry) if absent; if present and expired,
replace it only if it is still the expired one (If-Match its ETag), so that of two callers
finding the same expired lease only one takes it over. release: delete the lock only if it is
still ours (If-Match our ETag). A holder killed with SIGKILL keeps the lease until it expires
(the flock of a local directory is released at once by the kernel); the lease must outlast the
longest fit. boto3 is needed (pyarrow's file systems do not expose conditional writes); it
takes the endpoint and credentials from the environment as pyarrow does.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from .errors import BnpmixError


@dataclass(frozen=True)
class Lease:
    """A lease held: where, and the ETag of our lock object."""

    bucket: str
    key: str
    etag: str


def _client() -> Any:
    try:
        import boto3
    except ImportError:
        raise BnpmixError("scheduled runs in object storage lock with S3 conditional writes, "
                          "which need boto3: pip install boto3") from None
    return boto3.client("s3")


def _where(url: str, name: str) -> tuple[str, str]:
    parts = urlparse(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise BnpmixError(f"{url}: scheduled runs in object storage need an s3:// URL")
    return parts.netloc, f"{parts.path.strip('/')}/{name}".lstrip("/")


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def acquire(url: str, name: str, seconds: float) -> Lease | None:
    """The lease on ``url/name`` for ``seconds``, or None while another holder's is valid."""
    client = _client()
    bucket, key = _where(url, name)
    body = json.dumps({"token": uuid.uuid4().hex, "host": socket.gethostname(),
                       "pid": os.getpid(), "expires": time.time() + seconds}).encode()
    try:
        return Lease(bucket, key, client.put_object(Bucket=bucket, Key=key, Body=body,
                                                    IfNoneMatch="*")["ETag"])
    except client.exceptions.ClientError as exc:
        if _code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
            raise BnpmixError(f"s3://{bucket}/{key}: cannot take the lock ({exc})") from None
    try:
        held = client.get_object(Bucket=bucket, Key=key)
        expires = float(json.loads(held["Body"].read())["expires"])
    except client.exceptions.NoSuchKey:
        return acquire(url, name, seconds)  # released meanwhile: try again
    except (ValueError, KeyError, TypeError):
        expires = 0.0  # an unreadable lock is treated as expired
    if expires > time.time():
        return None
    try:
        return Lease(bucket, key, client.put_object(Bucket=bucket, Key=key, Body=body,
                                                    IfMatch=held["ETag"])["ETag"])
    except client.exceptions.ClientError as exc:
        if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
            return None  # another caller took the expired lease first
        raise BnpmixError(f"s3://{bucket}/{key}: cannot take the lock ({exc})") from None


def release(lease: Lease) -> None:
    """Delete the lock if it is still ours (after an expiry another caller may hold it)."""
    client = _client()
    try:
        client.delete_object(Bucket=lease.bucket, Key=lease.key, IfMatch=lease.etag)
    except client.exceptions.ClientError as exc:
        if _code(exc) not in ("PreconditionFailed", "NoSuchKey", "404"):
            raise BnpmixError(f"s3://{lease.bucket}/{lease.key}: cannot release the lock "
                              f"({exc})") from None


def claim(url: str, name: str) -> bool:
    """Create ``url/name`` if it is absent, atomically (If-None-Match): True for the one caller
    that created it. Needs an s3:// URL and boto3; elsewhere the caller's exists-check stands
    alone (see remote_run)."""
    client = _client()
    bucket, key = _where(url, name)
    body = json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                       "at": time.time()}).encode()
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
        return True
    except client.exceptions.ClientError as exc:
        if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise BnpmixError(f"s3://{bucket}/{key}: cannot claim ({exc})") from None
