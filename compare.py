"""Compare machines: the headline figures of saved results side by side, with each machine's
ratio to the first, and whether the difference is real or within the noise.

    python compare.py                                   # every machine under results/
    python compare.py results/post results/amd-epyc-2c  # the named result folders, in order
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    import stopping
    stopping.stop_quietly()

import argparse
import math
import os
import zlib

import numpy as np

import cli
import machine
import results
import schema
from terminal import note, plain_streams, plural, show

SCRIPTS = ("machine_speed", "two_phases", "cube_bug")
MIN_CHANGE = 5.0  # percent: a smaller change between two machines is no change (pyperf's idea)
RESAMPLES, CONFIDENCE, SEED = 2000, 0.95, 0  # the bootstrap behind every verdict


# The headline figures, as data: section -> [(table, key column, figure column, label)]. A key
# column gives one figure per row (per prompt length, user count, ...). A section is a script's
# name, or "script: title" for more of that script's figures. Every figure's samples are in its
# table's samples_s[row][column] (older schemas are brought to that layout as they are read).
FIGURES = {
    "machine_speed": [("machine_speed", None, column, label) for column, label in (
        ("memory speed", "forklift"), ("math speed", "workbench"), ("balance", "balance"),
        ("tokens a trip needs", "tokens a trip needs"))],
    "two_phases": [
        ("prefill", "prompt", "ms/token", "prefill ms/token"),
        ("prefill", "prompt", "GFLOP/s", "prefill GFLOP/s"),
        ("decode", "users", "step ms", "decode step"),
        ("decode", "users", "tokens/s", "decode tokens/s"),
        ("collision", None, "normal gap ms", "typers' normal gap"),
        ("collision", None, "all at once gap ms", "gap, question all at once"),
        ("collision", None, "chunked worst gap ms", "worst gap, question in chunks")],
    "two_phases: where the time goes": [  # one recorded run per row: no samples to decide with
        ("breakdown", "row", column, part)
        for column, part in [("trip ms", "recorded trip"), ("tables ms", "tables"),
                             ("alone ms", "tables alone"), ("attention ms", "attention"),
                             ("elementwise ms", "elementwise"), ("other ms", "other")]],
    "cube_bug": [("cube", "numbers", "ratio", "h**3 / h*h*h")],
}


def figures(data, section):
    """{(label, unit): (value, samples)} of one result file: the figures of a section it holds,
    each with the samples behind it ([(seconds, power)]), or None where it has none. A thread
    sweep's figures are there once per thread count, each label ending in "@ N threads"."""
    sweep = data["machine"].get("sweep") or []
    blocks = [(f" @{n}", f" @ {n} {plural(n, 'thread')}") for n in sweep] or [("", "")]
    out = {}
    for table, key, column, label in FIGURES[section]:
        for suffix, threads in blocks:
            t = data["tables"].get(table + suffix)
            heads = [c["header"] for c in t["columns"]] if t else []
            if column not in heads or (key is not None and key not in heads):
                continue
            unit = t["columns"][heads.index(column)]["unit"]
            for i, row in enumerate(t["rows"]):
                cells = dict(zip(heads, row))
                which = "" if key is None else (f" ({cells[key]})" if isinstance(cells[key], str)
                                                else f" ({key} {cells[key]})")
                out[(label + which + threads, unit)] = (cells[column],
                                                        schema.samples(t, i, column))
    return out


def machine_folders(args_folders, out):
    """The folders to compare: those named, or every folder under results/."""
    if args_folders:
        return args_folders
    if not os.path.isdir(out):
        return []
    return sorted(os.path.join(out, d) for d in os.listdir(out)
                  if os.path.isdir(os.path.join(out, d)))


