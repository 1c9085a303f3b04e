"""The report a user pastes: results/<machine>/report.md, made anew from the folder's saved full
runs whenever one of them is saved, in the post's order: the machine, every table with its title
and settings, the post's claims with a verdict each, the pictures, the runs' warnings. Quick
runs never go into it. It reads saved results and measures nothing.

    python two_phases.py   # a full run brings results/<machine>/report.md up to date
"""
import os
import re

from harness import claims, machine, results, schema, speeds
from harness.printers import Column, cell, col, format_table, sig
from harness.records import rows
from harness.terminal import printable, warn
from harness.text import for_markdown

PICTURES = {"roofline.png": "The roofline", "decode.png": "Batching's trade",
            "dial.png": "The chunk-size dial", "depth.png": "How deep the notebooks are"}
NAME = "report.md"


def with_run(folder, script, data, names):
    """A writer of the folder's report as it will be once this run's files (names) are in:
    the folder's saved full runs, this script's replaced by data. It runs inside the run's own
    save, under the folder's lock, so that a result and its report are one save."""
    def write(f):  # f: the new file, open, binary
        runs = {**saved_runs(folder), script: schema.upgrade(data)}
        runs = {s: runs[s] for s in results.SCRIPTS if s in runs}  # the post's order
        f.write(made(runs, script, [*os.listdir(folder), *names]).encode("utf-8"))
    return write


UNUSABLE = (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError)


def made(runs, script, names):
    """The report of these runs; an earlier run whose figures it cannot use (one that divides by
    zero, text where a number must be) is left out with one line, so that no saved file ever
    keeps a run from saving its own result; and if even this run's own cannot be reported, the
    report says so in place of it."""
    for other in [s for s in runs if s != script]:
        try:
            markdown({other: runs[other]}, names)
        except UNUSABLE as e:
            warn(f"the report leaves out {other}.json: its figures cannot be reported "
                 f"({type(e).__name__}: {str(e)[:80]})")
            runs = {s: d for s, d in runs.items() if s != other}
    for tried in (runs, {script: runs[script]}):
        try:
            return markdown(tried, names)
        except UNUSABLE as e:
            why = f"{type(e).__name__}: {str(e)[:80]}"
    warn(f"the report could not be made ({why}); this run's own files are saved")
    return f"# Prefill vs Decode\n\nThe report could not be made from these results ({md(why)}).\n"


def saved_runs(folder):
    """{script: its saved full run} of the folder, as the last whole save left them."""
    paths, _ = results.as_saved(folder)
    found = {}
    for script in results.SCRIPTS:
        if script + ".json" in paths:
            try:
                found[script] = schema.load(paths[script + ".json"], script)
            except ValueError as e:
                warn(f"the report leaves out {script}.json: it {e}")
    return found


