"""How a run ends on Ctrl-C (SIGINT), a kill (SIGTERM) or a closed terminal (SIGHUP): the same
way at any moment from its first line to its exit, in one true line, with 128 + the signal's
number; never with the results half saved. Its worker processes say nothing of it, and end
with it (worker())."""
import contextlib
import os
import signal
import sys

STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated",
         **({signal.SIGHUP: "hung up"} if hasattr(signal, "SIGHUP") else {})}  # the terminal
#   closed: a stop like the others, never a save cut short
NOTHING_SAVED = "nothing saved, earlier results untouched"
SAVED = "the results were saved just before"
_now = {"outcome": NOTHING_SAVED, "stopping": False, "held": None, "pending": None,
        "parent": None}
#       the process's one state; pending: a signal whose Stopped has not reached the run yet;
#       parent: a worker process's run (its parent's pid), None in a run itself
PR_SET_PDEATHSIG = 1  # Linux's prctl option (linux/prctl.h): a signal for when the parent dies
ORPHANED = 129  # a worker's exit once its run is gone: as a hang-up's (128 + SIGHUP's 1)
RUN = "PREFILL_VS_DECODE_RUN"  # the environment variable a run gives its workers: its own pid


class Stopped(BaseException):
    """SIGINT or SIGTERM during a run; the run exits with 128 + the signal's number. A stop is
    not an error: like KeyboardInterrupt, no `except Exception`, the suite's or a library's,
    can swallow it (and with it every later signal, as the first one sets "stopping")."""

    def __init__(self, signum):
        super().__init__(STOPS[signum])
        self.signum = signum


def cut_short_words(stopped):
    """How a run's measuring was cut short, from the mark it saved ("stopped": a signal's number,
    or a worker process's end in words): 'interrupted while adding processes'; a mark of any
    other kind, as a file may hold, 'stopped while adding processes'."""
    if isinstance(stopped, str):
        return stopped
    number = isinstance(stopped, int) and not isinstance(stopped, bool)
    return f"{STOPS.get(stopped, 'stopped') if number else 'stopped'} while adding processes"


def stop_quietly():
    """Outside a run (while the script loads, after it is done), SIGINT or SIGTERM end the
    script at once with the line that is true then. Each script calls this first when run,
    never when imported; a standard stream it was started without goes to the null device
    first (terminal.open_streams). A run's worker process (--worker) says nothing: worker()."""
    from harness.terminal import open_streams
    open_streams()
    if "--worker" in sys.argv[1:]:  # as processes.spawn starts it: quiet from its first line on
        worker()
        return
    for s in STOPS:
        signal.signal(s, _at_once)


def worker():
    """A run's worker process (worker.serve) never speaks of a stop: the run that started it
    says what happened, once. The terminal's signals reach the run alone (it starts each worker
    in a session of its own, and ends it when the run stops); a signal aimed at the worker
    itself ends it as the signal's default does, so that the run reads which one it was. It
    ends with its run: on Linux the kernel kills it the moment its parent dies; elsewhere,
    check() sees its parent gone at its next visit."""
    for s in STOPS:
        signal.signal(s, signal.SIG_DFL)
    given = os.environ.get(RUN, "")
    _now["parent"] = int(given) if given.isdigit() else os.getppid()  # the run's own pid: a
    #   run killed before this line leaves its worker to another parent, which getppid() would
    #   name as if it were the run
    if sys.platform.startswith("linux"):
        import ctypes
        with contextlib.suppress(OSError, AttributeError):  # no C library to ask: check() alone
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0,
                                                    0, 0)
    check()  # (its run gone before the kernel was asked to end it with it: it ends now)


def _at_once(signum, frame):
    if not _now["stopping"]:  # a second signal while the first one ends the run: no more lines
        _now["stopping"] = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(f"{STOPS[signum]}: {_now['outcome']}\n")
            sys.stderr.flush()
        os._exit(128 + signum)


def _unwind(signum, frame):
    if _now["held"] is not None:
        _now["held"].append(signum)
    elif not _now["stopping"]:
        _now["stopping"], _now["pending"] = True, signum
        raise Stopped(signum)


def check():
    """Raise the Stopped of a signal that came, where it did not reach the run: Python runs a
    signal's handler wherever the main thread is, and a Stopped raised inside a finalizer or a
    library's callback is lost there ('Exception ignored in ...'). A run measuring calls this
    between its visits; there a worker process whose run has ended (its parent gone: the pid
    it has as its parent is another's now) ends without a word, no one being left to read it."""
    if _now["parent"] is not None and os.getppid() != _now["parent"]:
        os._exit(ORPHANED)
    if _now["pending"] is not None:
        raise Stopped(_now["pending"])


def stopped():
    """The run has unwound from the signal: nothing pending."""
    _now["pending"] = None


def begin():
    """A new run: nothing saved yet, no signal yet."""
    _now.update(outcome=NOTHING_SAVED, stopping=False, held=None, pending=None)


def outcome():
    """What a run that stops now has done: NOTHING_SAVED, or SAVED once its results are."""
    return _now["outcome"]


@contextlib.contextmanager
def stoppable():
    """While a run measures and saves, SIGINT and SIGTERM raise Stopped, so that it unwinds."""
    previous = {s: signal.signal(s, _unwind) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def held_signals():
    """SIGINT and SIGTERM wait until the block is done, then take effect. saved() inside it
    marks the results as saved, so that a signal from then on says so."""
    _now["held"] = []
    try:
        yield
    finally:
        pending, _now["held"] = _now["held"], None
    if pending and not _now["stopping"]:
        _now["stopping"] = True
        raise Stopped(pending[0])


def saved():
    _now["outcome"] = SAVED


def leave(code):
    """Exit with code now: what is printed is flushed, and no signal can come between the
    run's last line and the exit (os._exit skips the interpreter's shutdown)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # None: started closed
            stream.flush()
    os._exit(code)
