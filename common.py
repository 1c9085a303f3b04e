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
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SCHEMA_VERSION = 2  # bump when the JSON layout changes; compare tools read it
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # the default --out
MEMORY_MARGIN = 1.1, 0.25e9  # what a run may use: 90% of the available memory, less 250 MB
BUSY_LOAD = 0.5  # cores busy per core above which the machine is too busy to measure (pyperf's)
NOISE_SPREAD = 1.2  # slowest / fastest counted sample above this: the machine looked noisy
BLAS_ENV = ("OPENBLAS_", "OMP_", "MKL_", "BLIS_", "GOTO_", "VECLIB_", "ACCELERATE_", "KMP_")

# ---------------------------------------------------------------------------------------------
# stopping: Ctrl-C (SIGINT) and a kill (SIGTERM) end a run the same way at any moment, in one line


STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class Stopped(Exception):
    """SIGINT or SIGTERM during a run; the run exits with 128 + the signal's number. held: the
    signal waited for a block of held_signals() to finish (the results were saved)."""

    def __init__(self, signum, held=False):
        super().__init__(STOPS[signum])
        self.signum, self.held = signum, held


def stop_quietly():
    """Until a run starts, SIGINT or SIGTERM end the script at once: nothing is measured or
    saved yet, so there is nothing to undo. Every script calls this before its slow imports."""
    def now(signum, frame):
        sys.stderr.write(f"{STOPS[signum]}: nothing saved, earlier results untouched\n")
        os._exit(128 + signum)
    for s in STOPS:
        signal.signal(s, now)


_held = None  # while results are being renamed into place: the signals that arrived meanwhile


def _stop(signum, frame):
    if _held is not None:
        _held.append(signum)
        return
    raise Stopped(signum)


@contextlib.contextmanager
def stoppable():
    """While a run measures and saves, SIGINT and SIGTERM raise Stopped, so that it unwinds."""
    previous = {s: signal.signal(s, _stop) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def held_signals():
    """SIGINT and SIGTERM wait until the block is done, then take effect."""
    global _held
    _held = []
    try:
        yield
    finally:
        pending, _held = _held, None
    if pending:
        raise Stopped(pending[0], held=True)


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


def cpu_frequency():
    """{"governor", "mhz", "max_mhz"}, each where Linux exposes it: cpufreq's governor, current
    and maximum frequency, or else /proc/cpuinfo's current MHz. Missing ones are left out."""
    def cpufreq(name):
        with open(f"/sys/devices/system/cpu/cpu0/cpufreq/{name}") as f:
            return f.read().strip()

    def cpuinfo_mhz():
        with open("/proc/cpuinfo") as f:
            return next(float(line.split(":")[1]) for line in f if line.startswith("cpu MHz"))
    found = {"governor": _quiet(lambda: cpufreq("scaling_governor")),
             "mhz": _quiet(lambda: int(cpufreq("scaling_cur_freq")) / 1000) or _quiet(cpuinfo_mhz),
             "max_mhz": _quiet(lambda: int(cpufreq("cpuinfo_max_freq")) / 1000)}
    return {k: v for k, v in found.items() if v is not None}


def load_average():
    """The number of processes that wanted a core, over the last minute (Unix), or None."""
    return round(os.getloadavg()[0], 2)


def cores_busy_now(seconds=0.2):
    """How many cores' worth of work other processes did while this one slept for `seconds`
    (Linux's /proc/stat). Unlike the load average, it forgets a run that just ended."""
    def ticks():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return sum(fields) - fields[3] - fields[4], sum(fields)  # busy (not idle, iowait), all
    busy0, all0 = ticks()
    time.sleep(seconds)
    busy1, all1 = ticks()
    return (busy1 - busy0) / max(all1 - all0, 1) * (os.cpu_count() or 1)


def machine(busy=(), sweep=None):
    """Everything the machine line says, as a plain dict (saved with every result). busy: what
    else was measuring on the machine when the run started, in words; sweep: the thread counts
    a sweep runs, or None."""
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
        "load": _quiet(load_average),
        "frequency": _quiet(cpu_frequency, {}),
        "busy": list(busy),
        "sweep": sweep,
    }


