"""Corpora read from object storage: ``s3://bucket/corpus`` (and any scheme pyarrow's
filesystems know: ``gs://``, ``abfs://``, ``hdfs://``).

pyarrow's own filesystems (``pyarrow.fs.FileSystem.from_uri``) rather than fsspec: pyarrow is
already a dependency and reads the Parquet partitions, and its S3 client takes credentials and
the endpoint from the usual places (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ``AWS_PROFILE`` and ~/.aws, instance roles), so bnpmix never handles a
secret: a URL carries none, and nothing bnpmix writes records more than the URL.

Reading needs no atomicity: a corpus's files are immutable once its manifest names them, and
every partition is checked against the manifest's size and SHA-256 when read. Writing a corpus
(``publish_corpus``) puts every file but the manifest first and the manifest last: an object
store has no rename, and a single PUT is whole or absent, so the manifest is the commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import BnpmixError
from .errors import is_url as is_url  # here for the modules that import it from this one

if TYPE_CHECKING:  # Dask and pyarrow are imported by the functions that use a store
    import pyarrow.fs as pafs

MANIFEST = "manifest.json"  # storage.corpus.MANIFEST (corpus imports this module)


def storage_options() -> dict[str, Any]:
    """Dask config ``bnpmix.storage-options``: keyword arguments of pyarrow's S3FileSystem
    (endpoint_override, scheme, region, access_key, secret_key, ...) for s3:// URLs, set by a
    job file's ``[storage]`` table for its run (and on its workers); empty: the environment."""
    import dask.config

    options = dask.config.get("bnpmix.storage-options", None) or {}
    if not isinstance(options, dict):
        raise BnpmixError("Dask config bnpmix.storage-options: expected a mapping of "
                          "S3FileSystem arguments")
    return dict(options)


def _filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """The store and the path within it; opened per read, so credentials or an endpoint
    changed in the environment take effect (a worker reads each partition once and caches
    it)."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    options = storage_options()
    try:
        if options and url.startswith("s3://"):
            return pafs.S3FileSystem(**options), url.removeprefix("s3://")
        return pafs.FileSystem.from_uri(url)
    except (pa.ArrowException, ValueError, OSError, TypeError) as exc:
        raise BnpmixError(f"{url}: cannot open the object store ({exc})") from None


def read_object(url: str, name: str) -> bytes:
    """The bytes of ``name`` under the prefix ``url``; FileNotFoundError when it is absent,
    BnpmixError naming the object for any other failure (access denied, no endpoint)."""
    import pyarrow as pa

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


def write_object(url: str, name: str, data: bytes) -> None:
    """Put ``data`` at ``name`` under the prefix ``url`` (one PUT: whole or absent)."""
    import pyarrow as pa

    fs, root = _filesystem(url.rstrip("/"))
    try:
        with fs.open_output_stream(f"{root}/{name}") as stream:
            stream.write(data)
    except (pa.ArrowException, OSError) as exc:
        raise BnpmixError(f"{url}/{name}: cannot write ({exc})") from None


def exists(url: str, name: str) -> bool:
    """Whether ``name`` exists under the prefix ``url``."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    fs, root = _filesystem(url.rstrip("/"))
    try:
        return fs.get_file_info(f"{root}/{name}").type != pafs.FileType.NotFound
    except (pa.ArrowException, OSError) as exc:
        raise BnpmixError(f"{url}/{name}: cannot look it up ({exc})") from None


def publish_corpus(local: Path, url: str) -> None:
    """Copy a finished local corpus directory to ``url``: the partitions and vocabulary first,
    ``manifest.json`` last, so a reader sees no corpus until every file it names is there (an
    object store has no rename). An existing corpus is never replaced; a second writer that
    publishes its manifest between this one's check and its own is reported, and any mix of
    the two writers' partitions is caught by the manifest's checksums when read."""
    url = url.rstrip("/")
    if exists(url, MANIFEST):
        raise BnpmixError(f"{url}: a corpus exists there ({MANIFEST}); choose another prefix "
                          "(replacing a corpus in object storage is not supported)")
    for path in sorted(local.iterdir()):
        if path.name != MANIFEST:
            write_object(url, path.name, path.read_bytes())
    if exists(url, MANIFEST):
        raise BnpmixError(f"{url}: another ingest published a corpus there while this one "
                          "was uploading; its partitions may now be this one's, which its "
                          "checksums will report: ingest again under another prefix")
    write_object(url, MANIFEST, (local / MANIFEST).read_bytes())


def list_objects(url: str) -> list[str]:
    """The names of the objects under the prefix ``url`` (relative, '/'-separated), sorted."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    fs, root = _filesystem(url.rstrip("/"))
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    except (pa.ArrowException, OSError) as exc:
        raise BnpmixError(f"{url}: cannot list ({exc})") from None
    return sorted(i.path[len(root) + 1:] for i in infos if i.type == pafs.FileType.File)


def delete_object(url: str, name: str) -> None:
    """Remove ``name`` under the prefix ``url`` (absent already: nothing to do)."""
    import pyarrow as pa

    fs, root = _filesystem(url.rstrip("/"))
    try:
        fs.delete_file(f"{root}/{name}")
    except FileNotFoundError:
        pass
    except (pa.ArrowException, OSError) as exc:
        raise BnpmixError(f"{url}/{name}: cannot delete ({exc})") from None


def download(url: str, local: Path, only: tuple[str, ...] | None = None) -> list[str]:
    """Every object under ``url`` (or those of ``only``) into the directory ``local``
    (created); their names."""
    names = list_objects(url) if only is None else list(only)
    for name in names:
        target = local / name
        if ".." in Path(name).parts:  # a key naming a file outside the directory
            raise BnpmixError(f"{url}/{name}: refused (a key outside its prefix)")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read_object(url, name))
    return names
