"""A results folder's history/: each result's earlier runs, in folders of their own (one an
earlier run, named for its date), the newest KEPT of them; an edited report kept there too.
Only regular files the suite made are copied or removed, never through a link."""
import contextlib
import datetime
import json
import os
import re
import shutil
import stat
import time

from harness.terminal import note, warn
from harness.keeping import held, schema
from harness.keeping.held import NEW, NONBLOCK, plain_name
from harness.keeping.signed import REPORT, edited


@contextlib.contextmanager
def history_of(d, what):
    """The held folder d's history/, made if need be, held open: -> Held. It must be a real
    folder, never a link (ValueError, saying `what` cannot be kept there)."""
    with contextlib.suppress(FileExistsError):
        d.mkdir(HISTORY)
    opening = held.opened(HISTORY, within=d)
    try:
        history = opening.__enter__()
    except OSError as e:  # (the opening's alone: an error of what is kept there, a full disk's,
        if d.kind(HISTORY) == stat.S_IFDIR:  # is its own, and says so)
            raise
        raise ValueError(f"{d.at(HISTORY)} is a link or not a folder, so {what} cannot be "
                         f"kept there; remove it to save here") from e
    with contextlib.ExitStack() as stack:
        stack.push(opening)
        yield history


# ---- history: each result's earlier runs, in folders of their own, the newest KEPT of them

HISTORY, KEPT = "history", 10
STAMP = r"(\d[A-Za-z0-9+-]{0,39}|undated)"  # an entry's date: ASCII, bounded, no dot
COPIES = 100  # entries of one date at most: <stem>.<stamp>, then .2 to .100


def keep_earlier(folder, files, stem):
    """Copy the result that `files` replace into a new folder of history/, named for its date
    (folder: a path, or a Held): -> (that folder's path, the earlier result's machine facts,
    whether this save made it: a save stopped before its renames made it already), or None if
    there is none: no regular <stem>.json (a link is not followed). history/ must be a real
    folder, never a link; only regular files are copied, and into files this makes."""
    d = held.of(folder)
    facts = earlier_facts(d, stem + ".json")
    if facts is None:
        return None
    with history_of(d, "the earlier result") as history:
        newest = (entries(history, stem) or [None])[-1]
        if newest and same_file(d, history, newest, stem + ".json"):
            return history.at(newest), facts, False  # kept already, by a save stopped before
            #                                          its renames
        keep = new_entry(history, f"{stem}.{stamp(facts.get('date'))}")
        try:
            with held.opened(keep, within=history) as entry:
                for name in [*files, *stale_pictures(d, stem, files)]:
                    copy_regular(d, name, entry)
        except BaseException:
            discard(d, keep)
            raise
        return history.at(keep), facts, True


def stale_pictures(d, stem, files):
    """The pictures the earlier <stem> result drew (its JSON's "pictures") that this save does
    not draw again: kept in history with it, and taken out of the held folder d by the save, so
    that no picture stands beside a result that did not draw it. Plain .png names of regular
    files only: a name is never a path."""
    try:
        raw = d.read(stem + ".json", schema.FILE_MAX)
        drawn = schema.parse(raw, stem.split(".")[0]).get("pictures") or [] if raw else []
    except (ValueError, OSError):
        return []
    return [n for n in drawn if isinstance(n, str) and n.endswith(".png") and n not in files
            and plain_name(n) and not n.startswith(".") and d.kind(n) == stat.S_IFREG]


def same_file(d, history, entry, name):
    """Whether the held folder d's file `name` and the one of the same name in history's entry
    are regular files (never through a link) holding the same bytes."""
    try:
        with held.opened(entry, within=history) as kept:
            ours, theirs = d.read(name, schema.FILE_MAX), kept.read(name, schema.FILE_MAX)
    except OSError:
        return False
    return ours is not None and ours == theirs


def earlier_facts(d, name):
    """The machine facts of the result `name` in the held folder d: {} if they cannot be read;
    None if it is not a regular file (a link, say, which is never followed). Read only up to
    schema.FILE_MAX. A regular file that cannot be read is an error: it would be replaced
    without being kept."""
    try:
        raw = d.read(name, schema.FILE_MAX)
    except PermissionError:
        raise ValueError(f"{d.at(name)} cannot be read, so it cannot be kept in history before "
                         f"this run replaces it; make it readable, or move it") from None
    if raw is None:
        return None
    with contextlib.suppress(ValueError, RecursionError, KeyError, TypeError):
        facts = json.loads(raw)["machine"]
        return facts if isinstance(facts, dict) else {}
    return {}


def stamp(date):
    """A date as a history entry names it: ASCII letters, digits, '+' and '-', up to 40 of
    them, from a digit on; "undated" for anything else."""
    text = re.sub(r"[^A-Za-z0-9+-]", "-", str(date))[:40]
    return text if re.fullmatch(STAMP, text) else "undated"


