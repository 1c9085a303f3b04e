"""Exports: a run's records, or compare.py's comparison, on stdout as csv, json or jsonl: one row
per figure, numbers unrounded, every field its own column, so that pandas reads it in one line
(llama-bench's -o, in spirit). The terminal's tables stay the default; an export replaces them on
stdout, and the saved files are the same."""
import csv
import io
import json
import math

from harness.terminal import printable

FORMATS = ("csv", "json", "jsonl")
MACHINE = ("cpu", "cores", "os", "python", "numpy", "date", "load")  # the machine's columns
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads a cell starting so as a formula


def tidy(script, facts, found, headline=None):
    """One flat row per record: the script, the experiment, each key, the figure, its unit,
    statistic, value (a number; a figure in words, "forklift" for "bound by", goes to "text"
    instead, so that the value column reads as numbers), spread (slowest over fastest run) and
    runs, each setting, and the machine's fields; a prediction says so in place of this
    machine's fields."""
    rows = []
    for r in found:
        runs = r.get("samples") or []
        spread = max(runs) / min(runs) if runs and min(runs) > 0 else None
        machine = ({"machine": headline} if headline else
                   {f"machine {k}": facts.get(k) for k in MACHINE} | {
                       "machine blas": " ".join(f"{b['library']} {b['version']}"
                                                for b in facts.get("blas") or [])})
        rows.append({"script": script, "experiment": r["experiment"], **r["keys"],
                     "figure": r["figure"], "unit": r["unit"], "statistic": r["statistic"],
                     **words_apart(r["value"]), "spread": spread, "runs": r.get("runs"),
                     "predicted": r.get("predicted", False),
                     **{f"setting {k}": plain(v) for k, v in r["settings"].items()}, **machine})
    return rows


def words_apart(value):
    """{"value": a number, "text": None} or {"value": None, "text": words}: each its own column."""
    text = isinstance(value, str)
    return {"value": None if text else value, "text": value if text else None}


def plain(v):
    """A setting as one cell: lists joined by spaces."""
    return " ".join(map(str, v)) if isinstance(v, (list, tuple)) else v


def write(fmt, rows):
    """Flat rows (dicts) in fmt: a JSON list, one JSON object a line, or csv with every field
    any row has as a column."""
    rows = [{k: finite(v) for k, v in r.items()} for r in rows]
    if fmt == "json":
        return json.dumps(rows, indent=1, allow_nan=False)
    if fmt == "jsonl":
        return "\n".join(json.dumps(r, allow_nan=False) for r in rows)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writerow({k: for_csv(k) for k in fields})
    writer.writerows({k: for_csv(v) for k, v in r.items()} for r in rows)
    return out.getvalue().rstrip("\n")


def finite(v):
    """A number JSON can hold: an infinite or undefined ratio is no figure (null, an empty cell)."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def run(fmt, script, facts, found, headline=None):
    """A run's records in fmt."""
    return write(fmt, tidy(script, facts, found, headline))


def for_csv(value):
    """A CSV cell: a number as it is; text as the terminal shows it, and, where it would start a
    formula in a spreadsheet, led by a quote (the cell then reads as text)."""
    if not isinstance(value, str):
        return value
    text = printable(value)
    return "'" + text if text.startswith(FORMULA) else text
