"""The command line: the flags every script shares, their checks before anything is measured,
and a run from its machine line to its saved result, printed as it goes.

A script's body(args, machine) measures, makes its records, and yields what the run prints and
keeps: a Sheet (its records, saved, and the table rendered from them), a str (a line printed and
kept in the .txt), a Saved (kept in the JSON) or a Picture (a file beside the result). The run
loop alone prints and saves; nothing it is handed is changed or handed back.
"""
import argparse
import contextlib
import dataclasses
import math
import os
import re
import secrets
import shlex
import signal
import sys
import time

from harness import exports, machine, report, results, stopping
from harness.printers import Picture, Saved, Sheet, entry, render
from harness.terminal import WARNED, note, plain_streams, plural, show, steps, warn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: the scripts
RESULTS = os.path.join(ROOT, "results")  # the default --out
REFERENCES = os.path.join(os.path.dirname(RESULTS), "references")  # shipped: no run writes here
MEMORY_MARGIN = 1.1, 0.25e9  # what a run may use: 90% of the available memory, less 250 MB
UNSAVED = ("out", "no_save", "tablefmt", "oversubscribe", "export")  # about the run, not the result
MOST_RUNS, MOST_THREADS = 10_000, 256  # beyond these a run never ends, or the threads swamp it


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help shows the script's whole description as written, with its examples, and each
    default, except where there is none to show."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            return action.help
        if isinstance(action.default, (list, tuple)):
            return f"{action.help} (default: {' '.join(map(str, action.default))})"
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag costs one line on stderr and exit code 2, never the usage dump."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def whole(lo, hi, words=()):
    """An argparse type: a whole number in [lo, hi] (or one of `words`), with a message naming
    what is allowed."""
    def parse(text):
        if text in words:
            return text
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"must be {''.join(w + ', ' for w in words)}a whole number from {lo:,} to "
                f"{hi:,}, got {shown(text)}")
        return value
    return parse


def shown(text, most=40):
    """A value as a message repeats it: quoted, and cut short if long."""
    return repr(text if len(text) <= most else text[:most - 3] + "...")


LABEL_MAX = 100  # characters: a folder name any file system takes


def finite(allowed, ok):
    """An argparse type: a finite number for which ok(number) holds; `allowed` says which, in
    the message."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {shown(text)}")
        return value
    return parse


def speed(unit, low, high):
    """An argparse type: a speed in `unit`, from low to high."""
    return finite(f"a speed in {unit} from {low:g} to {high:g}", lambda v: low <= v <= high)


def folder(text):
    """An argparse type: a folder's path, which must not be empty."""
    if not text:
        raise argparse.ArgumentTypeError("must be a folder's path, got ''")
    return text


def reads(reader, what):
    """An argparse type: the file at a path, as reader(path) reads it; refused in one line
    saying why when reader raises ValueError."""
    def parse(path):
        try:
            return reader(path)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"must be {what}; {path!r} {e}") from None
    return parse


def checked(reader):
    """An argparse type: the text itself, once reader(text) takes it; refused in one line saying
    why when reader raises ValueError or OSError."""
    def parse(text):
        try:
            reader(text)
        except (ValueError, OSError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text
    return parse


def label(text):
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text) or len(text) > LABEL_MAX:
        raise argparse.ArgumentTypeError(
            f"must be up to {LABEL_MAX} letters, digits, '.', '_' or '-' (a folder name), "
            f"got {shown(text)}")
    return text


MARKDOWN = ("markdown", "md")  # what a user calls GitHub's Markdown tables


def tablefmt(text):
    from tabulate import tabulate_formats
    if text in MARKDOWN:
        return "github"
    if text not in tabulate_formats:
        raise argparse.ArgumentTypeError(f"must be a tabulate format such as plain, github, "
                                         f"simple or grid, got {shown(text)}")
    return text


