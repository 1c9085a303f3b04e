"""Compare machines: the headline figures of saved results side by side, with each machine's
ratio to the first.

    python compare.py                                   # every machine under results/
    python compare.py results/post results/amd-epyc-2c  # the named result folders, in order
"""
import common  # first, and the call below: Ctrl-C or a kill while the rest loads ends in one line

common.stop_quietly()

import json  # noqa: E402 (this and every import below come after the call above)
import os  # noqa: E402
import sys  # noqa: E402

SCRIPTS = ("machine_speed", "two_phases", "cube_bug")
READABLE = (1, 2)  # schema versions this compare.py reads: 2 added two_phases' breakdown

# The headline figures, as data: section -> [(table, key column, figure column, label)].
# A key column gives one figure per row (per prompt length, user count, ...). A section is a
# script's name, or "script: title" for more of that script's figures.
FIGURES = {
    "machine_speed": [("machine_speed", None, "memory speed", "forklift"),
                      ("machine_speed", None, "math speed", "workbench"),
                      ("machine_speed", None, "balance", "balance"),
                      ("machine_speed", None, "tokens a trip needs", "tokens a trip needs")],
    "two_phases": [("prefill", "prompt", "ms/token", "prefill ms/token"),
                   ("prefill", "prompt", "GFLOP/s", "prefill GFLOP/s"),
                   ("decode", "users", "step ms", "decode step"),
                   ("decode", "users", "tokens/s", "decode tokens/s"),
                   ("collision", None, "normal gap ms", "typers' normal gap"),
                   ("collision", None, "all at once gap ms", "gap, question all at once"),
                   ("collision", None, "chunked worst gap ms", "worst gap, question in chunks")],
    "two_phases: where the time goes": [
        ("breakdown", "row", column, part)
        for column, part in [("trip ms", "recorded trip"), ("tables ms", "tables"),
                             ("alone ms", "tables alone"), ("attention ms", "attention"),
                             ("elementwise ms", "elementwise"), ("other ms", "other")]],
    "cube_bug": [("cube", "numbers", "ratio", "h**3 / h*h*h")],
}


