"""The machine line: which CPU, cache, OS, Python, NumPy and BLAS (with its threads) a run
measured, how quiet the machine was, and the folder name a machine's results go to."""
import contextlib
import datetime
import os
import platform
import re
import stat
import subprocess
import sys
import tempfile
import time

from harness.terminal import plural, warn
from harness.measuring import nvidia

try:
    import fcntl  # POSIX: where there is none, no run marks the machine
except ImportError:
    fcntl = None

NOFOLLOW, NONBLOCK = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_NONBLOCK", 0)  # POSIX's
BLAS_ENV = ("OPENBLAS_", "OMP_", "GOMP_", "MKL_", "BLIS_", "GOTO_", "VECLIB_", "ACCELERATE_",
            "KMP_", "NUMBA_")  # the BLAS's threads, and Numba's (the compiled kernels': its
#                            threads, their layer and how long they spin, whether it compiles
#                            at all, where it keeps its cache)


def quietly(fn, default=None):
    """fn() or default: a missing source of machine facts must never crash a run. A stop
    (Ctrl-C, SIGTERM: stopping.Stopped, KeyboardInterrupt) is no Exception, and goes on."""
    try:
        value = fn()
        return default if value in (None, "") else value
    except Exception:
        return default


def run_quiet(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True).stdout.strip()


def cpu_model():
    if sys.platform.startswith("linux"):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() in ("model name", "Processor", "cpu model"):
                    return line.split(":", 1)[1].strip()
    if sys.platform == "darwin":
        return run_quiet("sysctl", "-n", "machdep.cpu.brand_string")
    return platform.processor()


def last_level_cache_bytes():
    """Size of the largest CPU cache in bytes (Linux sysfs, macOS sysctl), or None."""
    if sys.platform == "darwin":
        return max(int(run_quiet("sysctl", "-n", f"hw.{k}cachesize") or 0) for k in ("l2", "l3"))
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in os.listdir(base):
        with contextlib.suppress(OSError):
            with open(f"{base}/{index}/size") as f:
                text = f.read().strip().upper()
            unit = {"K": 1024, "M": 1024 ** 2}.get(text[-1], 1)
            sizes.append(int(text.rstrip("KM")) * unit)
    return max(sizes)


def memory_room():
    """(bytes a new allocation can get, what limits it, in words): the least of the machine's
    available memory, what the process's address-space limit (ulimit -v) leaves, and what its
    cgroup's memory limit (a container's) leaves; (None, "") where none can be read."""
    found = [(quietly(machine_available), "available"),
             (quietly(address_space_left), "left under this process's address-space limit "
                                           "(ulimit -v)"),
             (quietly(cgroup_left), "left under this process's cgroup memory limit (a "
                                    "container's)")]
    found = [(b, why) for b, why in found if b is not None]
    return min(found, key=lambda f: f[0]) if found else (None, "")


def machine_available():
    if sys.platform.startswith("linux"):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def address_space_left():
    """RLIMIT_AS less the address space this process holds now (a worker starts about as
    large), or None where unlimited."""
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    with open("/proc/self/status") as f:
        held = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    return max(soft - held, 0)


def cgroup_left():
    """The cgroup's memory limit less what it holds now (cgroup v2's memory.max and
    memory.current; v1's limit_in_bytes and usage_in_bytes), or None where it sets none."""
    with open("/proc/self/cgroup") as f:
        lines = f.read().splitlines()
    v2 = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    for limit, used in ((f"/sys/fs/cgroup{v2}/memory.max", f"/sys/fs/cgroup{v2}/memory.current")
                        if v2 is not None else (None, None),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                         "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        if limit and os.path.exists(limit):
            with open(limit) as f:
                text = f.read().strip()
            if text == "max" or int(text) >= 2 ** 60:
                return None
            with open(used) as f:
                return max(int(text) - int(f.read().strip()), 0)
    return None


def blas_info():
    """The BLAS libraries NumPy loaded: [{library, version, threads, architecture}]."""
    from threadpoolctl import threadpool_info
    return [{"library": p.get("internal_api"), "version": p.get("version"),
             "threads": p.get("num_threads"), "architecture": p.get("architecture")}
            for p in threadpool_info() if p.get("user_api") == "blas"]


def blas_env():
    """The variables that steer the BLAS and the compiled kernels, as set when the run began."""
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
    found = {"governor": quietly(lambda: cpufreq("scaling_governor")),
             "mhz": (quietly(lambda: int(cpufreq("scaling_cur_freq")) / 1000)
                     or quietly(cpuinfo_mhz)),
             "max_mhz": quietly(lambda: int(cpufreq("cpuinfo_max_freq")) / 1000)}
    return {k: v for k, v in found.items() if v is not None}


def load_average():
    """The number of processes that wanted a core, over the last minute (Unix), or None."""
    return round(os.getloadavg()[0], 2)


TICK = quietly(lambda: os.sysconf("SC_CLK_TCK"), 100)  # /proc/stat counts in these, per second
TICKS_MIN = 50  # a sample spanning fewer of them (over all cores) is judged by PSI where Linux
#                has it: a tick either way is 2% of 50, and 8% of a 60 ms trip's 12 on 2 cores


def counters():
    """What the machine's counters say now: (wall seconds, this process's CPU seconds, the
    system's busy ticks on all cores or None, the microseconds some task waited for a core
    (Linux PSI) or None)."""
    def busy_ticks():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return sum(fields) - fields[3] - fields[4]  # not idle, not waiting on a disk
    def waited_us():
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().rsplit("total=", 1)[1])
    return (time.perf_counter(), time.process_time(), quietly(busy_ticks), quietly(waited_us))


