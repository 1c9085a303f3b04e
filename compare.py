"""Compare machines: every table the scripts save, side by side, each figure against the first
machine's as 'x faster' or 'x slower' with a verdict on the noise, the machines' limits from every
measurement of them, and what it means in the post's words.

    python compare.py                        # the post, then every machine under results/
    python compare.py post amd-epyc-2c       # by name: the post's figures, a shipped machine
    python compare.py references results/    # every machine in these folders of machines
    python compare.py post results/my-box --export csv > compared.csv

The post kept no samples, only its printed figures: a ratio against it is shown, never tested.
Two runs of the suite are tested figure by figure (each run's processes its samples).
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()

import argparse
import contextlib
import html

from harness import flags
from harness.post import MATMUL, SIZE
from harness.terminal import arrived, note, plain_streams, plural, printable, show
from harness.keeping import exports, records, results
from harness.keeping.folders import (MADE, describe, machine_folders, previous, read_from,
                                     read_machine, short_names, unlike_settings)
from harness.judging.significance import (ALPHA, LEVEL, MIN_CHANGE, corrected, geometric_mean,
                                          judged, settle, speedup, units, verdict)
from harness.showing.escaping import for_cell, for_markdown


# What is compared: each figure a script's sheets mark as compared, sheet by sheet, as the
# saved results declare them (older files are brought to that layout as they are read). A
# figure's runs are its record's samples. A thread sweep's records are compared block by block.


# ---------------------------------------------------------------------------------------------
# the figures of one machine


def sections(machines):
    """[(experiment, title, {figure compared: its header})] in the order the machines' records
    came: the figures each record marks as compared, matched by name; shown by the title and
    header their sheet printed them with, where it did."""
    out = {}
    for data in (found[stem] for stem in stems() for found in machines if stem in found):
        shown = {sheet["name"]: sheet for sheet in data["sheets"]}
        for r in data["records"]:
            if not r.get("compared"):
                continue
            sheet = shown.get(r["experiment"], {})
            headers = {c.get("figure"): c.get("header") for c in sheet.get("columns", [])}
            _, _, compared = out.setdefault(r["experiment"], (
                r["experiment"], sheet.get("title") or r["experiment"], {}))
            compared.setdefault(r["figure"], headers.get(r["figure"]) or r["figure"])
    return list(out.values())


def stems():
    """Each script's plain run, then its thread sweep, in the scripts' order."""
    return [stem for script in results.SCRIPTS for stem in (script, script + ".sweep")]


def values_of(found, section):
    """{(row label, figure): (value, units or None, unit, settings, doubt)} of one machine for one
    section (units: significance.units, what its test weighs), and {(row label, figure): text}
    of the figures a row's other records explain."""
    experiment, _, compared = section
    values, words = {}, {}
    for data in found.values():
        sweep = bool(data["machine"].get("sweep"))
        for r in data["records"]:
            if r["experiment"] != experiment or r["figure"] not in compared:
                continue
            n = r["settings"].get("threads")
            label = (records.label(r["keys"]) + (
                f" @ {n} {plural(n, 'thread')}" if sweep and type(n) is int else "")).strip()
            if isinstance(r["value"], (int, float)) and r["value"] > 0:
                values[(label, r["figure"])] = (r["value"], units(r), r["unit"],
                                                {**r["settings"], MADE: r["predicted"]},
                                                doubt(r, data))
                if experiment == "breakdown":  # the parts of the same block's trip
                    words[(label, r["figure"])] = parts(
                        [p for p in data["records"] if p["settings"].get("threads") == n],
                        r["keys"])
    return values, words


def doubt(r, data):
    """Why a figure backs no verdict, in a few words, or '': its runs disturbed by other work,
    or run beside another run of this suite."""
    if r.get("disturbed") is True:
        share = r.get("others")
        return "its runs disturbed by other work" + (
            f" (up to {share:.0%} of the cores)" if isinstance(share, (int, float)) else "")
    busy = data["machine"].get("busy")
    return f"run while the machine was busy ({'; '.join(map(str, busy))})" if busy else ""


