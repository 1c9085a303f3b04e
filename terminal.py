"""What the person at the terminal sees besides the tables: progress, notes and warnings, all on
stderr, so that stdout holds the machine line and the tables only."""
import sys


def plural(n, word):
    """The word as it goes after the number n: "run" after 1, "runs" after 5."""
    return word if n == 1 else word + "s"


def warn(message):
    note(f"warning: {message}")


def note(message):
    """A line for the person at the terminal (stderr): never part of the tables."""
    progress("")
    print(message, file=sys.stderr, flush=True)


def progress(message):
    """One updating status line on stderr, only when stderr is a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + message)
        sys.stderr.flush()