def others(before, after, cores=None):
    """The share of the cores other processes took between two counters(): the system's busy
    time less this process's own, over the cores; for a span too short for the system's ticks
    to tell, the share of the time some task waited for a core. -> 0 to 1, or None: unknown."""
    cores = cores or os.cpu_count() or 1
    wall, own = after[0] - before[0], after[1] - before[1]
    if wall <= 0:
        return None
    ticks = before[2] is not None and after[2] is not None
    if ticks and wall * cores * TICK >= TICKS_MIN:
        return min(max((after[2] - before[2]) / TICK - own, 0.0) / (wall * cores), 1.0)
    if before[3] is not None and after[3] is not None:
        return min((after[3] - before[3]) / 1e6 / wall, 1.0)
    if ticks and wall * cores * TICK >= TICKS_MIN / 5:  # no PSI: the ticks, coarse as they are
        return min(max((after[2] - before[2]) / TICK - own, 0.0) / (wall * cores), 1.0)
    return None


def watch():
    """Start watching the machine: -> a function that says the share of the cores other work
    took since (see others())."""
    before = counters()
    return lambda: others(before, counters())


def facts(busy=(), sweep=None):
    """Everything the machine line says, as a plain dict (saved with every result). busy: what
    else was measuring on the machine when the run started, in words; sweep: the thread counts
    a sweep runs, or None."""
    import numpy as np
    return {
        "cpu": quietly(cpu_model, "unknown CPU"),
        "cores": quietly(os.cpu_count),
        "llc_bytes": quietly(last_level_cache_bytes),
        "os": quietly(lambda: f"{platform.system()} {platform.release()} {platform.machine()}",
                       "unknown OS"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": quietly(blas_info, []),
        "env": quietly(blas_env, {}),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load": quietly(load_average),
        "frequency": quietly(cpu_frequency, {}),
        "busy": list(busy),
        "sweep": sweep,
    }


def line(m):
    """One line: CPU, cores, cache, OS, Python, NumPy, BLAS with threads, BLAS env vars, date."""
    blas = ", ".join(f"{b['library']} {b['version']}"
                     + (f" ({b['architecture']})" if b.get("architecture") else "")
                     + f" {b['threads']} {plural(b['threads'], 'thread')}"
                     for b in m["blas"]) or "unknown"
    cache = f", L3 {m['llc_bytes'] / 2 ** 20:.0f} MiB" if m.get("llc_bytes") else ""
    env = " ".join(f"{k}={v}" for k, v in m["env"].items()) or "none set"
    sweep = f" | a sweep of {', '.join(map(str, m['sweep']))} threads" if m.get("sweep") else ""
    return (f"machine: {m['cpu']}, {m.get('cores') or '?'} cores{cache} | {m['os']} | "
            f"Python {m['python']}, NumPy {m['numpy']} | BLAS {blas} | env {env}"
            f"{device_line(m.get('device'))} | {m['date'][:10]}{quiet_line(m)}{sweep}")


def device_line(d):
    """' | device torch:cuda: NVIDIA H100 80GB HBM3, 85.0 GB, CUDA 12.4, torch 2.13.0 | float32,
    TF32 off | device env TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1', or '' for NumPy's arrays (this
    CPU, as the line's start says)."""
    if not isinstance(d, dict):
        return ""
    memory = f", {d['memory_bytes'] / 1e9:.1f} GB" if d.get("memory_bytes") else ""
    runtime = d.get("cuda") or d.get("driver")  # (an older run's "driver" was CUDA's runtime)
    driver = f", {runtime}" if runtime else ""
    precision = f" | {d['dtype']}, TF32 {d['tf32']}" if d.get("dtype") and d.get("tf32") else ""
    env = " ".join(f"{k}={v}" for k, v in (d.get("env") or {}).items())
    smi = nvidia.words(d.get("smi"))
    unseen = f" | other work unknown: {d['unseen']}" if d.get("unseen") else ""
    return (f" | device {d.get('device')}: {d.get('name')}{memory}{driver}, {d.get('library')}"
            f"{precision}" + (f" | {smi}" if smi else "") + unseen
            + (f" | device env {env}" if env else ""))


def quiet_line(m):
    """How quiet the machine was at the start: load, frequency, governor, anything else busy."""
    f = m.get("frequency") or {}
    parts = [f"load {m['load']:.1f}" if m.get("load") is not None else "",
             " ".join(filter(None, [f"{f['mhz']:.0f} MHz" if f.get("mhz") else "",
                                    f"(max {f['max_mhz']:.0f})" if f.get("max_mhz") else "",
                                    f"governor {f['governor']}" if f.get("governor") else ""])),
             *(f"BUSY: {b}" for b in m.get("busy") or []), disturbed_words(m.get("disturbance"))]
    return "".join(f" | {p}" for p in parts if p)


def disturbed_words(d):
    """How much other work disturbed a run, in a few words for its machine line, or '' for a
    run with no sample disturbed. d: records.disturbance()'s, as saved."""
    if not isinstance(d, dict) or not all(type(d.get(k)) is int for k in
                                          ("figures", "disturbed", "again")):
        return ""
    share = d.get("others")
    took = f", other work up to {share:.0%} of the cores" if type(share) in (int, float) and \
        0 <= share <= 1 else ""
    if d["disturbed"]:
        return f"DISTURBED: {d['disturbed']} of {d['figures']} rows{took}"
    return f"{d['again']} runs measured again, disturbed by other work" if d["again"] else ""


MOVED = 0.1  # a clock that moved by more than this share between a run's start and end moved


def advice(machine, now=None):
    """What to do for steadier figures, as pyperf's `system tune` advises, where the run saw the
    machine move: other work disturbed samples, or the clock moved between the start and the end
    (now: the frequency facts at the end; cpu_frequency()'s). '' where nothing moved."""
    start, now = (machine.get("frequency") or {}).get("mhz"), (now or {}).get("mhz")
    d = machine.get("disturbance") if isinstance(machine.get("disturbance"), dict) else {}
    other = bool(d.get("disturbed") or d.get("again") or machine.get("busy"))
    moved = isinstance(start, (int, float)) and isinstance(now, (int, float)) and start > 0 \
        and abs(now - start) / start > MOVED
    if not (other or moved):
        return ""
    seen = [*(["other work took the cores"] if other else []),
            *([f"the clock moved from {start:.0f} to {now:.0f} MHz"] if moved else [])]
    tips = [*(["close what else runs"] if other else []),
            *(["set the CPU governor to performance (sudo cpupower frequency-set -g "
               "performance) and turbo off, as pyperf's system tune does"] if moved else []),
            "keep the run to cores nothing else uses (taskset -c), and give it more "
            "--processes"]
    return f"for steadier figures ({' and '.join(seen)}): {'; '.join(tips)}"


@contextlib.contextmanager
def measuring():
    """Hold a machine-wide mark for as long as a run measures. -> what else was measuring when
    it started: another run of this suite (in words). Other work is watched sample by sample
    (watch())."""
    busy = []
    fd = own_mark(mark_path()) if fcntl else None  # no such marks without fcntl (Windows)
    try:
        if fd is not None and not first_mark(fd):
            busy.append("another run of this suite")
        for b in busy:
            warn(f"the machine is busy ({b}): every timing of this run will be slower than the "
                 f"machine can do; the machine line says so")
        yield busy
    finally:
        if fd is not None:
            os.close(fd)


def first_mark(fd):
    """Mark this run in the mark's file fd, with a shared lock (others run beside it, and see
    it): -> whether no other run had marked it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        first = True
    except BlockingIOError:
        first = False
    fcntl.flock(fd, fcntl.LOCK_SH)
    return first


def mark_path():
    """The machine-wide mark: a file per user in the temp folder (TMPDIR, which tests set)."""
    return os.path.join(tempfile.gettempdir(), f"prefill-vs-decode-{quietly(os.getuid, 0)}.lock")


def own_mark(path):
    """The mark at path, opened (made if missing): -> its descriptor; or None, with a warning,
    if it is anything but a regular file of this user's. A link is never followed: whoever
    planted it would have this run make or lock a file of their choosing."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | NONBLOCK, 0o600)
    except OSError as e:
        why = "a link" if os.path.islink(path) else e.strerror or str(e)
    else:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == quietly(os.getuid, st.st_uid):
            return fd
        os.close(fd)
        why = "not a regular file of this user's"
    warn(f"the machine-wide mark {path} cannot be used ({why}): this run goes without it, "
         f"and cannot see another run of this suite measuring, nor be seen")
    return None


def machine_id(m):
    """A readable folder name: the CPU model and core count, e.g. amd-epyc-2c."""
    cpu = re.sub(r"\((r|tm|c)\)|\bcpu\b|@.*$", " ", m["cpu"].lower())
    return slug(cpu) + f"-{m.get('cores') or 0}c"


def slug(name):
    """A name as a folder's: lower-case letters and digits between dashes ('nvidia-h100-80gb')."""
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower())[:80].strip("-") or "unknown"


def peak_rss_bytes():
    """The most memory this process, or any worker process it waited for, has held (Linux
    reports KiB, macOS bytes)."""
    import resource
    peak = max(resource.getrusage(who).ru_maxrss
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return peak if sys.platform == "darwin" else peak * 1024