def parts(found, keys):
    """A recorded trip condensed to one cell: its parts' milliseconds, and whose excess is most."""
    try:
        ms = [records.find(found, "breakdown", p, **keys)["value"]
              for p in ("tables", "attention", "elementwise", "other")]
        most = records.find(found, "breakdown", "most excess", **keys)["value"]
    except records.Missing:
        return None
    if not all(numeric(v) for v in ms):
        return None  # a part that is not a number of milliseconds: no cell of parts
    return f"{' + '.join(f'{v:.1f}' for v in ms)}; most excess {most}"


# ---------------------------------------------------------------------------------------------
# the comparison, section by section


def settled(names, machines, min_change, every):
    """{section: its rows} of every section of one comparison, as tidy rows: each figure of
    each machine, its value and, for every machine after the first that has it, the reference
    machine, the ratio and its verdict, each test's p corrected together with every other
    figure's of the comparison."""
    tested = [row for s in every for row in judged_rows(names, machines, s)]
    ps = [row for row in tested if isinstance(row.get("p alone"), float)]
    for row, p in zip(ps, corrected([row["p alone"] for row in ps])):
        row["p"] = p
    out = {s[0]: [] for s in every}
    for row in tested:
        if "j" in row:
            j = settle(row.pop("j"), row.get("p"), row["unit"], min_change)
            said = verdict(j, row["unit"], min_change)
            if row["why"]:  # the ratio, but no verdict
                j = {**j, "verdict": "not judged"}
                said = f"{verdict({**j, 'p': None, 'verdict': None}, row['unit'])[:-2]}, " \
                       f"no verdict: {row['why']}"
            row.update(j, said=said + row.pop("vs"))
        row.pop("why", None)
        out[row["section"]].append(row)
    return out


def judged_rows(names, machines, section):
    """One section's rows before their verdicts: each figure's ratio and own test."""
    per = [values_of(m, section) for m in machines]
    fullest = sorted(per, key=lambda vw: -len(vw[0]))  # rows in the order of the machine that
    labels = list(dict.fromkeys(k for values, words in fullest  # has most of them (the post's
                                for k in [*values, *words]))  #  few would lead otherwise)
    rows = []
    for label, figure in labels:
        key = (label, figure)
        have = [i for i, (values, _) in enumerate(per) if key in values]
        ref = have[0] if have else 0  # the first machine that has the figure is its reference
        unit = per[ref][0][key][2] if have else ""
        for i, (values, words) in enumerate(per):
            row = {"section": section[0], "row": label, "figure": figure, "unit": unit,
                   "machine": names[i], "value": values.get(key, (None,))[0],
                   "parts": words.get(key), "reference": None, "ratio": None, "p": None,
                   "verdict": None, "said": None}
            unlike = i > ref and i in have and unlike_settings(per[ref][0][key][3],
                                                               values[key][3])
            if unlike:  # shown, but held to nothing
                row.update(reference=names[ref], verdict="not compared",
                           said=f"not compared: {unlike}" + (f" (vs {names[ref]})" if ref else ""))
            elif i > ref and i in have:
                (*first, _, why_a), (*other, _, why_b) = per[ref][0][key], values[key]
                j = judged(first, other)
                why = why_a and f"{names[ref]}: {why_a}" or why_b and f"{names[i]}: {why_b}"
                row.update(reference=names[ref], j=j, why=why,
                           vs=f" (vs {names[ref]})" if ref else "",
                           **{"p alone": None if why else j["p alone"]})
            rows.append(row)
    return rows


def comparison(names, machines, section, min_change, every=None):
    """(headers, rows) of one section, as printed: each figure, each machine's value and, for
    every machine after the first, how it compares: '1.30x faster', with the verdict. every:
    the comparison's settled rows (settled()), made here where not given."""
    headers = ["figure", "unit", names[0]]
    for n in names[1:]:
        headers += [n, f"{n} vs {names[0]}"]
    table = {}
    every = every or settled(names, machines, min_change, sections(machines))
    for c in every[section[0]]:
        shown = section[2].get(c["figure"], c["figure"])
        row = table.setdefault((c["row"], c["figure"]), [
            f"{c['row']}: {shown}" if c["row"] else shown, c["unit"]])
        cell = f"{c['value']:.1f} = {c['parts']}" if c["parts"] else c["value"]
        row += [cell] if c["machine"] == names[0] else [cell, c["said"]]
    return headers, list(table.values())