def read_machine(folder, problems):
    """{file stem: data} of one machine's folder: each script's plain run, and its thread sweep
    (<script>.sweep); what cannot be used goes to problems. The folder is read as its last
    whole save left it, waiting for a save under way, and nothing in it is changed."""
    if not os.path.exists(folder):
        problems.append(f"{folder}: no such results folder")
        return None
    if not os.path.isdir(folder):
        problems.append(f"{folder}: is a file, not a results folder")
        return None
    found = {}
    try:
        with results.locked(folder, shared=True):
            paths, half_done = results.as_saved(folder)
    except (OSError, ValueError) as e:
        problems.append(f"{folder}: {e}")
        return None
    if half_done:
        note(f"compare.py: {half_done}")
    for script in SCRIPTS:
        for stem in (script, script + ".sweep"):
            if stem + ".json" not in paths:
                continue  # this machine did not run it: its rows stay blank
            try:
                found[stem] = schema.load(paths[stem + ".json"], script)
            except ValueError as e:
                problems.append(f"{os.path.join(folder, stem + '.json')}: {e}; left out")
    if not found and not any(p.startswith(folder + os.sep) for p in problems):
        quick = sorted(n for n in paths if n.endswith(".quick.json"))
        problems.append(f"{folder}: " + (
            f"holds only quick runs ({', '.join(quick)}), which compare.py leaves out: run "
            f"the scripts without --quick" if quick
            else f"no result files of {', '.join(SCRIPTS)}"))
    return found


def describe(name, results):
    """One line for a machine: its machine line, or what the published entry says it is."""
    data = next(iter(results.values()), None)
    if data is None:
        return f"{name}: no results"
    if data.get("published"):
        return f"{name}: {data['published']}"
    if data.get("predicted"):
        return f"{name}: {data['predicted'].removeprefix('machine: ')}"
    return f"{name}: {machine.line(data['machine'])}"


