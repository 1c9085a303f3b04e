"""The report a user pastes: results/<machine>/report.md, made anew from the folder's saved full
runs whenever one of them is saved, in the post's order: the machine, every table with its title
and settings, the post's claims with a verdict each, the pictures, the runs' warnings. Quick
runs never go into it. It reads saved results and measures nothing.

    python two_phases.py   # a full run brings results/<machine>/report.md up to date
"""
import re

from harness import stopping
from harness.terminal import printable, warn
from harness.measuring import host, speeds
from harness.keeping import older, results, schema
from harness.keeping.records import Missing, find
from harness.judging import intervals, judge
from harness.showing import pictures
from harness.showing.gfm import Raw, gfm, md, section

NAME = results.REPORT


def with_run(folder, script, data, names, told):
    """A writer of the folder's report as it will be once this run's files (names) are in
    (told: the post's claims and pictures, experiments/registry.py):
    the folder's saved full runs (each through the schema's check: what it refuses is left out,
    with its line), this script's replaced by data. It runs inside the run's own save, under the
    folder's lock, so that a result and its report are one save."""
    def write(f, d):  # f: the new file, open, binary; d: the folder, held open by the save
        text = contained(script, older.upgrade(data), held_runs(d, but=script),
                         [*d.names(), *names], told)
        f.write(text.encode("utf-8"))
    return write


def contained(script, mine, saved, names, told):
    """The report of this run (mine) and the folder's saved runs of other scripts: a saved file
    the report cannot be made with is left out, with one line naming it, so that one bad file
    never costs a finished run its save. Each is tried with the runs taken before it."""
    runs = {script: mine}
    for other, data in saved.items():
        try:
            markdown(in_order({**runs, other: data}), names, told)
        except Exception as e:  # a file the schema passes that a reader still trips on: a bug
            warn(f"the report leaves out {other}.json: the report cannot be made with it "
                 f"({type(e).__name__})")
            continue
        runs[other] = data
    return markdown(in_order(runs), names, told)


def in_order(runs):
    """{script: its run} in the post's order."""
    return {s: runs[s] for s in results.SCRIPTS if s in runs}


def saved_runs(folder, but=None, quiet=False):
    """{script: its saved full run} of the folder, as the last whole save left them; but: a
    script whose saved run is not read (the one a run replaces); quiet: a file left out is not
    said (the report, which reads them again, says it once)."""
    paths, _ = results.as_saved(folder)
    found = {}
    for script in results.SCRIPTS:
        if script != but and script + ".json" in paths:
            try:
                found[script] = schema.load(paths[script + ".json"], script)
            except ValueError as e:
                if not quiet:
                    warn(f"the report leaves out {script}.json: it {e}")
    return found


def held_runs(d, but=None):
    """saved_runs() of the folder a save holds open (held.Held), under its lock, its files read
    within it (a link swapped in for the folder, or one above it, leads the report nowhere)."""
    found = {}
    for script in results.SCRIPTS:
        if script == but:
            continue
        try:
            raw = d.read(script + ".json", schema.FILE_MAX)
            if raw is not None:
                found[script] = schema.parse(raw, script)
        except ValueError as e:
            warn(f"the report leaves out {script}.json: it {e}")
        except OSError:
            continue
    return found


def markdown(runs, names, told):
    """The report's text: GitHub-flavoured Markdown that pastes into a post as it is, and renders
    on a code-hosting site as a results section does: the machine in one line, the post's claims
    with their verdicts first, then each script's tables in the post's words, each picture
    beside its table with a caption, every table within the page's width; the glossary, each
    run's command and machine, the rules and the warnings folded at the end."""
    predicted = bool(runs) and all(data.get("predicted") for data in runs.values())
    machines = machine_lines(runs)
    lines = ["# Prefill vs Decode, " + ("predicted: every figure a limit, nothing was run"
                                         if predicted else "rerun on this machine"
                                         if len(machines) == 2 else
                                         f"rerun on {len(machines) - 1} machines"), "",
             *machines, *banners(runs)]
    found = [v for script, data in runs.items() for v in judged(script, data, runs, told.claims)]
    lines += claims_section(found, predicted)
    for script, data in runs.items():  # each script's sheets in the order its run printed them
        heading = SECTIONS.get(script, script)
        lines += [f"## {md(heading)}", ""]
        drawn = [d for d in told.drawings if d.name in drawn_by(data, names)] \
            if script == "two_phases" else []
        for sheet in data["sheets"]:
            name = sheet["name"]
            if name != "claims":
                lines += section(sheet, name, data["records"], titled=not repeats(
                    sheet.get("title") or name, heading))
                lines += moved(runs) if name == "speeds" else []
                lines += [picture(d, data["records"]) for d in drawn if d.under == name]
        placed = {d.name for d in drawn for sheet in data["sheets"] if d.under == sheet["name"]}
        lines += [picture(d, data["records"]) for d in drawn if d.name not in placed]  # its table
        #                                                                          not in this run
    lines += appendix(runs, found)
    return results.signed("\n".join(lines) + "\n")