def verdicts(names, machines):
    """The post's claims as each machine's runs judged them (their verdict records, made once
    when each ran; a result saved before runs kept them has none): -> (headers, rows)"""
    said = [{dict(keys).get("claim"): f["verdict"] for data in m.values()
             for keys, f in records.rows(data["records"], "claims").items() if "verdict" in f}
            for m in machines]
    claims = list(dict.fromkeys(says for s in said for says in s))
    return ["the post says", *names], [[says, *(s.get(says, "") for s in said)]
                                       for says in claims]


def limits(names, machines):
    """Every measurement of each machine's two speeds (machine_speed's, and two_phases': the best
    of its rounds, or, in an older result, at its start and its end), and a line for each
    machine whose own measurements disagree by more than their runs' spread. -> (headers, rows,
    lines)"""
    found = [speeds_of(m) for m in machines]
    odd = sorted({what for f in found for what, _ in f if ALONE in what})  # other sizes
    rows = [[what, unit, *[f.get((what, key)) for f in found]]
            for key, unit, word in (("bytes_per_s", "GB/s", "forklift"),
                                    ("flops_per_s", "GFLOP/s", "workbench"))
            for what in (f"{word}: machine_speed", *(w for w in odd if w.startswith(word)),
                         f"{word}: two_phases' rounds", f"{word}: two_phases' start",
                         f"{word}: two_phases' end")]
    rows = [row for row in rows if any(v is not None for v in row[2:])]
    lines = []
    for name, f in zip(names, found):
        for word in ("forklift", "workbench"):
            seen = [v for (what, key), v in f.items()  # at the sizes every run measures at
                    if what.startswith(word) and ALONE not in what and key != "spread" and v]
            spread = f.get((word, "spread"))  # machine_speed's runs: without them, no noise
            if spread and len(seen) > 1 and max(seen) / min(seen) > spread:
                lines.append(f"{name}: its {word} measured from {min(seen):.1f} to "
                             f"{max(seen):.1f}, further apart than its runs' spread "
                             f"({spread:.2f}x): the machine's speed moved between measurements")
    return ["limit", "unit", *names], rows, lines


POST_SIZES = {"size": SIZE, "matmul": MATMUL}  # machine_speed's, and two_phases' rounds'
ALONE = ", at --size"  # a machine_speed run at other sizes than the post's: shown, never compared


def speeds_of(found):
    """{(what, key): speed in GB/s or GFLOP/s} of one machine, and each speed's spread. A
    machine_speed run at other sizes than the post's (a forklift table that may sit in cache)
    is named with its sizes, and compared with nothing."""
    out = {}
    measured = found.get("machine_speed", {}).get("records", [])
    for word, figure, key in (("forklift", "memory speed", "bytes_per_s"),
                              ("workbench", "math speed", "flops_per_s")):
        try:
            f = records.find(measured, "machine_speed", figure)
        except records.Missing:
            continue
        if not numeric(f["value"]):
            continue  # a speed that is not a number: none measured
        ran = {k: (f.get("settings") or {}).get(k, v) for k, v in POST_SIZES.items()}
        if ran["matmul"] != MATMUL or read_from({**f.get("settings", {}), **ran}) == "cache":
            out[(f"{word}: machine_speed{ALONE} {ran['size']} --matmul {ran['matmul']}",
                 key)] = f["value"]
            continue
        out[(f"{word}: machine_speed", key)] = f["value"]
        runs = f.get("samples")
        out[(word, "spread")] = max(runs) / min(runs) if runs else None
    rounds = found.get("two_phases", {}).get("records", [])
    for word, figure, key in (("forklift", "memory speed", "bytes_per_s"),
                              ("workbench", "math speed", "flops_per_s")):
        with contextlib.suppress(records.Missing):
            f = records.find(rounds, "speeds", figure)
            if numeric(f["value"]):
                out[(f"{word}: two_phases' rounds", key)] = f["value"]
    roofs = found.get("two_phases", {}).get("roofs") or {}
    for when in ("start", "end"):
        for key, word in (("bytes_per_s", "forklift"), ("flops_per_s", "workbench")):
            speed = (roofs.get(when) or {}).get(key)
            out[(f"{word}: two_phases' {when}", key)] = speed / 1e9 if speed else None
    return out


