"""What the person at the terminal sees: the tables on stdout, and progress, notes and warnings on
stderr, so that stdout holds the machine line and the tables only. A terminal that cannot show a
character shows '?', and a closed or full stdout is said once, never a traceback."""
import contextlib
import os
import sys

_stdout = {"broken": None}  # why stdout stopped taking lines, once it has
WARNED = []  # this run's warnings, in order: saved with its results


def plain_streams():
    """stdout and stderr replace what the terminal's encoding cannot show (an ASCII terminal
    shows '?' for a '±'); the saved files keep every character (UTF-8)."""
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


def plural(n, word):
    """The word as it goes after the number n: "run" after 1, "runs" after 5."""
    return word if n == 1 else word + "s"


def warn(message):
    WARNED.append(message)
    note(f"warning: {message}")


def note(message):
    """A line for the person at the terminal (stderr): never part of the tables."""
    progress("")
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr, flush=True)


def progress(message):
    """One updating status line on stderr, only when stderr is a terminal."""
    if sys.stderr.isatty():
        with contextlib.suppress(OSError):
            sys.stderr.write("\r\033[K" + message)
            sys.stderr.flush()