def machine_line(m):
    """One line: CPU, cores, cache, OS, Python, NumPy, BLAS with threads, BLAS env vars, date."""
    blas = ", ".join(f"{b['library']} {b['version']}"
                     + (f" ({b['architecture']})" if b.get("architecture") else "")
                     + f" {b['threads']} {plural(b['threads'], 'thread')}"
                     for b in m["blas"]) or "unknown"
    cache = f", L3 {m['llc_bytes'] / 2 ** 20:.0f} MiB" if m.get("llc_bytes") else ""
    env = " ".join(f"{k}={v}" for k, v in m["env"].items()) or "none set"
    sweep = f" | a sweep of {', '.join(map(str, m['sweep']))} threads" if m.get("sweep") else ""
    return (f"machine: {m['cpu']}, {m['cores'] or '?'} cores{cache} | {m['os']} | "
            f"Python {m['python']}, NumPy {m['numpy']} | BLAS {blas} | env {env} | "
            f"{m['date'][:10]}{quiet_line(m)}{sweep}")


def quiet_line(m):
    """How quiet the machine was at the start: load, frequency, governor, anything else busy."""
    f = m.get("frequency") or {}
    parts = [f"load {m['load']:.1f}" if m.get("load") is not None else "",
             " ".join(filter(None, [f"{f['mhz']:.0f} MHz" if f.get("mhz") else "",
                                    f"(max {f['max_mhz']:.0f})" if f.get("max_mhz") else "",
                                    f"governor {f['governor']}" if f.get("governor") else ""])),
             *(f"BUSY: {b}" for b in m.get("busy") or [])]
    return "".join(f" | {p}" for p in parts if p)


@contextlib.contextmanager
def measuring():
    """Hold a machine-wide mark for as long as a run measures. -> what else was measuring when
    it started: another run of this suite, or a load above BUSY_LOAD per core (in words)."""
    busy = []
    cores = os.cpu_count() or 1
    now = _quiet(cores_busy_now)
    load = now if now is not None else _quiet(load_average)  # where /proc/stat is not there
    if load is not None and load > BUSY_LOAD * cores:
        busy.append(f"{load:.1f} of {cores} cores busy with other work" if now is not None
                    else f"load {load:.1f} on {cores} cores")
    path = os.path.join(tempfile.gettempdir(), f"prefill-vs-decode-{_quiet(os.getuid, 0)}.lock")
    try:
        import fcntl
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):  # no such marks on this system
        yield busy
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy.append("another run of this suite")
        fcntl.flock(fd, fcntl.LOCK_SH)  # others can see this run, and run beside it
        for b in busy:
            warn(f"the machine is busy ({b}): every timing of this run will be slower than the "
                 f"machine can do; the machine line says so")
        yield busy
    finally:
        os.close(fd)


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
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return value
    return parse


def label(text):
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text) or len(text) > LABEL_MAX:
        raise argparse.ArgumentTypeError(
            f"must be up to {LABEL_MAX} letters, digits, '.', '_' or '-' (a folder name), "
            f"got {text if len(text) <= 40 else text[:37] + '...'!r}")
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
    g.add_argument("--threads", nargs="+", type=whole(1), default=None, metavar="N",
                   help="BLAS threads (via threadpoolctl), at most this machine's logical CPUs; "
                        "several (--threads 1 2) sweep them: one block of tables each, saved as "
                        "<script>.sweep; default: the library's own choice")
    g.add_argument("--oversubscribe", action="store_true",
                   help="let --threads exceed the logical CPUs (the threads then take turns)")
    g.add_argument("--quick", action="store_true",
                   help="small sizes, a smoke run of a few seconds; saved apart from full runs")
    g.add_argument("--tablefmt", type=tablefmt, default="plain", metavar="FMT",
                   help="any tabulate format; plain is the post's layout, github is Markdown")
    g.add_argument("--spread", action="store_true",
                   help="a ± column beside each timed figure: the standard deviation of its "
                        "counted runs (the post's own layouts give way to tables)")
    g.add_argument("--out", default=RESULTS, metavar="DIR",
                   help="folder for results, the same wherever the scripts are run from")
    g.add_argument("--label", type=label, default=None, metavar="NAME",
                   help="results subfolder; default: a slug of the CPU model and core count")
    g.add_argument("--no-save", action="store_true", help="print the tables, save nothing")
    return p