def summary(names, machines):
    """A line per machine after the first: reading and typing against the first machine's (the
    figures of like settings only, neither side disturbed by other work), the two speeds, and
    each phase's bound and distance from its limit as each machine's own check table says: the
    suite never second-guesses its check."""
    lines = []
    first = machines[0]
    for name, m in zip(names[1:], machines[1:]):
        said = {}
        for what, experiment, figure in (("reading", "prefill", "time per token"),
                                          ("typing", "decode", "step")):
            a, b = (values_of(x, (experiment, "", {figure: ""}))[0] for x in (first, m))
            said[what] = geometric_mean([speedup(a[k], b[k]) for k in a if k in b
                                         and not unlike_settings(a[k][3], b[k][3])
                                         and not a[k][4] and not b[k][4]])  # (undisturbed)
        if None in said.values():
            continue
        words = [f"{what} {r:.2f}x faster" if r >= 1 else f"{what} {1 / r:.2f}x slower"
                 for what, r in said.items()]
        line = f"{name} against {names[0]}: {', '.join(words)}"
        for source in ("machine_speed", "two_phases' rounds"):  # like measured with like
            fast = [f.get((f"{word}: {source}", key)) for f in (speeds_of(first), speeds_of(m))
                    for word, key in (("forklift", "bytes_per_s"), ("workbench", "flops_per_s"))]
            if None not in fast:
                line += (f"; its workbench {fast[3] / fast[1]:.2f}x and its forklift "
                         f"{fast[2] / fast[0]:.2f}x {names[0]}'s ({source})")
                break
        checked = [bounds(x) for x in (first, m)]
        if all(checked):
            line += "; by the checks, " + ", ".join(
                f"{what} {checked[0][what]} on {names[0]}, {checked[1][what]} here"
                for what in ("reading", "typing") if what in checked[0] and what in checked[1])
        lines.append(line)
    return lines