def markdown(runs, names):
    """The report's text: GitHub-flavoured Markdown that pastes into a post as it is, and renders
    on a code-hosting site: each script's section dated, with its command, each table a real
    table with its title, settings and note as text, the pictures beside the run that drew
    them; then the claims as a table, their rules in a list, and the runs' warnings."""
    predicted = [s for s, data in runs.items() if data.get("predicted")]
    lines = ["# Prefill vs Decode, " + ("predicted: every figure a limit, nothing was run"
                                         if predicted and len(predicted) == len(runs) else
                                         "rerun on this machine"), ""]
    said = {}  # each machine line once, with the scripts it measured
    for script, data in runs.items():
        said.setdefault(data.get("predicted") or machine.line(data["machine"]), []).append(script)
    for line, scripts in said.items():
        lines += ["- " + ", ".join(f"`{s}.py`" for s in scripts) + f": {md(line)}", ""]
    busy = [f"`{s}.py` ({'; '.join(d['machine']['busy'])})" for s, d in runs.items()
            if d["machine"].get("busy")]
    if busy:
        lines += [f"> **Busy:** {', '.join(busy)} ran while the machine was busy: its timings "
                  "back no verdict, so its claims read 'cannot tell here'. Rerun on a quiet "
                  "machine, with more `--runs`, or with fewer `--threads`.", ""]
    disturbed = [f"`{s}.py` ({md(machine.disturbed_words(d['machine'].get('disturbance')))})"
                 for s, d in runs.items()
                 if machine.disturbed_words(d["machine"].get("disturbance")).startswith("DIST")]
    if disturbed:
        lines += [f"> **Disturbed:** {', '.join(disturbed)}: other work took the cores while "
                  "some figures were measured, even measured again; the claims that rest on "
                  "them read 'cannot tell here'. Rerun when the machine is quieter (close what "
                  "else runs), or with more `--runs`.", ""]
    lines += HOW_TO_READ + (["Every figure here is a limit, the fastest each machine allows: "
                             "max(bytes / the forklift, FLOPs / the workbench). Nothing was "
                             "run; a real engine reaches some fraction of it.", ""]
                            if predicted and len(predicted) == len(runs) else MEASURED)
    for script, data in runs.items():  # each script's sheets in the order its run printed them
        lines += heading(script, data)
        for name, sheet in data["sheets"].items():
            if name != "claims":
                lines += section(sheet, name, data["records"])
        drawn = [n for n in PICTURES if n in drawn_by(data, names)] if script == "two_phases" \
            else []
        lines += [f"![{PICTURES[n]}]({n})\n" for n in drawn]
    roofs = speeds.read(runs.get("two_phases", {}).get("roofs")
                        or runs.get("machine_speed", {}).get("roofs"))
    found = [v for script, data in runs.items()
             for v in claims.both(data["records"], roofs, (script,), data.get("settings", {}),
                                  data["machine"].get("busy") or (), data.get("at_limits") or [])]
    limits = any(at for *_, at in found)
    lines += ["## The post's claims " + ("about a GPU, predicted" if predicted and len(
        predicted) == len(runs) else "on this machine"), "",
              "Each verdict follows its rule, listed below the table; 'about' means within "
              "1.5x either way, over the middle half of the runs" + (
                  "; 'at the limits' is the verdict on the rows a perfect implementation would "
                  "give on this machine: where the two differ, the suite's distance from the "
                  "limits decides it here, not the machine." if limits else "."), "",
              format_table(CLAIM_COLUMNS[:5 if limits else 4], [
                  [md(x, in_table=True) for x in (v, c.says, c.post, h or "-",
                                                  claims.limited(at))]
                  for c, h, v, _, at in found], "github"), "",
              "The rules, and why a claim does not hold or cannot be told:", "",
              *(f"- **{md(c.says)}**: {md(c.rule)}." + (f" Why: {md(w)}." if w else "")
                for c, _, _, w, _ in found), ""]
    warned = [f"- `{script}.py`: {md(w)}" for script, data in runs.items()
              for w in condensed(data.get("made", {}).get("warnings", []))]
    lines += ["## Warnings", "", *(warned or ["None."]), ""]
    return "\n".join(lines) + "\n"


CLAIM_COLUMNS = [col(f, f, "", "s") for f in ("verdict", "the post says", "post", "here",
                                               "at the limits")]
GLOSSARY = [("forklift", "memory bandwidth (GB/s)"), ("workbench", "peak math (GFLOP/s)"),
            ("balance", "machine balance, FLOPs per byte: the roofline's ridge"),
            ("tables", "the weight matrices"), ("floor", "a layer (transformer block)"),
            ("trip", "a forward pass"), ("notebook", "a user's KV cache"),
            ("notes", "cached tokens: a key and a value per layer each"),
            ("reading", "prefill"), ("typing", "decode: one new token per user per step"),
            ("typers", "users decoding together: the batch"), ("question", "the prompt"),
            ("first word, the newcomer's wait", "time to first token (TTFT)"),
            ("gap", "the time between two tokens of one user (inter-token latency)"),
            ("chunk", "chunked prefill: the prompt's tokens read per step"),
            ("collision", "a long prompt arriving while others decode"),
            ("the accounting", "FLOPs and bytes counted from the model's shapes")]
