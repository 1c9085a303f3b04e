"""Exports: a run's tables, or compare.py's comparison, on stdout as csv, json or jsonl, numbers
unrounded and every header with its unit (llama-bench's -o, in spirit). The terminal's tables
stay the default; an export replaces them on stdout, and the saved files are the same."""
import csv
import io
import json

FORMATS = ("csv", "json", "jsonl")


def header(h, unit):
    """A column's name with its unit, where the name does not already say it."""
    return h if not unit or unit in h else f"{h} ({unit})"


def records(tables):
    """Every row of every table as a dict: {"table", then each header with its unit: value}.
    tables: {name: (headers with units, rows)}."""
    return [{"table": name, **dict(zip(heads, row))} for name, (heads, rows) in tables.items()
            for row in rows]


def write(fmt, about, tables):
    """tables ({name: (headers, rows)}) in fmt, each row also saying `about` (a dict: the
    script and the machine)."""
    rows = [{**about, **r} for r in records(tables)]
    if fmt == "json":
        return json.dumps({**about, "tables": {name: [dict(zip(heads, row)) for row in body]
                                               for name, (heads, body) in tables.items()}},
                          indent=1, allow_nan=False)
    if fmt == "jsonl":
        return "\n".join(json.dumps(r, allow_nan=False) for r in rows)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().rstrip("\n")


def run(fmt, script, machine_line, saved):
    """A run's saved tables ({name: its JSON entry}) in fmt."""
    return write(fmt, {"script": script, "machine": machine_line},
                 {name: ([header(c["header"], c["unit"]) for c in t["columns"]], t["rows"])
                  for name, t in saved.items()})


def compared(fmt, machines, sheets):
    """compare.py's sections ([(title, headers, rows)]) in fmt."""
    about = {"machines": machines if fmt == "json" else " || ".join(machines)}
    return write(fmt, about, {title: (headers, rows) for title, headers, rows in sheets})
