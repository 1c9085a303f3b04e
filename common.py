"""What every script shares: timing, the machine line, saving results, the shared flags.

Nothing here measures on its own; run machine_speed.py, two_phases.py or cube_bug.py.
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

SCHEMA_VERSION = 2  # bump when the JSON layout changes; compare tools read it
NOISE_SPREAD = 1.2  # slowest / fastest counted sample above this: the machine looked noisy
BLAS_ENV = ("OPENBLAS_", "OMP_", "MKL_", "BLIS_", "GOTO_", "VECLIB_", "ACCELERATE_", "KMP_")

# ---------------------------------------------------------------------------------------------
# timing


def time_steps(steps, runs, setup=None, clock=time.perf_counter, what=""):
    """Run a schedule (a list of calls) once to warm up, then `runs` times; return, for each
    counted run, the seconds of every step. setup runs before each whole schedule, untimed."""
    counted = []
    for i in range(runs + 1):
        if setup is not None:
            setup()
        progress(f"{what}: {'warm-up' if i == 0 else f'run {i} of {runs}'}" if what else "")
        seconds = []
        for step in steps:
            start = clock()
            step()
            seconds.append(clock() - start)
        if i > 0:
            counted.append(seconds)
    progress("")
    return counted


def time_runs(fn, runs, setup=None, clock=time.perf_counter, what="", min_sample_s=0.0):
    """Call fn once to warm up (not counted), then `runs` times; return the counted seconds.

    setup, if given, runs before every call (warm-up included) and is never inside the timer.
    A call shorter than min_sample_s is repeated inside each sample, as timeit does, and the
    sample is the time per call: a 0.3 ms call alone is mostly timer and scheduler noise.
    """
    number = 1
    if setup is None and min_sample_s > 0:
        start = clock()
        fn()
        number = min(math.ceil(min_sample_s / max(clock() - start, 1e-9)), 10_000)

    def sample():
        for _ in range(number):
            fn()
    return [s[0] / number for s in time_steps([sample], runs, setup, clock, what)]


STATS = {"best": min, "middle": statistics.median}  # best of N: peaks; middle of N: experiments


def measure(fn, runs, stat="middle", setup=None, clock=time.perf_counter, what="",
            min_sample_s=0.0):
    """Time fn; return {"stat", "seconds", "samples", "spread"}, warning on stderr if noisy."""
    samples = time_runs(fn, runs, setup=setup, clock=clock, what=what, min_sample_s=min_sample_s)
    return summarize(samples, stat, what)


def summarize(samples, stat="middle", what=""):
    """The chosen statistic of samples (seconds), with the spread; warns when it is wide."""
    spread = max(samples) / min(samples) if min(samples) > 0 else float("inf")
    if spread > NOISE_SPREAD:
        warn(f"noisy machine: {what or 'samples'} spread {spread:.2f}x "
             f"(fastest {min(samples) * 1e3:.3g} ms, slowest {max(samples) * 1e3:.3g} ms)")
    return {"stat": f"{stat} of {len(samples)}", "seconds": STATS[stat](samples),
            "samples": list(samples), "spread": spread}


def plural(n, word):
    """The word as it goes after the number n: "run" after 1, "runs" after 5."""
    return word if n == 1 else word + "s"


def warn(message):
    note(f"warning: {message}")


def note(message):
    """A line for the person at the terminal (stderr): never part of the tables."""
    progress("")
    print(message, file=sys.stderr, flush=True)


def progress(message):
    """One updating status line on stderr, only when stderr is a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + message)
        sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# the machine line


def _quiet(fn, default=None):
    """fn() or default: a missing source of machine facts must never crash a run."""
    try:
        value = fn()
        return default if value in (None, "") else value
    except Exception:
        return default


def _run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True).stdout.strip()


def cpu_model():
    if sys.platform.startswith("linux"):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() in ("model name", "Processor", "cpu model"):
                    return line.split(":", 1)[1].strip()
    if sys.platform == "darwin":
        return _run("sysctl", "-n", "machdep.cpu.brand_string")
    return platform.processor()


