"""Printers: a sheet of figures (a table of measured or predicted rows) as the post prints it,
as any tabulate format, and as its JSON entry. Printers never measure."""
import dataclasses

from harness.terminal import plural


@dataclasses.dataclass(frozen=True)
class Sheet:
    """One printed table. columns: [(header, unit, floatfmt)]; rows: lists of values; figures:
    per row, {column: [(power, Timing)]}, the timings behind each measured figure (the figure
    goes as the product of their seconds, each to its power: 1 for a time, -1 for a rate);
    timed: the columns whose figure is one timing, which --spread follows with a ± column and
    the note under the sheet sums up; text: what to print instead of the table (the post's own
    layout, for the plain format); title and settings: the line above it, saying what it is
    and how it was run."""
    name: str
    columns: list
    rows: list
    figures: list = ()
    timed: tuple = ()
    text: str = None
    per: str = "row"
    note: str = ""
    title: str = ""
    settings: str = ""

    def timings(self):
        """The timings of the timed columns, row by row."""
        return [f[c][0][1] for f in self.figures for c in self.timed]


def render(sheet, fmt="plain", spread=False):
    """The sheet as printed: its title and settings, its table (the post's layout where it has
    one) and, under a measured sheet, the statistic and the spread of its timings."""
    return "\n".join(filter(None, [heading(sheet), body(sheet, fmt, spread)]))


def heading(sheet):
    return f"{sheet.title}: {sheet.settings}" if sheet.settings else sheet.title


def body(sheet, fmt="plain", spread=False):
    """The table and the line under it, without the heading."""
    columns, rows, text = sheet.columns, sheet.rows, sheet.text
    if spread and sheet.timed and sheet.figures:
        columns, rows, text = *with_spread(sheet), None
    lines = [text if text is not None else format_table(columns, rows, fmt)]
    if sheet.timed and sheet.figures:
        lines.append(spread_note(sheet.timings(), sheet.per, sheet.note))
    elif sheet.note:
        lines.append(sheet.note)
    return "\n".join(lines)


def format_table(columns, rows, fmt):
    """columns: [(header, unit, floatfmt)]. The plain layout packs the columns as the post does:
    numbers right-aligned under headers no wider than they are."""
    from tabulate import tabulate
    if fmt != "plain":  # every header says its unit, where the post's layout leaves it out
        return tabulate(rows, headers=[h if u in h else f"{h} ({u})" for h, u, _ in columns],
                        tablefmt=fmt, floatfmt=[c[2] for c in columns])
    cells = [[format(v, f) if isinstance(v, float) else str(v)
              for v, (_, _, f) in zip(row, columns)] for row in rows]
    return tabulate([[c[0] for c in columns]] + cells, tablefmt="plain", disable_numparse=True,
                    colalign=["left" if f == "s" else "right" for _, _, f in columns])


def with_spread(sheet):
    """The table with a ± column after each timed one: the standard deviation of its samples,
    in the figure's own unit. -> (columns, rows)"""
    columns = []
    for i, column in enumerate(sheet.columns):
        columns.append(column)
        if i in sheet.timed:
            columns.append((f"± {column[0]}", column[1], column[2]))
    rows = []
    for row, figures in zip(sheet.rows, sheet.figures):
        cells = []
        for i, value in enumerate(row):
            cells.append(value)
            if i in sheet.timed:
                t = figures[i][0][1]
                cells.append(value / t.seconds * t.sd)  # in the unit of the figure beside it
        rows.append(cells)
    return columns, rows


def spread_note(timings, per, note=""):
    """The line under a table that names the statistic and shows how far the samples spread."""
    spreads = [t.spread for t in timings]
    span = (f"{spreads[0]:.2f}x" if len(spreads) == 1
            else f"{min(spreads):.2f}x to {max(spreads):.2f}x")
    runs = plural(len(timings[0].samples), "run")
    return f"({timings[0].label} {runs} per {per}; spread slowest/fastest {span}{note})"


def entry(sheet):
    """The sheet's JSON entry: columns with units, rows unrounded, and for every measured figure
    the samples behind it, one layout for every sheet: samples_s[row][header] = [[power,
    [seconds, ...]], ...]."""
    out = {"columns": [{"header": h, "unit": u} for h, u, _ in sheet.columns],
           "rows": [[plain(v) for v in row] for row in sheet.rows],
           "title": sheet.title, "settings": sheet.settings, "printed": body(sheet)}
    if sheet.figures:
        timed = sheet.timings()
        if timed:
            out.update(stat=timed[0].label, spread=[t.spread for t in timed])
        out["samples_s"] = [{sheet.columns[c][0]: [[power, list(t.samples)] for power, t in parts]
                             for c, parts in figures.items()} for figures in sheet.figures]
    return out


def plain(v):
    """A JSON-ready number: NumPy scalars become Python ones."""
    return v.item() if hasattr(v, "item") else v


@dataclasses.dataclass(frozen=True)
class Saved:
    """Something a run keeps in its JSON beside the sheets: the speeds, the roofline's points."""
    key: str
    value: object


@dataclasses.dataclass(frozen=True)
class Picture:
    """A file beside the result: draw(path) writes it."""
    name: str
    draw: object
