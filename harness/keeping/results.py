"""Results folders: one run's files saved as one unit (under the folder's lock, through a
journal, never half written), and a folder read as its last whole save left it, changing
nothing in it. What a folder contains never reaches outside it."""
import contextlib
import datetime
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
import time

from harness import stopping
from harness.terminal import note, printable, warn
from harness.keeping import schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the
#      checkout: the scripts
RESULTS = os.path.join(ROOT, "results")  # the default --out
REFERENCES = os.path.join(ROOT, "references")  # shipped: no run writes here
SCRIPTS = ("machine_speed", "two_phases", "cube_bug")  # a folder's results, in the post's order
SCHEMA_VERSION = 7  # the JSON layout; 4: one record per figure, and the sheets as printed;
#                    5: a row found by its keys alone, its printed name not among them; 6: each
#                    sample with its round and the share of the cores other work took; 7: each
#                    record says whether compare.py holds it against other machines, and the
#                    claims are judged once, as the run's records ("claims")
TEMP, JOURNAL, LOCK = ".tmp-", ".replacing.json", ".lock"  # a results folder's own files
NOFOLLOW, NONBLOCK = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_NONBLOCK", 0)  # POSIX's
NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW  # a new file: never one already there


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
        fd = os.open(path, NOFOLLOW | (os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT),
                     0o666)
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
            if not shared:
                fcntl.flock(fd, how)
            elif not waited(fd, how):  # a reader never waits for ever: a run may be stopped
                note(f"{folder}/: another run has held it for {READER_WAIT_S} s; read as its "
                     f"last whole save left it")
        yield
    finally:
        os.close(fd)


READER_WAIT_S = 10  # a reader waits this long for a save under way (a save takes well under 1 s)


def waited(fd, how):
    """Take the lock, trying for READER_WAIT_S at most: -> whether it was taken."""
    import fcntl
    end = time.monotonic() + READER_WAIT_S
    while time.monotonic() < end:
        time.sleep(0.05)
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            continue
    return False


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
    for temp in renames.values():  # what a rename would move must be a file the suite made
        there = os.path.join(folder, temp)
        if os.path.lexists(there) and not stat.S_ISREG(os.lstat(there).st_mode):
            raise ValueError(f"{path}: a journal entry names {printable(temp)}, which is not a "
                             f"file; refused and left as it is (remove the journal to save here)")
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
                   f"({', '.join(printable(n) for n in sorted(pending))})" if pending else None)


def _write_temp(folder, name, content, identities=None):
    """content (text, or a function that writes into the binary file it is given) in a new
    temp file, written through the descriptor that made it, never reopened by its name (which
    another process could have swapped for a link meanwhile): -> its name. identities: a dict
    to keep the new file's (device, inode) in, under its name, to check before it is renamed."""
    while True:  # made as open() makes a file, with the umask's permissions (mkstemp's are 0600)
        path = os.path.join(folder, TEMP + secrets.token_hex(8) + os.path.splitext(name)[1])
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, NEW, 0o666)
            break
    with os.fdopen(fd, "wb") as f:
        if identities is not None:
            st = os.fstat(fd)
            identities[os.path.basename(path)] = (st.st_dev, st.st_ino)
        made(path)
        if callable(content):
            content(f)
        else:
            f.write(content.encode("utf-8", errors="surrogateescape"))
        f.flush()
        os.fsync(f.fileno())
    return os.path.basename(path)


def made(path):
    """A temp file is made (and open): where a test swaps it for a link, as a race could."""


def moved(folder, name, identity):
    """After a rename: what now holds the name must be the file this save wrote; anything
    swapped in at the last instant is taken out again, and the save fails."""
    try:
        unchanged(folder, name, identity)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, name))  # a link is removed, never followed
        raise


def unchanged(folder, temp, identity):
    """Raise OSError unless the temp file is still the regular file this save made (another
    process may have swapped a link, or another file, in its place): never renamed into the
    result."""
    st = os.lstat(os.path.join(folder, temp))
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != identity:
        raise OSError(f"{os.path.join(folder, temp)} was replaced by something else while "
                      f"this run wrote it; nothing is saved through it")


# ---- the report: a file the suite writes and a user may edit; an edited one is kept

REPORT = "report.md"  # the folder's report, made anew from its results by every save
SIGNATURE = "<!-- made by the suite: sha256 {} -->\n"  # its last line: the digest of the rest


