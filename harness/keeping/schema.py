"""A saved result read back: every field compare.py or --roofs reads is checked (type, sign,
finiteness) by one validator, and an older layout is brought to the newest. A file that fails
is refused whole, in a few words naming the field."""
import errno
import json
import math
import os
import re
import stat

from harness.terminal import printable
from harness.keeping import older
from harness.keeping.held import NOFOLLOW
from harness.keeping.records import cell, number, what
from harness.measuring.speeds import Speeds

READABLE = (1, 2, 3, 4, 5, 6, 7, 8)  # the schema versions read; older layouts become the newest
NEWEST = max(READABLE)
FILE_MAX = 1 << 24  # bytes: a results file is a few hundred KB; anything larger is not one


def load(path, script, follow=False):
    """A result file's data, or raise ValueError with what is wrong with it, in a few words. It
    must be a regular file of at most FILE_MAX bytes, read without waiting (a FIFO or a device
    that blocks is refused), and, unless follow (a path the user gave), not a symbolic link:
    what a results folder holds never leads a reader elsewhere."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else NOFOLLOW))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > FILE_MAX:
                raise ValueError("is not a results file")  # a folder, a FIFO, a device, a giant
            raw = f.read(FILE_MAX + 1)
    except FileNotFoundError:
        raise ValueError("does not exist") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError("is a link, not a results file; left as it is") from None
        raise ValueError(f"cannot be read ({e.strerror or e})") from None
    return parse(raw, script)


def parse(raw, script):
    """The data of a result file's bytes (see load()), or raise ValueError with what is wrong."""
    if len(raw) > FILE_MAX:
        raise ValueError("is not a results file")  # a file that says it is small, and is not
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg}, line {e.lineno})") from None
    except (RecursionError, UnicodeDecodeError):
        raise ValueError("is not JSON (nested too deeply, or not text)") from None
    if nested(data) > MOST_NESTED:  # (before anything walks it by recursion)
        raise ValueError(f"is nested deeper than {MOST_NESTED} levels: not a results file")
    if not plain(text):
        data = cleaned(data)
    check(data, script)
    try:
        upgraded = older.upgrade(data)
    except (ArithmeticError, TypeError, KeyError, IndexError) as e:  # checked, yet its figures
        raise ValueError(f"cannot be brought to the newest layout ({type(e).__name__})") \
            from None  # are beyond what the upgrade's arithmetic can hold
    if data["schema_version"] < NEWEST:  # an older file's every field, as the newest layout
        check({**upgraded, "schema_version": NEWEST}, script)  # has it, as the newest's are
    return upgraded  # (a schema-7 file's own "blocks" passed through the upgrade unchecked)


MOST_NESTED = 32  # lists and objects within each other at most: a result nests 6 deep; a file
#                   of 600 made cleaned() recurse past Python's limit, in a traceback


def nested(data):
    """How deep lists and objects nest in data (0 for a number or a text), counted without
    recursion, and no further than a level past MOST_NESTED."""
    deepest, level = 0, [(data, 0)]
    while level:
        v, depth = level.pop()
        if isinstance(v, (list, dict)) and depth <= MOST_NESTED:
            deepest = max(deepest, depth + 1)
            level.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def plain(text):
    """Whether a JSON text's strings can hold no control or format character, so that cleaned()
    would change nothing: printable ASCII alone (JSON refuses a raw control character in a
    string, but for DEL), and no escape but a line's end, a quote, a backslash or a slash."""
    return text.isascii() and "\x7f" not in text and not ESCAPE.search(text)


ESCAPE = re.compile(r'\\[^n"\\/]')  # a JSON escape that may make a control character: \t, \u...


def cleaned(data):
    """Every text of a result, keys among them, with each control or format character but a
    line's end as '?': whatever a file holds, no message, table or export made of it steers a
    terminal."""
    if isinstance(data, str):
        return "\n".join(printable(line) for line in data.split("\n"))
    if isinstance(data, list):
        return [cleaned(v) for v in data]
    if isinstance(data, dict):
        return {cleaned(k): cleaned(v) for k, v in data.items()}
    return data


