"""Results folders: one run's files saved as one unit (under the folder's lock, through a
journal, never half written), and a folder read as its last whole save left it, changing
nothing in it. What a folder contains never reaches outside it."""
import contextlib
import json
import os
import secrets
import shutil
import stat
import sys

from harness import stopping
from harness.terminal import note, warn

SCHEMA_VERSION = 3  # the JSON layout; 3: one samples layout for every table (samples_s)
TEMP, JOURNAL, LOCK = ".tmp-", ".replacing.json", ".lock"  # a results folder's own files


def files(stem, data, text, pictures, quick):
    """{file name: text, or a function that writes the file at the path it is given} of one
    result: <stem>.json, <stem>.txt and any pictures. A quick run's names say .quick, so that
    it never replaces a full run's."""
    q = ".quick" if quick else ""
    out = {f"{stem}{q}.json": json.dumps(data, indent=1, allow_nan=False) + "\n",
           f"{stem}{q}.txt": "\n".join(text) + "\n"}
    for name, draw in pictures.items():
        base, ext = os.path.splitext(name)
        out[f"{base}{q}{ext}"] = draw
    return out


@contextlib.contextmanager
def locked(folder, shared=False):
    """Hold a results folder's lock: one run saves into it at a time (exclusive), and readers
    (shared) wait for a save to finish. A reader never makes the lock file; where there is
    none, or the system has no such locks, nothing is held. A lock that is not a file is an
    error: saving without it could mix two runs' files."""
    path = os.path.join(folder, LOCK)
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise OSError(f"{path} is not a lock file")
    try:
        import fcntl
        fd = os.open(path, os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        if not shared:
            raise
        yield
        return
    try:
        how = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except BlockingIOError:
            note(f"waiting for another run to finish with {folder}/")
            fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)


def journal(folder):
    """The renames a killed save left undone, {file name: temp name}, or {} when there is no
    journal. Raise ValueError unless every entry names a plain file of this folder and one of
    the temp files the suite makes: a journal must never move anything from or to elsewhere."""
    path = os.path.join(folder, JOURNAL)
    if not os.path.lexists(path):
        return {}
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) > 1 << 16:
            raise ValueError("is not a journal file")
        with open(path, encoding="utf-8") as f:
            renames = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{path}: unreadable journal ({e}); left as it is") from None
    if not isinstance(renames, dict) or not all(
            plain_name(name) and plain_name(temp) and temp.startswith(TEMP)
            and not name.startswith(".") for name, temp in renames.items()):
        raise ValueError(f"{path}: a journal entry names something other than a file of "
                         f"this folder; refused and left as it is (remove it to save here)")
    return renames


