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

KEYS = "keys"  # a row's entry for keys it does not print (the check's row of prefill: prompt)
EXCESS = ("the BLAS", "our tables", "attention", "elementwise", "other")  # whose time a row
#          spends over its limit: the breakdown records each as "excess: <part>"
ROW = "row"  # the figure of a column that prints a row's name: a label, never a key
STATISTIC = {"middle": "median", "best": "best", "limit": "limit"}  # Timing.stat, as saved
COMPUTED = "computed"  # a figure with no timing behind it: a count, the accounting, a ratio given
SETTINGS = ("model", "threads", "runs", "notes", "typers", "question", "seed", "attention",
            "blocks", "paths", "size", "matmul", "tokens", "quick", "predict", "dtype",
            "note_dtype", "devices", "device")
#           the flags (and the chosen paths) a record keeps: what makes two figures alike


@dataclasses.dataclass(frozen=True)
class Measured:
    """A figure and the timings behind it, which never part: value is the product of each
    timing's seconds to its power (1 for a time, -1 for a rate), times a constant."""
    value: float
    parts: tuple  # ((power, Timing), ...)

    @property
    def timing(self):
        """The first timing behind it: its statistic and run count name the figure's."""
        return self.parts[0][1]


def timed(value, t, power=1):
    """A figure of one timing: a time (power 1) or a rate (power -1)."""
    return Measured(value, ((power, t),))


def ms(t):
    """A Timing as a figure in milliseconds."""
    return timed(t.seconds * 1e3, t)


def value(v):
    """A row's entry as a plain number or text, whether measured or not."""
    v = v.value if isinstance(v, Measured) else v
    return v.item() if hasattr(v, "item") else v


def samples(m):
    """The figure in each counted run, in its own unit: the value scaled by how far each run's
    timings sit from the statistic they were summed up by. None where runs do not pair up."""
    counts = {len(t.samples) for _, t in m.parts}
    if len(counts) != 1 or any(t.seconds <= 0 for _, t in m.parts):
        return None
    return [value(m) * math.prod((t.samples[i] / t.seconds) ** p for p, t in m.parts)
            for i in range(counts.pop())]


def make(layout, rows, settings, predicted=False):
    """The records of an experiment's rows, as measured or predicted: one per figure that is not
    a key and not empty. layout: its printers.Layout, whose columns name each figure's unit and
    which are keys (a ROW column, the row's printed name, is none: figures are found by their
    keys); rows: [{figure: a Measured, a number or a word}], a row's unprinted keys under KEYS;
    settings: the flags (and paths) it ran with."""
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
            runs = samples(v) if measured else None
            out.append({"experiment": layout.name, "keys": dict(keys), "figure": c.figure,
                        "unit": c.unit,
                        "statistic": STATISTIC[v.timing.stat] if measured else COMPUTED,
                        "value": value(v), "samples": runs, "runs": len(runs) if runs else None,
                        **(conditions(v) if measured else {}),
                        "predicted": predicted, "settings": settings})
    return out


def conditions(m):
    """How the runs behind a measured figure went: {"others": the most of the cores other work
    took during any of them (None: unknown), "again": how many were measured again because
    other work disturbed them, "disturbed": whether too few were clean even so}."""
    shares = [t.share for _, t in m.parts if t.share is not None]
    return {"others": max(shares) if shares else None,
            "again": sum(t.again for _, t in m.parts),
            "disturbed": any(t.disturbed for _, t in m.parts)}


def disturbance(found):
    """How disturbed a run was, from its records, row by row (a row's figures share its runs):
    {"figures": the measured rows, "disturbed": how many of them other work disturbed beyond
    measuring again, "again": the runs measured again, "others": the most of the cores other
    work took in any kept run (None: unknown)}."""
    timed = [r for r in found if r.get("samples") and not r.get("predicted")]
    by_row = {}
    for r in timed:
        by_row.setdefault((r["experiment"], tuple(r["keys"].items())), []).append(r)
    shares = [r["others"] for r in timed if isinstance(r.get("others"), (int, float))]
    return {"figures": len(by_row),
            "disturbed": sum(any(r.get("disturbed") is True for r in row)
                             for row in by_row.values()),
            "again": sum(max([r["again"] for r in row if type(r.get("again")) is int] or [0])
                         for row in by_row.values()),
            "others": max(shares) if shares else None}