def check(data, script):
    """Raise ValueError, naming the field, unless data is a whole result of `script`."""
    if not isinstance(data, dict):
        raise ValueError("is not a result file (no object at the top)")
    if "schema_version" not in data:
        raise ValueError("has no schema version; rerun that script to refresh it")
    version = data["schema_version"]
    if type(version) is not int:
        raise ValueError(f"has schema version {version!r}, which is not a whole number")
    if version not in READABLE:
        age = "older" if version < min(READABLE) else "newer"
        raise ValueError(f"has schema version {version}, {age} than this suite reads "
                         f"({', '.join(map(str, READABLE))}); rerun that script to refresh it")
    if data.get("script") != script:
        raise ValueError(f"holds results of {data.get('script')!r}, not {script!r}")
    for key in ("published", "predicted"):
        if key in data and not isinstance(data[key], str):
            raise ValueError(f"has a {key!r} that is not text")
    made = data.get("made", {"version": "", "command": "", "warnings": []})
    if not (isinstance(made, dict) and isinstance(made.get("version"), str)
            and isinstance(made.get("command"), str) and isinstance(made.get("warnings"), list)
            and all(isinstance(w, str) for w in made["warnings"])):
        raise ValueError("has no usable 'made' (the suite's version, command and warnings)")
    check_machine(data.get("machine"))
    if not isinstance(data.get("settings", {}), dict):
        raise ValueError("has settings that are not an object")
    for key in ("at_limits",):
        if key in data:
            check_records(data[key])
    if version >= 4:
        check_records(data.get("records"))
        check_saved_sheets(data.get("sheets"), version)
        check_layouts(data["records"], data["sheets"])
        check_once(data["records"])
    else:
        older.check_tables(data.get("tables"))
    for key, speeds in kept(data, version):
        if key == "roofs":
            check_speeds(speeds, key)


def kept(data, version):
    """[(name, value)] of what a run saved besides its records and sheets: at the top, and in
    each of a thread sweep's blocks (schema 8), or named with their block's threads (schema 7 and
    older: "roofs @2"). Raise ValueError where a block's thread count is not a whole number."""
    if version < 8:
        found = [(older.block_of(k), k, v) for k, v in data.items()]
        for (base, threads), key, _ in found:
            if base == "roofs" and key != base and older.block_threads(threads) is None:
                raise ValueError(f"has {key[:40]!r}, whose thread count is not a whole number")
        return [(base, v) for (base, _), _, v in found]
    blocks = data.get("blocks", [])
    if not isinstance(blocks, list) or not all(isinstance(b, dict)
                                               and thread_count(b.get("threads"))
                                               for b in blocks):
        raise ValueError("has blocks that do not each say their whole number of threads")
    return [*data.items(), *(kv for b in blocks for kv in b.items())]


def thread_count(n):
    """Whether n is a block's thread count: a whole number from 1."""
    return type(n) is int and 1 <= n < 100000


MACHINE = {"cpu": str, "os": str, "python": str, "numpy": str, "blas": list, "env": dict,
           "date": str}  # what the machine line needs
OPTIONAL = {"cores": lambda v: type(v) is int and v >= 1, "llc_bytes": lambda v: number(v, 0),
            "load": lambda v: number(v, 0), "frequency": lambda v: isinstance(v, dict) and all(
                isinstance(v[k], str) if k == "governor" else number(v[k], 0) for k in v),
            "busy": lambda v: isinstance(v, list) and all(isinstance(b, str) for b in v),
            "sweep": lambda v: isinstance(v, list) and all(type(n) is int and n >= 1
                                                           for n in v),
            "device": lambda v: isinstance(v, dict) and all(
                isinstance(v.get(k), str) for k in ("device", "name", "library"))
            and (v.get("memory_bytes") is None or number(v["memory_bytes"], 0))}
#   each may be null


def check_machine(m):
    """Raise ValueError, naming the field, if the machine line cannot be made from m."""
    if not isinstance(m, dict):
        raise ValueError("has no machine")
    for field, kind in MACHINE.items():
        if not isinstance(m.get(field), kind):
            raise ValueError(f"has no usable machine {field!r}")
    for b in m["blas"]:
        if not (isinstance(b, dict) and isinstance(b.get("library"), str)
                and isinstance(b.get("version"), str)
                and type(b.get("threads")) is int and b["threads"] >= 1):
            raise ValueError("has a BLAS entry without its library, version or threads")
    for field, ok in OPTIONAL.items():
        if m.get(field) is not None and not ok(m[field]):
            raise ValueError(f"has no usable machine {field!r} ({m[field]!r:.40})")


RECORDS_MAX, SAMPLES_MAX = 5_000, 10_000  # a sweep of 8 thread counts keeps ~3,200 records
ALL_SAMPLES_MAX = 200_000  # in one file: what compare.py's tests read in seconds
RECORD = {"experiment": str, "keys": dict, "figure": str, "unit": str, "statistic": str,
          "predicted": bool, "settings": dict}


