"""Results of an older schema brought to the newest layout as they are read: schemas 1 to 3
kept tables (their rows, their samples by header), 4 kept a row's printed name among its keys, 5
and 6 no record said whether compare.py holds it against other machines, and up to 7 a thread
sweep's entries carried their threads in their names. Every reader takes the
newest layout; two still take what an older run saved where a newer record is absent: the
speeds a run held its rows to (rules.speeds, without "speeds" records) and a forklift measured at
a run's start and end (compare.limits, without its rounds)."""
import contextlib
import math
import re

from harness.keeping.records import cell, kind, number, what

AT = " @"  # schema 7 and older: a thread sweep's entry named with its block's threads, "prefill @2"


def block_of(key):
    """(an entry's own name, its block's threads as written, '' without a sweep) of a name
    saved by schema 7 or older (AT)."""
    base, _, threads = key.partition(AT)
    return base, threads


def block_threads(threads):
    """A block's threads as written in an older name, as a number from 1; None where it is
    none."""
    ok = threads.isdigit() and threads.isascii() and len(threads) < 6 and int(threads) >= 1
    return int(threads) if ok else None


def named(sheets):
    """[(name, sheet)] of a result's sheets, in either layout: schema 8's list, each sheet
    naming itself, or an older one's mapping of names, a sweep's with AT."""
    if isinstance(sheets, list):
        return [(t.get("name"), t) for t in sheets]
    return [(block_of(name)[0], t) for name, t in sheets.items()]

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
    = [[power, samples]]; all three named a figure by its header, which LEGACY maps; up to 6, a
    record did not say whether compare.py holds it against other machines: its sheet did; up to
    7, a thread sweep named its entries with their block's threads (blocks_apart)."""
    if data["schema_version"] >= 8:
        return data
    if data["schema_version"] == 7:
        return blocks_apart(data)
    if data["schema_version"] >= 5:
        return blocks_apart(compared(data))
    if data["schema_version"] == 4:
        return blocks_apart(compared(names_out_of_keys(data)))
    if data["schema_version"] < 3:
        samples_by_header(data)
    found, sheets = [], {}
    for name, t in data["tables"].items():
        base, threads = block_of(name)
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
    return blocks_apart(compared(names_out_of_keys({**data, "schema_version": 4,
                                                    "records": found, "sheets": sheets})))


def blocks_apart(data):
    """Schema 7 and older in schema 8's layout: a thread sweep's sheets as a list, each saying
    its name and its block's threads (None outside a sweep), and what each block saved besides
    ("roofs @2") in blocks, [{"threads": 2, "roofs": ...}], in the order of their threads."""
    sheets = [{**t, "name": block_of(name)[0], "threads": block_threads(block_of(name)[1])}
              for name, t in data["sheets"].items()]
    apart = {k: (block_of(k)[0], block_threads(block_of(k)[1])) for k in data if AT in k}
    apart = {k: v for k, v in apart.items() if v[1] is not None}
    blocks = {}
    for key, (base, threads) in sorted(apart.items(), key=lambda kv: kv[1][1]):
        blocks.setdefault(threads, {"threads": threads})[base] = data[key]
    kept = {k: v for k, v in data.items() if k not in apart}
    return {**kept, "schema_version": 8, "sheets": sheets,
            **({"blocks": list(blocks.values())} if blocks else {})}


def compared(data):
    """Schema 6 and older: each record says whether compare.py holds it against other machines,
    as its sheet's column said."""
    marked = {(block_of(name)[0], c.get("figure")) for name, sheet in data["sheets"].items()
              for c in sheet.get("columns", []) if c.get("compared")}
    return {**data, "records": [{**r, "compared": (r["experiment"], r["figure"]) in marked}
                                for r in data["records"]]}


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
        old, base = t.get("samples_s"), block_of(name)[0]
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