def short_names(folders):
    """A column name per folder: its own name, with as much of its path as tells it apart."""
    parts = [os.path.normpath(os.path.abspath(f)).split(os.sep) for f in folders]
    for depth in range(1, max(map(len, parts)) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [f"{p[-1]} ({i + 1})" for i, p in enumerate(parts)]  # one folder, named twice


def figures_of(machine, section):
    """The figures of a section that one machine's results hold, its sweeps' included."""
    script = section.split(":")[0]
    return {k: v for stem in (script, script + ".sweep") if stem in machine
            for k, v in figures(machine[stem], section).items()}


def comparison(names, machines, section, min_change=MIN_CHANGE):
    """Rows of one section's figures: label, unit, then each machine's value, its ratio to the
    first machine's and the verdict; last, the geometric mean of the time ratios."""
    per_machine = [figures_of(m, section) for m in machines]
    labels = []
    for f in per_machine:
        labels += [k for k in f if k not in labels]
    unmeasured = [next((word for data in m.values() for word in ("published", "predicted")
                        if data.get(word)), None) for m in machines]  # no samples, and why
    rows, times = [], [[] for _ in names[1:]]  # per later machine: (time ratio, its draws)
    for label, unit in labels:
        first = per_machine[0].get((label, unit))
        row = [label, unit, first and first[0]]
        for k, f in enumerate(per_machine[1:]):
            other = f.get((label, unit))
            ratio, draws = difference(first, other, label)
            row += [other and other[0], ratio,
                    verdict(ratio, draws, unit, min_change, unmeasured[0] or unmeasured[k + 1])]
            if ratio is not None and kind(unit) != "other":
                power = 1 if kind(unit) == "time" else -1  # a rate's ratio, as a time's
                times[k].append((ratio ** power, None if draws is None else draws ** power))
        rows.append(row)
    if any(times):
        row = ["geometric mean, as time", "x", None]
        for k, pairs in enumerate(times):
            ratio, draws = geometric_mean(pairs) if pairs else (None, None)
            row += [None, ratio,
                    verdict(ratio, draws, "ms", min_change, unmeasured[0] or unmeasured[k + 1])]
        rows.append(row)
    headers = ["figure", "unit", names[0]]
    for n in names[1:]:
        headers += [n, f"{n} / {names[0]}", "verdict"]
    return headers, rows


def difference(first, other, label):
    """The ratio other / first of a figure, and RESAMPLES bootstrap draws of it from the samples
    behind both (None without samples): each side's runs resampled with replacement and their
    median taken, from a generator seeded by the figure's name, so the same files always give
    the same verdicts. -> (ratio or None, draws or None)"""
    if not (first and other) or not all(isinstance(v[0], (int, float)) and v[0] > 0
                                        for v in (first, other)):
        return None, None
    ratio = other[0] / first[0]
    if first[1] is None or other[1] is None:
        return ratio, None
    rng = np.random.default_rng([SEED, zlib.crc32(label.encode())])

    def resampled(parts):  # the figure in each draw, over the figure measured
        out = np.ones(RESAMPLES)
        for seconds, power in parts:
            s = np.asarray(seconds, dtype=np.float64)
            medians = np.median(rng.choice(s, size=(RESAMPLES, s.size)), axis=1)
            out *= (medians / np.median(s)) ** power
        return out
    return ratio, ratio * resampled(other[1]) / resampled(first[1])


def geometric_mean(pairs):
    """The geometric mean of ratios, and of their draws where every ratio has them."""
    ratio = math.exp(sum(math.log(r) for r, _ in pairs) / len(pairs))
    if any(d is None for _, d in pairs):
        return ratio, None
    return ratio, np.exp(np.mean([np.log(d) for _, d in pairs], axis=0))


def kind(unit):
    """'time' for a figure that shrinks as the machine gets faster, 'rate' for one that grows,
    'other' for neither (a ratio, a balance)."""
    return "time" if unit in ("ms", "s") else "rate" if unit.endswith("/s") else "other"


def verdict(ratio, draws, unit, min_change, unmeasured=None):
    """In words: faster or slower (higher or lower), within the noise when the CONFIDENCE
    interval of the draws holds 1, no change when it is smaller than min_change percent.
    unmeasured: why a side has no samples ("published", "predicted"), if it is so."""
    if ratio is None:
        return None
    if draws is None:
        return f"{unmeasured}: no samples" if unmeasured else "no samples"
    lo, hi = np.quantile(draws, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    if lo <= 1 <= hi:
        return "within the noise"
    if abs(math.log(ratio)) < math.log(1 + min_change / 100):
        return "no change"
    up = ratio > 1
    return {"time": "slower" if up else "faster", "rate": "faster" if up else "slower",
            "other": "higher" if up else "lower"}[kind(unit)]


def build_parser():
    p = cli.Parser(description=__doc__.strip(),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="*", metavar="FOLDER",
                   help="result folders to compare, the first is the reference "
                        "(default: every folder under --out)")
    p.add_argument("--out", default=cli.RESULTS, metavar="DIR",
                   help="where to look for machines when no folder is named (default: results/ "
                        "beside the scripts, where they save)")
    p.add_argument("--tablefmt", type=cli.tablefmt, default="plain", metavar="FMT",
                   help="any tabulate format; github is Markdown (default: plain)")
    p.add_argument("--min-change", default=MIN_CHANGE, metavar="PCT",
                   type=cli.finite("a percentage of 0 or more", lambda v: v >= 0),
                   help=f"a smaller difference, even a real one, is no change "
                        f"(default: {MIN_CHANGE:g})")
    return p


def main(argv=None):
    plain_streams()
    args = build_parser().parse_args(argv)
    from tabulate import tabulate
    problems, found = [], []
    for folder in machine_folders(args.folders, args.out):
        data = read_machine(folder, problems)
        if data:
            found.append((folder, data))
    if not args.folders and not os.path.isdir(args.out):
        problems.append(f"{args.out}: no such results folder (--out)")
    if not args.folders:  # the post's figures first: the others are held to them
        found.sort(key=lambda f: not any(d.get("published") for d in f[1].values()))
    folders, machines = [f for f, _ in found], [m for _, m in found]
    names = short_names(folders) if folders else []
    for line in [describe(n, m) for n, m in zip(names, machines)]:
        show(line)
    if len(machines) > 1:
        show(f"(verdicts: a {CONFIDENCE:.0%} bootstrap interval of each ratio from the runs "
              f"behind both figures, {RESAMPLES:,} resamples, seeded; within the noise when it "
              f"holds 1; a change under {args.min_change:g}% is no change, --min-change)")
    for section in FIGURES if machines else ():
        headers, rows = comparison(names, machines, section, args.min_change)
        if not rows:
            continue
        show(f"\n{section}")
        show(tabulate(rows, headers=headers, tablefmt=args.tablefmt, floatfmt=".2f",
                      missingval=""))
    for name, m in zip(names, machines):
        for stem, data in m.items():
            if not (data.get("published") or data.get("predicted")) and not any(
                    samples for section in FIGURES if section.split(":")[0] == data["script"]
                    for _, samples in figures(data, section).values()):
                note(f"compare.py: {name}/{stem}.json has no samples behind its figures, so "
                     f"its differences get no verdict")
    for line in problems:
        note(f"compare.py: {line}")
    if not machines and not problems:
        note("compare.py: no results to compare; run the scripts first")
    return 1 if problems or not machines else 0


if __name__ == "__main__":
    stopping.leave(main())