def judged(script, data, runs, claims):
    """A script's claims as its run judged them (its verdict records); a result saved before
    runs kept them is judged now, on its records."""
    return judge.from_records(data["records"], claims) or judge.both(
        data["records"], speeds.read(runs.get("two_phases", {}).get("roofs")
                                     or runs.get("machine_speed", {}).get("roofs")),
        (script,), data.get("settings", {}), data["machine"].get("busy") or (),
        data.get("at_limits") or [], claims=claims)


SECTIONS = {"machine_speed": "The forklift and the workbench: memory speed and math speed",
            "two_phases": "Two phases, two bottlenecks: reading (prefill) and typing (decode)",
            "cube_bug": "The slow road: h**3 against h*h*h"}  # each script's section, the post's
#   words
VERDICTS = {"holds": "✅", "does not hold": "❌", "cannot tell here": "❓", "not run": "➖"}
#   a verdict's mark, so that it scans


def picture(drawing, found=()):
    """A picture (a Drawing) and its caption, one line saying what to look at, written from the
    records it was drawn from (found), so that it never says what the picture does not show."""
    return (f"![{drawing.title}]({drawing.name})\n\n*{drawing.title}: "
            f"{md(pictures.look(drawing, found))}.*\n")


def machine_lines(runs):
    """The machine, once where the scripts ran on one (their lines the same but for the load,
    the clock and the date); else a line per script. A prediction says what it is instead."""
    said = {}
    for script, data in runs.items():
        said.setdefault(data.get("predicted") or steady(host.line(data["machine"])),
                        []).append(script)
    return [("- " + ", ".join(f"`{s}.py`" for s in scripts) + ": " if len(said) > 1 else "")
            + md(line) for line, scripts in said.items()] + [""]


def other_machines(folder, script, machine):
    """The folder's saved runs of other scripts made on another machine than `machine` (this
    run's facts) -> {script: its machine line}: a report of them and this run mixes machines."""
    mine = steady(host.line(machine))
    return {s: line for s, data in saved_runs(folder, but=script, quiet=True).items()
            if not data.get("predicted")
            for line in [steady(host.line(data["machine"]))] if line != mine}


def steady(line):
    """A machine line without what changes from run to run on one machine: its date, load,
    clock and anything after them (a file's busy words may hold a line's end)."""
    return re.sub(r" \| \d{4}-\d\d-\d\d.*", "", line, flags=re.S)


def moved(runs):
    """A line for each speed that machine_speed's run and two_phases' rounds measured apart
    beyond both their intervals (at the report's level): the machine moved between the
    scripts, and each script's figures are held to its own run's speeds."""
    lines = []
    for figure, word, unit in (("memory speed", "forklift", "GB/s"),
                               ("math speed", "workbench", "GFLOP/s")):
        try:
            mine, theirs = (find(runs[s]["records"], e, figure) for s, e in (
                ("machine_speed", "machine_speed"), ("two_phases", "speeds")))
        except (KeyError, Missing):
            continue
        a, b = (intervals.interval(intervals.of(r), intervals.FAMILY) for r in (mine, theirs))
        if a is None or b is None or (a.low <= b.high and b.low <= a.high):
            continue
        lines += [f"> **The {word} moved between the scripts:** {a.value:.1f} {unit} "
                  f"({a.low:.1f} to {a.high:.1f}) in `machine_speed.py`'s run against "
                  f"{b.value:.1f} ({b.low:.1f} to {b.high:.1f}) in `two_phases.py`'s rounds, "
                  f"{max(a.value, b.value) / min(a.value, b.value):.2f}x apart: each script's "
                  f"figures and verdicts are held to its own run's speeds.", ""]
    return lines