def plain_name(name):
    """A file name in a folder: no folder part, nothing that climbs out, no NUL."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name
            and os.path.basename(name) == name and "/" not in name and os.sep not in name)


def finish_replacing(folder):
    """Under the lock: finish the renames of a save that was killed halfway (its journal lists
    them, and every file it names was whole before the first rename), then remove stray temps."""
    for name, temp in journal(folder).items():
        with contextlib.suppress(FileNotFoundError):
            os.replace(os.path.join(folder, temp), os.path.join(folder, name))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(folder, JOURNAL))
    for name in os.listdir(folder):
        if name.startswith(TEMP):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def as_saved(folder):
    """Where each file of a folder is to be read, changing nothing: {file name: path}. If a save
    was killed halfway, a file it had still to rename is read from its whole temp file, as the
    next save will finish it. -> ({name: path}, a note saying so, or None)"""
    paths = {name: os.path.join(folder, name) for name in os.listdir(folder)}
    try:
        pending = {name: temp for name, temp in journal(folder).items()
                   if os.path.lexists(os.path.join(folder, temp))}
    except ValueError as e:  # a journal that names anything else is not followed
        return paths, f"{e}; the files are read as they are"
    paths.update({name: os.path.join(folder, temp) for name, temp in pending.items()})
    return paths, (f"{folder}: a save was cut short; read as the next save will finish it "
                   f"({', '.join(sorted(pending))})" if pending else None)


def _write_temp(folder, name, content):
    """content (text, or a function that writes at a path) in a new temp file: -> its name."""
    while True:  # made as open() makes a file, with the umask's permissions (mkstemp's are 0600)
        path = os.path.join(folder, TEMP + secrets.token_hex(8) + os.path.splitext(name)[1])
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        if callable(content):
            content(path)
        else:
            f.write(content)
        f.flush()
        os.fsync(f.fileno())
    return os.path.basename(path)


def replace_together(folder, files, before=None, the_result=True):
    """Write {name: content} into folder as one unit: whatever happens (a full disk, Ctrl-C, a
    kill), every file is either new or as it was, all of them. Every file is written to a temp
    file first; then a journal lists the renames, the renames follow, and the journal goes. A save
    killed during the renames is finished by the next one, as the journal says; SIGINT and
    SIGTERM wait for the renames. before(), if given, runs first under the same lock.
    the_result: these files are the run's result, so that a signal from then on says saved."""
    with locked(folder):
        finish_replacing(folder)
        if before is not None:
            before()
        temps = {}
        try:
            for name, content in files.items():
                temps[name] = _write_temp(folder, name, content)
            journal = _write_temp(folder, JOURNAL, json.dumps(temps))
            with stopping.held_signals():
                os.replace(os.path.join(folder, journal), os.path.join(folder, JOURNAL))
                for name, temp in temps.items():
                    os.replace(os.path.join(folder, temp), os.path.join(folder, name))
                os.unlink(os.path.join(folder, JOURNAL))
                if the_result:
                    stopping.saved()
        finally:
            finish_replacing(folder)  # nothing half done is left: temps of a failed save go


def save(folder, files, stem=None, busy=()):
    """Write files into folder as one unit; on failure say so on stderr and return 1 (the tables
    were printed; earlier results stay as they were). stem: the result's name, whose earlier
    result is kept in history/ first; busy: what else was measuring while this run did."""
    made = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        replace_together(folder, files, stem and (lambda: keep_earlier(folder, files, stem,
                                                                        busy)))
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):
            if made and os.listdir(folder) in ([], [LOCK]):  # this run made it, for nothing
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, LOCK))
                os.rmdir(folder)
        print(f"error: could not save results to {folder}/: {e}", file=sys.stderr)
        return 1
    print(f"saved {', '.join(os.path.join(folder, name) for name in files)}", file=sys.stderr)
    return 0


HISTORY, KEPT = "history", 10  # each result's earlier runs, the newest KEPT of them


def keep_earlier(folder, files, stem, busy):
    """Copy the result that `files` replace into history/<stem>.<its date>/, keep the newest
    KEPT, and say so; and warn if a run on a busy machine replaces one on a quiet machine."""
    earlier = os.path.join(folder, stem + ".json")
    if not os.path.isfile(earlier):
        return
    try:
        with open(earlier, encoding="utf-8") as f:
            old = json.load(f)
        date, old_busy = str(old["machine"]["date"]), old["machine"].get("busy") or []
    except (OSError, ValueError, KeyError, TypeError):
        date, old_busy = "undated", []
    stamp = "".join(c if c.isalnum() or c in "-+" else "-" for c in date)
    keep = os.path.join(folder, HISTORY, f"{stem}.{stamp}")
    os.makedirs(keep, exist_ok=True)
    replace_together(keep, {name: (lambda path, src=os.path.join(folder, name):
                                   shutil.copyfile(src, path))
                            for name in files if os.path.isfile(os.path.join(folder, name))},
                     the_result=False)
    kept = sorted(d for d in os.listdir(os.path.join(folder, HISTORY))
                  if d.startswith(stem + ".") and d[len(stem) + 1:][:1].isdigit())
    for gone in kept[:-KEPT]:
        shutil.rmtree(os.path.join(folder, HISTORY, gone), ignore_errors=True)
    note(f"the earlier {stem} result, of {date[:19]}, is kept in {keep}/")
    if busy and not old_busy:
        warn(f"this run, made while the machine was busy ({'; '.join(busy)}), replaces a "
             f"{stem} result made on a quiet machine ({date[:19]}), kept in {keep}/")