def bounds(found):
    """{phase: 'workbench-bound at 1.30x its limit'} from one machine's check records: the
    phase's most common bound, and its rows' median distance from their limits."""
    out = {}
    check = found.get("two_phases", {}).get("records", [])
    for what, experiment in (("reading", "prefill"), ("typing", "decode")):
        rows = records.rows([r for r in check if r["experiment"] == "check"
                             and r["keys"].get("experiment") == experiment], "check")
        said = [f for f in rows.values() if "bound by" in f and numeric(f.get("x limit"))]
        if said:
            bound = max({f["bound by"] for f in said}, key=[f["bound by"] for f in said].count)
            ratio = sorted(f["x limit"] for f in said)[len(said) // 2]
            out[what] = f"{bound}-bound at {ratio:.2f}x its limit"
    return out


def numeric(v):
    """A figure a reader computes with: a number above 0 (never text, nor a bool)."""
    return type(v) in (int, float) and v > 0


MARKDOWN = ("github", "pipe")  # tabulate's Markdown tables (--tablefmt markdown is github's)


def shown(fmt):
    """How text from a results file or a folder's name is printed in this table format: (a
    line's, a cell's). In Markdown as it shows it, character for character, so that nothing a
    file holds becomes a link, markup or a table's edge; else as the terminal may show it."""
    if fmt in MARKDOWN:
        return for_markdown, for_cell
    if "html" in fmt:  # tabulate escapes the cells (but unsafehtml's); the lines are this
        return (lambda t: f"<p>{html.escape(printable(t))}</p>" if t.strip() else "",
                printable if fmt == "html" else lambda t: html.escape(printable(t)))
    if fmt.startswith("latex"):  # tabulate escapes latex's cells (not latex_raw's): the
        return for_latex, printable if fmt != "latex_raw" else for_latex  # lines are this script's
    return printable, printable


LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
         "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def for_latex(text):
    """Text as LaTeX prints it, every special character escaped."""
    return "".join(LATEX.get(c, c) for c in printable(text))


# ---------------------------------------------------------------------------------------------
# the command line


def build_parser():
    from tabulate import tabulate_formats
    p = flags.Parser(description=(__doc__ or "").strip(),  # (none under python -OO)
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="*", metavar="FOLDER",
                   help="result folders, folders of them (results/), or names of shipped "
                        "references or of machines under results/; the first is the "
                        "reference (default: post, then every machine under results/)")
    p.add_argument("--tablefmt", type=flags.tablefmt, default="plain", metavar="FMT",
                   help="plain, github (Markdown) or any tabulate format: "
                        + ", ".join(tabulate_formats) + " (default: plain)")
    p.add_argument("--export", choices=exports.FORMATS, default=None,
                   help="write the comparison to stdout as csv, json or jsonl instead of tables")
    p.add_argument("--previous", action="store_true",
                   help="each folder's previous run (its history/ keeps it) beside it, as "
                        "the reference: what changed since")
    p.add_argument("--min-change", default=MIN_CHANGE, metavar="PCT",
                   type=flags.finite("a percentage of 0 or more", lambda v: v >= 0),
                   help=f"a smaller difference, even a real one, is no change "
                        f"(default: {MIN_CHANGE:g})")
    return p


PREVIOUS = object()  # where a folder's previous run stands among the folders (--previous)


def main(argv=None):
    plain_streams()
    args = build_parser().parse_args(argv)
    from tabulate import tabulate
    problems, found = [], []
    for folder in machine_folders(args.folders, problems):
        data = read_machine(folder, problems)  # what the schema's check refuses is left out,
        if data:  #                               with its line; anything else is a bug
            earlier = previous(folder, problems) if args.previous else {}
            found += [(PREVIOUS, earlier)] if earlier else []
            found.append((folder, data))
    names = short_names([f for f, _ in found if f is not PREVIOUS]) if found else []
    for i, (f, _) in enumerate(found):  # a previous run named for the folder it ran in
        if f is PREVIOUS:
            names.insert(i, names[i] + " (previous)")
    machines = [m for _, m in found]
    every = settled(names, machines, args.min_change, sections(machines)) if machines else {}
    sheets = [(title, *comparison(names, machines, s, args.min_change, every))
              for s in sections(machines) for title in [s[1]]] if machines else []
    if len(machines) > 1:
        sheets.insert(1, ("The machines' limits, every measurement", *limits(names, machines)[:2]))
        sheets.append(("The post's claims, machine by machine", *verdicts(names, machines)))
    sheets = [s for s in sheets if s[2]]
    if args.export:
        about = {n: describe(n, m) for n, m in zip(names, machines)}
        show(exports.write(args.export, [{**c, "machine line": about[c["machine"]]}
                                         for rows in every.values() for c in rows]))
    else:
        line, cell = shown(args.tablefmt)
        for name, m in zip(names, machines):
            show(line(describe(name, m)))
        if len(machines) > 1:
            show(line(f"(vs: how much faster or slower each figure is than {names[0]}'s, "
                      f"with its {LEVEL:.0%} interval where both sides kept samples; "
                      f"faster or slower only where Welch's t-test of the two runs' processes "
                      f"(each a process's mean, on the log scale) finds a difference, its p "
                      f"corrected with every other figure's here (a false-discovery rate of "
                      f"{ALPHA:g}), of at least {args.min_change:g}%, else not significant, or "
                      f"no change; untested where a side has one process; no verdict where one "
                      f"side's runs were disturbed or the machine busy; * one side's figure has "
                      f"no samples behind it)"))
            published = [n for n, m in zip(names, machines)
                         if any(d.get("published") for d in m.values())]
            if published:  # the post kept none: its ratios are shown, never tested
                show(line(f"({' and '.join(published)} kept no samples, only its printed "
                          f"figures: every ratio against it is shown (*), never tested, and is "
                          f"no verdict)"))
        plain = {"stralign": None, "numalign": None} if args.tablefmt == "tsv" else {}
        for title, headers, rows in sheets:  # (tsv: fields unpadded, as a reader splits them)
            show(f"\n{line(title)}")
            show(tabulate([[f"{v:.2f}" if isinstance(v, float) else
                            cell(v) if isinstance(v, str) else v for v in row]
                           for row in rows], headers=[cell(h) for h in headers],
                          tablefmt=args.tablefmt, floatfmt=".2f", missingval="", **plain))
        if len(machines) > 1:
            said = limits(names, machines)[2] + summary(names, machines)
            show("\n" + "\n".join(map(line, said)) if said else "")
    for line in problems:
        note(f"compare.py: {printable(line)}")
    if not machines and not problems:
        note("compare.py: no results to compare; run the scripts first")
    return 1 if problems or not machines or not arrived(args.export) else 0


if __name__ == "__main__":
    stopping.leave(main())