def banners(runs):
    """The stopped, busy and disturbed warnings, above everything else they bear on."""
    lines = []
    stopped = [f"`{s}.py` ({md(stopping.cut_short_words(d['stopped']))})"
               for s, d in runs.items() if d.get("stopped")]
    if stopped:
        lines += [f"> **Stopped:** {', '.join(stopped)}: the processes planned beyond "
                  "`--processes` were cut short; the claims are judged on those measured "
                  "before. Rerun to let it finish.", ""]
    busy = [f"`{s}.py` ({md('; '.join(d['machine']['busy']))})" for s, d in runs.items()
            if d["machine"].get("busy")]
    if busy:
        lines += [f"> **Busy:** {', '.join(busy)} ran while the machine was busy: its timings "
                  "back no verdict, so its claims read 'cannot tell here'. Rerun on a quiet "
                  "machine, with more `--runs`, or with fewer `--threads`.", ""]
    disturbed = [f"`{s}.py` ({md(host.disturbed_words(d['machine'].get('disturbance')))})"
                 for s, d in runs.items()
                 if host.disturbed_words(d["machine"].get("disturbance")).startswith("DIST")]
    if disturbed:
        lines += [f"> **Disturbed:** {', '.join(disturbed)}: other work took the cores while "
                  "some figures were measured, even measured again; the claims that rest on "
                  "them read 'cannot tell here'. Rerun when the machine is quieter (close what "
                  "else runs), or with more `--runs`.", ""]
    return lines


def claims_section(found, predicted):
    """The post's claims, first: how many hold, then a verdict each, marked so it scans, the post's
    figure and this machine's, what the verdict was judged by (the figure with its interval and
    the rule's edge, or why it does not hold or cannot be told, shortly), the verdict at this
    machine's limits in a column of its own; every rule and reason in full right under the
    table."""
    limits = any(at for *_, at, _ in found)
    headers = ["verdict", "the post says", "the post", "here", "judged by"] + (
        ["at the limits"] * limits)
    rows = [[marked(v), c.says, c.post, h or "no figure here: " + (w or "not run")[:60],
             judged_by(t, w, c.rule)]
            + ([Raw(f"{marked(at[1])}{' by construction' * constructed(c, at)} "
                    f"({md(at[0], in_table=True)})") if at
                else "not judged there"] * limits)
            for c, h, v, w, at, t in found]
    return ["## The post's claims " + ("about a GPU, predicted" if predicted
                                        else "on this machine"), "",
            f"**{md(judge.summed(found))}.**" if found else "", "",
            ("Each verdict follows its rule (in full under the table), on the predicted limits: "
             "nothing was run, so no figure has an interval, and every verdict says 'predicted'"
             if predicted else
             "Each verdict follows its rule (in full under the table), over the figure's "
             "interval from the run's processes: firm only where it clears the rule's edge") + (
                "; 'at the limits' is the verdict on the rows a perfect implementation would "
                "give on this machine: where the two differ, the suite's distance from the "
                "limits decides it here, not the machine; 'by construction' where it holds "
                "there on any CPU by how a limit is made, and so tells nothing of the machine."
                if limits else "."), "",
            gfm(headers, rows), "",
            "<details><summary>The rule behind each verdict, and why a claim does not hold or "
            "cannot be told</summary>", "",
            *(f"- **{md(c.says)}**: {md(c.rule)}." + (f" Tested: {md(t)}." if t and not w else "")
              + (f" Why: {md(w)}." if w else "") for c, _, _, w, _, t in found), "",
            "</details>", ""] if found else []


def judged_by(tested, why, rule):
    """What a verdict rests on, once and whole: the figure with its interval and the rule's
    edge, and, where it does not hold or cannot be told, why (which says the figure itself
    where it could not tell); where no figure was tested (the accounting's), the rule itself."""
    if why and tested and why.startswith(tested):
        return why
    return "; ".join(filter(None, (tested, why))) or rule


def constructed(c, at):
    """Whether a claim's verdict at the limits holds by how a limit is made (on any CPU)."""
    return bool(at) and c.construction and at[1].removeprefix("predicted: ") == "holds"


def marked(verdict):
    """A verdict with its mark, in bold: '✅ **holds**', '✅ **predicted: holds**' (Markdown
    already: a table takes it as it is)."""
    plain = verdict.removeprefix("predicted: ")
    return Raw(f"{VERDICTS.get(plain, '')}\u00a0**{md(verdict, in_table=True)}**".strip()
               .replace(" ", "\u00a0"))  # one line: no break inside a verdict


