"""A run, from its machine line to its saved result, printed as it goes.

A script's body(args, machine) measures, makes its records, and yields what the run prints and
keeps: a Sheet (its records, saved, and the table rendered from them), a str (a line printed and
kept in the .txt), a Saved (kept in the JSON) or a Picture (a file beside the result). The run
loop alone prints and saves; nothing it is handed is changed or handed back.
"""
import contextlib
import json
import os
import shlex
import signal
import sys
import time

from harness import flags, stopping
from harness.keeping.where import folder_of
from harness.terminal import arrived, kept, note, plain_streams, plural, show, steps, warn
from harness.measuring import devices, host, nvidia, processes
from harness.measuring.worker import serve
from harness.measuring.speeds import Speeds
from harness.keeping import exports, records, results, schema
from harness.keeping.results import ROOT
from harness.showing import pictures, report
from harness.experiments.registry import TOLD
from harness.showing.printers import Picture, Saved, Sheet, entry, render

UNSAVED = ("out", "no_save", "tablefmt", "oversubscribe", "export", "argv", "worker", "job",
           "on", "given", "held_out")  # about the run, not the result


def run(script, args, body, headline=None, worker=None):
    """Measure under each chosen thread count: the machine line, then what body yields, printed
    as it comes; then save, and bring the folder's report up to date. headline: the line to show
    instead of the machine line, for a run that measures nothing (a prediction). worker(args,
    job): what one of the run's worker processes measures; a worker (--worker) does only that,
    printing and saving nothing (worker.serve). Returns the exit code: 0; 1 if the results could
    not be saved, or a worker process failed (saving what was measured before it, marked, where
    every row was); 128 + the signal's number on Ctrl-C (130) or SIGTERM (143), with nothing
    saved and earlier results untouched."""
    if worker and getattr(args, "worker", False):
        return serve(args, worker)
    plain_streams()
    args = flags.settled(args)
    stopping.begin()
    steps(())  # a run counts its own steps, if any
    start, out = time.perf_counter(), Output(args)
    try:
        with stopping.stoppable(), kept() as warned:
            with contextlib.nullcontext([]) if headline else host.measuring() as busy:
                facts = each_thread_count(args, body, busy, out, headline)
            if not headline:  # how disturbed the run was as a whole, saved with the machine
                facts["disturbance"] = records.disturbance(out.records)
                said = host.disturbed_words(facts["disturbance"])
                if said:
                    note(f"{said}: the machine line saved with the results says so")
                tune = host.advice(facts, host.quietly(host.cpu_frequency, {}))
                if tune:
                    note(tune)
            wall, peak = time.perf_counter() - start, host.quietly(host.peak_rss_bytes)
            note(f"wall time {wall:.1f} s" + (f", peak memory {peak / 1e9:.2f} GB" if peak
                                              else ""))
            if args.export:
                show(exports.run(args.export, script, facts, out.records, headline))
            if args.no_save:
                return stopped(out, 0, saved=False)
            drawn = pictures.drawn(out.pictures)  # before the save: a failing one left out
            made = {"version": version(), "command": command(), "warnings": list(warned)}
            data = {"schema_version": results.SCHEMA_VERSION, "script": script,
                    "quick": args.quick, "machine": facts, "settings": out.settings,
                    "records": out.records, "sheets": out.tables, "sweep": out.sweep,
                    "pictures": sorted(drawn), **out.kept,
                    **({"blocks": list(out.blocks.values())} if out.blocks else {}),
                    "wall_s": wall,
                    "peak_rss_bytes": peak, "made": made}
            text = [*out.text, "", f"(made by the suite at {made['version']}: "
                                   f"{made['command']})", *(f"warning: {w}" for w in warned)]
            stem, folder = script + (".sweep" if out.sweep else ""), folder_of(args)
            try:  # what is saved must read back: the reader's own check, before the save
                schema.check(json.loads(json.dumps(data, allow_nan=False)), script)
            except ValueError as e:
                note(f"error: could not save results to {folder}/: the result would not read "
                     f"back (it {e})" + ("; use fewer --runs or --threads" if "samples" in str(e)
                                         else ""))
                return 1
            files = results.files(stem, data, text, drawn, args.quick)
            if not (args.quick or out.sweep) and script in results.SCRIPTS:  # one save with it
                files[report.NAME] = report.with_run(folder, script, data, list(files), TOLD)
                mixed(folder, script, facts, headline)
            saved = results.save(folder, files, None if args.quick else stem, facts["busy"],
                                 getattr(args, "held_out", None))
            if saved == 0:
                note(next_steps(folder, report.NAME in files, args.quick))
            return stopped(out, saved)
    except processes.DeviceFailed as e:
        note(f"error: --device {args.device}: {e}: nothing saved, earlier results untouched")
        return 2
    except processes.WorkerFailed as e:
        note(f"error: {e}: nothing saved, earlier results untouched")
        return 1
    except Exception as e:  # in this process (--quick): a GPU library's error, in one line
        cause = devices.failure(e, args.on)
        if cause is None:
            raise
        note(f"error: --device {args.device}: {cause}: nothing saved, earlier results "
             f"untouched")
        return 2
    except (stopping.Stopped, KeyboardInterrupt) as e:
        stopping.stopped()
        signum = getattr(e, "signum", signal.SIGINT)
        note(f"{stopping.STOPS[signum]}: {stopping.outcome()}")
        return 128 + signum
    finally:
        pictures.tidy()  # matplotlib's temp folder, where this run had to make one


