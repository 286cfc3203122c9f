"""A signal's stop is carried out even where the code it landed in swallowed it
(pipeline/stops.py): pyarrow's lazy import of pandas catches everything, so a SIGINT in a
partition's first read was lost and the run went on to its end."""

from __future__ import annotations

import os
import signal

import pytest

from bnpmix.pipeline import stops


@pytest.fixture
def handlers():
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGINT, saved[0])
    signal.signal(signal.SIGTERM, saved[1])


@pytest.mark.parametrize(("sig", "raised"), [(signal.SIGINT, KeyboardInterrupt),
                                             (signal.SIGTERM, stops.Terminated)])
def test_a_swallowed_stop_is_raised_again(sig, raised, handlers):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stops.install()
    stops.raise_pending()  # nothing asked for yet
    try:
        os.kill(os.getpid(), sig)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a call: the handler runs by its return
    except BaseException:  # what pyarrow does with it
        pass
    assert stops.pending() is raised
    with pytest.raises(raised):
        stops.raise_pending()
    stops.install()  # a new command forgets it
    assert stops.pending() is None


def test_a_process_started_ignoring_sigint_keeps_ignoring_it(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job starts
    stops.install()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