def parser(doc, runs):
    """An argument parser with the flags every script shares; `runs` is the post's count."""
    from tabulate import tabulate_formats
    p = Parser(description=doc.strip(), formatter_class=_Help)
    g = p.add_argument_group("shared by every script")
    g.add_argument("--runs", type=whole(1, MOST_RUNS), default=runs, metavar="N",
                   help="counted runs per figure, after one warm-up run that is not counted")
    g.add_argument("--threads", nargs="+", type=whole(1, MOST_THREADS), default=None,
                   metavar="N",
                   help="BLAS threads (via threadpoolctl), at most this machine's logical CPUs; "
                        "several (--threads 1 2) sweep them: one block of tables each, saved as "
                        "<script>.sweep; default: the library's own choice")
    g.add_argument("--oversubscribe", action="store_true",
                   help="let --threads exceed the logical CPUs (the threads then take turns)")
    g.add_argument("--quick", action="store_true",
                   help="small sizes, a smoke run of a few seconds; saved apart from full runs")
    g.add_argument("--tablefmt", type=tablefmt, default="plain", metavar="FMT",
                   help="plain is the post's layout, github (or markdown, md) is Markdown; any "
                        "tabulate format: "
                        + ", ".join(tabulate_formats))
    g.add_argument("--export", choices=exports.FORMATS, default=None,
                   help="write the figures to stdout as csv, json or jsonl instead: one row "
                        "per figure, numbers unrounded; what is saved is the same")
    g.add_argument("--spread", action="store_true",
                   help="a range column beside each timed figure: its slowest and fastest "
                        "counted run (the post's own layouts give way to tables)")
    g.add_argument("--out", type=folder, default=RESULTS, metavar="DIR",
                   help="folder for results, the same wherever the scripts are run from")
    g.add_argument("--label", type=label, default=None, metavar="NAME",
                   help="results subfolder; default: a slug of the CPU model and core count")
    g.add_argument("--no-save", action="store_true", help="print the tables, save nothing")
    return p


_UNSET = object()  # a flag's value before parsing: still _UNSET after it, the flag was not given


def parse(p, argv, quick):
    """Parse the flags and check, before anything is measured, what can be checked: --quick
    takes the small sizes in `quick` for every flag not given; a list flag keeps each value
    once; --threads and the folder that results will go to."""
    plain_streams()  # --help too
    args = p.parse_args(argv, namespace=argparse.Namespace(**{name: _UNSET for name in quick}))
    for name, value in quick.items():
        if getattr(args, name) is _UNSET:
            setattr(args, name, value if args.quick else p.get_default(name))
    for action in p._actions:  # each value once, in the order given
        value = getattr(args, action.dest, None)
        if action.nargs == "+" and isinstance(value, list):  # given: defaults are tuples
            setattr(args, action.dest, list(dict.fromkeys(value)))
    cpus = os.cpu_count() or 1
    if args.threads and max(args.threads) > cpus:
        if not args.oversubscribe:
            p.error(f"argument --threads: must be at most {cpus}, this machine's logical CPUs, "
                    f"got {max(args.threads)} (add --oversubscribe to run more anyway)")
        warn(f"--threads {max(args.threads)} on {cpus} logical CPUs: the threads take turns")
    if args.threads:
        args.threads = sorted(set(args.threads))
    if getattr(args, "predict", None) is None:  # a prediction's folder is named later
        check_folder(p, args)
    return args


def check_folder(p, args):
    """Refuse, in one line, a results folder a run must not or cannot save into: the shipped
    references, a link, or one where its files cannot be made."""
    if args.no_save:
        return
    if shipped(folder_of(args)):
        p.error(f"argument --out: {REFERENCES} holds the shipped reference results, which no run "
                f"replaces; save elsewhere (the default is {RESULTS})")
    stem = os.path.splitext(p.prog)[0] + (".sweep" if args.threads and len(args.threads) > 1
                                           else "") + (".quick" if args.quick else "")
    problem = unwritable(folder_of(args), [stem + ".json", stem + ".txt"])
    if problem:
        p.error(f"argument --out: results cannot be saved to {folder_of(args)}: {problem} "
                f"(choose another --out or --label, or --no-save)")


