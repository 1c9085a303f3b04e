"""The report a user pastes: results/<machine>/report.md, made anew from the folder's saved full
runs whenever one of them is saved, in the post's order: the machine, every table with its title
and settings, the post's claims with a verdict each, the pictures, the runs' warnings. Quick
runs never go into it. It reads saved results and measures nothing.

    python two_phases.py   # a full run brings results/<machine>/report.md up to date
"""
import os
import re

from harness import claims, machine, results, schema, speeds
from harness.printers import format_table
from harness.terminal import warn

SCRIPTS = ("machine_speed", "two_phases", "cube_bug")
PICTURES = {"roofline.png": "The roofline", "decode.png": "Batching's trade",
            "dial.png": "The chunk-size dial", "depth.png": "How deep the notebooks are"}
NAME = "report.md"


def update(folder):
    """Make the folder's report anew from its saved full runs; a failure is a warning."""
    try:
        runs = saved_runs(folder)
        if runs:
            results.replace_together(folder, {NAME: markdown(runs, os.listdir(folder))})
    except (OSError, ValueError) as e:
        warn(f"the report {os.path.join(folder, NAME)} was not brought up to date: {e}")


def with_run(folder, script, data, names):
    """A writer of the folder's report as it will be once this run's files (names) are in:
    the folder's saved full runs, this script's replaced by data. It runs inside the run's own
    save, under the folder's lock, so that a result and its report are one save."""
    def write(path):
        runs = {**saved_runs(folder), script: schema.upgrade(data)}
        runs = {s: runs[s] for s in SCRIPTS if s in runs}  # the post's order
        with open(path, "w", encoding="utf-8") as f:
            f.write(markdown(runs, [*os.listdir(folder), *names]))
    return write


def saved_runs(folder):
    """{script: its saved full run} of the folder, as the last whole save left them."""
    paths, _ = results.as_saved(folder)
    found = {}
    for script in SCRIPTS:
        if script + ".json" in paths:
            try:
                found[script] = schema.load(paths[script + ".json"], script)
            except ValueError as e:
                warn(f"the report leaves out {script}.json: it {e}")
    return found


def markdown(runs, names):
    """The report's text: Markdown that pastes into a post and renders on a code-hosting site."""
    predicted = [s for s, data in runs.items() if data.get("predicted")]
    lines = ["# Prefill vs Decode, " + ("predicted: every figure a limit, nothing was run"
                                         if predicted and len(predicted) == len(runs) else
                                         "rerun on this machine"), ""]
    for script, data in runs.items():
        lines += [f"- `{script}.py`: {data.get('predicted') or machine.line(data['machine'])}",
                  ""]
    busy = [f"`{s}.py` ({'; '.join(d['machine']['busy'])})" for s, d in runs.items()
            if d["machine"].get("busy")]
    if busy:
        lines += [f"> **Busy:** {', '.join(busy)} ran while the machine was busy: its timings "
                  "back no verdict, so its claims read 'cannot tell here'. Rerun on a quiet "
                  "machine, with more `--runs`, or with fewer `--threads`.", ""]
    lines += ["## The tables", ""]
    for data in runs.values():  # each script's sheets in the order its run printed them
        for name, sheet in data["sheets"].items():
            if name != "claims":
                lines += section(sheet, name)
    roofs = speeds.read(runs.get("two_phases", {}).get("roofs")
                        or runs.get("machine_speed", {}).get("roofs"))
    found = [v for script, data in runs.items()
             for v in claims.both(data["records"], roofs, (script,), data.get("settings", {}),
                                  data["machine"].get("busy") or (), data.get("at_limits") or [])]
    lines += ["## The post's claims on this machine", "",
              "Each verdict follows the rule beside its claim; 'about' means within 1.5x either "
              "way, over the middle half of the runs; 'at the limits' is the verdict on the rows "
              "a perfect implementation would give on this machine. A claim that does not hold "
              "says why, as the check and breakdown tables do; where the runs spread across the "
              "rule's margin, or the machine was busy, it cannot be told.",
              "", format_table(claims.COLUMNS, [[v, c.says, c.post, h, claims.limited(at), c.rule,
                                                 w] for c, h, v, w, at in found], "github"), ""]
    drawn = [name for name in PICTURES if name in names]
    lines += ["## Pictures", ""] + [f"![{PICTURES[n]}]({n})\n" for n in drawn] if drawn else [
        "## Pictures", "", "None yet: a full run of `python two_phases.py` draws them.", ""]
    warned = [f"- `{script}.py`: {w}" for script, data in runs.items()
              for w in condensed(data.get("made", {}).get("warnings", []))]
    lines += ["## Warnings", "", *(warned or ["None: every run was quiet."]), "",
              *(f"_{script}.py: {data['made']['command']}, {data['made']['version']}_  "
                for script, data in runs.items() if data.get("made"))]
    return "\n".join(lines) + "\n"


def section(table, name):
    """One sheet: its title, its settings, and the table as the run printed it."""
    title, printed = table.get("title") or name, table.get("printed") or "(not kept)"
    return [f"### {title}", "", *([f"_{table['settings']}_", ""] if table.get("settings")
                                  else []), "```text", printed, "```", ""]


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