_UNSET = object()  # a flag's value before parsing: still _UNSET after it, the flag was not given


def parse(p, argv, quick):
    """Parse the flags and check, before anything is measured, what can be checked: --quick
    takes the small sizes in `quick` for every flag not given; --threads and the folder that
    results will go to."""
    args = p.parse_args(argv, namespace=argparse.Namespace(**{name: _UNSET for name in quick}))
    for name, value in quick.items():
        if getattr(args, name) is _UNSET:
            setattr(args, name, value if args.quick else p.get_default(name))
    cpus = os.cpu_count() or 1
    if args.threads and max(args.threads) > cpus:
        if not args.oversubscribe:
            p.error(f"argument --threads: must be at most {cpus}, this machine's logical CPUs, "
                    f"got {max(args.threads)} (add --oversubscribe to run more anyway)")
        warn(f"--threads {max(args.threads)} on {cpus} logical CPUs: the threads take turns")
    if args.threads:
        args.threads = sorted(set(args.threads))
    if not args.no_save:
        problem = unwritable(folder_of(args))
        if problem:
            p.error(f"argument --out: results cannot be saved to {folder_of(args)}: {problem} "
                    f"(choose another --out or --label, or --no-save)")
    return args


def folder_of(args):
    """Where a run's results go: --out/--label, or --out/<this machine's CPU and cores>."""
    cpu = {"cpu": _quiet(cpu_model, "unknown CPU"), "cores": _quiet(os.cpu_count)}
    return os.path.join(args.out, args.label or machine_id(cpu))


def unwritable(folder):
    """Why files cannot be made in folder, in a few words, or None. Creates nothing."""
    path, missing = os.path.abspath(folder), []
    while not os.path.exists(path):
        path, name = os.path.split(path)
        missing.append(name)
    if not os.path.isdir(path):
        return f"{path} is a file, not a folder"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    longest = _quiet(lambda: os.pathconf(path, "PC_NAME_MAX"), 255)
    if any(len(name.encode()) > longest for name in missing):
        return f"a folder name is longer than the {longest} bytes this file system takes"
    return None


def need_memory(p, need_bytes, what, flag):
    """Exit with one line (code 2) if need_bytes, with a margin, is more than the machine has
    available."""
    have = _quiet(available_memory_bytes)
    if have is not None and need_bytes * MEMORY_MARGIN[0] + MEMORY_MARGIN[1] > have:
        p.error(f"{what}: about {need_bytes / 1e9:.1f} GB, and a margin for the rest of the "
                f"machine, but only {have / 1e9:.1f} GB is available; use a smaller {flag}")


# ---------------------------------------------------------------------------------------------
# printing and saving: a report is a plain dict that collects what was printed and the tables


UNSAVED = ("text", "tablefmt", "spread", "files", "suffix")  # for the run, not for the JSON


