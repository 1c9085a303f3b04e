"""A worker process's side of the rounds: the script itself run with --worker and nothing else,
its job read from stdin (each field checked: JOB) into a Job, the run's own words in it parsed
as the run parsed them (a worker takes every setting from its job, never from its command
line: job_given(), through flags.parse), its rounds measured (rounds.run, through the script's
own measure), its result written after MARK on its stdout. Both are plain JSON:
  job    Job's fields: {"argv": [the run's words], "rounds": [ids, the run's own], "trials":
          [names] or null (all), "record": bool, "paths": {...} or null (choose them),
          "threads": n, "again": n, "kind": its name, "process": i (of its kind),
          "processes": the least of each kind, "start": the run's monotonic start, "left_s":
          the measuring's estimate, "repeat": {trial: visits a round} or null, "bridge_s":
          seconds or null, "alone": bool}
  result {"visits": {trial: [[round, [seconds of each step], share or null, again], ...]},
          "recorded": {trial: [[round, {part: seconds}], ...]}, "alone": {tokens: [seconds]},
          "paths": {...}, "chosen": {...}, "setup_s": seconds}
"""
import dataclasses
import json
import math
import os
import statistics
import sys
import threading

from harness.terminal import quoted
from engine import blocks
from harness.measuring import devices, nvidia, timing
from harness.measuring.rounds import MOST_REPEAT

MOST_THREADS = 256  # threads at most, a job's as --threads's: beyond, the threads swamp a run


def serve(args, measure):
    """A worker's whole life: measure(args, job) -> result under the job's threads (args the
    run's own settings, as its job gave them: args.job), then the result as JSON after MARK on
    the stdout it was started with (anything printed meanwhile goes to stderr), then exit. From
    the script's first line, its run alone speaks of a stop, and it ends with its run
    (stopping.worker)."""
    job = args.job
    out = os.dup(sys.stdout.fileno())  # written unbuffered: a result that cannot be written
    #                                    leaves nothing for the interpreter to flush at exit
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print goes to stderr
    from threadpoolctl import threadpool_limits
    block = args.replace(threads=job.threads)
    with threadpool_limits(block.threads):
        block.on.threads(block.threads)
        try:
            result, clocks = under_work(block.on, lambda: measure(block, job))
            result = {**result, **on_the_device(block.on, clocks)}
        except Exception as e:  # a GPU library's error: its cause in one line, for the run
            cause = devices.failure(e, block.on)
            if cause is None:
                raise
            result, code = {FAILED: cause}, DEVICE_EXIT
        else:
            code = 0
    data = (MARK + json.dumps(result) + "\n").encode()
    try:
        while data:
            data = data[os.write(out, data):]
    except OSError:  # its run is gone (a pipe closed at the other end): no one left to tell
        return 1
    finally:
        os.close(out)
    return code


@dataclasses.dataclass(frozen=True)
class Job:
    """What one worker process is asked (JOB checks each field as JSON brings it; NEEDED, it must
    hold). A run makes one for each process, and so does a run of one process for itself."""
    rounds: tuple  # the rounds it measures: their ids, the run's own
    threads: int = None  # the BLAS's threads (a worker's job always says: never the BLAS's own)
    argv: tuple = ()  # the run's words: every setting of the run, parsed as the run parsed them
    trials: tuple = None  # the names of the trials it measures; None: every one
    record: bool = True  # each trial's trip recorded part by part (the breakdown's)
    alone: bool = False  # the table products alone, outside the model: a share of the counts
    paths: dict = None  # the paths the run's first process chose; None: choose them here
    again: int = timing.AGAIN  # a disturbed visit measured again at most this many times
    kind: str = ""  # its kind of process
    process: int = 0  # its number among its kind's, from 0
    processes: int = 1  # the least of its kind's processes
    start: float = None  # the run's start, on the monotonic clock
    left_s: float = None  # the measuring's estimate of the seconds left
    repeat: dict = None  # {trial: visits a round}; None: its process times how often
    bridge_s: float = None  # the seconds between two groups of a round; None: timed here

    def sent(self):
        """The job as JSON, as a worker reads it."""
        return json.dumps(dataclasses.asdict(self))


def job_given():
    """A worker's job, from its stdin (a run's JSON), checked field by field (JOB): -> the Job;
    raise ValueError saying what is wrong where it is no job a worker can take."""
    try:
        job = None if sys.stdin is None or sys.stdin.isatty() else json.loads(sys.stdin.read())
    except (ValueError, RecursionError):  # not JSON, or nested deeper than it reads
        job = None
    wrong = not_a_job(job)
    if wrong:
        raise ValueError(wrong)
    return Job(**{field: tuple(value) if field in ("argv", "rounds", "trials")
                  and value is not None else value for field, value in job.items()})


