"""How a run ends on Ctrl-C (SIGINT) or a kill (SIGTERM): the same way at any moment, in one
line, with 128 + the signal's number; never with the results half saved."""
import contextlib
import os
import signal
import sys

STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class Stopped(Exception):
    """SIGINT or SIGTERM during a run; the run exits with 128 + the signal's number. held: the
    signal waited for a block of held_signals() to finish (the results were saved)."""

    def __init__(self, signum, held=False):
        super().__init__(STOPS[signum])
        self.signum, self.held = signum, held


def stop_quietly():
    """Until a run starts, SIGINT or SIGTERM end the script at once: nothing is measured or
    saved yet, so there is nothing to undo. Each script calls this first when run, never
    when imported."""
    def now(signum, frame):
        sys.stderr.write(f"{STOPS[signum]}: nothing saved, earlier results untouched\n")
        os._exit(128 + signum)
    for s in STOPS:
        signal.signal(s, now)


_held = None  # while results are being renamed into place: the signals that arrived meanwhile


def _stop(signum, frame):
    if _held is not None:
        _held.append(signum)
        return
    raise Stopped(signum)


@contextlib.contextmanager
def stoppable():
    """While a run measures and saves, SIGINT and SIGTERM raise Stopped, so that it unwinds."""
    previous = {s: signal.signal(s, _stop) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def held_signals():
    """SIGINT and SIGTERM wait until the block is done, then take effect."""
    global _held
    _held = []
    try:
        yield
    finally:
        pending, _held = _held, None
    if pending:
        raise Stopped(pending[0], held=True)
