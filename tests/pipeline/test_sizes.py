"""Byte sizes as people write them (pipeline/sizes.py), the same in every flag, job-file key and
Dask setting that takes one."""

from __future__ import annotations

import dask
import pytest

from bnpmix import BnpmixError
from bnpmix.pipeline.cli import build_parser, fit_flags
from bnpmix.pipeline.jobfile import load_job
from bnpmix.pipeline.settings import setting
from bnpmix.pipeline.sizes import nbytes, parse_size


@pytest.mark.parametrize("text, size", [
    ("40MB", 40_000_000), ("40mb", 40_000_000), ("1.5GiB", 1_610_612_736), ("200k", 200_000),
    ("200 kB", 200_000), ("3KiB", 3072), ("2M", 2_000_000), ("1TB", 10**12),
    ("1TiB", 2**40), ("512", 512), ("7B", 7), (4096, 4096), (1e6, 10**6), ("1.1MB", 1_100_000)])
def test_decimal_units_are_powers_of_1000_and_binary_ones_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, message", [
    ("lots", "expected a size .*40MB, 1.5GiB, 200k"), ("5 zb", "unknown unit 'zb'"),
    ("0.5B", "not a whole"), (True, "expected a size"), (1.5, "not a whole"),
    ("-1MB", "cannot be negative"), (-3, "cannot be negative")])
def test_what_is_not_a_size_is_refused_saying_what_one_looks_like(text, message):
    with pytest.raises(ValueError, match=message):
        nbytes(text)


def test_fit_flags_and_job_keys_take_sizes_with_units(tmp_path):
    """`bnpmix fit --cache-bytes 40MB` (refused as "expected an integer" before) and a job file's
    summary_bytes = "1.5GiB" resolve to bytes; a bad size is a usage error naming the flag."""
    argv = ["fit", "corpus", "--out", "run", "--cache-bytes", "40MB", "--summary-bytes", "200k"]
    run = load_job(None, fit_flags(build_parser(argv).parse_args(argv))).config.run
    assert (run.cache_bytes, run.summary_bytes) == (40_000_000, 200_000)
    (tmp_path / "job.toml").write_text('summary_bytes = "1.5GiB"\ncache_bytes = 3000\n')
    run = load_job(tmp_path / "job.toml", {}).config.run
    assert (run.cache_bytes, run.summary_bytes) == (3000, 1_610_612_736)
    with pytest.raises(BnpmixError, match=r"cache_bytes: -1000 is not in \[0, inf\)"):
        load_job(None, {"cache_bytes": "-1kB"})


def test_plan_flags_and_dask_settings_read_sizes_alike():
    argv = ["plan", "--shape", "dense:1000:4", "--workers", "1", "--memory", "1.5GiB",
            "--cache-bytes", "40MB"]
    args = build_parser(argv).parse_args(argv)
    assert (args.memory, args.cache_bytes) == (1_610_612_736, 40_000_000)
    with dask.config.set({"bnpmix.worker-malloc-trim": "32MiB", "bnpmix.cache-bytes": "200k"}):
        assert setting("worker-malloc-trim") == 32 << 20
        assert setting("cache-bytes") == 200_000


def test_a_bad_size_flag_is_a_usage_error_naming_it(capsys):
    argv = ["fit", "corpus", "--out", "run", "--cache-bytes", "40 apples"]
    with pytest.raises(SystemExit) as exit_:
        build_parser(argv).parse_args(argv)
    assert exit_.value.code == 2
    assert "--cache-bytes: '40 apples': unknown unit 'apples'" in capsys.readouterr().err
