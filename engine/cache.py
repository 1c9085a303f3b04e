"""The compiled kernels (kernels.py) loaded once a process, and where Numba keeps their compiled
code: beside them where that can be written, else a folder of this user's alone (a cache file
runs code when loaded: no one else may plant one); a cache file Numba cannot read is removed, so
that the next run compiles afresh. compiled.py checks and drives them."""
import contextlib
import functools
import os
import stat
import tempfile
import threading
import traceback

from harness.terminal import printable

HERE = os.path.dirname(os.path.abspath(__file__))  # where kernels.py is, whose
#   __pycache__ Numba keeps their compiled code in, as Python keeps bytecode, where it can
MODULE = "kernels"  # the start of every cache file name of the kernels


@functools.lru_cache(maxsize=None)
def numba():
    """Numba, imported on first use (available() says whether it loads)."""
    import numba as nb
    return nb


HELD = threading.local()  # .threads: the count set_threads() last gave Numba on this thread


def set_threads(n):
    """Numba's threads for the kernels on this thread: n of them (at most what it started
    with)."""
    HELD.threads = min(n, numba().config.NUMBA_NUM_THREADS)
    numba().set_num_threads(HELD.threads)


def threads_now():
    """Numba's threads for the kernels on this thread, as set_threads() last set them, else
    as Numba has them (asking Numba costs half a microsecond, 120 times in one user's typing
    step)."""
    return getattr(HELD, "threads", None) or numba().get_num_threads()


def words(e):
    """An exception in a few words on one line: its kind and its message's first line."""
    first = next((line for line in str(e).splitlines() if line.strip()), "")
    return printable(f"{type(e).__name__}: {first.strip()}" if first else type(e).__name__)[:200]


def from_cache(e):
    """Whether e was raised loading a kernel from Numba's cache (an index cut short, a file it
    cannot unpickle)."""
    return any(f.name == "load_overload" and f.filename.endswith(
        os.path.join("numba", "core", "caching.py")) for f in traceback.extract_tb(e.__traceback__))


def forget():
    """Remove the kernels' own cache files (MODULE.*.nbi and .nbc in their cache folder), so
    that the next run compiles them afresh; any other file stays."""
    folder = getattr(getattr(kernels()["norm"], "_cache", None), "cache_path", None)
    with contextlib.suppress(OSError, TypeError):
        for name in os.listdir(folder):
            if name.startswith(MODULE + ".") and name.endswith((".nbi", ".nbc")):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))


def keep_cache():
    """Give Numba a cache folder this process can write, before Numba is imported (it reads
    NUMBA_CACHE_DIR once): the __pycache__ beside the kernels where it can be written (Numba's
    own choice); else a folder of this user's, NUMBA_CACHE_DIR, in the user's cache folder or,
    where that cannot be written either, in the temp folder. One the user set is kept. Without
    any, Numba refuses the kernels, each of which asks to be cached."""
    if os.environ.get("NUMBA_CACHE_DIR") or writable(os.path.join(HERE, "__pycache__")):
        return
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for folder in (os.path.join(home, "prefill-vs-decode", "numba"), own_temp()):
        if folder and writable(folder):
            os.environ["NUMBA_CACHE_DIR"] = folder
            return


def writable(folder):
    """Whether a file can be made in folder (made if missing), as Numba tests a cache folder."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def own_temp():
    """A folder in the temp folder for this user alone, or None where the one there is not:
    whoever else could write in it could plant a cache file, which runs code when loaded."""
    uid = getattr(os, "getuid", lambda: None)()
    path = os.path.join(tempfile.gettempdir(), f"prefill-vs-decode-{uid}-numba")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    held = os.lstat(path)
    mine = uid is None or held.st_uid == uid
    return path if stat.S_ISDIR(held.st_mode) and mine and not held.st_mode & 0o022 else None


@functools.lru_cache(maxsize=None)
def kernels():
    """The kernels (kernels.py), imported once per process: {name: kernel}."""
    from engine import kernels as k
    return {name: getattr(k, name)
            for name in ("table", "tiles", "rows_tiled", "laid_out", "laid_outs", "vector",
                         "sides_by_side",
                         "attend", "attend_tasks", "question", "questions", "norm", "gelu",
                         "gelus", "SHAPES", "DOTTED", "PANELS", "ASKING", "LANES")}