def new_entry(history, name):
    """Make <name> in the held history/, or <name>.2, .3, ... if that is taken: always a new
    folder, never one that was there (whatever that is: mkdir fails on a link too). -> its
    name"""
    for n in range(1, COPIES + 1):
        entry = name + (f".{n}" if n > 1 else "")
        with contextlib.suppress(FileExistsError):
            history.mkdir(entry)
            return entry
    raise FileExistsError(f"{history} holds {COPIES} entries named {name}; remove some")


def copy_regular(d, name, into):
    """Copy the held folder d's file `name` into the held folder `into`, under its name, with
    its permission bits (a private file stays private), if it is a regular file; a link is
    never followed, and nothing is written through one: the copy is a new file."""
    if d.kind(name) != stat.S_IFREG:
        return
    with os.fdopen(d.open(name, os.O_RDONLY | NONBLOCK), "rb") as source:
        mode = os.fstat(source.fileno()).st_mode
        if not stat.S_ISREG(mode):  # changed since: a link now makes the open fail
            return
        with os.fdopen(into.open(name, NEW, 0o600), "wb") as copy:
            shutil.copyfileobj(source, copy)
            os.fchmod(copy.fileno(), stat.S_IMODE(mode) & 0o777)
            copy.flush()
            os.fsync(copy.fileno())


def entries(history, stem):
    """The names of stem's entries in history/ (a path, or a Held) that the suite made: real
    folders, not links, named <stem>.<stamp>[.n]; oldest first, by the time each run recorded
    in its result (a copy, `cp -r` of a folder, keeps it, where it sets every folder's ctime
    anew, in listing order); an entry whose result says no time comes before them all, by when
    it last changed (its ctime, which no one can set)."""
    history = held.of(history)
    named = re.compile(re.escape(stem) + r"\." + STAMP + r"(\.\d{1,3})?")
    found = []
    for name in filter(named.fullmatch, history.names()):
        with contextlib.suppress(OSError, ValueError):
            st = history.lstat(name)
            if stat.S_ISDIR(st.st_mode):
                with held.opened(name, within=history) as entry:
                    when = recorded_at(entry, stem + ".json")
                found.append((when is not None, st.st_ctime if when is None else when, name))
    return [name for *_, name in sorted(found)]


def recorded_at(d, name):
    """When the run of the result `name` in the held folder d was made, as it recorded it
    (seconds since the epoch), or None where it cannot be read."""
    try:
        made = datetime.datetime.fromisoformat(str((earlier_facts(d, name) or {}).get("date")))
    except ValueError:  # unreadable, or no date in it
        return None
    return (made if made.tzinfo else made.astimezone()).timestamp()


def trim(d, stem):
    """Keep stem's newest KEPT entries in the held folder d's history/, and remove the older
    ones it made; nothing else there is ever removed. A failure to remove one leaves it for the
    next save."""
    with contextlib.suppress(OSError), held.opened(HISTORY, within=d) as history:
        for gone in entries(history, stem)[:-KEPT]:
            remove(history, gone)


def remove(history, entry):
    """Remove an entry of the held history/: its files, then the folder (an entry the suite
    made holds files only; anything else in it keeps it). Never follows a link, nor enters
    one."""
    with contextlib.suppress(OSError):
        with held.opened(entry, within=history) as e:
            for name in e.names():
                with contextlib.suppress(OSError):
                    e.unlink(name)
        history.rmdir(entry)


def discard(d, entry):
    """Remove an entry of the held folder d's history/ made for nothing, and history/ too if
    that leaves it empty."""
    with contextlib.suppress(OSError):
        with held.opened(HISTORY, within=d) as history:
            remove(history, entry)
        d.rmdir(HISTORY)


def say_kept(stem, keep, facts, busy):
    """Say where the earlier result went; warn if a busy machine's run replaced a quiet one's."""
    date = "".join(c if c.isprintable() else "?" for c in str(facts.get("date") or "undated")[:19])
    note(f"the earlier {stem} result, of {date}, is kept in {keep}/")
    if busy and not facts.get("busy"):
        warn(f"this run, made while the machine was busy ({'; '.join(busy)}), replaces a "
             f"{stem} result made on a quiet machine ({date}), kept in {keep}/")


def keep_edited(d, files):
    """A copy of the held folder d's report in a new folder of history/ where a user edited it
    and this save replaces it (a report.<date>/, never trimmed: it is the user's): -> that
    folder's path, or None where there is nothing of theirs to keep."""
    if REPORT not in files:
        return None
    try:
        raw = d.read(REPORT, schema.FILE_MAX)
    except OSError:  # one this user cannot read: not kept, as no link is
        raw = None
    if raw is None or not edited(d.at(REPORT), raw):
        return None
    with history_of(d, "the edited report") as history:
        when = stamp(time.strftime("%Y-%m-%dT%H-%M-%S"))
        keep = new_entry(history, f"{REPORT.split('.')[0]}.{when}")
        try:
            with held.opened(keep, within=history) as entry:
                copy_regular(d, REPORT, entry)
        except BaseException:
            discard(d, keep)
            raise
        return history.at(keep)
