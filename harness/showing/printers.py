"""Printers: a sheet of figures (a table of measured or predicted rows) as the post prints it,
as any tabulate format, and as its JSON entry. Printers never measure."""
import dataclasses
import math

from harness.terminal import plural
from harness.keeping.records import ROW, SIG, Layout, named, sig, value
from harness.judging.intervals import outliers


@dataclasses.dataclass(frozen=True)
class Sheet:
    """One printed table, rendered from records by a layout: the records' rows (one per keys,
    in the order the records came), each cell the record of its column's figure. settings: the
    line above it with the title, saying how it was run; note: added to the line under it; text:
    what to print instead of the table (the post's own layout, for the plain format); labels:
    {row keys as items: the row's name} for a ROW column; rows: for a sheet of words rather than
    figures (the claims' verdicts), its rows as they print, and then it records nothing."""
    layout: Layout
    records: tuple = ()
    settings: str = ""
    note: str = ""
    text: str = None
    labels: dict = None
    rows: list = None

    name = property(lambda self: self.layout.name)
    title = property(lambda self: self.layout.title)
    columns = property(lambda self: self.layout.columns)

    @property
    def recorded(self):
        return self.rows is None

    def figure_rows(self):
        """[(keys, {figure: record})], one per row, in the records' order."""
        out = {}
        for r in self.records:
            keys = tuple(r["keys"].items())
            out.setdefault(keys, (r["keys"], {}))[1][r["figure"]] = r
        return list(out.values())

    def timings(self):
        """The records of the timed figures that kept their runs, row by row."""
        return [row[f] for _, row in self.figure_rows() for f in self.layout.timed
                if row.get(f) and row[f].get("samples")]

    def cells(self):
        """The rows as printed: a list of values per row, in the columns' order."""
        if self.rows is not None:
            return [[value(row.get(c.figure)) for c in self.columns] for row in self.rows]
        labels = self.labels or {}
        return [[labels.get(tuple(keys.items())) if c.figure == ROW and c.figure not in keys
                 else keys.get(c.figure) if c.key
                 else row[c.figure]["value"] if c.figure in row else None
                 for c in self.columns] for keys, row in self.figure_rows()]


def sheet(layout, found, **kw):
    """The Sheet of one layout's experiment, from every record found so far."""
    return Sheet(layout, tuple(r for r in found if r["experiment"] == layout.name), **kw)


def render(sheet, fmt="plain", spread=False):
    """The sheet as printed: its title and settings, its table (the post's layout where it has
    one) and, under a measured sheet, the statistic and the spread of its timings."""
    return "\n".join(filter(None, [heading(sheet), body(sheet, fmt, spread)]))


def heading(sheet):
    return f"{sheet.title}: {sheet.settings}" if sheet.settings else sheet.title


def body(sheet, fmt="plain", spread=False):
    """The table and the line under it, without the heading."""
    columns, rows, text = sheet.columns, sheet.cells(), sheet.text
    if spread and sheet.timings():
        columns, rows, text = *with_spread(sheet), None
    return "\n".join(filter(None, [text if text is not None else format_table(columns, rows, fmt),
                                    under(sheet)]))


def under(sheet):
    """The line under the table: the statistic and the spread of its timings, and its note."""
    if sheet.timings():
        return spread_note(sheet.timings(), sheet.layout.per, sheet.note)
    return sheet.note


def format_table(columns, rows, fmt):
    """columns: [Column]. Every layout shows the same digits, each column in its own format;
    the plain layout packs the columns as the post does, numbers right-aligned under headers no
    wider than they are; the others say each header's unit, where the post's layout leaves it
    out."""
    from tabulate import tabulate
    cells = [[cell(v, c) for v, c in zip(row, columns)] for row in rows]
    align = ["left" if c.fmt == "s" else "right" for c in columns]
    if fmt == "plain":
        return tabulate([[c.header for c in columns]] + cells, tablefmt="plain",
                        disable_numparse=True, colalign=align)
    return tabulate(cells, headers=[c.header if c.unit in c.header else f"{c.header} ({c.unit})"
                                    for c in columns],
                    tablefmt=fmt, disable_numparse=True, colalign=align)


TINY = 1e-3  # a figure shown to three significant digits smaller than this prints as <0.001


def cell(v, column):
    """A value as the plain layout prints it in this column."""
    if v is None:
        return column.empty
    if column.fmt.startswith(SIG) and isinstance(v, (int, float)) and not isinstance(v, bool):
        scale = column.fmt.partition("/")[2]  # "sig/1000": shown a thousand times coarser
        v = v / float(scale) if scale else v
        return "<0.001" if 0 < v < TINY else sig(v)  # (a predicted part that costs nothing)
    return format(v, column.fmt) if isinstance(v, float) else str(v)


COARSER = {"ms": "s", "MB": "GB", "GB": "TB", "GB/s": "TB/s", "GFLOP/s": "TFLOP/s"}  # a
#   unit, and the one a thousand times larger that large figures are shown in
LARGE = 10_000  # a column whose largest figure reaches this is shown in its coarser unit


