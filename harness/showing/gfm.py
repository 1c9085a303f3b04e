"""A sheet as GitHub renders report.md: a table of GitHub-flavoured Markdown (or several, each
within the page's width, the key columns repeated), numbers right-aligned, every cell and line of
text escaped so that nothing in it renders as what it is not."""
import re

from harness.keeping.records import SIG, Column, ROW, label, rows, sig
from harness.showing.escaping import for_cell, for_markdown
from harness.showing.printers import COARSER, cell


class Raw(str):
    """A cell that is Markdown already, made here of escaped text: gfm() takes it as it is."""


def section(sheet, name, found, titled=True):
    """One sheet as Markdown: its title (unless its section's heading says it), its settings,
    its rows (from the records) as one or more tables, each within the page's width (the key
    columns repeated, each table after the first under a heading of its own), numbers
    right-aligned, and the note under it as text."""
    columns = [Column(c["figure"], c.get("header") or c["figure"], c.get("unit", ""),
                      c.get("format") or "", c.get("key", False), empty=c.get("empty", ""))
               for c in sheet.get("columns", [])]
    labels = labels_of(sheet)
    cells = [[labels.get(keys) or named(dict(keys)) if c.figure == ROW
              and c.figure not in dict(keys) else
              cell_text(dict(keys).get(c.figure) if c.key else figures.get(c.figure), c)
              for c in columns] for keys, figures in rows(found, name).items()]
    note = sheet.get("note") if "note" in sheet else last_note(sheet.get("printed") or "")
    shown = [COARSER[c.unit] if c.fmt.startswith(SIG + "/") and c.unit in COARSER else c.unit
             for c in columns]  # a column shown a thousand times coarser: printers.at_scale
    headers = [c.header if not u or u in c.header else f"{c.header} ({u})"
               for c, u in zip(columns, shown)]
    right = [c.fmt not in ("s", "") or c.unit not in ("", "s") for c in columns]
    tables = [gfm([headers[i] for i in part], [[row[i] for i in part] for row in cells],
                  [right[i] for i in part])
              for part in fitted(headers, cells, [c.key for c in columns])] \
        if cells and columns else ["(no figures kept)"]  # a sheet that saved no columns: none
    title = md(sheet.get("title") or name)
    tables = [t if i == 0 else f"#### {title}, continued\n\n{t}" for i, t in enumerate(tables)]
    return [*([f"### {title}", ""] if titled else []),
            *([f"_{md(sheet['settings'])}_", ""] if sheet.get("settings") else []),
            *"\n\n".join(tables).split("\n"),
            "", *(["\n".join(md(line) for line in note.splitlines()), ""] if note else [])]


def labels_of(sheet):
    """{a row's keys, as items: its printed name} that a sheet saved; an entry that is not a name
    with keys of text or numbers, as a row's keys are, names no row."""
    saved = sheet.get("labels")
    return {tuple(n["keys"].items()): n["label"] for n in saved if isinstance(n, dict)
            and isinstance(n.get("keys"), dict) and isinstance(n.get("label"), str)
            and all(isinstance(v, (str, int, float)) for v in n["keys"].values())} \
        if isinstance(saved, list) else {}


def named(keys):
    """A row's name where its sheet prints one (the check's, the breakdown's) and its result
    saved none: its keys in words, its experiment apart ('prompt 256')."""
    return label({k: v for k, v in keys.items() if k != "experiment"}) or "its own row"


PAGE = 890  # px: GitHub's column for a file's Markdown (its 980-px page less its margins)
CHAR, PADDING = 7.5, 26  # px: a table cell's character at its 14-px font, and its padding


def widths(headers, cells):
    """Each column's width on the page, in px: its widest cell, or its header's longest word (a
    header wraps between its words)."""
    return [max([max(map(len, headers[i].split()), default=0), *(len(row[i]) for row in cells)])
            * CHAR + PADDING for i in range(len(headers))]


def fitted(headers, cells, keys):
    """The columns split into groups that each fit the page, each led by the key columns:
    [[column index]]; one group where all fit."""
    width = widths(headers, cells)
    lead = [i for i, k in enumerate(keys) if k]
    groups, current = [], list(lead)
    for i in (i for i, k in enumerate(keys) if not k):
        if len(current) > len(lead) and sum(width[j] for j in current + [i]) > PAGE:
            groups.append(current)
            current = list(lead)
        current.append(i)
    return groups + [current]


def gfm(headers, rows, right=None):
    """A GitHub-flavoured Markdown table: every cell escaped, numbers right-aligned."""
    right = right or [bool(rows) and all(re.fullmatch(r"[-+]?[\d,.]+%?x?", str(r[i]).strip())
                                         for r in rows) for i in range(len(headers))]
    line = lambda cells: "| " + " | ".join(c if isinstance(c, Raw) else for_cell(c)  # noqa: E731
                                          for c in cells) + " |"
    return "\n".join([line(headers), "| " + " | ".join("---:" if r else "---" for r in right)
                      + " |", *(line(row) for row in rows)])


def md(text, in_table=False):
    """Text from a results file as Markdown shows it, character for character (in a table's
    cell, text.for_cell; elsewhere text.for_markdown)."""
    return for_cell(text) if in_table else for_markdown(text)


def cell_text(v, column):
    """A figure as its column prints it, as text; an older file's column that names no format,
    or names one that does not apply, shows a number to four significant digits."""
    if not column.fmt:
        return column.empty if v is None else sig(v, 4) if isinstance(v, float) else str(v)
    try:
        return cell(v, column)
    except (ValueError, TypeError):
        return sig(v, 4) if isinstance(v, (int, float)) else str(v)


def last_note(printed):
    """The note under an older result's table: its last line, where it is one."""
    last = printed.splitlines()[-1] if printed.strip() else ""
    return last if last.startswith("(") else ""
