"""Results folders: one run's files saved as one unit (under the folder's lock, through a
journal, never half written), and a folder read as its last whole save left it, changing
nothing in it. What a folder contains never reaches outside it."""
import contextlib
import json
import os
import secrets
import stat
import time

from harness import stopping
from harness.terminal import note, printable
from harness.keeping import held, schema
from harness.keeping.history import (HISTORY, discard, keep_earlier, keep_edited, say_kept,
                                     stale_pictures, trim)
from harness.keeping.signed import REPORT, edited, signed  # noqa: F401 (the folder's report)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the
#      checkout: the scripts
RESULTS = os.path.join(ROOT, "results")  # the default --out
REFERENCES = os.path.join(ROOT, "references")  # shipped: no run writes here
SCRIPTS = ("machine_speed", "two_phases", "cube_bug")  # a folder's results, in the post's order
SCHEMA_VERSION = 8  # the JSON layout; 4: one record per figure, and the sheets as printed;
#                    5: a row found by its keys alone, its printed name not among them; 6: each
#                    sample with its round and the share of the cores other work took; 7: each
#                    record says whether compare.py holds it against other machines, and the
#                    claims are judged once, as the run's records ("claims"); 8: the sheets a
#                    list, each naming itself and its sweep block's threads, and what a sweep's
#                    blocks saved besides in "blocks", never a thread count in a name
TEMP, JOURNAL, LOCK = ".tmp-", ".replacing.json", ".lock"  # a results folder's own files
NEW, NONBLOCK, plain_name = held.NEW, held.NONBLOCK, held.plain_name


def files(stem, data, text, pictures, quick):
    """{file name: text, bytes, or a function that writes the file it is given} of one
    result: <stem>.json, <stem>.txt and any pictures ({file name: bytes}). A quick run's names
    say .quick, so that it never replaces a full run's."""
    q = ".quick" if quick else ""
    out = {f"{stem}{q}.json": json.dumps(data, indent=1, allow_nan=False) + "\n",
           f"{stem}{q}.txt": "\n".join(text) + "\n"}
    for name, draw in pictures.items():
        base, ext = os.path.splitext(name)
        out[f"{base}{q}{ext}"] = draw
    return out