def new_report(script, args, busy=()):
    settings = {k: v for k, v in vars(args).items()
                if k not in ("out", "no_save", "tablefmt", "oversubscribe")}
    sweep = args.threads if args.threads and len(args.threads) > 1 else None
    return {"schema_version": SCHEMA_VERSION, "script": script, "quick": args.quick,
            "machine": machine(busy, sweep), "settings": settings, "tables": {}, "text": [],
            "tablefmt": args.tablefmt, "spread": args.spread, "files": {}, "sweep": sweep,
            "suffix": ""}


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
          timed=(), **saved):
    """Print a table (or `text`, the post's own layout of it) and record it for the JSON file.

    columns: [(header, unit, floatfmt)]; rows: lists of numbers; timings: the measure() results
    behind its figures, whose statistic and spread are printed under the table (with `note`);
    timed: the columns that hold them, row by row (timing k is row k // len(timed)), which get a
    ± column with --spread; samples: the raw seconds to save, by default each timing's samples;
    saved: more to save.
    """
    if report.get("spread") and timed:
        columns, rows, text = *with_spread(columns, rows, timings, timed), None
    show(report, text if text is not None else format_table(columns, rows, report["tablefmt"]))
    entry = {"columns": [{"header": h, "unit": u} for h, u, _ in columns],
             "rows": [[_plain(v) for v in row] for row in rows]}
    if timings:
        entry.update(stat=timings[0]["stat"], spread=[t["spread"] for t in timings],
                     samples_s=[t["samples"] for t in timings] if samples is None else samples)
        show(report, spread_note(timings, per, note))
    report["tables"][name + report.get("suffix", "")] = {**entry, **saved}


def with_spread(columns, rows, timings, timed):
    """The table with a ± column after each timed one: the standard deviation of its samples,
    in the figure's own unit. -> (columns, rows)"""
    spread_columns = []
    for i, column in enumerate(columns):
        spread_columns.append(column)
        if i in timed:
            spread_columns.append((f"± {column[0]}", column[1], column[2]))
    spread_rows = []
    for r, row in enumerate(rows):
        cells = []
        for i, value in enumerate(row):
            cells.append(value)
            if i in timed:
                t = timings[r * len(timed) + timed.index(i)]
                sd = statistics.stdev(t["samples"]) if len(t["samples"]) > 1 else 0.0
                cells.append(value / t["seconds"] * sd)  # in the unit of the figure beside it
        spread_rows.append(cells)
    return spread_columns, spread_rows


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


def _plain_file_mode():
    mask = os.umask(0)  # the only way to read the umask is to set it
    os.umask(mask)
    return 0o666 & ~mask


PLAIN_FILE = _plain_file_mode()  # what open() would have made: temp files start as 0600
TEMP, JOURNAL, LOCK = ".tmp-", ".replacing.json", ".lock"  # a results folder's own files


def result_files(report, args):
    """The folder and {file name: text, or a function that writes the file at the path it is
    given} of one result: the script's .txt and .json and any files the run added (a picture).
    A quick run's names say .quick, so that it never replaces a full run's."""
    stem = report["script"] + (".sweep" if report.get("sweep") else "")
    quick = ".quick" if report["quick"] else ""
    data = {k: v for k, v in report.items() if k not in UNSAVED}
    files = {f"{stem}{quick}.json": json.dumps(data, indent=1, allow_nan=False) + "\n",
             f"{stem}{quick}.txt": "\n".join(report["text"]) + "\n"}
    for name, write in report["files"].items():
        stem, ext = os.path.splitext(name)
        files[f"{stem}{quick}{ext}"] = write
    return folder_of(args), files


@contextlib.contextmanager
def locked(folder):
    """Hold a results folder's lock: one run saves into it at a time, and compare.py reads it
    whole. Where the system has no such locks, or the folder is read-only, nothing is held."""
    try:
        import fcntl
        fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, PLAIN_FILE)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note(f"waiting for another run to finish with {folder}/")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def finish_replacing(folder):
    """Under the lock: finish the renames of a save that was killed halfway (its journal lists
    them, and every file it names was whole before the first rename), then remove stray temps."""
    journal = os.path.join(folder, JOURNAL)
    with contextlib.suppress(OSError, ValueError):
        with open(journal) as f:
            renames = json.load(f)
        for name, temp in renames.items():
            with contextlib.suppress(FileNotFoundError):
                os.replace(os.path.join(folder, temp), os.path.join(folder, name))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal)
    for name in os.listdir(folder):
        if name.startswith(TEMP):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def _write_temp(folder, name, content):
    """content (text, or a function that writes at a path) in a new temp file: -> its name."""
    fd, path = tempfile.mkstemp(dir=folder, prefix=TEMP, suffix=os.path.splitext(name)[1])
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        if callable(content):
            content(path)
        else:
            f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, PLAIN_FILE)
    return os.path.basename(path)