def mixed(folder, script, facts, headline):
    """Warn where the folder holds runs of another machine than this one: the report would mix
    them (a label shared by two machines, or the default one by two BLAS builds)."""
    if headline:
        return
    others = host.quietly(lambda: report.other_machines(folder, script, facts), {})
    for other, line in (others or {}).items():
        line = line.removeprefix("machine: ")[:160]
        warn(f"{folder} holds {other}.py run on another machine or setup ({line}): its report "
             f"will show both machines; keep them apart with --label")


def stopped(out, code, saved=True):
    """The exit code of a run whose measuring was cut short, keeping what was measured before,
    marked: by a signal while adding processes, 128 + its number; by a worker process's failure, 1,
    said even where the save failed after; else code, or 1 where an export to stdout was cut
    short."""
    code = code or (0 if arrived(out.export) else 1)
    why, kept = cut_short(out), "saved" if saved and not code else "printed"
    if why is None or (code and not isinstance(why, str)):
        return code
    note(f"{stopping.cut_short_words(why)}: the processes measured before are {kept}, marked")
    return 1 if isinstance(why, str) else 128 + why


def cut_short(out):
    """What cut the run's measuring short, keeping what came before (Measurements.stopped, of
    processes.py), in whichever block of a sweep it came; None if nothing did."""
    return next((b["stopped"] for b in (out.kept, *out.blocks.values()) if "stopped" in b), None)


def each_thread_count(args, body, busy, out, headline):
    """body(args, facts) once per thread count (several: a sweep), the BLAS held to it, each
    block's sheets named with its count; a block cut short (cut_short) is the sweep's last.
    -> the machine's facts, as the first block found it."""
    from threadpoolctl import threadpool_limits
    facts = None
    for n in args.threads or (None,):  # (then the BLAS's own count: threads_run())
        with threadpool_limits(n) if n else contextlib.nullcontext():
            if facts is None:
                facts = host.facts(busy, out.sweep)
                facts["device"] = args.on.facts()
                facts["busy"] += gpu_busy(args.on, facts["device"])
                out.show(headline or host.line(facts))
            args.on.threads(n)  # PyTorch's, on this CPU
            n = threads_run(n, facts)
            if out.sweep:
                out.show(f"\n{n} {plural(n, 'thread')}:")
            out.settings.setdefault("threads_used", []).append(n)
            block = args.replace(threads=n)
            for item in body(block, facts):
                stopping.check()
                out.take(item, n if out.sweep else None)
            stopping.check()
        if cut_short(out) is not None:
            break
    return facts


def gpu_busy(on, device):
    """Other processes computing on the run's GPU when it starts, in words, said once: []
    where none is (or it cannot be known). Processes the run cannot see (a container's view:
    nvidia-smi gives the host's PIDs) are said and kept in the device's facts as unknown, and
    counted as busy only where the GPU's utilization says it is at work as the run starts."""
    found = on.others() or {"others": [], "unseen": []}
    said, unseen = nvidia.busy_words(found["others"]), nvidia.unseen_words(found["unseen"])
    if said:
        warn(f"the machine is busy ({said}): every timing of this run on the GPU may be slower "
             f"than it can do; the machine line says so")
    if unseen:  # whose they are is unknown; how busy the GPU is, before this run's work, is not
        busy = (nvidia.facts((on.facts() or {}).get("uuid")) or {}).get("busy_pct")
        if not said and isinstance(busy, (int, float)) and busy >= nvidia.BUSY_PCT:
            said = f"the GPU {busy:g}% busy as the run starts, with {unseen}"
            warn(f"the machine is busy ({said}): every timing of this run on the GPU may be "
                 f"slower than it can do; the machine line says so")
            return [said]
        warn(f"{unseen}: in a container nvidia-smi gives the host's numbers, so they may be "
             f"this run's own or another's; the GPU idle as the run starts ({busy}% busy), "
             f"so not counted as busy, and the machine line says unknown")
        device["unseen"] = unseen
    return [said] if said else []