def last_level_cache_bytes():
    """Size of the largest CPU cache in bytes (Linux sysfs, macOS sysctl), or None."""
    if sys.platform == "darwin":
        return max(int(_run("sysctl", "-n", f"hw.{k}cachesize") or 0) for k in ("l2", "l3"))
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in os.listdir(base):
        with contextlib.suppress(OSError):
            with open(f"{base}/{index}/size") as f:
                text = f.read().strip().upper()
            unit = {"K": 1024, "M": 1024 ** 2}.get(text[-1], 1)
            sizes.append(int(text.rstrip("KM")) * unit)
    return max(sizes)


def available_memory_bytes():
    """Memory a new allocation can get without swapping, or None when it cannot be read."""
    if sys.platform.startswith("linux"):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def blas_info():
    """The BLAS libraries NumPy loaded: [{library, version, threads, architecture}]."""
    from threadpoolctl import threadpool_info
    return [{"library": p.get("internal_api"), "version": p.get("version"),
             "threads": p.get("num_threads"), "architecture": p.get("architecture")}
            for p in threadpool_info() if p.get("user_api") == "blas"]


def blas_env():
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(BLAS_ENV)}


def machine():
    """Everything the machine line says, as a plain dict (saved with every result)."""
    import numpy as np
    return {
        "cpu": _quiet(cpu_model, "unknown CPU"),
        "cores": _quiet(os.cpu_count),
        "llc_bytes": _quiet(last_level_cache_bytes),
        "os": _quiet(lambda: f"{platform.system()} {platform.release()} {platform.machine()}",
                     "unknown OS"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": _quiet(blas_info, []),
        "env": _quiet(blas_env, {}),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def machine_line(m):
    """One line: CPU, cores, cache, OS, Python, NumPy, BLAS with threads, BLAS env vars, date."""
    blas = ", ".join(f"{b['library']} {b['version']}"
                     + (f" ({b['architecture']})" if b.get("architecture") else "")
                     + f" {b['threads']} {plural(b['threads'], 'thread')}"
                     for b in m["blas"]) or "unknown"
    cache = f", L3 {m['llc_bytes'] / 2 ** 20:.0f} MiB" if m.get("llc_bytes") else ""
    env = " ".join(f"{k}={v}" for k, v in m["env"].items()) or "none set"
    return (f"machine: {m['cpu']}, {m['cores'] or '?'} cores{cache} | {m['os']} | "
            f"Python {m['python']}, NumPy {m['numpy']} | BLAS {blas} | env {env} | "
            f"{m['date'][:10]}")


def machine_id(m):
    """A readable folder name: the CPU model and core count, e.g. amd-epyc-2c."""
    cpu = re.sub(r"\((r|tm|c)\)|\bcpu\b|@.*$", " ", m["cpu"].lower())
    return (re.sub(r"[^a-z0-9]+", "-", cpu).strip("-") or "unknown") + f"-{m['cores'] or 0}c"


# ---------------------------------------------------------------------------------------------
# the shared flags


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each default, except where there is none to show."""

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


def whole(lo, hi=None):
    """An argparse type: a whole number in [lo, hi], with a message naming the range."""
    allowed = f"a whole number from {lo} to {hi}" if hi else f"a whole number >= {lo}"

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return value
    return parse


def label(text):
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text):
        raise argparse.ArgumentTypeError(
            f"must be letters, digits, '.', '_' or '-' (a folder name), got {text!r}")
    return text


def tablefmt(text):
    from tabulate import tabulate_formats
    if text not in tabulate_formats:
        raise argparse.ArgumentTypeError(f"must be a tabulate format such as plain, github, "
                                         f"simple or grid, got {text!r}")
    return text


def parser(doc, runs):
    """An argument parser with the flags every script shares; `runs` is the post's count."""
    p = Parser(description=doc.strip().splitlines()[0],
               formatter_class=_Help)
    g = p.add_argument_group("shared by every script")
    g.add_argument("--runs", type=whole(1), default=runs, metavar="N",
                   help="counted runs per figure, after one warm-up run that is not counted")
    g.add_argument("--threads", type=whole(1), default=None, metavar="N",
                   help="BLAS threads (via threadpoolctl); default: the library's own choice")
    g.add_argument("--quick", action="store_true",
                   help="small sizes, a smoke run of a few seconds; saved apart from full runs")
    g.add_argument("--tablefmt", type=tablefmt, default="plain", metavar="FMT",
                   help="any tabulate format; plain is the post's layout, github is Markdown")
    g.add_argument("--out", default="results", metavar="DIR", help="folder for results")
    g.add_argument("--label", type=label, default=None, metavar="NAME",
                   help="results subfolder; default: a slug of the CPU model and core count")
    g.add_argument("--no-save", action="store_true", help="print the tables, save nothing")
    return p


def parse(p, argv, quick):
    """Parse the flags; --quick takes the small sizes in `quick`, except where a flag asked for
    something else."""
    args = p.parse_args(argv)
    if args.quick:
        for name, value in quick.items():
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)
    return args


def need_memory(p, need_bytes, what, flag):
    """Exit with one line (code 2) if need_bytes is more than the machine has available."""
    have = _quiet(available_memory_bytes)
    if have is not None and need_bytes > have:
        p.error(f"{what} needs about {need_bytes / 1e9:.1f} GB but only {have / 1e9:.1f} GB "
                f"is available; use a smaller {flag}")


# ---------------------------------------------------------------------------------------------
# printing and saving: a report is a plain dict that collects what was printed and the tables


UNSAVED = ("text", "tablefmt", "files")  # what a report holds for the run, not for the JSON


def new_report(script, args):
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "no_save", "tablefmt")}
    return {"schema_version": SCHEMA_VERSION, "script": script, "quick": args.quick,
            "machine": machine(), "settings": settings, "tables": {}, "text": [],
            "tablefmt": args.tablefmt, "files": {}}