def replace_together(folder, files):
    """Write {name: content} into folder as one unit: whatever happens (a full disk, Ctrl-C, a
    kill), every file is either new or as it was, all of them. Every file is written to a temp
    file first; then a journal lists the renames, the renames follow, and the journal goes. A save
    killed during the renames is finished by the next one (or by compare.py), as the journal says;
    SIGINT and SIGTERM wait for the renames."""
    with locked(folder):
        finish_replacing(folder)
        temps = {}
        try:
            for name, content in files.items():
                temps[name] = _write_temp(folder, name, content)
            journal = _write_temp(folder, JOURNAL, json.dumps(temps))
            with held_signals():
                os.replace(os.path.join(folder, journal), os.path.join(folder, JOURNAL))
                for name, temp in temps.items():
                    os.replace(os.path.join(folder, temp), os.path.join(folder, name))
                os.unlink(os.path.join(folder, JOURNAL))
        finally:
            finish_replacing(folder)  # nothing half done is left: temps of a failed save go


def save(report, args):
    """Write the result as one unit; on failure say so on stderr and return 1 (the tables were
    printed; earlier results stay as they were)."""
    folder, files = result_files(report, args)
    made = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        replace_together(folder, files)
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):
            if made and os.listdir(folder) in ([], [LOCK]):  # this run made it, for nothing
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, LOCK))
                os.rmdir(folder)
        print(f"error: could not save results to {folder}/: {e}", file=sys.stderr)
        return 1
    print(f"saved {', '.join(os.path.join(folder, name) for name in files)}", file=sys.stderr)
    return 0


def run(script, args, body, headline=None):
    """Measure under the chosen thread count: machine line, body(args, report), then save.

    Returns the exit code: 0, 1 if the results could not be saved, 128 + the signal's number on
    Ctrl-C (130) or SIGTERM (143), with nothing saved and earlier results untouched.
    """
    from threadpoolctl import threadpool_limits
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a table's characters
        with contextlib.suppress(AttributeError, ValueError):  # shows '?' for them; the
            stream.reconfigure(errors="replace")  # saved .txt keeps them (UTF-8)
    start = time.perf_counter()
    try:
        with stoppable():
            with measuring() as busy:
                report = None
                for n in args.threads or [None]:  # several: a sweep, one block per thread count
                    with threadpool_limits(n) if n else contextlib.nullcontext():
                        if report is None:  # the machine as the first thread count finds it
                            report = new_report(script, args, busy)
                            show(report, headline or machine_line(report["machine"]))
                        if report["sweep"]:
                            report["suffix"] = f" @{n}"
                            show(report, f"\n{n} {plural(n, 'thread')}:")
                        body(argparse.Namespace(**{**vars(args), "threads": n}), report)
            report["wall_s"] = time.perf_counter() - start
            report["peak_rss_bytes"] = _quiet(peak_rss_bytes)
            peak = report["peak_rss_bytes"]
            note(f"wall time {report['wall_s']:.1f} s"
                 + (f", peak memory {peak / 1e9:.2f} GB" if peak else ""))
            return 0 if args.no_save else save(report, args)
    except (Stopped, KeyboardInterrupt) as e:
        signum = getattr(e, "signum", signal.SIGINT)
        progress("")
        done = "the results were saved just before" if getattr(e, "held", False) else \
            "nothing saved, earlier results untouched"
        print(f"{STOPS[signum]}: {done}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # `python x.py | head`: the reader stopped reading, so stop too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def peak_rss_bytes():
    """The most memory this process has held (Linux reports KiB, macOS bytes)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
