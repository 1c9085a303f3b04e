"""Records: the saved form of a run, one record per figure, in the spirit of llama-bench's jsonl.
A record holds the experiment, the row's keys, the figure's name, unit and statistic, its value,
its samples (one per counted run, in the figure's own unit) and the settings it ran with. The
printed sheets are made from the same rows; every reader (claims, pictures, compare, the report,
the exports) reads records, never a printed cell.

    {"experiment": "decode", "keys": {"users": 4}, "figure": "step", "unit": "ms",
     "statistic": "median", "value": 33.6, "samples": [33.1, ...], "runs": 5,
     "predicted": false, "settings": {"model": "small", "notes": 512, "threads": 2, ...}}
"""
import dataclasses
import math
import statistics

from harness.measuring.timing import Measured, ms, timed  # noqa: F401 (a figure, as it is kept)

KEYS = "keys"  # a row's entry for keys it does not print (the check's row of prefill: prompt)
EXCESS = ("the BLAS", "our tables", "attention", "elementwise", "other")  # whose time a row
#          spends over its limit: the breakdown records each as "excess: <part>"
ROW = "row"  # the figure of a column that prints a row's name: a label, never a key
STATISTIC = {"middle": "median", "best": "best", "limit": "limit"}  # Timing.stat, as saved
COMPUTED = "computed"  # a figure with no timing behind it: a count, the accounting, a ratio given
SETTINGS = ("model", "threads", "runs", "notes", "typers", "question", "seed", "attention",
            "blocks", "paths", "size", "matmul", "tokens", "quick", "predict", "dtype",
            "note_dtype", "devices", "device", "quantize_head", "request",
            "act_dtype")
#           the flags (and the chosen paths) a record keeps: what makes two figures alike


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a sheet: the figure it shows (the records' name for it, which no layout
    changes), its header as printed, its unit and format; key: it names the row; compared:
    compare.py holds it against other machines."""
    figure: str
    header: str
    unit: str
    fmt: str
    key: bool = False
    compared: bool = False
    empty: str = ""  # what a cell with no figure says ("never": no such turning point)
    centered: bool = False  # a measured figure's value is its interval's center (the mean over
    #                         the run's processes, as a verdict on it is told), not the ratio
    #                         of its timings' middles: one figure wherever it is shown
    by_round: bool = False  # a ratio's value is the middle of its rounds' own ratios, each of
    #   two timings measured moments apart, not the ratio of their middles: where a machine
    #   moves between two states, the middle of each timing may fall in a different one


def col(figure, header, unit, fmt, key=False, compared=False, empty="", centered=False,
        by_round=False):
    return Column(figure, header, unit, fmt, key, compared, empty, centered, by_round)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How one experiment's figures print, declared once: its columns ([Column], the key
    columns first), the figures that are one timing each (timed: --spread follows each with a
    column of its runs' range, and the note under the sheet sums them up, per row or per
    figure), its title, and the figures it records but does not print (unprinted)."""
    name: str
    columns: list
    timed: tuple = ()
    per: str = "row"
    title: str = ""
    unprinted: tuple = ()


SIG = "sig"  # a column's format: three significant digits, as a prediction's figures are shown


def sig(v, digits=3):
    """v to `digits` significant digits, never in exponent form: 887932 -> '888,000',
    0.00633841 -> '0.00634'."""
    if not v or not math.isfinite(v):
        return format(v, "g")
    places = digits - 1 - math.floor(math.log10(abs(v)))
    if math.floor(math.log10(abs(round(v, places)))) > math.floor(math.log10(abs(v))):
        places -= 1  # 99.96 rounds up to 100, three digits already
    if isinstance(v, int):
        places = min(places, 0)  # a count stays whole
    return f"{round(v, places):,.{max(places, 0)}f}"


def rate(per_s, unit):
    """A rate at the scale a reader reads it: '4.80 TB/s', '990 TFLOP/s', '12.0 GB/s'."""
    return f"{sig(per_s / 1e12)} T{unit}" if per_s >= 1e12 else f"{sig(per_s / 1e9)} G{unit}"