def check_records(found):
    """Raise ValueError, naming the record, unless every record has its fields, its keys are
    plain text or numbers, its value fits its unit, and its samples are finite numbers."""
    if not isinstance(found, list) or len(found) > RECORDS_MAX:
        raise ValueError("has no usable records")
    for i, r in enumerate(found):
        if not isinstance(r, dict):
            raise ValueError(f"has record {i}, which is not an object")
        for field, kind_ in RECORD.items():
            if not isinstance(r.get(field), kind_):
                raise ValueError(f"has record {i} without a usable {field!r}")
        if not all(isinstance(k, str) and (isinstance(v, str) or number(v))
                   for k, v in r["keys"].items()):
            raise ValueError(f"has record {i} whose keys are not text or finite numbers")
        if not cell(r["unit"], r.get("value")) or r.get("value") is None:
            raise ValueError(f"has {r.get('value')!r:.40} in record {i} ({r['experiment']}: "
                             f"{r['figure']}): not a {what(r['unit'])}")
        runs = r.get("samples")
        if runs is not None and not (isinstance(runs, list) and 0 < len(runs) <= SAMPLES_MAX
                                     and all(number(x, 0) and x > 0 for x in runs)):
            raise ValueError(f"has record {i} ({r['experiment']}: {r['figure']}) whose samples "
                             f"are not finite numbers above 0")
        problem = rounds_problem(r, runs)
        if problem:
            raise ValueError(f"has record {i} ({r['experiment']}: {r['figure']}) whose {problem}")
    if sum(len(r.get("samples") or ()) for r in found) > ALL_SAMPLES_MAX:
        raise ValueError(f"holds more than {ALL_SAMPLES_MAX:,} samples: not a run's")



def check_once(found):
    """Raise ValueError where a figure is recorded twice (the same experiment, keys, figure and
    threads): a reader that took the first copy and one that took the last would read two
    values of it."""
    seen = {}
    for i, r in enumerate(found):
        figure = (r["experiment"], json.dumps(r["keys"], sort_keys=True), r["figure"],
                  json.dumps(r["settings"].get("threads")))
        if figure in seen:
            raise ValueError(f"has record {i} ({r['experiment']}: {r['figure']}) twice (as "
                             f"record {seen[figure]} too): which one holds is not known")
        seen[figure] = i


def rounds_problem(r, runs):
    """What is wrong with a record's rounds, shares, processes, trials or visit time, in a few
    words, or '': rounds are distinct whole numbers from 0, one per sample; shares, one per
    sample, a number from 0 to 1 or null; processes, whole numbers from 0, one per sample;
    trials, text; visit_s, a number of 0 or more."""
    n = len(runs) if isinstance(runs, list) else 0
    rounds, shares = r.get("rounds"), r.get("shares")
    if rounds is not None and not (isinstance(rounds, list) and len(rounds) == n and all(
            type(x) is int and 0 <= x < 10 ** 9 for x in rounds) and len(set(rounds)) == n):
        return "rounds are not distinct whole numbers, one per sample"
    if shares is not None and not (isinstance(shares, list) and len(shares) == n and all(
            x is None or number(x, 0) and x <= 1 for x in shares)):
        return "shares are not numbers from 0 to 1 (or null), one per sample"
    processes = r.get("processes")
    if processes is not None and not (rounds is not None and isinstance(processes, list)
                                      and len(processes) == n and all(
            type(x) is int and 0 <= x < 10 ** 6 for x in processes)):
        return "processes are not whole numbers, one per sample of its rounds"
    trials = r.get("trials")
    if trials is not None and not (isinstance(trials, list) and len(trials) < 100
                                   and all(isinstance(t, str) for t in trials)):
        return "trials are not a list of names"
    if r.get("visit_s") is not None and not number(r["visit_s"], 0):
        return "visit time is not a number of 0 or more"
    if r.get("process_s") is not None and not number(r["process_s"], 0):
        return "a process's time is not a number of 0 or more"
    if not isinstance(r.get("compared", False), bool):
        return "'compared' is not true or false"
    return ""


def check_saved_sheets(sheets, version=8):
    """Raise ValueError unless every saved sheet's title, settings and printed text are text,
    and its columns name their figures; from schema 8, each names itself and its sweep block's
    threads (None outside a sweep)."""
    if not isinstance(sheets, list if version >= 8 else dict) or version >= 8 and not all(
            isinstance(t, dict) and isinstance(t.get("name"), str)
            and (t.get("threads") is None or thread_count(t["threads"])) for t in sheets):
        raise ValueError("has no usable sheets")
    if not all(
            isinstance(t, dict) and all(isinstance(t.get(k, ""), str)
                                        for k in ("title", "settings", "printed", "note"))
            and isinstance(t.get("columns", []), list)
            and all(isinstance(c, dict) and isinstance(c.get("figure"), str)
                    and all(isinstance(c.get(k, ""), str)
                            for k in ("header", "unit", "format", "empty"))
                    for c in t.get("columns", []))
            for _, t in older.named(sheets)):
        raise ValueError("has no usable sheets")