FAILED, DEVICE_EXIT = "device failed", 3  # a worker's result, and its exit, where its device's
#                                            library failed: the cause in one line (DeviceFailed)


MARK = "\n== the worker's result ==\n"  # what a worker's result follows on its stdout: what
#                                       came before it there is no part of it (spawn)


def at_least(least):
    """A job's field: a whole number (not true or false) at least `least`."""
    return lambda v: type(v) is int and v >= least


def number(least=-math.inf):
    """A job's field: a finite number at least `least`."""
    return lambda v: type(v) in (int, float) and math.isfinite(v) and v >= least


def texts(v):
    return isinstance(v, list) and all(isinstance(t, str) for t in v)


def or_null(ok):
    return lambda v: v is None or ok(v)


JOB = {  # each field a worker's job may hold (NEEDED, it must): (its check, what it takes)
    "argv": (texts, "a list of the run's words"),
    "rounds": (lambda v: isinstance(v, list) and all(map(at_least(0), v)),
               "a list of round ids, whole numbers from 0"),
    "trials": (or_null(texts), "a list of trial names, or null (all)"),
    "record": (lambda v: isinstance(v, bool), "true or false"),
    "alone": (lambda v: isinstance(v, bool), "true or false"),
    "paths": (or_null(blocks.readable), "the paths a run chose, or null (choose them)"),
    "threads": (lambda v: at_least(1)(v) and v <= MOST_THREADS,
                f"a whole number from 1 to {MOST_THREADS}"),
    "again": (lambda v: at_least(0)(v) and v <= timing.AGAIN,
              f"a whole number from 0 to {timing.AGAIN}"),
    "kind": (lambda v: isinstance(v, str), "a kind's name"),
    "process": (at_least(0), "a whole number from 0"),
    "processes": (at_least(1), "a whole number from 1"),
    "start": (or_null(number()), "a time in seconds, or null"),
    "left_s": (or_null(number()), "seconds, or null"),
    "repeat": (or_null(lambda v: isinstance(v, dict) and all(
        at_least(1)(n) and n <= MOST_REPEAT for n in v.values())),
               f"an object of trial names and whole numbers from 1 to {MOST_REPEAT}, or null"),
    "bridge_s": (or_null(number(0)), "seconds from 0, or null"),
}
NEEDED = ("rounds", "threads")  # a run gives every block its thread count: never the BLAS's own


def not_a_job(job):
    """What is wrong with a job (as JSON reads it) that a worker cannot take, field by field,
    in words; '' where nothing is."""
    if not isinstance(job, dict):
        return "only the run's own worker processes take it, their job as JSON on stdin"
    for field, value in job.items():
        if field not in JOB:
            return f"its job's {quoted(field)} is no field a worker takes"
        ok, takes = JOB[field]
        if not ok(value):
            return f"its job's {field!r} takes {takes}, got {quoted(json.dumps(value))}"
    missing = [field for field in NEEDED if field not in job]
    return f"its job has no {missing[0]!r}" if missing else ""


CLOCK_EVERY_S = 1.0  # while a process measures on an NVIDIA GPU, its SM clock read this often


def under_work(on, work):
    """work() -> its result, and the SM clock nvidia-smi read every CLOCK_EVERY_S meanwhile
    (none but on an NVIDIA GPU): the clock under the work, not after it, when an idle GPU has
    already let it drop. -> (result, [MHz])"""
    if on.kind != "cuda":
        return work(), []
    uuid, clocks, done = (on.facts() or {}).get("uuid"), [], threading.Event()

    def watch():
        while not done.wait(CLOCK_EVERY_S):
            said = nvidia.facts(uuid) or {}
            if isinstance(said.get("sm_mhz"), (int, float)):
                clocks.append(said["sm_mhz"])
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return work(), clocks
    finally:
        done.set()
        watcher.join(nvidia.TIMEOUT_S)


def on_the_device(on, clocks=()):
    """What a process says of a GPU library's device once its rounds are done: the most memory
    it held there, the other processes computing on the GPU meanwhile (None: unknown), and its
    SM clock under the work (the middle of the readings while it measured; where none was
    taken, one as the rounds end), with the clock's most."""
    found = on.others()  # (those this run cannot see are said once, as the run starts)
    said = nvidia.facts((on.facts() or {}).get("uuid")) if on.kind == "cuda" else None
    under = statistics.median(clocks) if clocks else (said or {}).get("sm_mhz")
    return {"device_bytes": on.memory_used(), "gpu_others": found["others"] if found else None,
            "gpu_clock": [under, said.get("max_sm_mhz")] if said else None}