def threads_run(asked, facts):
    """The threads the BLAS runs with under --threads `asked` (its own count where none is
    asked): what it took, said where it took fewer (OpenBLAS stops at the most it was built
    for, 64 say), so that a run records the threads it ran."""
    ran = [b["threads"] for b in host.quietly(host.blas_info, []) if b.get("threads")]
    if not asked:
        return max([b["threads"] or 1 for b in facts["blas"]] or [1])
    if ran and max(ran) < asked:
        warn(f"--threads {asked}: the BLAS runs {max(ran)}, the most it takes; the run records "
             f"{max(ran)}")
        return max(ran)
    return asked


class Output:
    """What a run prints and keeps, as body yields it: the .txt's lines, every sheet's records
    (made by the body as it measured) and its presentation, other entries, the pictures."""

    def __init__(self, args):
        self.fmt, self.spread, self.quiet = args.tablefmt, args.spread, bool(args.export)
        self.export = args.export
        self.sweep = args.threads if args.threads and len(args.threads) > 1 else None
        self.settings = {k: v.saved() if isinstance(v, Speeds) else v
                         for k, v in vars(args).items() if k not in UNSAVED}  # --roofs: Speeds
        self.text, self.tables, self.pictures, self.records = [], [], {}, []
        self.kept, self.blocks = {}, {}  # what was saved: the run's, or each sweep block's

    def show(self, line):
        """A line of the .txt, printed unless an export takes stdout's place."""
        if not self.quiet:
            show(line)
        self.text.append(line)

    def take(self, item, threads=None):
        """What body yielded, kept under its name; in a sweep, a sheet says its block's threads
        and a saved entry goes into its block's (blocks: [{"threads": n, name: value}])."""
        if isinstance(item, Sheet):
            self.show(render(item, self.fmt, self.spread))
            self.tables.append({"name": item.name, "threads": threads, **entry(item)})
            self.records += list(item.records) if item.recorded else []
        elif isinstance(item, Saved):
            kept = self.kept if threads is None else self.blocks.setdefault(
                threads, {"threads": threads})
            kept[item.key] = item.value
        elif isinstance(item, Picture):
            self.pictures[item.name] = item.draw
        else:
            self.show(item)


def next_steps(folder, reported, quick):
    """The run's last line: where its report is, and what to run next."""
    if quick:
        return "a quick run, kept apart: run without --quick for the report and compare.py"
    mine = os.path.relpath(folder) if not os.path.relpath(folder).startswith("..") else folder
    return ((f"the report: {pasteable(os.path.join(mine, 'report.md'))}; " if reported else "")
            + f"next: python compare.py post {pasteable(mine)}")


def pasteable(path):
    """A path as a shell takes it back when pasted: quoted; and where the terminal cannot show
    a character of it (an ASCII terminal, a name in UTF-8), in bash's $'...' with each such
    byte as \\xNN, never a '?' that names another file."""
    encoding = getattr(sys.stderr, "encoding", None) or "ascii"
    try:
        path.encode(encoding)
        return shlex.quote(path)
    except UnicodeEncodeError:
        raw = path.encode("utf-8", "surrogateescape")  # the name's own bytes, as on disk
        return "$'" + "".join(chr(b) if 32 <= b < 127 and chr(b) not in "'\\" else f"\\x{b:02x}"
                              for b in raw) + "'"


def version():
    """The suite's version: its git commit when run from a checkout ('+' if changed since)."""
    here = ROOT
    commit = host.quietly(lambda: host.run_quiet("git", "-C", here, "rev-parse", "--short",
                                                       "HEAD"))
    if commit is None:
        return "an unknown version (not a git checkout)"
    changed = host.quietly(lambda: host.run_quiet(  # read only: no optional lock, so
        "git", "--no-optional-locks", "-C", here, "status",  # git never rewrites its index
        "--porcelain", "--untracked-files=no"))
    return f"commit {commit}" + (" with changes" if changed else "")


def command():
    """The command line as typed: python, then the script and its flags."""
    return "python " + shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