class Seen(list):
    """Records as a judge reads them, keeping each record it found (find())."""

    def __init__(self, found):
        super().__init__(found)
        self.used = []


def from_rows(made, settings, predicted=False):
    """The records of [(layout, rows)], each as make() makes them."""
    return [r for layout, rows in made for r in make(layout, rows, settings, predicted)]


def settings_of(args, **more):
    """The settings a run's records keep, from its flags."""
    flags = {k: v for k, v in vars(args).items() if k in SETTINGS
             and not (k == "threads" and getattr(args, "predict", False))}  # a prediction runs
    #                                                                        on no threads
    return {**{k: list(v) if isinstance(v, tuple) else v for k, v in flags.items()}, **more}


class Missing(LookupError):
    """A figure that is not among the records: not run, or run with other settings."""


@dataclasses.dataclass(frozen=True)
class Figure:
    """A figure as a judge reads it: its value, and the range its counted runs spanned (lo = hi
    = value where no samples were kept); its record, where it is one. A product or quotient of
    figures spans the worst case either way (every figure a judge divides is above 0)."""
    value: float
    lo: float
    hi: float
    record: dict = None
    measured: bool = False  # a timing is behind it, not only counts or limits

    @property
    def spread(self):
        return self.hi / self.lo if self.lo > 0 else math.inf

    def __format__(self, spec):
        return format(self.value, spec)

    def __mul__(self, other):
        o = span(other)
        return Figure(self.value * o.value, self.lo * o.lo, self.hi * o.hi, None,
                      self.measured or o.measured)

    __rmul__ = __mul__

    def __add__(self, other):
        o = span(other)
        return Figure(self.value + o.value, self.lo + o.lo, self.hi + o.hi, None,
                      self.measured or o.measured)

    def __sub__(self, other):
        o = span(other)
        return Figure(self.value - o.value, self.lo - o.hi, self.hi - o.lo, None,
                      self.measured or o.measured)

    def __truediv__(self, other):
        o = span(other)
        return Figure(self.value / o.value, self.lo / o.hi, self.hi / o.lo, None,
                      self.measured or o.measured)

    def __rtruediv__(self, other):
        return span(other) / self


def span(v):
    """A plain number as a Figure with no spread."""
    return v if isinstance(v, Figure) else Figure(v, v, v)


def of(found, experiment):
    """The records of one experiment."""
    return [r for r in found if r["experiment"] == experiment]


def matches(record, experiment, figure, keys):
    return (record["experiment"] == experiment and record["figure"] == figure
            and all(record["keys"].get(k) == v for k, v in keys.items()))


def find(records, experiment, figure, /, **keys):
    """The one record of this experiment and figure whose keys include `keys`: -> Figure; raise
    Missing where there is none."""
    found = [r for r in records if matches(r, experiment, figure, keys)]
    if not found:
        said = " ".join(f"{k} {v}" for k, v in keys.items())
        raise Missing(f"{experiment}: {figure}" + (f" at {said}" if said else ""))
    r = found[0]
    if isinstance(records, Seen):
        records.used.append(r)
    if isinstance(r["value"], str):
        return Figure(r["value"], r["value"], r["value"], r)
    lo, hi = noise(r)
    measured = bool(r.get("samples")) and not r.get("predicted") and r["statistic"] != "limit"
    return Figure(r["value"], min(lo, r["value"]), max(hi, r["value"]), r, measured)


def noise(r):
    """How far a figure's runs leave room for it to be: the middle half of the runs around a
    median (their quartiles), the two best around a best (a best's noise is how near the next
    run came), the value itself where no runs were kept. -> (lo, hi)"""
    runs = sorted(r.get("samples") or [r["value"]])
    if r["statistic"] == "best" and len(runs) > 1:
        return (runs[0], runs[1]) if r["value"] <= runs[0] else (runs[-2], runs[-1])
        #      a best time is the least of its runs; a best rate, the most
    quarter = len(runs) // 4
    return runs[quarter], runs[len(runs) - 1 - quarter]


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