@contextlib.contextmanager
def locked(folder, shared=False):
    """Hold a results folder's lock (folder: a path, or a Held): one run saves into it at a time
    (exclusive), and readers (shared) wait for a save to finish. A reader never makes the lock
    file; where there is none, or the system has no such locks, nothing is held. A lock that is
    not a file is an error: saving without it could mix two runs' files."""
    d = held.of(folder)
    if d.kind(LOCK) not in (None, stat.S_IFREG):
        raise OSError(f"{d.at(LOCK)} is not a lock file")
    try:
        import fcntl
        fd = d.open(LOCK, os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT)
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
            note(f"waiting for another run to finish with {d}/")
            if not shared:
                fcntl.flock(fd, how)
            elif not waited(fd, how):  # a reader never waits for ever: a run may be stopped
                note(f"{d}/: another run has held it for {READER_WAIT_S} s; read as its "
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
    journal (folder: a path, or a Held). Raise ValueError unless every entry names a plain file
    of this folder and one of the temp files the suite makes: a journal must never move
    anything from or to elsewhere."""
    d = held.of(folder)
    if not d.exists(JOURNAL):
        return {}
    try:
        raw = d.read(JOURNAL, 1 << 16)
        if raw is None or len(raw) > 1 << 16:
            raise ValueError("is not a journal file")
        renames = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{d.at(JOURNAL)}: unreadable journal ({e}); left as it is") from None
    if not isinstance(renames, dict) or not all(
            plain_name(name) and plain_name(temp) and temp.startswith(TEMP)
            and not name.startswith(".") for name, temp in renames.items()):
        raise ValueError(f"{d.at(JOURNAL)}: a journal entry names something other than a file "
                         f"of this folder; refused and left as it is (remove it to save here)")
    for temp in renames.values():  # what a rename would move must be a file the suite made
        if d.kind(temp) not in (None, stat.S_IFREG):
            raise ValueError(f"{d.at(JOURNAL)}: a journal entry names {printable(temp)}, which "
                             f"is not a file; refused and left as it is (remove the journal to "
                             f"save here)")
    return renames


def finish_replacing(d):
    """Under the lock, in the held folder d: finish the renames of a save that was killed
    halfway (its journal lists them, and every file it names was whole before the first
    rename), then remove stray temps."""
    stuck = []
    for name, temp in journal(d).items():
        try:
            d.replace(temp, name)
        except FileNotFoundError:
            pass
        except OSError as e:  # (a folder put where a file was: it never will be finished)
            stuck.append(f"{printable(name)}: {e.strerror or e}")
    if stuck:  # said once: the journal goes, and no later save is held up by it
        note(f"{d.at(JOURNAL)}: a save cut short could not be finished ({'; '.join(stuck)}); "
             f"the files are as it left them, and its journal is removed")
    with contextlib.suppress(FileNotFoundError):
        d.unlink(JOURNAL)
    for name in d.names():
        if name.startswith(TEMP):
            with contextlib.suppress(OSError):
                d.unlink(name)


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


def _write_temp(d, name, content, identities=None):
    """content (text, bytes, or a function that writes into the binary file it is given) in a new
    temp file of the held folder d, written through the descriptor that made it, never
    reopened by its name (which another process could have swapped for a link meanwhile): -> its
    name. identities: a dict to keep the new file's (device, inode) in, under its name, to check
    before it is renamed."""
    while True:  # made as open() makes a file, with the umask's permissions (mkstemp's are 0600)
        temp = TEMP + secrets.token_hex(8) + os.path.splitext(name)[1]
        with contextlib.suppress(FileExistsError):
            fd = d.open(temp, NEW)
            break
    with os.fdopen(fd, "wb") as f:
        if identities is not None:
            st = os.fstat(fd)
            identities[temp] = (st.st_dev, st.st_ino)
        made(d, temp)
        if callable(content):  # (the report reads the folder it is saved into: held, here)
            content(f, d) if name == REPORT else content(f)
        elif isinstance(content, bytes):
            f.write(content)
        else:
            f.write(content.encode("utf-8", errors="surrogateescape"))
        f.flush()
        os.fsync(f.fileno())
    return temp


def made(d, temp):
    """A temp file is made (and open): where a test swaps it for a link, as a race could."""


def moved(d, name, identity):
    """After a rename: what now holds the name must be the file this save wrote; anything
    swapped in at the last instant is taken out again, and the save fails."""
    try:
        unchanged(d, name, identity)
    except OSError:
        with contextlib.suppress(OSError):
            d.unlink(name)  # a link is removed, never followed
        raise


def unchanged(d, temp, identity):
    """Raise OSError unless the temp file is still the regular file this save made (another
    process may have swapped a link, or another file, in its place): never renamed into the
    result."""
    st = d.lstat(temp)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != identity:
        raise OSError(f"{d.at(temp)} was replaced by something else while this run wrote it; "
                      f"nothing is saved through it")


def replace_together(folder, files, stem=None, busy=(), the_result=True):
    """Write {name: content} into folder (a path, whose last step must be a real folder, or a
    Held) as one unit: whatever happens (a full disk, Ctrl-C, a kill), every file is either new
    or as it was, all of them. Every file is written to a temp file first; then a journal lists
    the renames, the renames follow, and the journal goes. A save killed during the renames is
    finished by the next one, as the journal says; SIGINT and SIGTERM wait for the renames.
    stem: the result's name, whose earlier result is first kept in history/ (see keep_earlier),
    and that copy is removed again unless the renames begin; busy: what else was measuring while
    this run did. the_result: these files are the run's result, so that a signal from then on
    says saved. Every file is found within the folder as it was opened here: a link swapped in
    for it, or for a folder above it, leads nothing elsewhere."""
    with contextlib.ExitStack() as stack:
        d = folder if isinstance(folder, held.Held) else stack.enter_context(held.opened(folder))
        stack.enter_context(locked(d))
        replaced(d, files, stem, busy, the_result)


def replaced(d, files, stem, busy, the_result):
    """replace_together()'s work, in the held folder d, under its lock."""
    finish_replacing(d)
    for name in files:  # every target one a rename can replace (a file, or a link, replaced
        if d.kind(name) == stat.S_IFDIR:  # itself), before the first thing is replaced: a
            raise ValueError(f"{d.at(name)} is a folder, not a file: nothing is saved (remove "
                             f"it to save here)")  # save is all or nothing
    mine = files.get(f"{stem}.json") if stem else None
    other = other_kind(d, bool(json.loads(mine).get("predicted")), stem) \
        if isinstance(mine, str) else ""
    if other:  # (checked at the start, and again here: another run may have saved since)
        raise ValueError(f"{d.at(stem + '.json')} would stand beside {other} saved while this "
                         f"ran; their report would mix the two (choose another --label)")
    stale = stale_pictures(d, stem, files) if stem else []
    kept = keep_earlier(d, files, stem) if stem else None
    temps, identities, replacing, theirs = {}, {}, False, None
    try:
        theirs = keep_edited(d, files)
        for name, content in files.items():
            temps[name] = _write_temp(d, name, content, identities)
        for temp in temps.values():
            unchanged(d, temp, identities[temp])
        journal = _write_temp(d, JOURNAL, json.dumps(temps), identities)
        unchanged(d, journal, identities[journal])
        with stopping.held_signals():  # the renames and history's trimming: all or none
            d.replace(journal, JOURNAL)
            replacing = True  # from here on the renames are done, by this save or the next
            for name, temp in temps.items():
                d.replace(temp, name)
                moved(d, name, identities[temp])
            d.unlink(JOURNAL)
            for name in stale if kept else ():  # kept in history, with their result
                with contextlib.suppress(OSError):
                    d.unlink(name)
            if kept:
                trim(d, stem)
            if the_result:
                stopping.saved()
    except BaseException:
        if kept and kept[2] and not replacing:  # the earlier result is still in place: the
            discard(d, os.path.basename(kept[0]))  # copy this save made is for nothing
        if theirs and not replacing:
            discard(d, os.path.basename(theirs))
        raise
    finally:
        finish_replacing(d)  # nothing half done is left: temps of a failed save go
    if kept:
        say_kept(stem, *kept[:2], busy)
    if theirs:
        note(f"report.md had been edited since the suite wrote it: your copy is kept in "
             f"{theirs}/, and report.md is made anew from the results")


def other_kind(d, predicting, but=None):
    """The results of the other kind the held folder d holds ('a measured two_phases.json'),
    where a prediction would stand among measurements or a measurement among predictions: their
    report and history would mix the two; else ''. but: a script whose result is left out (the
    one a save replaces)."""
    for script in SCRIPTS:
        if script == but:
            continue
        try:
            raw = d.read(script + ".json", schema.FILE_MAX)
            data = schema.parse(raw, script) if raw is not None else None
        except (ValueError, OSError):
            continue  # none, or one the save's own checks refuse
        if data is not None and bool(data.get("predicted")) != predicting:
            return f"a {'measured' if predicting else 'predicted'} {script}.json"
    return ""


def hold(out):
    """--out as a run starts: its deepest folder that is there, held open (a link the user
    named followed, here and once), and the steps below it not made yet: -> (Held, [names]).
    A save finds --out from these alone (save(out=)): a link swapped in for it, or for a folder
    above it, while the run measures leads nothing elsewhere."""
    path, steps = os.path.abspath(out), []
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path, step = os.path.split(path)
        steps.insert(0, step)
    fd = os.open(path, os.O_RDONLY | held.DIRECTORY) if held.BY_DESCRIPTOR else None
    return held.Held(fd, path), steps


@contextlib.contextmanager
def out_folder(parent, out):
    """The folder the label folder is made in, held open: out (hold()'s), its steps below the
    held folder made where missing, each a real folder, never a link; or, where not given,
    parent's path, made if need be (a link the user put there followed)."""
    if out is None:
        os.makedirs(parent or os.curdir, exist_ok=True)
        with held.opened(parent or os.curdir, follow=True) as above:
            yield above
        return
    with contextlib.ExitStack() as stack:
        above = out[0]
        for step in out[1]:
            with contextlib.suppress(FileExistsError):
                above.mkdir(step)
            above = stack.enter_context(held.opened(step, within=above))
        yield above


def save(folder, files, stem=None, busy=(), out=None):
    """Write files into folder as one unit; on failure say so on stderr and return 1 (the tables
    were printed; earlier results stay as they were). stem: the result's name, whose earlier
    result is kept in history/ first; busy: what else was measuring while this run did; out:
    --out as hold() held it when the run started, where it did. The folder is made if need be
    and checked again here, at the save: a link put in its place while the run measured is
    refused, never written through (the folder that holds it, --out, is the user's to choose, a
    link to elsewhere included, as it was when the run started)."""
    parent, name = os.path.split(os.path.normpath(folder))
    made = False
    try:
        with out_folder(parent, out) as above:
            with contextlib.suppress(FileExistsError):
                above.mkdir(name)
                made = True
            try:
                with held.opened(name, within=above) as d:
                    replace_together(d, files, stem, busy)
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    if made:  # this run made it, for nothing
                        with held.opened(name, within=above) as d:
                            if d.names() in ([], [LOCK]):
                                with contextlib.suppress(FileNotFoundError):
                                    d.unlink(LOCK)
                                above.rmdir(name)
                raise
    except (OSError, ValueError) as e:
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
