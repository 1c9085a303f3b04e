"""A saved result read back: every field compare.py or --roofs reads is checked (type, sign,
finiteness) by one validator, and an older layout is brought to the newest. A file that fails
is refused whole, in a few words naming the field."""
import contextlib
import errno
import json
import math
import os
import re
import stat

from harness.measuring.speeds import Speeds
from harness.terminal import printable

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # where the system has it
READABLE = (1, 2, 3, 4, 5, 6)  # the schema versions read; older layouts are brought to the newest
FILE_MAX = 1 << 24  # bytes: a results file is a few hundred KB; anything larger is not one


def load(path, script, follow=False):
    """A result file's data, or raise ValueError with what is wrong with it, in a few words. It
    must be a regular file of at most FILE_MAX bytes, read without waiting (a FIFO or a device
    that blocks is refused), and, unless follow (a path the user gave), not a symbolic link:
    what a results folder holds never leads a reader elsewhere."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else NOFOLLOW))
        with os.fdopen(fd, encoding="utf-8") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > FILE_MAX:
                raise ValueError("is not a results file")  # a folder, a FIFO, a device, a giant
            text = f.read(FILE_MAX + 1)
        if len(text) > FILE_MAX:
            raise ValueError("is not a results file")  # a file that says it is small, and is not
        data = json.loads(text)
    except FileNotFoundError:
        raise ValueError("does not exist") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError("is a link, not a results file; left as it is") from None
        raise ValueError(f"cannot be read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg}, line {e.lineno})") from None
    except (RecursionError, UnicodeDecodeError):
        raise ValueError("is not JSON (nested too deeply, or not text)") from None
    data = cleaned(data)
    check(data, script)
    try:
        return upgrade(data)
    except (ArithmeticError, TypeError, KeyError, IndexError) as e:  # checked, yet its figures
        raise ValueError(f"cannot be brought to the newest layout ({type(e).__name__})") \
            from None  # are beyond what the upgrade's arithmetic can hold


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
        check_sheets(data.get("sheets"))
    else:
        check_tables(data.get("tables"))
    for key, speeds in data.items():
        base, at, threads = key.partition(" @")
        if base == "roofs":
            if at and not (threads.isdigit() and threads.isascii() and len(threads) < 6):
                raise ValueError(f"has {key[:40]!r}, whose thread count is not a whole number")
            check_speeds(speeds, key)


FIGURE_MAX = 1e30  # no figure of the suite comes near; larger ones only overflow what reads them


FIGURE_MIN = 1e-30  # nor so small: a tiny figure's inverse, or a ratio over it, overflows


def number(v, low=-math.inf):
    """A finite int or float (not a bool) of at least low, and 0 or from FIGURE_MIN to
    FIGURE_MAX either way."""
    try:
        return type(v) in (int, float) and low <= float(v) and (
            FIGURE_MIN <= abs(float(v)) <= FIGURE_MAX or v == 0)
    except OverflowError:  # an integer beyond any float
        return False


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


def check_tables(tables):
    """Raise ValueError, naming the table and the cell, unless every table is columns with
    units and rows of that width whose figures are finite numbers of the right sign (above 0
    for times, rates and ratios; 0 or more for counts), and its samples are in the newest
    layout or an older one."""
    if not isinstance(tables, dict):
        raise ValueError("has no tables")
    for name, t in tables.items():
        columns = t.get("columns") if isinstance(t, dict) else None
        if not isinstance(columns, list) or not all(
                isinstance(c, dict) and isinstance(c.get("header"), str)
                and isinstance(c.get("unit"), str) for c in columns):
            raise ValueError(f"has a table {name!r} without usable columns")
        rows = t.get("rows")
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == len(columns) for r in rows):
            raise ValueError(f"has a table {name!r} whose rows do not match its columns")
        for row in rows:
            for c, v in zip(columns, row):
                if not cell(c["unit"], v):
                    raise ValueError(f"has {v!r:.40} in table {name!r}, column "
                                     f"{c['header']!r}: not a {what(c['unit'])}")
        for key in ("stat", "title", "settings", "printed"):
            if t.get(key) is not None and not isinstance(t[key], str):
                raise ValueError(f"has a table {name!r} whose {key} is not text")


RECORDS_MAX, SAMPLES_MAX = 5_000, 10_000  # a sweep of 8 thread counts keeps ~3,200 records
ALL_SAMPLES_MAX = 200_000  # in one file: what compare.py's bootstrap draws from in seconds
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


def rounds_problem(r, runs):
    """What is wrong with a record's rounds, shares, trials or visit time, in a few words, or
    '': rounds are distinct whole numbers from 0, one per sample; shares, one per sample, a
    number from 0 to 1 or null; trials, text; visit_s, a number of 0 or more."""
    n = len(runs) if isinstance(runs, list) else 0
    rounds, shares = r.get("rounds"), r.get("shares")
    if rounds is not None and not (isinstance(rounds, list) and len(rounds) == n and all(
            type(x) is int and 0 <= x < 10 ** 9 for x in rounds) and len(set(rounds)) == n):
        return "rounds are not distinct whole numbers, one per sample"
    if shares is not None and not (isinstance(shares, list) and len(shares) == n and all(
            x is None or number(x, 0) and x <= 1 for x in shares)):
        return "shares are not numbers from 0 to 1 (or null), one per sample"
    trials = r.get("trials")
    if trials is not None and not (isinstance(trials, list) and len(trials) < 100
                                   and all(isinstance(t, str) for t in trials)):
        return "trials are not a list of names"
    if r.get("visit_s") is not None and not number(r["visit_s"], 0):
        return "visit time is not a number of 0 or more"
    return ""


def check_sheets(sheets):
    """Raise ValueError unless every saved sheet's title, settings and printed text are text,
    and its columns name their figures."""
    if not isinstance(sheets, dict) or not all(
            isinstance(t, dict) and all(isinstance(t.get(k, ""), str)
                                        for k in ("title", "settings", "printed", "note"))
            and isinstance(t.get("columns", []), list)
            and all(isinstance(c, dict) and isinstance(c.get("figure"), str)
                    and all(isinstance(c.get(k, ""), str)
                            for k in ("header", "unit", "format", "empty"))
                    for c in t.get("columns", []))
            for t in sheets.values()):
        raise ValueError("has no usable sheets")


def cell(unit, v):
    """A figure in a column of this unit: none (a figure not given, as the post leaves some),
    text or a number where there is no unit, else a finite number, above 0 for a time, a rate
    or a ratio."""
    if v is None:
        return True
    if unit == "":
        return isinstance(v, str) or number(v)
    return number(v, 0) and (v > 0 or not positive(unit))


def kind(unit):
    """'time' for a figure that shrinks as the machine gets faster, 'rate' for one that grows,
    'other' for neither (a ratio, a balance, a count)."""
    return "time" if unit in ("ms", "s") else "rate" if unit.endswith("/s") else "other"


def positive(unit):
    """A figure of this unit is above 0: a time, a rate or a ratio."""
    return kind(unit) != "other" or unit == "x"


def what(unit):
    return ("text or a number" if unit == "" else "finite number above 0" if positive(unit)
            else "finite number of 0 or more")


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


def samples(table, row, column):
    """The samples behind one figure, [(seconds, power)], or None where the file holds none
    usable: samples_s[row][column] = [[power, [seconds, ...]], ...], each above 0."""
    try:
        parts = [(s, power) for power, s in table["samples_s"][row][column]]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    usable = parts and all(power in (1, -1) and isinstance(s, list) and s and all(
        number(x) and x > 0 for x in s) for s, power in parts)
    return parts if usable else None


OLD_FIGURES = {  # schema 1 and 2: which timing behind each figure, table by table
    "machine_speed": lambda s, i: {"memory speed": [[-1, s["forklift"]]],
                                   "read time": [[1, s["forklift"]]],
                                   "math speed": [[-1, s["workbench"]]],
                                   "math time": [[1, s["workbench"]]],
                                   "balance": [[1, s["forklift"]], [-1, s["workbench"]]],
                                   "tokens a trip needs": [[1, s["forklift"]],
                                                           [-1, s["workbench"]]]},
    "collision": lambda s, i: {"normal gap ms": [[1, s[0]]], "all at once gap ms": [[1, s[1]]],
                               "chunked worst gap ms": [[1, s[2]]]},
    "dial": lambda s, i: {"worst gap ms": [[1, s[i]]]},
    "cube": lambda s, i: {"h**3 ms": [[1, s[i][0]]], "h*h*h ms": [[1, s[i][1]]],
                          "ratio": [[1, s[i][0]], [-1, s[i][1]]]},
}


def upgrade(data):
    """A result of an older schema in the newest layout: records from its tables. Schema 1 and 2
    kept one list of samples per row (or per figure, or per name); 3 kept samples_s[row][header]
    = [[power, samples]]; all three named a figure by its header, which LEGACY maps."""
    if data["schema_version"] >= 5:
        return data
    if data["schema_version"] == 4:
        return names_out_of_keys(data)
    if data["schema_version"] < 3:
        samples_by_header(data)
    found, sheets = [], {}
    for name, t in data["tables"].items():
        base, _, threads = name.partition(" @")
        names = LEGACY.get(base, {})
        sheets[name] = {"title": t.get("title") or TITLES.get(base, base),
                        "settings": t.get("settings") or "",
                        "printed": t.get("printed") or "", "columns": [
                            {"figure": names.get(c["header"], c["header"]).lstrip("@"),
                             "header": c["header"], "unit": c["unit"],
                             "key": names.get(c["header"], "").startswith("@"),
                             "compared": names.get(c["header"]) in COMPARED.get(base, ())}
                            for c in t["columns"]]}
        if base in LEGACY:
            settings = {**legacy_settings(data), **({"threads": int(threads)} if threads else {})}
            found += legacy_records(base, t, settings, bool(data.get("predicted")))
    data = {k: v for k, v in data.items() if k != "tables"}
    return names_out_of_keys({**data, "schema_version": 4, "records": found, "sheets": sheets})


NAMES = {"check": "row", "breakdown": "row", "bug": "phase"}  # schema 4 kept a row's printed
#        name among its keys in these; 5 finds a row by its keys alone (the check's prefill
#        row of 256 tokens: experiment prefill, prompt 256)


def names_out_of_keys(data):
    """A schema-4 result in schema 5's layout: no row's printed name among its keys. A row
    named only by its name (schemas 1 to 3 kept no other keys) gets the keys its name says
    ("16 tokens": prompt 16), and keeps its name where it says none."""
    def keys(r):
        name = NAMES.get(r.get("experiment")) if isinstance(r, dict) else None
        if not (name and isinstance(r.get("keys"), dict) and name in r["keys"]):
            return r
        kept = {k: v for k, v in r["keys"].items() if k != name}
        if set(kept) <= {"experiment"}:
            said = keys_said(r["keys"][name])
            kept = {name: r["keys"][name], **kept} if said is None else {**kept, **said}
        return {**r, "keys": kept}
    return {**data, "schema_version": 5, "records": [keys(r) for r in data["records"]],
            **({"at_limits": [keys(r) for r in data["at_limits"]]}
               if isinstance(data.get("at_limits"), list) else {})}


SAID = [(r"(\d+) tokens?", ("prompt",)), (r"(\d+) users?(?: at (\d+) notes?)?", ("users", "notes")),
        (r"chunks of (\d+), worst", ("chunk",))]  # a row's name, and the keys it says


def keys_said(text):
    """The keys a row's printed name says ("4 users": {"users": 4}), {} for the typers' normal
    gap, or None where it says none."""
    if text == "normal gap":
        return {}
    for pattern, names in SAID:
        found = re.fullmatch(pattern, str(text))
        if found:
            return {k: int(v) for k, v in zip(names, found.groups()) if v is not None}
    return None


def legacy_settings(data):
    s = data.get("settings") if isinstance(data.get("settings"), dict) else {}
    return {k: v for k, v in s.items() if k in ("model", "threads", "runs", "notes", "typers",
                                                 "question", "size", "matmul", "tokens",
                                                 "quick") and not isinstance(v, dict)}


def legacy_records(base, t, settings, predicted):
    """The records of one old table, its headers read through LEGACY: {header: figure}, keys
    marked by a leading '@'."""
    names = LEGACY[base]
    heads = [c["header"] for c in t["columns"]]
    units = {c["header"]: c["unit"] for c in t["columns"]}
    stat = {"best": "best", "middle": "median", "limit": "limit"}.get(
        str(t.get("stat") or "middle").split(" ")[0], "median")
    out = []
    for i, row in enumerate(t["rows"]):
        cells = dict(zip(heads, row))
        keys = {names[h][1:]: v for h, v in cells.items() if names.get(h, "").startswith("@")}
        for h, v in cells.items():
            figure = names.get(h)
            if figure is None or figure.startswith("@") or v is None:
                continue
            runs = legacy_samples(v, samples(t, i, h), stat)
            out.append({"experiment": base, "keys": keys, "figure": figure, "unit": units[h],
                        "statistic": stat if runs else "computed", "value": v,
                        "samples": runs, "runs": len(runs) if runs else None,
                        "predicted": predicted, "settings": settings})
    return out


def legacy_samples(value, parts, stat):
    """An old figure's samples in its own unit, from its timings' seconds and powers."""
    if not parts or len({len(s) for s, _ in parts}) != 1 or not number(value):
        return None
    pick = min if stat == "best" else lambda s: sorted(s)[len(s) // 2]
    return [value * math.prod((s[i] / pick(s)) ** p for s, p in parts)
            for i in range(len(parts[0][0]))]


def samples_by_header(data):
    """Schema 1 and 2's samples in schema 3's layout: samples_s[row][header] = [[power,
    samples]]."""
    for name, t in data["tables"].items():
        old, base = t.get("samples_s"), name.split(" @")[0]
        if old is None:
            continue
        units = {c["header"]: c["unit"] for c in t["columns"]}
        per_row = {h: (1 if kind(u) == "time" else -1) for h, u in units.items()
                   if kind(u) != "other"}  # prefill, decode, depth: one timing a row
        t["samples_s"] = None
        with contextlib.suppress(KeyError, IndexError, TypeError):
            t["samples_s"] = [OLD_FIGURES[base](old, i) if base in OLD_FIGURES else
                              {h: [[p, old[i]]] for h, p in per_row.items()}
                              for i in range(len(t["rows"]))]


TITLES = {"machine_speed": "The forklift and the workbench",
          "prefill": "Phase 1, reading (prefill)",
          "decode": "Phase 2, typing (decode)", "collision": "When the two phases share a server",
          "dial": "The chunk-size dial", "depth": "Beyond the post: how deep the notebooks are",
          "summary": "Reading against typing, per token",
          "check": "Every row against the machine's limits",
          "breakdown": "Where each row's time goes",
          "cube": "The slow road: h**3 against h*h*h, by sign"}  # the old files that kept none
COMPARED = {"machine_speed": ("memory speed", "math speed", "balance", "tokens a trip needs"),
            "prefill": ("time per token", "math speed"), "decode": ("step", "tokens per second"),
            "collision": ("normal gap", "all at once gap", "chunked worst gap"),
            "dial": ("first word", "worst gap"), "depth": ("step",), "summary": ("times cheaper",),
            "check": ("x limit",), "breakdown": ("trip",), "cube": ("power", "product")}


def same(*names):
    return {n: n for n in names}


LEGACY = {  # schemas 1 to 3: each table's headers, as the figures they showed ('@': a key)
    "machine_speed": same("memory speed", "read", "read time", "math speed", "math",
                          "math time", "balance", "tokens a trip needs"),
    "prefill": {"prompt": "@prompt", "time ms": "time", "ms/token": "time per token",
                "GFLOP/s": "math speed"},
    "decode": {"users": "@users", "step ms": "step", "tokens/s": "tokens per second",
               "GFLOP/s": "math speed", "MB read": "bytes read"},
    "depth": {"users": "@users", "notes": "@notes", "step ms": "step",
              "tokens/s": "tokens per second", "MB read": "bytes read",
              "notes % of bytes": "notes share", "x limit": "x limit"},
    "collision": {**same("typers", "question", "chunk", "steps"), "normal gap ms": "normal gap",
                  "all at once gap ms": "all at once gap",
                  "chunked worst gap ms": "chunked worst gap"},
    "dial": {"chunk": "@chunk", "steps to read": "steps to read", "TTFT ms": "first word",
             "gap median ms": "median gap", "worst gap ms": "worst gap",
             "worst x normal": "worst x normal", "total ms": "total"},
    "summary": {"reading ms/token": "reading per token", "at prompt": "at prompt",
                "typing ms/token": "typing per token", "times cheaper": "times cheaper"},
    "check": {"experiment": "@experiment", "row": "@row", "measured ms": "measured",
              "limit ms": "limit", "bound by": "bound by", "x limit": "x limit"},
    "breakdown": {"experiment": "@experiment", "row": "@row", "trip ms": "trip",
                  "tables ms": "tables", "one call ms": "one call", "x one call": "x one call",
                  "attention ms": "attention", "attention x limit": "attention x limit",
                  "elementwise ms": "elementwise", "other ms": "other",
                  "most excess": "most excess"},
    "cube": {"numbers": "@numbers", "h**3 ms": "power", "h*h*h ms": "product", "ratio": "ratio",
             "largest rel. diff": "largest relative difference"},
}


SPEEDS = {"bytes_per_s": (1e6, 1e15, "memory speed", "GB/s"),  # 1 MB/s to 1 PB/s
          "flops_per_s": (1e6, 1e18, "math speed", "GFLOP/s")}  # 1 MFLOP/s to 1 EFLOP/s


def read_roofs(path, follow=True):
    """The two speeds of a saved machine_speed.json (of a sweep, its most threads'): Speeds; or
    raise ValueError saying why not. follow: the path is the user's own (--roofs), which may
    be a link; one found inside a results folder is not followed (hardware's measured
    machines)."""
    data = load(path, "machine_speed", follow)
    found = sorted((k for k in data if k.split(" @")[0] == "roofs"),
                   key=lambda k: int(k.split(" @")[1]) if " @" in k else 0)
    if not found:
        raise ValueError("has no saved speeds ('roofs'): rerun machine_speed.py to save them")
    roofs = {name: float(data[found[-1]][name]) for name in SPEEDS}  # checked as it was read
    threads = f", {found[-1].split(' @')[1]} threads" if " @" in found[-1] else ""
    return Speeds(**roofs, source=f"from {path} (measured {data['machine']['date'][:10]}"
                                  f"{threads})")