def shipped(path):
    """Whether path is the shipped references/ folder or inside it, wherever links lead."""
    real, references = os.path.realpath(path), os.path.realpath(REFERENCES)
    return real == references or real.startswith(references.rstrip(os.sep) + os.sep)


def folder_of(args):
    """Where a run's results go: --out/--label, or --out/<this machine's CPU and cores>."""
    cpu = {"cpu": machine.quietly(machine.cpu_model, "unknown CPU"),
           "cores": machine.quietly(os.cpu_count)}
    return os.path.join(args.out, args.label or machine.machine_id(cpu))


def unwritable(folder, names=()):
    """Why the files `names` cannot be saved into folder, in a few words, or None. Tries it: makes
    the missing folders and a new file in the last, then removes everything it made. Refused too:
    a name (or the lock) that is there but not a regular file (a link, say), and what
    results.refusal names (history/ that is a link, a journal naming other files)."""
    path, made = os.path.abspath(folder), []
    try:
        missing, head = [], path
        while not os.path.lexists(head):
            head, name = os.path.split(head)
            missing.append(name)
        for name in reversed(missing):
            head = os.path.join(head, name)
            os.mkdir(head)
            made.append(head)
        if os.path.islink(path) or not os.path.isdir(path):
            return f"{path} is a link or not a folder: a run writes only into a folder of its own"
        for name in [results.LOCK, *names]:
            there = os.path.join(path, name)
            if os.path.islink(there):
                return f"{there} is a link, not a file"
            if os.path.lexists(there) and not os.path.isfile(there):
                return f"{there} is not a file"
        problem = results.refusal(path)
        if problem:
            return problem
        probe = os.path.join(path, results.TEMP + "probe-" + secrets.token_hex(8))
        os.close(os.open(probe, results.NEW, 0o600))  # a leftover probe is no matter: unique
        os.unlink(probe)
    except OSError as e:
        return f"{e.filename or path}: {e.strerror or e}"
    finally:
        for made_folder in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(made_folder)
    return None


def need_memory(p, need_bytes, what, flag):
    """Exit with one line (code 2) if need_bytes, with a margin, is more than the machine has
    available."""
    have = machine.quietly(machine.available_memory_bytes)
    if have is not None and need_bytes * MEMORY_MARGIN[0] + MEMORY_MARGIN[1] > have:
        p.error(f"{what}: about {need_bytes / 1e9:.1f} GB, and a margin for the rest of the "
                f"machine, but only {have / 1e9:.1f} GB is available; use a smaller {flag}")


def run(script, args, body, headline=None):
    """Measure under each chosen thread count: the machine line, then what body yields, printed
    as it comes; then save, and bring the folder's report up to date. headline: the line to show
    instead of the machine line, for a run that measures nothing (a prediction). Returns the
    exit code: 0; 1 if the results could not be saved; 128 + the signal's number on Ctrl-C (130)
    or SIGTERM (143), with nothing saved and earlier results untouched."""
    plain_streams()
    stopping.begin()
    WARNED.clear()
    steps(())  # a run counts its own steps, if any
    start, out = time.perf_counter(), Output(args)
    try:
        with stopping.stoppable():
            with contextlib.nullcontext([]) if headline else machine.measuring() as busy:
                facts = each_thread_count(args, body, busy, out, headline)
            wall, peak = time.perf_counter() - start, machine.quietly(machine.peak_rss_bytes)
            note(f"wall time {wall:.1f} s" + (f", peak memory {peak / 1e9:.2f} GB" if peak
                                              else ""))
            if args.export:
                show(exports.run(args.export, script, facts, out.records, headline))
            if args.no_save:
                return 0
            made = {"version": version(), "command": command(), "warnings": list(WARNED)}
            data = {"schema_version": results.SCHEMA_VERSION, "script": script,
                    "quick": args.quick, "machine": facts, "settings": out.settings,
                    "records": out.records, "sheets": out.tables, "sweep": out.sweep,
                    "pictures": sorted(out.pictures),
                    **out.kept, "wall_s": wall,
                    "peak_rss_bytes": peak, "made": made}
            text = [*out.text, "", f"(made by the suite at {made['version']}: "
                                   f"{made['command']})", *(f"warning: {w}" for w in WARNED)]
            stem, folder = script + (".sweep" if out.sweep else ""), folder_of(args)
            files = results.files(stem, data, text, out.pictures, args.quick)
            if not (args.quick or out.sweep) and script in report.SCRIPTS:  # one save with it
                files[report.NAME] = report.with_run(folder, script, data, list(files))
            saved = results.save(folder, files, None if args.quick else stem, facts["busy"])
            if saved == 0:
                note(next_steps(folder, report.NAME in files, args.quick))
            return saved
    except (stopping.Stopped, KeyboardInterrupt) as e:
        signum = getattr(e, "signum", signal.SIGINT)
        note(f"{stopping.STOPS[signum]}: {stopping.outcome()}")
        return 128 + signum


