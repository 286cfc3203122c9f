"""Corpora read from object storage: ``s3://bucket/corpus`` (and any scheme pyarrow's
filesystems know: ``gs://``, ``abfs://``, ``hdfs://``).

pyarrow's own filesystems (``pyarrow.fs.FileSystem.from_uri``) rather than fsspec: pyarrow is
already a dependency and reads the Parquet partitions, and its S3 client takes credentials and
the endpoint from the usual places (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ``AWS_PROFILE`` and ~/.aws, instance roles), so bnpmix never handles a
secret: a URL carries none, and nothing bnpmix writes records more than the URL.

Reading needs no atomicity: a corpus's files are immutable once its manifest names them, and
every partition is checked against the manifest's size and SHA-256 when read.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs

from .errors import URL, BnpmixError


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL string (``scheme://...``) rather than a local path."""
    return isinstance(path, str) and URL.match(path) is not None


def _filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """The store and the path within it; opened per read, so credentials or an endpoint
    changed in the environment take effect (a worker reads each partition once and caches
    it)."""
    try:
        return pafs.FileSystem.from_uri(url)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise BnpmixError(f"{url}: cannot open the object store ({exc})") from None


def read_object(url: str, name: str) -> bytes:
    """The bytes of ``name`` under the prefix ``url``; FileNotFoundError when it is absent,
    BnpmixError naming the object for any other failure (access denied, no endpoint)."""
    fs, root = _filesystem(url.rstrip("/"))
    key = f"{root}/{name}"
    try:
        with fs.open_input_stream(key) as stream:
            return stream.read()
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        if "not found" in str(exc).lower() or "nosuchkey" in str(exc).lower():
            raise FileNotFoundError(f"{url}/{name}") from None
        raise BnpmixError(f"{url}/{name}: unreadable ({exc})") from None