def signed(text):
    """The report's text, with a last line that holds the digest of the rest: an edit anywhere
    changes one without the other (edited())."""
    return text + SIGNATURE.format(hashlib.sha256(text.encode("utf-8")).hexdigest())


def edited(path):
    """Whether the regular file at path is not what the suite last wrote there: its last line
    is not the digest of the rest (an edit; or a report of a version that signed none). False
    where there is no regular file (a link is never read)."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return False
            raw = f.read(schema.FILE_MAX + 1)
    except OSError:
        return False
    text = raw.decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    return last + "\n" != SIGNATURE.format(hashlib.sha256((body + "\n").encode(
        "utf-8")).hexdigest())


def keep_edited(folder, files):
    """A copy of the folder's report in a new folder of history/ where a user edited it and this
    save replaces it (a report.<date>/, never trimmed: it is the user's): -> that folder, or
    None where there is nothing of theirs to keep."""
    if REPORT not in files or not edited(os.path.join(folder, REPORT)):
        return None
    history = os.path.join(folder, HISTORY)
    with contextlib.suppress(FileExistsError):
        os.mkdir(history)
    if not stat.S_ISDIR(os.lstat(history).st_mode):
        raise ValueError(f"{history} is a link or not a folder, so the edited report cannot be "
                         f"kept there; remove it to save here")
    when = stamp(time.strftime("%Y-%m-%dT%H-%M-%S"))
    keep = new_entry(history, f"{REPORT.split('.')[0]}.{when}")
    try:
        copy_regular(os.path.join(folder, REPORT), keep)
    except BaseException:
        discard(keep)
        raise
    return keep


def replace_together(folder, files, stem=None, busy=(), the_result=True):
    """Write {name: content} into folder as one unit: whatever happens (a full disk, Ctrl-C, a
    kill), every file is either new or as it was, all of them. Every file is written to a temp
    file first; then a journal lists the renames, the renames follow, and the journal goes. A save
    killed during the renames is finished by the next one, as the journal says; SIGINT and
    SIGTERM wait for the renames. stem: the result's name, whose earlier result is first kept in
    history/ (see keep_earlier), and that copy is removed again unless the renames begin; busy:
    what else was measuring while this run did. the_result: these files are the run's result,
    so that a signal from then on says saved."""
    with locked(folder):
        finish_replacing(folder)
        stale = stale_pictures(folder, stem, files) if stem else []
        kept = keep_earlier(folder, files, stem) if stem else None
        temps, identities, replacing, theirs = {}, {}, False, None
        try:
            theirs = keep_edited(folder, files)
            for name, content in files.items():
                temps[name] = _write_temp(folder, name, content, identities)
            for temp in temps.values():
                unchanged(folder, temp, identities[temp])
            journal = _write_temp(folder, JOURNAL, json.dumps(temps), identities)
            unchanged(folder, journal, identities[journal])
            with stopping.held_signals():  # the renames and history's trimming: all or none
                os.replace(os.path.join(folder, journal), os.path.join(folder, JOURNAL))
                replacing = True  # from here on the renames are done, by this save or the next
                for name, temp in temps.items():
                    os.replace(os.path.join(folder, temp), os.path.join(folder, name))
                    moved(folder, name, identities[temp])
                os.unlink(os.path.join(folder, JOURNAL))
                for name in stale if kept else ():  # kept in history, with their result
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, name))
                if kept:
                    trim(os.path.dirname(kept[0]), stem)
                if the_result:
                    stopping.saved()
        except BaseException:
            if kept and kept[2] and not replacing:  # the earlier result is still in place: the
                discard(kept[0])  #                      copy this save made is for nothing
            if theirs and not replacing:
                discard(theirs)
            raise
        finally:
            finish_replacing(folder)  # nothing half done is left: temps of a failed save go
    if kept:
        say_kept(stem, *kept[:2], busy)
    if theirs:
        note(f"report.md had been edited since the suite wrote it: your copy is kept in "
             f"{theirs}/, and report.md is made anew from the results")


def save(folder, files, stem=None, busy=()):
    """Write files into folder as one unit; on failure say so on stderr and return 1 (the tables
    were printed; earlier results stay as they were). stem: the result's name, whose earlier
    result is kept in history/ first; busy: what else was measuring while this run did."""
    made = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        replace_together(folder, files, stem, busy)
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):
            if made and os.listdir(folder) in ([], [LOCK]):  # this run made it, for nothing
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, LOCK))
                os.rmdir(folder)
        note(f"error: could not save results to {folder}/: {e}")
        return 1
    note(f"saved {', '.join(os.path.join(folder, name) for name in files)}")
    return 0


def refusal(folder, names=()):
    """Why a save into folder, as it is now, would be refused, in a few words, or None: its
    history/ is a link, not a folder, or one this user cannot use; an earlier result among
    `names` that cannot be read (so it could not be kept before being replaced); or its journal
    names something other than its files."""
    history = os.path.join(folder, HISTORY)
    if os.path.lexists(history) and not stat.S_ISDIR(os.lstat(history).st_mode):
        return f"{history} is a link or not a folder, so no earlier result can be kept there"
    if os.path.isdir(history) and not os.access(history, os.R_OK | os.W_OK | os.X_OK):
        return (f"{history} is on a read-only file system" if read_only(history) else
                f"{history} cannot be used by this user") + \
            ", so no earlier result can be kept there"
    for name in names:
        there = os.path.join(folder, name)
        if os.path.isfile(there) and not os.path.islink(there) and not os.access(there, os.R_OK):
            return (f"{there} cannot be read, so it could not be kept in history before this "
                    f"run replaced it; make it readable, or move it")
    try:
        journal(folder)
    except ValueError as e:
        return str(e)
    return None


def read_only(path):
    """Whether path is on a file system mounted read-only (where access() says "not this user's"
    too)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


# ---- history: each result's earlier runs, in folders of their own, the newest KEPT of them

HISTORY, KEPT = "history", 10
STAMP = r"(\d[A-Za-z0-9+-]{0,39}|undated)"  # an entry's date: ASCII, bounded, no dot
COPIES = 100  # entries of one date at most: <stem>.<stamp>, then .2 to .100


def keep_earlier(folder, files, stem):
    """Copy the result that `files` replace into a new folder of history/, named for its date:
    -> (that folder, the earlier result's machine facts, whether this save made it: a save
    stopped before its renames made it already), or None if there is none: no
    regular <stem>.json (a link is not followed). history/ must be a real folder, never a
    link; only regular files are copied, and into files this makes."""
    facts = earlier_facts(os.path.join(folder, stem + ".json"))
    if facts is None:
        return None
    history = os.path.join(folder, HISTORY)
    with contextlib.suppress(FileExistsError):
        os.mkdir(history)
    if not stat.S_ISDIR(os.lstat(history).st_mode):
        raise ValueError(f"{history} is a link or not a folder, so the earlier result cannot "
                         f"be kept there; remove it to save here")
    newest = (entries(history, stem) or [None])[-1]
    if newest and same_file(os.path.join(folder, stem + ".json"),
                            os.path.join(newest, stem + ".json")):
        return newest, facts, False  # kept already, by a save stopped before its renames
    keep = new_entry(history, f"{stem}.{stamp(facts.get('date'))}")
    try:
        for name in [*files, *stale_pictures(folder, stem, files)]:
            copy_regular(os.path.join(folder, name), keep)
    except BaseException:
        discard(keep)
        raise
    return keep, facts, True


def stale_pictures(folder, stem, files):
    """The pictures the earlier <stem> result drew (its JSON's "pictures") that this save does
    not draw again: kept in history with it, and taken out of the folder by the save, so that
    no picture stands beside a result that did not draw it. Plain .png names of regular files
    only: a name is never a path."""
    try:
        drawn = schema.load(os.path.join(folder, stem + ".json"), stem.split(".")[0]).get(
            "pictures") or []
    except (ValueError, OSError):
        return []
    return [n for n in drawn if isinstance(n, str) and n.endswith(".png") and n not in files
            and os.path.basename(n) == n and not n.startswith(".")
            and os.path.isfile(os.path.join(folder, n))
            and not os.path.islink(os.path.join(folder, n))]


def same_file(a, b):
    """Whether two regular files (never through a link) hold the same bytes."""
    try:
        with os.fdopen(os.open(a, os.O_RDONLY | NOFOLLOW | NONBLOCK), "rb") as f, \
                os.fdopen(os.open(b, os.O_RDONLY | NOFOLLOW | NONBLOCK), "rb") as g:
            return (stat.S_ISREG(os.fstat(f.fileno()).st_mode)
                    and stat.S_ISREG(os.fstat(g.fileno()).st_mode)
                    and f.read(schema.FILE_MAX + 1) == g.read(schema.FILE_MAX + 1))
    except OSError:
        return False


def earlier_facts(path):
    """The machine facts of the result at path: {} if they cannot be read; None if path is not
    a regular file (a link, say, which is never followed). Read only up to schema.FILE_MAX. A
    regular file that cannot be read is an error: it would be replaced without being kept."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK)
    except PermissionError:
        if os.path.isfile(path) and not os.path.islink(path):
            raise ValueError(f"{path} cannot be read, so it cannot be kept in history before "
                             f"this run replaces it; make it readable, or move it") from None
        return None
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with contextlib.suppress(ValueError, RecursionError, KeyError, TypeError):
            facts = json.loads(f.read(schema.FILE_MAX + 1))["machine"]
            return facts if isinstance(facts, dict) else {}
    return {}


def stamp(date):
    """A date as a history entry names it: ASCII letters, digits, '+' and '-', up to 40 of
    them, from a digit on; "undated" for anything else."""
    text = re.sub(r"[^A-Za-z0-9+-]", "-", str(date))[:40]
    return text if re.fullmatch(STAMP, text) else "undated"


def new_entry(history, name):
    """Make history/<name>, or <name>.2, .3, ... if that is taken: always a new folder, never one
    that was there (whatever that is: os.mkdir fails on a link too). -> its path"""
    for n in range(1, COPIES + 1):
        path = os.path.join(history, name + (f".{n}" if n > 1 else ""))
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
            return path
    raise FileExistsError(f"{history} holds {COPIES} entries named {name}; remove some")


def copy_regular(src, folder):
    """Copy src into folder, under its name, with its permission bits (a private file stays
    private), if it is a regular file; a link is never followed, and nothing is written
    through one: the copy is a new file."""
    try:
        if not stat.S_ISREG(os.lstat(src).st_mode):
            return
    except FileNotFoundError:
        return
    with os.fdopen(os.open(src, os.O_RDONLY | NOFOLLOW | NONBLOCK), "rb") as source:
        mode = os.fstat(source.fileno()).st_mode
        if not stat.S_ISREG(mode):  # changed since: a link now makes the open fail
            return
        with os.fdopen(os.open(os.path.join(folder, os.path.basename(src)), NEW, 0o600),
                       "wb") as copy:
            shutil.copyfileobj(source, copy)
            os.fchmod(copy.fileno(), stat.S_IMODE(mode) & 0o777)
            copy.flush()
            os.fsync(copy.fileno())


def entries(history, stem):
    """stem's entries in history/ that the suite made: real folders, not links, named
    <stem>.<stamp>[.n]; oldest first, by the time each run recorded in its result (a copy, `cp
    -r` of a folder, keeps it, where it sets every folder's ctime anew, in listing order); an
    entry whose result says no time comes before them all, by when it last changed (its
    ctime, which no one can set)."""
    named = re.compile(re.escape(stem) + r"\." + STAMP + r"(\.\d{1,3})?")
    found = []
    for name in filter(named.fullmatch, os.listdir(history)):
        with contextlib.suppress(OSError):
            path = os.path.join(history, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                when = recorded_at(os.path.join(path, stem + ".json"))
                found.append((when is not None, st.st_ctime if when is None else when, name))
    return [os.path.join(history, name) for *_, name in sorted(found)]


def recorded_at(path):
    """When the run of the result at path was made, as it recorded it (seconds since the epoch),
    or None where it cannot be read."""
    try:
        made = datetime.datetime.fromisoformat(str((earlier_facts(path) or {}).get("date")))
    except ValueError:  # unreadable, or no date in it
        return None
    return (made if made.tzinfo else made.astimezone()).timestamp()


def trim(history, stem):
    """Keep stem's newest KEPT entries in history/, and remove the older ones it made; nothing
    else there is ever removed. A failure to remove one leaves it for the next save."""
    with contextlib.suppress(OSError):
        for gone in entries(history, stem)[:-KEPT]:
            shutil.rmtree(gone, ignore_errors=True)  # never follows a link, nor enters one


def discard(keep):
    """Remove an entry made for nothing, and history/ too if that leaves it empty."""
    shutil.rmtree(keep, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(keep))


def say_kept(stem, keep, facts, busy):
    """Say where the earlier result went; warn if a busy machine's run replaced a quiet one's."""
    date = "".join(c if c.isprintable() else "?" for c in str(facts.get("date") or "undated")[:19])
    note(f"the earlier {stem} result, of {date}, is kept in {keep}/")
    if busy and not facts.get("busy"):
        warn(f"this run, made while the machine was busy ({'; '.join(busy)}), replaces a "
             f"{stem} result made on a quiet machine ({date}), kept in {keep}/")