def show(report, text):
    """Print text to stdout and keep it for the .txt file."""
    progress("")
    print(text, flush=True)
    report["text"].append(text)


def format_table(columns, rows, fmt):
    """columns: [(header, unit, floatfmt)]. The plain layout packs the columns as the post does:
    numbers right-aligned under headers no wider than they are."""
    from tabulate import tabulate
    if fmt != "plain":
        return tabulate(rows, headers=[c[0] for c in columns], tablefmt=fmt,
                        floatfmt=[c[2] for c in columns])
    cells = [[format(v, f) if isinstance(v, float) else str(v)
              for v, (_, _, f) in zip(row, columns)] for row in rows]
    return tabulate([[c[0] for c in columns]] + cells, tablefmt="plain", disable_numparse=True,
                    colalign=["left" if f == "s" else "right" for _, _, f in columns])


def table(report, name, columns, rows, timings=(), text=None, per="row", note="", samples=None,
          **saved):
    """Print a table (or `text`, the post's own layout of it) and record it for the JSON file.

    columns: [(header, unit, floatfmt)]; rows: lists of numbers; timings: the measure() results
    behind its figures, whose statistic and spread are printed under the table (with `note`);
    samples: the raw seconds to save, by default each timing's samples; saved: more to save.
    """
    show(report, text if text is not None else format_table(columns, rows, report["tablefmt"]))
    entry = {"columns": [{"header": h, "unit": u} for h, u, _ in columns],
             "rows": [[_plain(v) for v in row] for row in rows]}
    if timings:
        entry.update(stat=timings[0]["stat"], spread=[t["spread"] for t in timings],
                     samples_s=[t["samples"] for t in timings] if samples is None else samples)
        show(report, spread_note(timings, per, note))
    report["tables"][name] = {**entry, **saved}


