"""The ``bnpmix`` command line. Exit codes: 0 success, 1 data or runtime error, 2 usage error.

Each command imports what it runs when it runs, and the parser gives arguments only to the
command named (``build_parser``, pipeline/commands/parser.py): ``bnpmix --help`` and ``bnpmix
info`` load neither Dask nor pyarrow, pandas or scipy, which the commands that read partitions
or fit need. The commands' handlers are in pipeline/commands/; here: ``main`` (the arguments
checked, the command run, its errors and signals as exit codes) and ``entry``, the console
script."""

from __future__ import annotations

import os
import select
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from bnpmix.pipeline import stops
from bnpmix.pipeline.commands.datawarnings import data_warnings
from bnpmix.pipeline.commands.fitting import fit_flags, format_fit
from bnpmix.pipeline.commands.parser import build_parser
from bnpmix.pipeline.console import console_notes
from bnpmix.pipeline.usage import UsageError
from bnpmix.storage import BnpmixError, local_path

# what tests and benchmarks import from here besides main and entry
__all__ = ["UsageError", "build_parser", "entry", "fit_flags", "format_fit", "main"]


def _notes(exc: BaseException) -> str:
    """What the code that was stopped added to its exception (how to continue a run)."""
    return "".join(f"; {note}" for note in getattr(exc, "__notes__", ()))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    remote_ok = getattr(args, "remote_ok", ())  # arguments that may be URLs (object storage)
    for name, value in vars(args).items():  # before anything can take a URL for a local path
        if not isinstance(value, str) or name in remote_ok:
            continue
        try:
            local_path(value)
        except BnpmixError as exc:
            parser.error(f"{name}: {exc}")
    stops.install()
    try:
        # fit's notes as lines on stderr; warnings such as a fit's constant columns once per text
        with console_notes(), data_warnings("default"):
            code = args.func(args)
        if stops.pending() is not None:  # swallowed where it landed, after the last step
            print("bnpmix: stopped by a signal once the command had finished; what it wrote "
                  "is complete", file=sys.stderr)
            return 143 if stops.pending() is stops.Terminated else 130
        return code
    except stops.Terminated as exc:
        print(f"bnpmix: terminated; nothing half-written was left{_notes(exc)}",
              file=sys.stderr)
        return 143
    except UsageError as exc:
        parser.error(str(exc))
    except BnpmixError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"bnpmix: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"bnpmix: interrupted{_notes(exc)}", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if stdout_gone():  # `bnpmix info RUN | head -1`: the reader has what it wanted
            return 0
        return report_error(exc, args.debug)
    except Exception as exc:
        return report_error(exc, args.debug)


def report_error(exc: Exception, debug: bool) -> int:
    """A one-line report of an unexpected error (the traceback with --debug): exit code 1."""
    if debug:
        traceback.print_exc()
    print(f"bnpmix: error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
          file=sys.stderr)
    return 1


def stdout_gone() -> bool:
    """Whether stdout's reader has closed the pipe (as in ``| head``); then stdout is pointed
    at /dev/null so that nothing later writes to it or reports the closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (captured output)
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poll.poll(0)):  # a pipe's reader left
        try:
            sys.stdout.flush()
            return False
        except BrokenPipeError:
            pass
        except (OSError, ValueError):  # closed some other way: nothing more can be said there
            return False
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
    return True


def entry() -> NoReturn:
    """The console script: main(), then an exit that skips the interpreter's teardown. Native
    thread pools (pyarrow's Parquet readers; apache/arrow#34314) can still be alive when the
    interpreter finalises and abort the process ("terminate called without an active
    exception", exit 134) after the command has succeeded. Every file a command writes is
    closed and published before main() returns, so after flushing stdout and stderr there is
    nothing left for the teardown to do. Before main(): the process's allocators
    (malloc.process_allocators)."""
    from bnpmix.pipeline.malloc import process_allocators

    process_allocators()
    code = main()
    stdout_gone()  # a reader that left before the last lines (`| head`) is not an error
    try:
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said there
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    entry()