def load(path, script):
    """A result file's data, or raise ValueError with what is wrong with it, in a few words."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"cannot be read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError("is not a result file (no object at the top)")
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise ValueError("has no schema version; rerun that script to refresh it")
    if type(version) is not int:
        raise ValueError(f"has schema version {version!r}, which is not a whole number")
    if version not in READABLE:
        age = "older" if version < min(READABLE) else "newer"
        raise ValueError(f"has schema version {version}, {age} than this compare.py reads "
                         f"({', '.join(map(str, READABLE))}); rerun that script to refresh it")
    if data.get("script") != script:
        raise ValueError(f"holds results of {data.get('script')!r}, not {script!r}")
    check_machine(data.get("machine"))
    check_tables(data.get("tables"))
    return data


MACHINE = {"cpu": str, "os": str, "python": str, "numpy": str, "blas": list, "env": dict,
           "date": str}  # what the machine line needs; the rest may be missing or None
BLAS = {"library": str, "version": str, "threads": int}


def check_machine(m):
    """Raise ValueError, naming the field, if the machine line cannot be made from m."""
    if not isinstance(m, dict):
        raise ValueError("has no machine")
    for field, kind in MACHINE.items():
        if not isinstance(m.get(field), kind):
            raise ValueError(f"has no usable machine {field!r}")
    for b in m["blas"]:
        if not isinstance(b, dict) or not all(isinstance(b.get(k), t) for k, t in BLAS.items()):
            raise ValueError("has a BLAS entry without its library, version or threads")
    if not isinstance(m.get("cores"), (int, type(None))):
        raise ValueError("has no usable machine 'cores'")


def check_tables(tables):
    """Raise ValueError, naming the table, if a table is not columns and rows of that width."""
    if not isinstance(tables, dict):
        raise ValueError("has no tables")
    for name, t in tables.items():
        columns = t.get("columns") if isinstance(t, dict) else None
        if not isinstance(columns, list) or not all(
                isinstance(c, dict) and isinstance(c.get("header"), str)
                and isinstance(c.get("unit"), str) for c in columns):
            raise ValueError(f"has a table {name!r} without usable columns")
        rows = t.get("rows")
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == len(columns) for r in rows):
            raise ValueError(f"has a table {name!r} whose rows do not match its columns")


def figures(data, section):
    """{(label, unit): value} of one result file: the figures of a section it holds."""
    out = {}
    for table, key, column, label in FIGURES[section]:
        t = data["tables"].get(table)
        heads = [c["header"] for c in t["columns"]] if t else []
        if column not in heads:
            continue
        unit = t["columns"][heads.index(column)]["unit"]
        for row in t["rows"]:
            cells = dict(zip(heads, row))
            which = "" if key is None else (
                f" ({cells[key]})" if isinstance(cells[key], str) else f" ({key} {cells[key]})")
            out[(label + which, unit)] = cells[column]
    return out


def machine_folders(args_folders, out):
    """The folders to compare: those named, or every folder under results/."""
    if args_folders:
        return args_folders
    if not os.path.isdir(out):
        return []
    folders = sorted(os.path.join(out, d) for d in os.listdir(out)
                     if os.path.isdir(os.path.join(out, d)))
    return sorted(folders, key=lambda f: not is_published(f))  # the post's figures first


def is_published(folder):
    """True for a folder of published figures (like the post's), which others are held to."""
    for script in SCRIPTS:
        try:
            with open(os.path.join(folder, script + ".json")) as f:
                return bool(json.load(f).get("published"))
        except (OSError, ValueError, AttributeError):
            continue
    return False


def read_machine(folder, problems):
    """{script: data} of one machine's folder; what cannot be used goes to problems. The folder
    is read under its lock, after any save a killed run left halfway is finished."""
    if not os.path.exists(folder):
        problems.append(f"{folder}: no such results folder")
        return None
    if not os.path.isdir(folder):
        problems.append(f"{folder}: is a file, not a results folder")
        return None
    found = {}
    with common.locked(folder):
        if os.access(folder, os.W_OK):
            common.finish_replacing(folder)
        for script in SCRIPTS:
            path = os.path.join(folder, script + ".json")
            if not os.path.exists(path):
                continue  # this machine did not run it: its rows stay blank
            try:
                found[script] = load(path, script)
            except ValueError as e:
                problems.append(f"{path}: {e}; left out")
    if not found and not any(p.startswith(folder + os.sep) for p in problems):
        quick = sorted(n for n in os.listdir(folder) if n.endswith(".quick.json"))
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
    return f"{name}: {common.machine_line(data['machine'])}"


def short_names(folders):
    """A column name per folder: its own name, with as much of its path as tells it apart."""
    parts = [os.path.normpath(os.path.abspath(f)).split(os.sep) for f in folders]
    for depth in range(1, max(map(len, parts)) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [f"{n} ({i + 1})" for i, n in enumerate(names)]  # the same folder named twice


def figures_of(machine, section):
    """The figures of a section that one machine's results hold."""
    script = section.split(":")[0]
    return figures(machine[script], section) if script in machine else {}


def comparison(names, machines, section):
    """Rows of one section's figures: label, unit, then each machine's value and its ratio."""
    per_machine = [figures_of(m, section) for m in machines]
    labels = []
    for f in per_machine:
        labels += [k for k in f if k not in labels]
    rows = []
    for label, unit in labels:
        values = [f.get((label, unit)) for f in per_machine]
        first = values[0]
        row = [label, unit, first]
        for v in values[1:]:
            ratio = v / first if isinstance(v, (int, float)) and isinstance(first, (int, float)) \
                and first else None
            row += [v, ratio]
        rows.append(row)
    headers = ["figure", "unit", names[0]]
    for n in names[1:]:
        headers += [n, f"{n} / {names[0]}"]
    return headers, rows


def build_parser():
    p = common.Parser(description=__doc__.strip().splitlines()[0])
    p.add_argument("folders", nargs="*", metavar="FOLDER",
                   help="result folders to compare, the first is the reference "
                        "(default: every folder under --out)")
    p.add_argument("--out", default=common.RESULTS, metavar="DIR",
                   help="where to look for machines when no folder is named (default: results/ "
                        "beside the scripts, where they save)")
    p.add_argument("--tablefmt", type=common.tablefmt, default="plain", metavar="FMT",
                   help="any tabulate format; github is Markdown (default: plain)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    from tabulate import tabulate
    problems, folders, machines = [], [], []
    for folder in machine_folders(args.folders, args.out):
        found = read_machine(folder, problems)
        if found:
            folders.append(folder)
            machines.append(found)
    names = short_names(folders) if folders else []
    for line in [describe(n, m) for n, m in zip(names, machines)]:
        print(line)
    for section in FIGURES if machines else ():
        headers, rows = comparison(names, machines, section)
        if not rows:
            continue
        print(f"\n{section}")
        print(tabulate(rows, headers=headers, tablefmt=args.tablefmt, floatfmt=".2f",
                       missingval=""))
    for line in problems:
        print(f"compare.py: {line}", file=sys.stderr)
    if not machines and not problems:
        print("compare.py: no results to compare; run the scripts first", file=sys.stderr)
    return 1 if problems or not machines else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `python compare.py | head`: the reader has seen enough
        sys.stderr.close()
        sys.exit(0)