def at_scale(sheet):
    """The sheet with each column of large figures shown a thousand times coarser ('990,000
    GFLOP/s' as '990 TFLOP/s', '121,000 ms' as '121 s') where every one of them stays 1 or
    more, and a column's link-serial twin with it; the records keep their own unit, so every
    reader compares what it always did."""
    columns, scaled = [], set()
    for c in sheet.columns:
        values = [r["value"] for r in sheet.records if r["figure"] == c.figure
                  and isinstance(r["value"], (int, float)) and not isinstance(r["value"], bool)]
        twin = any(c.figure.startswith(f + " ") for f in scaled)  # "total link serial"
        if c.fmt == SIG and c.unit in COARSER and values and (twin or (
                max(values) >= LARGE and min(values) >= 1000)):  # every figure 1 or more
            c = dataclasses.replace(c, fmt=f"{SIG}/1000", header=coarser(c.header, c.unit))
            scaled.add(c.figure)
        columns.append(c)
    return dataclasses.replace(sheet, layout=dataclasses.replace(sheet.layout, columns=columns))


def coarser(header, unit):
    """A column's header with its unit a thousand times coarser: 'step ms' -> 'step s',
    'ms/token' -> 's/token'."""
    words = header.split()
    shown = [COARSER[unit] + w[len(unit):] if w == unit or w.startswith(unit + "/") else w
             for w in words]
    return " ".join(shown) if shown != words else f"{header} ({COARSER[unit]})"


def with_spread(sheet):
    """The table with a column after each timed one: the range of its counted runs, slowest to
    fastest sample, in the figure's own unit. -> (columns, rows)"""
    columns = []
    for c in sheet.columns:
        columns.append(c)
        if c.figure in sheet.layout.timed:
            columns.append(dataclasses.replace(c, figure=c.figure + " range",
                                               header=f"{c.header} range", fmt="s", key=False))
    rows = []
    for cells, (_, row) in zip(sheet.cells(), sheet.figure_rows()):
        out = []
        for c, v in zip(sheet.columns, cells):
            out.append(v)
            if c.figure in sheet.layout.timed:
                runs = (row.get(c.figure) or {}).get("samples")
                out.append(f"{format(min(runs), c.fmt)} to {format(max(runs), c.fmt)}"
                           if runs else "")
        rows.append(out)
    return columns, rows


STATISTIC_WORDS = {"median": "middle", "best": "best", "limit": "limit"}  # as the note says it


def spread_note(timed, per, note=""):
    """The line under a table that names the statistic and shows how far the samples spread,
    and flags what backs no verdict (a figure other work disturbed beyond measuring again) and
    each sample far from the rest of its figure's (an outlier, by hyperfine's modified z-score:
    named, never dropped). timed: the records of its timed figures."""
    spreads = [max(r["samples"]) / min(r["samples"]) if min(r["samples"]) > 0 else math.inf
               for r in timed]
    span = (f"{spreads[0]:.2f}x" if len(spreads) == 1
            else f"{min(spreads):.2f}x to {max(spreads):.2f}x")
    first, n = timed[0], len(timed[0]["samples"])
    flags = [f"{named(r)} disturbed by other work" for r in timed if r.get("disturbed") is True]
    flagged = (f"; FLAGGED, no verdict rests on them: {', '.join(flags)}" if flags else "")
    odd = [f"{named(r)} {r['samples'][i]:.4g} {r['unit']}".rstrip()
           for r in timed for i in outliers(r["samples"])]
    odd_words = f"; far from the rest (counted like the rest): {', '.join(odd)}" if odd else ""
    unit = "round" if first.get("rounds") else "run"
    return (f"({STATISTIC_WORDS.get(first['statistic'], first['statistic'])} of {n} "
            f"{plural(n, unit)} per {per}; spread slowest/fastest {span}{note}{flagged}"
            f"{odd_words})")


def entry(sheet):
    """The sheet's presentation as saved beside the records: its title, settings, columns (each
    with the figure it shows), its rows' printed names where its keys are not (labels) and the
    table as printed. Readers take figures from the records."""
    return {"title": sheet.title, "settings": sheet.settings, "printed": body(sheet),
            "note": under(sheet),
            **({"labels": [{"keys": dict(keys), "label": label}
                           for keys, label in sheet.labels.items()]} if sheet.labels else {}),
            "columns": [{"figure": c.figure, "header": c.header, "unit": c.unit, "format": c.fmt,
                         "key": c.key, "compared": c.compared, **({"empty": c.empty} if c.empty
                                                                    else {})}
                        for c in sheet.columns]}


def spaced(sheets):
    """Each sheet, then a blank line."""
    for sheet in sheets:
        yield sheet
        yield ""


@dataclasses.dataclass(frozen=True)
class Saved:
    """Something a run keeps in its JSON beside the sheets: the speeds, the roofline's points."""
    key: str
    value: object


@dataclasses.dataclass(frozen=True)
class Picture:
    """A file beside the result: draw(f) writes it into f, a binary file open for it."""
    name: str
    draw: object