def appendix(runs, found):
    """What a reader looks up rather than reads: the glossary and the columns, each run's
    command, version and machine, and the warnings; folded."""
    how = [f"- `{s}.py`, {'predicted' if d.get('predicted') else 'run'} "
           f"{md(d['machine']['date'][:16].replace('T', ' '))} UTC"
           + (f": `{printable(d['made']['command']).replace('`', chr(39))}` "
              f"({md(d['made'].get('version', ''))})" if (d.get("made") or {}).get("command")
              else "") + f"; {md(d.get('predicted') or host.line(d['machine']))}"
           for s, d in runs.items()]
    warned = [f"- `{script}.py`: {md(w)}" for script, data in runs.items()
              for w in condensed(data.get("made", {}).get("warnings", []))]
    predicted = bool(runs) and all(data.get("predicted") for data in runs.values())
    return ["## Appendix", "",
            "<details><summary>How to read this: the post's words, and the columns</summary>",
            "", *HOW_TO_READ, *(["Every figure here is a limit, the fastest each machine "
                                 "allows: max(bytes / the forklift, FLOPs / the workbench). "
                                 "Nothing was run: a real engine reaches a share of each "
                                 "limit (two_phases.py --efficiency takes one).",
                                 ""] if predicted else MEASURED), "</details>", "",
            "<details><summary>How each script ran: when, its command, the suite's version and "
            "the machine</summary>", "", *how, "", "</details>", "",
            f"<details><summary>Warnings ({len(warned) or 'none'})</summary>", "",
            *(warned or ["None."]), "", "</details>", ""]


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
    "The post's words, and the terms an engineer searches for:", "",
    "| the post says | engineers say |", "| --- | --- |",
    *(f"| {post} | {term} |" for post, term in GLOSSARY), ""]
MEASURED = [
    "Each measured figure is the middle of several rounds (the forklift's and the workbench's "
    "each round's fastest of three tries; a balance the mean of each process's rounds', as its "
    "claim is told); the line under each result names the statistic and how far the rounds "
    "spread. The columns:", "",
    "- **limit**: the fastest the machine allows a row, max(bytes / the forklift, FLOPs / the "
    "workbench); **bound by**: which of the two it is; **x limit**: the row's time against it "
    "(1 is perfect; above 2, look for a bug, as the post did).",
    "- **one call**, **x one call**: the trip's table products as one library (BLAS) call each, "
    "and the tables' time against it (under 1: the suite's path beats the library's).",
    "- **most excess**: whose time is furthest above its limit: the BLAS, our tables, "
    "attention, elementwise, or other (Python).",
    "- **worst x normal**: the typers' worst gap against their gap with no newcomer; **notes % "
    "of bytes**: the notebooks' share of what a trip fetches.",
    "- **the ridge**: the roofline's ridge is the balance of the speeds the run held its rows "
    "to (measured beside the rows in every round); the forklift and workbench table's balance "
    "is machine_speed's own measurement, a separate run of the same two measurements: on a busy "
    "or drifting machine the two differ by as much as the speeds moved (said beside the "
    "speeds' table where they moved beyond both intervals).", ""]


def repeats(title, heading, words=4):
    """Whether a sheet's title says what its section's heading says (their first words the same):
    one heading is enough."""
    first = lambda text: str(text).lower().replace(":", " ").split()[:words]  # noqa: E731
    return first(title) == first(heading)


def drawn_by(data, names):
    """The pictures this run drew: those it names, or, for an older run that names none, every
    picture in the folder."""
    return data["pictures"] if isinstance(data.get("pictures"), list) else names


FAR = re.compile(r"(.+?) took ([0-9.]+)x its limit")  # a row's warning: far above its limit


def condensed(warnings):
    """A run's warnings, its noisy figures in one line (which, and the widest spread), and its
    rows far above their limits in another (the check table above shows each)."""
    far = [m for m in map(FAR.match, warnings) if m]
    if len(far) > 1:
        warnings = [w for w in warnings if not FAR.match(w)] + [
            f"{len(far)} rows took more than twice their limits, up to "
            f"{max(float(m[2]) for m in far):.1f}x ({', '.join(m[1] for m in far)}): the check "
            f"table says which limit binds each, the breakdown where the time goes"]
    noisy = [w for w in warnings if w.startswith("noisy machine: ")]
    if len(noisy) < 2:
        return warnings
    found = [re.match(r"noisy machine: (.*) spread ([0-9.]+)x", w) for w in noisy]
    spreads = [float(m.group(2)) for m in found if m]
    named = [m.group(1) if m else w[len("noisy machine: "):][:60] for m, w in zip(found, noisy)]
    return [w for w in warnings if w not in noisy] + [
        f"noisy machine: the runs of {len(noisy)} figures spread by more than 1.2x"
        + (f", up to {max(spreads):.2f}x" if spreads else "") + f" ({'; '.join(named)})"]
