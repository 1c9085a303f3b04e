"""What the person at the terminal sees: the tables on stdout, and progress, notes and warnings on
stderr, so that stdout holds the machine line and the tables only. A terminal that cannot show a
character shows '?', and a closed or full stdout is said once, never a traceback."""
import contextlib
import math
import os
import sys
import time

_stdout = {"broken": None}  # why stdout stopped taking lines, once it has
_stderr = {"broken": False}  # whether stderr stopped taking lines (closed, full): it says no more
_steps = {"weights": [], "done": 0, "start": 0.0}  # a long run's rows, for its progress line
_keeping = []  # the lists that keep the warnings said meanwhile (see kept())
_logged = {"at": None}  # when progress last wrote a line where stderr is a file or a pipe
LOG_EVERY_S = 5.0  # where stderr is no terminal, a progress line at most this often: a log
#                    grows by a line every few seconds, never by every step


def open_streams():
    """A standard stream the script was started without (`2>&-`) goes to the null device: no
    file the run opens later can take its number and receive what is written there, and the
    notes a run says go nowhere instead of failing it."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))


def plain_streams():
    """stdout and stderr replace what the terminal's encoding cannot show (an ASCII terminal
    shows '?' for a '±'); the saved files keep every character (UTF-8)."""
    open_streams()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="replace")


def show(text):
    """A line of the tables on stdout. If stdout is closed (`| head`) or full, say so once on
    stderr and go on: the run still saves what it measures."""
    if _stdout["broken"] is not None:
        return
    progress("")
    try:
        print(text, flush=True)
    except OSError as e:
        _stdout["broken"] = e
        with contextlib.suppress(OSError):  # later writes, and the exit's flush, go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        note(f"stdout took no more ({e.strerror or e}): the rest is not printed")


def printable(text):
    """Text read from a file, as the terminal may show it: every control or format character
    (an escape, a newline, a bidi mark) as '?', so that a results file cannot steer the screen."""
    import unicodedata
    return "".join("?" if unicodedata.category(c)[0] == "C" else c for c in str(text))


def quoted(text, most=40):
    """A value as a message repeats it: on one line, quoted, and cut short if long."""
    text = printable(text)
    return repr(text if len(text) <= most else text[:most - 3] + "...")


def plural(n, word):
    """The word as it goes after the number n: "run" after 1, "runs" after 5, "processes"."""
    return word if n == 1 else word + ("es" if word.endswith("s") else "s")


def warn(message):
    """A warning on stderr, kept by every kept() it is said within."""
    for warnings in _keeping:
        warnings.append(message)
    note(f"warning: {message}")


@contextlib.contextmanager
def kept():
    """Keep the warnings said inside, in order, as a run saves them with its results: -> the
    list they go into, handed to the caller and to nothing else."""
    warnings = []
    _keeping.append(warnings)
    try:
        yield warnings
    finally:
        _keeping.remove(warnings)


def note(message):
    """A line for the person at the terminal (stderr): never part of the tables. A stderr that
    takes no more (a closed pipe, a full disk) ends the notes, never the run."""
    progress("")
    if _stderr["broken"]:
        return
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        stderr_gone()


def stderr_gone():
    """stderr took no more: what would go there (and the exit's flush) goes nowhere."""
    _stderr["broken"] = True
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)


def arrived(export):
    """Whether what stdout was given arrived whole, where it is the run's deliverable (an
    export, FMT): a cut export (a full disk, a closed pipe) is said once, and the run fails.
    The tables on a terminal or into `| head` arrive as far as they are read: always True."""
    if not export or _stdout["broken"] is None:
        return True
    why = _stdout["broken"].strerror or _stdout["broken"]
    note(f"error: the {export} export did not arrive whole ({why}): what stdout holds is cut "
         f"short")
    return False


def progress(message):
    """Where the run is: on a terminal one updating status line on stderr; where stderr is a
    file or a pipe (a log), a plain line, the first at once and then at most every LOG_EVERY_S
    seconds. In a run of counted steps (see steps), led by the step, the time so far and an
    estimate of the time left."""
    if _stderr["broken"] or sys.stderr is None or not message and not _tty():
        return
    try:
        if _tty():
            sys.stderr.write("\r\033[K" + (where() + message if message else ""))
        elif (now := time.monotonic()) - (_logged["at"] or -math.inf) >= LOG_EVERY_S:
            _logged["at"] = now
            sys.stderr.write(printable(where() + message) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        stderr_gone()


def _tty():
    try:
        return sys.stderr.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def steps(weights):
    """Count a run's steps from here: weights, each step's expected share of the time (its
    rows' limits, say); an estimate is only as good as they are."""
    _steps.update(weights=list(weights), done=0, start=time.perf_counter())


def step():
    """One more step done."""
    _steps["done"] += 1


def where(now=None):
    """'row 3 of 17, 0:42 in, about 1:10 left: ', or '' outside a run of counted steps."""
    weights, done = _steps["weights"], _steps["done"]
    if not weights or done >= len(weights):
        return ""
    took = (time.perf_counter() if now is None else now) - _steps["start"]
    left = took * sum(weights[done:]) / sum(weights[:done]) if done and sum(weights[:done]) \
        else None
    return (f"row {done + 1} of {len(weights)}, {clock(took)} in"
            + (f", about {clock(left)} left" if left is not None else "") + ": ")


def clock(seconds):
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"