HOW_TO_READ = [
    "## How to read this", "",
    "The post's words, and the terms an engineer searches for:", "",
    "| the post says | engineers say |", "| --- | --- |",
    *(f"| {post} | {term} |" for post, term in GLOSSARY), ""]
MEASURED = [
    "Each measured figure is the middle of several runs (`machine_speed.py` keeps the best); the "
    "line under each result names the statistic and how far the runs spread. The columns:", "",
    "- **limit**: the fastest the machine allows a row, max(bytes / the forklift, FLOPs / the "
    "workbench); **bound by**: which of the two it is; **x limit**: the row's time against it "
    "(1 is perfect; above 2, look for a bug, as the post did).",
    "- **one call**, **x one call**: the trip's table products as one library (BLAS) call each, "
    "and the tables' time against it (under 1: the suite's path beats the library's).",
    "- **most excess**: whose time is furthest above its limit: the BLAS, our tables, "
    "attention, elementwise, or other (Python).",
    "- **worst x normal**: the typers' worst gap against their gap with no newcomer; **notes % "
    "of bytes**: the notebooks' share of what a trip fetches.", ""]


def heading(script, data):
    """A script's section: its name, when it ran, and its command."""
    made = data.get("made") or {}
    when = data["machine"]["date"][:16].replace("T", " ")
    return [f"## `{script}.py`, {'predicted' if data.get('predicted') else 'run'} "
            f"{md(when)} UTC", "", *([f"`{printable(made['command']).replace('`', chr(39))}` "
                                      f"({md(made.get('version', ''))})", ""]
                                     if made.get("command") else [])]


def section(sheet, name, found):
    """One sheet as Markdown: its title, its settings, its rows (from the records) as a table,
    and the note under it as text."""
    columns = [Column(c["figure"], md(c.get("header") or c["figure"]), c.get("unit", ""),
                      c.get("format") or "", c.get("key", False), empty=c.get("empty", ""))
               for c in sheet["columns"]]
    cells = [[cell_text(dict(keys).get(c.figure) if c.key else figures.get(c.figure), c)
              for c in columns] for keys, figures in rows(found, name).items()]
    note = sheet.get("note") if "note" in sheet else last_note(sheet.get("printed") or "")
    return [f"### {md(sheet.get('title') or name)}", "",
            *([f"_{md(sheet['settings'])}_", ""] if sheet.get("settings") else []),
            format_table(columns, [[md(v, in_table=True) for v in row] for row in cells],
                         "github") if cells else "(no figures kept)",
            "", *(["\n".join(md(line) for line in note.splitlines()), ""] if note else [])]


def md(text, in_table=False):
    """Text from a results file as Markdown shows it, character for character (text.for_markdown:
    a '|' never ends a table's cell either)."""
    return for_markdown(text)


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


def drawn_by(data, names):
    """The pictures this run drew: those it names, or, for an older run that names none, every
    picture in the folder."""
    return data["pictures"] if isinstance(data.get("pictures"), list) else names


def condensed(warnings):
    """A run's warnings, its noisy figures in one line: which, and the widest spread."""
    noisy = [w for w in warnings if w.startswith("noisy machine: ")]
    if len(noisy) < 2:
        return warnings
    found = [re.match(r"noisy machine: (.*) spread ([0-9.]+)x", w) for w in noisy]
    spreads = [float(m.group(2)) for m in found if m]
    named = [m.group(1) if m else w[len("noisy machine: "):][:60] for m, w in zip(found, noisy)]
    return [w for w in warnings if w not in noisy] + [
        f"noisy machine: the runs of {len(noisy)} figures spread by more than 1.2x"
        + (f", up to {max(spreads):.2f}x" if spreads else "") + f" ({'; '.join(named)})"]