def check_layouts(found, sheets):
    """Raise ValueError, naming the record, unless each record is as its sheet declares it: the
    unit its column gives, and every key its sheet keys its rows by (a row's printed name
    aside). What passes here, every reader can read: a file that does not is told by this
    error, and anything else a reader meets is a bug."""
    declared = {}
    for name, sheet in older.named(sheets):
        for c in sheet.get("columns", []):
            declared.setdefault(name, {})[c["figure"]] = c
    for i, r in enumerate(found):
        columns = declared.get(r["experiment"], {})
        said = columns.get(r["figure"])
        if said is not None and said.get("unit", "") != r["unit"]:
            raise ValueError(f"has record {i} ({r['experiment']}: {r['figure']}) in "
                             f"{r['unit'] or 'no unit'}, where its sheet says "
                             f"{said.get('unit') or 'none'}")
        missing = [f for f, c in columns.items() if c.get("key") and f not in ("row", "phase")
                   and f not in r["keys"] and not r.get("predicted")]
        if missing:
            raise ValueError(f"has record {i} ({r['experiment']}: {r['figure']}) without its "
                             f"key {missing[0]!r}")


def check_speeds(speeds, key):
    """Raise ValueError unless speeds (and its start and end, where given) are speeds a machine
    can have (SPEEDS)."""
    if not isinstance(speeds, dict):
        raise ValueError(f"has {key!r} without speeds")
    for when, at in (("", speeds), *((f" at the {w}", speeds.get(w)) for w in ("start", "end")
                                      if speeds.get(w) is not None)):
        if not isinstance(at, dict):
            raise ValueError(f"has {key!r}{when} without speeds")
        for name, (low, high, what_, unit) in SPEEDS.items():
            value = at.get(name)
            if not (number(value, 0) and value > 0 or type(value) is float
                    and math.isfinite(value) and value > 0):  # tiny: refused by the range
                raise ValueError(f"has {key!r}{when} without finite speeds above 0")
            if not low <= value <= high:
                raise ValueError(f"holds a {what_} of {value / 1e9:g} {unit}{when}: it must be "
                                 f"from {low / 1e9:g} to {high / 1e9:g}")


SPEEDS = {"bytes_per_s": (1e6, 1e15, "memory speed", "GB/s"),  # 1 MB/s to 1 PB/s
          "flops_per_s": (1e6, 1e18, "math speed", "GFLOP/s")}  # 1 MFLOP/s to 1 EFLOP/s


def read_roofs(path, follow=True, threads=None):
    """The two speeds of a saved machine_speed.json: its one run's, or, of a sweep, the block of
    `threads` threads (its most threads' where none is given or there is no such block):
    Speeds; or raise ValueError saying why not, where the speeds it saved disagree with its own
    figures (a file changed after its run). follow: the path is the user's own (--roofs), which
    may be a link; one found inside a results folder is not followed (a measured machine)."""
    data = load(path, "machine_speed", follow)
    found = sorted(([b["threads"], b["roofs"]] for b in data.get("blocks", []) if "roofs" in b),
                   key=lambda f: f[0]) or ([[None, data["roofs"]]] if "roofs" in data else [])
    if not found:
        raise ValueError("has no saved speeds ('roofs'): rerun machine_speed.py to save them")
    block, chosen = next((f for f in found if f[0] == threads), found[-1])
    roofs = {name: float(chosen[name]) for name in SPEEDS}  # checked as it was read
    for name, (_, _, figure, unit) in SPEEDS.items():
        own = [r["value"] for r in data["records"] if r["experiment"] == "machine_speed"
               and r["figure"] == figure and (block is None or
                                              (r.get("settings") or {}).get("threads") == block)]
        if own and not math.isclose(own[0] * 1e9, roofs[name], rel_tol=1e-6):
            raise ValueError(f"saves a {figure} of {roofs[name] / 1e9:,.4g} {unit} that its own "
                             f"figures measured at {own[0]:,.4g} {unit}: it was changed after "
                             f"its run")
    machine = data["machine"]
    where = f"{machine.get('cpu')}, {machine.get('cores')} cores"
    at = f", {block} threads" if block else ""
    return Speeds(**roofs, source=f"from {path} ({where}, measured {machine['date'][:10]}{at})",
                  origin=(path, machine.get("cpu"), machine.get("cores"), block))