def each_thread_count(args, body, busy, out, headline):
    """body(args, facts) once per thread count (several: a sweep), the BLAS held to it, each
    block's sheets named with its count. -> the machine's facts, as the first block found it."""
    from threadpoolctl import threadpool_limits
    facts = None
    for n in args.threads or [None]:
        with threadpool_limits(n) if n else contextlib.nullcontext():
            if facts is None:
                facts = machine.facts(busy, out.sweep)
                out.show(headline or machine.line(facts))
            n = n or max([b["threads"] or 1 for b in facts["blas"]] or [1])  # the BLAS's own
            if out.sweep:
                out.show(f"\n{n} {plural(n, 'thread')}:")
            out.settings.setdefault("threads_used", []).append(n)
            block = argparse.Namespace(**{**vars(args), "threads": n})
            for item in body(block, facts):
                out.take(item, f" @{n}" if out.sweep else "")
    return facts


class Output:
    """What a run prints and keeps, as body yields it: the .txt's lines, every sheet's records
    (made by the body as it measured) and its presentation, other entries, the pictures."""

    def __init__(self, args):
        self.fmt, self.spread, self.quiet = args.tablefmt, args.spread, bool(args.export)
        self.sweep = args.threads if args.threads and len(args.threads) > 1 else None
        self.settings = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
                         for k, v in vars(args).items() if k not in UNSAVED}  # --roofs: Speeds
        self.text, self.tables, self.kept, self.pictures, self.records = [], {}, {}, {}, []

    def show(self, line):
        """A line of the .txt, printed unless an export takes stdout's place."""
        if not self.quiet:
            show(line)
        self.text.append(line)

    def take(self, item, suffix):
        if isinstance(item, Sheet):
            self.show(render(item, self.fmt, self.spread))
            self.tables[item.name + suffix] = entry(item)
            self.records += list(item.records) if item.recorded else []
        elif isinstance(item, Saved):
            self.kept[item.key + suffix] = item.value
        elif isinstance(item, Picture):
            self.pictures[item.name] = item.draw
        else:
            self.show(item)


def next_steps(folder, reported, quick):
    """The run's last line: where its report is, and what to run next."""
    if quick:
        return "a quick run, kept apart: run without --quick for the report and compare.py"
    mine = os.path.relpath(folder) if not os.path.relpath(folder).startswith("..") else folder
    return ((f"the report: {os.path.join(mine, 'report.md')}; " if reported else "")
            + f"next: python compare.py post {shlex.quote(mine)}")


def version():
    """The suite's version: its git commit when run from a checkout ('+' if changed since)."""
    here = ROOT
    commit = machine.quietly(lambda: machine.run_quiet("git", "-C", here, "rev-parse", "--short",
                                                       "HEAD"))
    if commit is None:
        return "an unknown version (not a git checkout)"
    changed = machine.quietly(lambda: machine.run_quiet("git", "-C", here, "status",
                                                        "--porcelain", "--untracked-files=no"))
    return f"commit {commit}" + (" with changes" if changed else "")


def command():
    """The command line as typed: python, then the script and its flags."""
    return "python " + shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