def value(v):
    """A row's entry as a plain number or text, whether measured or not."""
    v = v.value if isinstance(v, Measured) else v
    return v.item() if hasattr(v, "item") else v


def samples(m):
    """The figure in each round its timings share, in its own unit: the value scaled by how far
    each round's timings sit from the statistic they were summed up by (where the figure is over
    the larger of weighted timings, that round's larger); a timing kept without rounds pairs by
    order. -> (samples, rounds, shares: the most of the cores other work took in each,
    processes: the process of each, or None where unknown) or None where they do not pair up."""
    timings = m.timings
    if any(t.seconds <= 0 for t in timings):
        return None
    by_round = [dict(zip(t.rounds or range(len(t.samples)),
                         zip(t.samples, t.others or [None] * len(t.samples))))
                for t in timings]
    common = sorted(set.intersection(*(set(b) for b in by_round)))
    if not common or (len(timings) > 1 and not all(t.rounds for t in timings)
                      and len({len(t.samples) for t in timings}) != 1):
        return None
    parts, over = by_round[:len(m.parts)], by_round[len(m.parts):]
    middle = max((w * t.seconds for w, t in m.over), default=1.0)
    values = [value(m) * math.prod((b[r][0] / t.seconds) ** p
                                   for (p, t), b in zip(m.parts, parts))
              * middle / max((w * b[r][0] for (w, _), b in zip(m.over, over)), default=1.0)
              for r in common]
    shares = [max((b[r][1] for b in by_round if b[r][1] is not None), default=None)
              for r in common]
    where = {}
    for t in timings:
        where.update(zip(t.rounds, t.processes) if t.processes else ())
    processes = [where[r] for r in common] if all(r in where for r in common) else None
    if processes is not None and len(set(processes)) < 2:  # one process: its rounds stand in
        processes = None  #                                   for processes (judging/intervals)
    return values, common if all(t.rounds for t in timings) else None, shares, processes


def make(layout, rows, settings, predicted=False, center=None):
    """The records of an experiment's rows, as measured or predicted: one per figure that is not
    a key and not empty. layout: its Layout, whose columns name each figure's unit and
    which are keys (a ROW column, the row's printed name, is none: figures are found by their
    keys); rows: [{figure: a Measured, a number or a word}], a row's unprinted keys under KEYS;
    settings: the flags (and paths) it ran with. center(record): a centered column's record with
    its value its interval's center (judging/intervals.centered), where a run measured one."""
    out = []
    for row in rows:
        keys = {c.figure: value(row[c.figure]) for c in layout.columns
                if c.key and c.figure != ROW}
        keys.update(row.get(KEYS, {}))
        for c in (*layout.columns, *layout.unprinted):
            v = row.get(c.figure)
            if c.key or v is None:
                continue
            measured = isinstance(v, Measured)
            runs, rounds, shares, processes = (samples(v) if measured else None) or (None,) * 4
            out.append({"experiment": layout.name, "keys": dict(keys), "figure": c.figure,
                        "unit": c.unit,
                        "statistic": STATISTIC[v.timing.stat] if measured else COMPUTED,
                        "value": value(v), "samples": runs, "runs": len(runs) if runs else None,
                        **({"rounds": rounds, "shares": shares, **visits(v)} if rounds else {}),
                        **({"processes": processes} if rounds and processes else {}),
                        **(conditions(v) if measured else {}),
                        "compared": c.compared, "predicted": predicted,
                        "settings": settings})
            if c.centered and runs and center:
                out[-1] = center(out[-1])
            if c.by_round and runs and rounds:
                out[-1] = {**out[-1], "value": statistics.median(runs), "statistic": "median"}
    return out


def visits(m):
    """Which trials a measured figure rests on, what one visit of them all takes, and what one
    more process of every kind takes, where the run planned them."""
    trials = {t.trial: t.visit_s for t in m.timings if t.trial}
    if not trials:
        return {}
    more = [t.process_s for t in m.timings if t.process_s]
    return {"trials": sorted(trials), "visit_s": sum(s or 0.0 for s in trials.values()),
            **({"process_s": max(more)} if more else {})}