def spread_note(timings, per, note=""):
    """The line under a table that names the statistic and shows how far the samples spread."""
    spreads = [t["spread"] for t in timings]
    span = (f"{spreads[0]:.2f}x" if len(spreads) == 1
            else f"{min(spreads):.2f}x to {max(spreads):.2f}x")
    runs = plural(len(timings[0]["samples"]), "run")
    return f"({timings[0]['stat']} {runs} per {per}; spread slowest/fastest {span}{note})"


def _plain(v):
    """A JSON-ready number: NumPy scalars become Python ones."""
    return v.item() if hasattr(v, "item") else v


def results_paths(report, args):
    folder = os.path.join(args.out, args.label or machine_id(report["machine"]))
    stem = report["script"] + (".quick" if report["quick"] else "")
    return folder, os.path.join(folder, stem + ".txt"), os.path.join(folder, stem + ".json")


def _plain_file_mode():
    mask = os.umask(0)  # the only way to read the umask is to set it
    os.umask(mask)
    return 0o666 & ~mask


PLAIN_FILE = _plain_file_mode()  # what open() would have made: temp files start as 0600


def atomic_write(files):
    """Write {path: text} so that a crash or Ctrl-C leaves each file whole: old or new.

    Instead of text, a value may be a function that writes the file at the path it is given
    (a picture, say)."""
    temps = {}
    try:
        for path, content in files.items():
            fd, temps[path] = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-",
                                               suffix=os.path.splitext(path)[1])
            with os.fdopen(fd, "w") as f:
                if callable(content):
                    content(temps[path])
                else:
                    f.write(content)
                f.flush()
                os.fsync(f.fileno())
        for path, temp in temps.items():  # only now does any old file make way
            os.chmod(temp, PLAIN_FILE)
            os.replace(temp, path)
    finally:
        for temp in temps.values():  # what was not renamed is removed
            with contextlib.suppress(OSError):
                os.unlink(temp)


def save(report, args):
    """Write <script>.txt and <script>.json, and any files the run added to report["files"]
    ({name: a function that writes it at the path it is given}); on failure say so on stderr
    and return 1."""
    folder, txt, js = results_paths(report, args)
    data = {k: v for k, v in report.items() if k not in UNSAVED}
    files = {js: json.dumps(data, indent=1, allow_nan=False) + "\n",
             txt: "\n".join(report["text"]) + "\n",
             **{os.path.join(folder, name): write for name, write in report["files"].items()}}
    try:
        os.makedirs(folder, exist_ok=True)
        atomic_write(files)
    except (OSError, ValueError) as e:
        print(f"error: could not save results to {folder}/: {e}", file=sys.stderr)
        return 1
    print(f"saved {', '.join(files)}", file=sys.stderr)
    return 0


def run(script, args, body):
    """Measure under the chosen thread count: machine line, body(args, report), then save.

    Returns the exit code: 0, 1 if the results could not be saved, 130 on Ctrl-C (nothing saved,
    earlier results untouched).
    """
    from threadpoolctl import threadpool_limits
    start = time.perf_counter()
    try:
        limits = threadpool_limits(args.threads) if args.threads else contextlib.nullcontext()
        with limits:
            report = new_report(script, args)
            show(report, machine_line(report["machine"]))
            body(args, report)
    except KeyboardInterrupt:
        progress("")
        print("interrupted: nothing saved, earlier results untouched", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `python x.py | head`: the reader stopped reading, so stop too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    report["wall_s"] = time.perf_counter() - start
    report["peak_rss_bytes"] = _quiet(peak_rss_bytes)
    peak = report["peak_rss_bytes"]
    note(f"wall time {report['wall_s']:.1f} s"
         + (f", peak memory {peak / 1e9:.2f} GB" if peak else ""))
    return 0 if args.no_save else save(report, args)


def peak_rss_bytes():
    """The most memory this process has held (Linux reports KiB, macOS bytes)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