def conditions(m):
    """How the runs behind a measured figure went: {"others": the most of the cores other work
    took during any of them (None: unknown), "again": how many were measured again because
    other work disturbed them, "disturbed": whether too few were clean even so}."""
    shares = [t.share for t in m.timings if t.share is not None]
    return {"others": max(shares) if shares else None,
            "again": sum(t.again for t in m.timings),
            "disturbed": any(t.disturbed for t in m.timings)}


def disturbance(found):
    """How disturbed a run was, from its records, row by row (a row's figures share its runs):
    {"figures": the measured rows, "disturbed": how many of them other work disturbed beyond
    measuring again, "again": the runs measured again, "others": the most of the cores other
    work took in any kept run (None: unknown)}."""
    measured = [r for r in found if r.get("samples") and not r.get("predicted")]
    by_row = {}
    for r in measured:
        by_row.setdefault((r["experiment"], tuple(r["keys"].items())), []).append(r)
    shares = [r["others"] for r in measured if isinstance(r.get("others"), (int, float))]
    return {"figures": len(by_row),
            "disturbed": sum(any(r.get("disturbed") is True for r in row)
                             for row in by_row.values()),
            "again": sum(max([r["again"] for r in row if type(r.get("again")) is int] or [0])
                         for row in by_row.values()),
            "others": max(shares) if shares else None}


def from_rows(made, settings, predicted=False, center=None):
    """The records of [(layout, rows)], each as make() makes them."""
    return [r for layout, rows in made for r in make(layout, rows, settings, predicted, center)]


def settings_of(args, **more):
    """The settings a run's records keep, from its flags."""
    flags = {k: v for k, v in vars(args).items() if k in SETTINGS
             and not (k == "threads" and getattr(args, "predict", False))}  # a prediction runs
    #                                                                        on no threads
    return {**{k: list(v) if isinstance(v, tuple) else v for k, v in flags.items()}, **more}


class Missing(LookupError):
    """A figure that is not among the records: not run, or run with other settings."""


def of(found, experiment):
    """The records of one experiment."""
    return [r for r in found if r["experiment"] == experiment]


def matches(record, experiment, figure, keys):
    return (record["experiment"] == experiment and record["figure"] == figure
            and all(record["keys"].get(k) == v for k, v in keys.items()))


def find(records, experiment, figure, /, **keys):
    """The one record of this experiment and figure whose keys include `keys`; raise Missing
    where there is none."""
    found = [r for r in records if matches(r, experiment, figure, keys)]
    if not found:
        said = " ".join(f"{k} {v}" for k, v in keys.items())
        raise Missing(f"{experiment}: {figure}" + (f" at {said}" if said else ""))
    return found[0]


def rows(records, experiment):
    """{keys as a tuple of items: {figure: value}} of one experiment, in the order saved."""
    out = {}
    for r in records:
        if r["experiment"] == experiment:
            out.setdefault(tuple(r["keys"].items()), {})[r["figure"]] = r["value"]
    return out


def named(r):
    """A record's figure in words: 'decode users 1: step'."""
    keys = label(r["keys"])
    return f"{r['experiment']}{' ' + keys if keys else ''}: {r['figure']}"


def label(keys):
    """A row's keys in words: 'prompt 256', 'users 16 notes 512'; a text key as it is."""
    return " ".join(str(v) if isinstance(v, str) else f"{k} {v}" for k, v in keys.items())


# ---- what a record's value may be, by its unit (the schema's check, and every reader)


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
    """A figure of this unit is above 0: a time, a rate, a ratio or a size (what a trip reads)."""
    return kind(unit) != "other" or unit in ("x", "MB", "GB")


def what(unit):
    return ("text or a number" if unit == "" else "finite number above 0" if positive(unit)
            else "finite number of 0 or more")
