"""Measuring in rounds. A round visits every trial (a row's trips, a speed) once, in an order
shuffled each round, so that a claim's ratio of two rows is taken from visits moments apart and
the machine's drift between rows cancels. The rounds are spread over many fresh worker
processes, each the script itself run with --worker (as pyperf spreads its runs), so that what
differs between processes (where memory lands, how the BLAS's threads start) is in the samples
instead of assumed: a verdict's interval counts processes, not rounds (judging/intervals.py).
Rows no claim holds against each other's are measured in processes of their own kind (Kind),
each making only what its rows need. Each process warms every trial once, records the
breakdown's trips once, then visits; a visit other work disturbed is measured again after a
pause.

A job (what a worker is asked, on its stdin, each field checked: JOB) and a result (what it
says back, after MARK on its stdout) are plain JSON:
  job    {"rounds": [ids, the run's own], "trials": [names] or null (all), "record": bool,
          "paths": {...} or null (choose them), "threads": n, "again": n, "kind": its name,
          "process": i (of its kind), "processes": the least of each kind, "start": the run's
          monotonic start, "left_s": the measuring's estimate, "repeat": {trial: visits a
          round} or null, "bridge_s": seconds or null, "alone": bool}
  result {"visits": {trial: [[round, [seconds of each step], share or null, again], ...]},
          "recorded": {trial: [[round, {part: seconds}], ...]}, "alone": {tokens: [seconds]},
          "paths": {...}, "chosen": {...}, "setup_s": seconds}
"""
import contextlib
import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import types

import numpy as np

from harness import stopping
from harness.terminal import clock, note, plural, progress, quoted, warn
from engine import blocks
from harness.measuring import devices, host, nvidia, timing

MOST_THREADS = 256  # threads at most, a job's as --threads's: beyond, the threads swamp a run
PROCESSES = 3  # fresh processes of each kind at least: the fewest an interval stands on
SEED = 0  # the orders the rounds visit their trials in: the same every run
BRIDGE_S = 0.15  # between a round's groups, the next group's cheapest trial runs untimed this
#                  long: the BLAS's threads stop spinning meanwhile (OpenBLAS's default timeout
#                  is 2^28 cycles, about 0.1 s), which would otherwise slow the next visit (a
#                  short read after a one-token trip most)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One thing a round visits: its name (unique in the run), its steps (calls, each one trip
    or product, built before any timer), setup (puts every notebook back where the first step
    starts; untimed, before each visit), and, for the breakdown, recorded(watch) -> runs the
    row's one recorded trip filling watch with its parts' seconds (None: no breakdown). number:
    calls of each step a sample repeats, a short call timed as timeit times it (a sample is
    then the time per call)."""
    name: str
    steps: list
    setup: object = None
    recorded: object = None
    number: int = 1
    group: int = 1  # 0: it runs on the BLAS's own threads, which spin on the cores for a while
    #                 after (~0.1 s): a round visits those first, then the rest after BRIDGE_S
    warm: bool = True  # warmed up on its own before the rounds; else a larger sibling's warm-up
    #                    readies what it uses (its notebooks are touched when made)
    timer: object = None  # what times its steps: the Device its arrays live on (a GPU's own
    #                       events, no wait between the calls of a sample); None: this CPU's clock
    best: int = 1  # samples of each step a visit takes, the fastest kept: a limit's ceiling in
    #                each round (the forklift and the workbench), never the best of a whole run
    repeat: int = 1  # times a round visits it, the round's sample their geometric mean
    once: bool = False  # its breakdown recorded in one of a kind's first processes, not in each
    #                     (no claim reads its parts): the processes take turns


HOST = types.SimpleNamespace(mark=time.perf_counter, between=lambda start, end: end - start)


def unwatched():
    """A watch for an untimed visit (a warm-up, a sizing): it asks the machine nothing."""
    return lambda: None


def visit(trial, watch=host.watch):
    """One visit: `repeat` times, setup, then each step timed, its `number` calls between two
    marks of the trial's timer (the fastest of `best` such samples). -> ([seconds per call of
    each step, the geometric mean of its repeats], the share of the cores other work took
    meanwhile, or None where the OS does not say). A signal that came before it and was lost on
    its way stops the run here (stopping.check)."""
    stopping.check()
    timer, done, logs = trial.timer or HOST, watch(), [0.0] * len(trial.steps)
    for _ in range(trial.repeat):
        if trial.setup is not None:
            trial.setup()
        for i, step in enumerate(trial.steps):
            tries = []
            for _ in range(trial.best):
                start = timer.mark()
                for _ in range(trial.number):
                    step()
                tries.append(timer.between(start, timer.mark()) / trial.number)
            logs[i] += math.log(max(min(tries), 1e-12)) / trial.repeat
    return [math.exp(v) for v in logs], done()


REPEAT_S = 0.25  # a short row is visited again and again in each round for about this long:
#                  its round's sample is then the geometric mean of a few, where most of a
#                  short trip's noise comes and goes from one trip to the next
MOST_REPEAT = 9


def repeats(trial, took=None):
    """How many times a round visits this trial: about REPEAT_S of it, at least 1, at most
    MOST_REPEAT, from what one visit took (its warm-up's time, an upper bound), else one visit
    timed now. A ceiling (the fastest of its tries), a burst of short calls (already averaged)
    and a schedule of several trips (long): once."""
    if trial.best > 1 or trial.number > 1 or len(trial.steps) > 1:
        return 1
    if took is None:
        took = sum(visit(trial, watch=unwatched)[0])
    return max(1, min(MOST_REPEAT, round(REPEAT_S / max(took, 1e-9))))


def visited(trial, again, watch=host.watch):
    """A visit kept: measured again, after a pause, while other work disturbed it, at most
    `again` times; the least disturbed kept. -> (seconds, share, times measured again)"""
    seconds, share = visit(trial, watch)
    tried = 0
    while timing.disturbed(share) and tried < again:
        time.sleep(timing.PAUSE_S)  # let the other work's moment pass
        tried += 1
        more, other = visit(trial, watch)
        if other is None or other < share:
            seconds, share = more, other
    return seconds, share, tried


def order(trials, round_id):
    """The order one round visits its trials in: group by group, each shuffled, the same for
    the same round; the groups in turn forward and backward from round to round, so that one
    round's last group is the next one's first (one bridge a round, not two). trials: {name:
    Trial}"""
    rng, out = np.random.default_rng([SEED, round_id]), []
    groups = sorted({t.group for t in trials.values()})
    for g in groups if round_id % 2 == 0 else groups[::-1]:
        names = sorted(n for n, t in trials.items() if t.group == g)
        out += [names[i] for i in rng.permutation(len(names))]
    return out


class Bridged:
    """A round's order, with a bridge between its groups: before the first trial of a group
    other than the last visited, the group's cheapest trial runs untimed for BRIDGE_S."""

    def __init__(self, trials, seconds=None):
        self.trials, self.cost, self.group = trials, {}, None
        self.seconds = BRIDGE_S if seconds is None else seconds

    def order(self, round_id):
        for name in order(self.trials, round_id):
            g = self.trials[name].group
            if g != self.group:
                self.bridge(g)
            self.group = g
            yield name

    def bridge(self, group):
        cheapest = min((t for t in self.trials.values() if t.group == group),
                       key=lambda t: self.cost.get(t.name, float(len(t.steps))))  # unknown: a
        #                                                                 second a step, say
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            visit(cheapest, watch=unwatched)


def calibrate(trial, min_sample_s):
    """The trial with each sample a burst lasting at least min_sample_s: a visit, warm (one
    untimed first), timed once decides how many calls a sample repeats."""
    if min_sample_s <= 0:
        return trial
    visit(trial, watch=unwatched)  # warm: a first call pays for what it readies
    took = max(sum(visit(trial, watch=unwatched)[0]), 1e-9)
    return dataclasses.replace(trial, number=min(int(min_sample_s / took) + 1, 10_000))


def run(trials, job):
    """A worker's part of the rounds, in this process: the trials that warm up on their own
    warmed (by their recorded trip, or a visit: the largest of each experiment, which readies
    the memory the others use too), then the job's rounds, each a shuffled visit of every trial,
    then each trial's breakdown recorded once, every trial warm by then. -> the result's
    "visits" and "recorded" (see the module's docstring)"""
    trials = {t.name: t for t in trials}
    rounds, again = list(job["rounds"]), job.get("again", timing.AGAIN)
    warmed = {}
    for t in trials.values():
        if t.warm:
            say(job, f"warming up: {t.name}")
            began = time.perf_counter()
            if t.recorded is not None:
                t.recorded(None)
            else:
                visit(dataclasses.replace(t, best=1), watch=unwatched)
            warmed[t.name] = time.perf_counter() - began
    chosen = job.get("repeat")  # the first process of a kind times each trial once, and the
    if chosen is None:  #          rest take its counts: every process's rounds alike
        say(job, "timing each row once: how often a round visits it")
        chosen = {name: repeats(t, warmed.get(name)) for name, t in trials.items()}
    trials = {name: dataclasses.replace(t, repeat=chosen.get(name, 1))
              for name, t in trials.items()}
    visits, recorded = {name: [] for name in trials}, {name: [] for name in trials}
    bridged, began = Bridged(trials, job.get("bridge_s")), time.perf_counter()
    for i, r in enumerate(rounds):
        for name in bridged.order(r):
            say(job, f"round {i + 1} of {len(rounds)}: {name}")
            seconds, share, tried = visited(trials[name], again)
            visits[name].append([r, seconds, share, tried])
            bridged.cost[name] = sum(seconds)
    last, ended = rounds[-1] if rounds else 0, time.perf_counter()
    once = sorted(n for n, t in trials.items() if t.once)
    for name in bridged.order(last) if job.get("record", True) else ():  # every trial warm now
        if trials[name].recorded is not None and (name not in once or once.index(name) % job.get(
                "processes", 1) == job.get("process", 0) % job.get("processes", 1)):
            say(job, f"recording the parts of {name}")
            parts = {}
            trials[name].recorded(parts)
            recorded[name].append([last, dict(parts)])
    progress("")
    return {"visits": visits, "recorded": {k: v for k, v in recorded.items() if v},
            "rounds_s": ended - began, "record_s": time.perf_counter() - ended,
            "repeat": chosen}


def say(job, words):
    """The progress line: which process, what it measures, the time so far and left."""
    start, left = job.get("start"), job.get("left_s")
    took = time.monotonic() - start if start is not None else None
    when = "" if took is None else f"{clock(took)} in" + (
        f", about {clock(max(left - took, 0))} left" if left else "") + ": "
    who = (f"{job['kind'] + ' ' if job.get('kind') else ''}process {job.get('process', 0) + 1}, "
           if job.get("processes", 1) > 1 else "")
    progress(f"{when}{who}{words}")


# ---------------------------------------------------------------------------------------------
# the worker processes


def serve(args, measure):
    """A worker's whole life: its job from stdin, checked field by field (JOB), measure(args,
    job) -> result under the job's threads, then the result as JSON after MARK on the stdout it
    was started with (anything printed meanwhile goes to stderr), then exit. From the
    script's first line, its run alone speaks of a stop, and it ends with its run
    (stopping.worker)."""
    try:
        job = None if sys.stdin is None or sys.stdin.isatty() else json.loads(sys.stdin.read())
    except (ValueError, RecursionError):  # not JSON, or nested deeper than it reads
        job = None
    wrong = not_a_job(job)
    if wrong:
        sys.stderr.write(f"{os.path.basename(sys.argv[0])}: error: argument --worker: {wrong}\n")
        return 2
    out = os.dup(sys.stdout.fileno())  # written unbuffered: a result that cannot be written
    #                                    leaves nothing for the interpreter to flush at exit
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print goes to stderr
    from threadpoolctl import threadpool_limits
    block = args.replace(threads=job.get("threads"))
    with threadpool_limits(block.threads) if block.threads else contextlib.nullcontext():
        block.on.threads(block.threads)
        try:
            result = {**measure(block, job), **on_the_device(block.on)}
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


FAILED, DEVICE_EXIT = "device failed", 3  # a worker's result, and its exit, where its device's
#                                            library failed: the cause in one line (DeviceFailed)


MARK = "\n== the worker's result ==\n"  # what a worker's result follows on its stdout: what
#                                       came before it there is no part of it (spawn)


def whole(least):
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
    "rounds": (lambda v: isinstance(v, list) and all(map(whole(0), v)),
               "a list of round ids, whole numbers from 0"),
    "trials": (or_null(texts), "a list of trial names, or null (all)"),
    "record": (lambda v: isinstance(v, bool), "true or false"),
    "alone": (lambda v: isinstance(v, bool), "true or false"),
    "paths": (or_null(blocks.readable), "the paths a run chose, or null (choose them)"),
    "threads": (lambda v: whole(1)(v) and v <= MOST_THREADS,
                f"a whole number from 1 to {MOST_THREADS}"),
    "again": (lambda v: whole(0)(v) and v <= timing.AGAIN,
              f"a whole number from 0 to {timing.AGAIN}"),
    "kind": (lambda v: isinstance(v, str), "a kind's name"),
    "process": (whole(0), "a whole number from 0"),
    "processes": (whole(1), "a whole number from 1"),
    "start": (number(), "a time in seconds"),
    "left_s": (or_null(number()), "seconds, or null"),
    "repeat": (or_null(lambda v: isinstance(v, dict) and all(
        whole(1)(n) and n <= MOST_REPEAT for n in v.values())),
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


def on_the_device(on):
    """What a process says of a GPU library's device once its rounds are done: the most memory
    it held there, the other processes computing on the GPU meanwhile (None: unknown), and its
    SM clock as the rounds end (nvidia-smi's, read under the work, not idle at the start)."""
    found = on.others()  # (those this run cannot see are said once, as the run starts)
    said = nvidia.facts((on.facts() or {}).get("uuid")) if on.kind == "cuda" else None
    return {"device_bytes": on.memory_used(), "gpu_others": found["others"] if found else None,
            "gpu_clock": [said.get("sm_mhz"), said.get("max_sm_mhz")] if said else None}


class WorkerFailed(Exception):
    """A worker process ended without its result: the run stops, saying so in one line."""


class DeviceFailed(WorkerFailed):
    """The device's library failed in a worker (out of memory, no kernel for this GPU, a
    driver too old, the GPU busy): the run stops with its cause in one line, exit 2."""


def spawn(script, argv, job):
    """One worker: `python script argv --worker`, given the job, -> its result. It starts in a
    session of its own, so that the terminal's signals (Ctrl-C) reach this run alone, which
    ends it and speaks (see stopping). Its progress shows on this process's stderr, and so does
    anything else it printed on stdout (a sitecustomize, a library): its result is what follows
    MARK there. A worker that fails raises WorkerFailed, saying how it ended."""
    done = subprocess.run([sys.executable, script, *argv, "--worker"], input=json.dumps(job),
                          stdout=subprocess.PIPE, text=True, errors="replace",
                          start_new_session=True,
                          env={**os.environ, stopping.RUN: str(os.getpid())})  # (whose end
    #                                                                      the worker checks)
    stray, marked, said = done.stdout.partition(MARK)
    if stray.strip():
        note(stray.rstrip("\n"))
    try:
        result = json.loads(said) if marked else None
    except (ValueError, RecursionError):  # cut short, or not the worker's
        result = None
    if done.returncode == DEVICE_EXIT and isinstance(result, dict) \
            and isinstance(result.get(FAILED), str):
        raise DeviceFailed(result[FAILED])
    if done.returncode != 0:
        raise WorkerFailed(ended(done.returncode))
    if not isinstance(result, dict):
        raise WorkerFailed("a worker process ended without its whole result (exit 0)")
    return result


def ended(code):
    """How a worker process that failed ended, in words, from its exit code (-n: signal n)."""
    if code > 0:
        return f"a worker process failed (exit {code}); its own words are above"
    try:
        name = signal.Signals(-code).name
    except ValueError:  # a signal Python has no name for
        name = str(-code)
    return f"a worker process died (exit {code}, killed by signal {name})"


KNOWN = ("visits", "recorded", "alone", "paths", "chosen", "setup_s", "device_bytes",
         "gpu_others", "gpu_clock", "process", "rounds_s", "record_s", "alone_s",
         "repeat")  # a result's own


@dataclasses.dataclass
class Measurements:
    """Every process's result merged: each trial's visits and recorded parts, the table
    products alone, the paths the first process chose, what each trial's visit takes, and the
    process each round was measured in (round ids are the run's own: no two processes share
    one)."""
    visits: dict = dataclasses.field(default_factory=dict)
    recorded: dict = dataclasses.field(default_factory=dict)
    alone: dict = dataclasses.field(default_factory=dict)
    paths: dict = None
    chosen: dict = None
    processes: int = 0
    rounds: int = 0  # the most round ids any trial was visited in
    stopped: object = None  # what cut the measuring short, what came before kept: the signal
    #                         that stopped the processes the budget added, or a worker process's
    #                         end in words (WorkerFailed's)
    extra: dict = dataclasses.field(default_factory=dict)  # what else a process said (first's)
    device_bytes: int = None  # the most memory any process held on a GPU library's device
    gpu_others: list = dataclasses.field(default_factory=list)  # other processes on the GPU
    gpu_clock: list = None  # [the lowest SM clock any process ended its rounds at, its most]
    process_of: dict = dataclasses.field(default_factory=dict)  # {round: its process}
    process_s: float = None  # what one more process of every kind that backs claims costs

    def take(self, result):
        process = result.get("process", self.processes)
        for name, vs in result["visits"].items():
            self.visits.setdefault(name, []).extend(vs)
            self.process_of.update({v[0]: process for v in vs})
        for name, rs in result.get("recorded", {}).items():
            self.recorded.setdefault(name, []).extend(rs)
        for n, samples in result.get("alone", {}).items():
            self.alone.setdefault(int(n), []).extend(samples)
        self.paths = self.paths or result.get("paths")
        self.chosen = self.chosen or result.get("chosen")
        if result.get("device_bytes") is not None:
            self.device_bytes = max(self.device_bytes or 0, result["device_bytes"])
        self.gpu_others += [tuple(o) for o in result.get("gpu_others") or ()
                            if tuple(o) not in self.gpu_others]
        clock = result.get("gpu_clock")
        if clock and all(isinstance(c, (int, float)) for c in clock) and (
                self.gpu_clock is None or clock[0] < self.gpu_clock[0]):
            self.gpu_clock = list(clock)
        for key, v in result.items():
            if key not in KNOWN:
                self.extra.setdefault(key, v)
        self.processes += 1
        self.rounds = max([self.rounds, *(v[0] + 1 for vs in self.visits.values() for v in vs)])

    def runs(self, name):
        """A trial's visits as timing.Runs, in round order."""
        vs = sorted(self.visits[name], key=lambda v: v[0])
        clean = sum(not timing.disturbed(v[2]) for v in vs)
        return timing.Runs([v[1] for v in vs], [v[2] for v in vs], sum(v[3] for v in vs),
                           clean < min(timing.MIN_RUNS, len(vs)), tuple(range(len(vs))),
                           tuple(v[0] for v in vs), name,
                           tuple(self.process_of.get(v[0], 0) for v in vs), self.process_s)

    def visit_s(self, name):
        """What one visit of a trial takes, its middle."""
        return statistics.median(sum(v[1]) for v in self.visits[name])


def measured(args, script, measure_here, kinds=None, began=None, **job):
    """A script's whole measuring: its rows' rounds in fresh worker processes (each the script
    itself, `python script ... --worker`, running measure_here(args, job)), planned by kind
    (plan()); a quick run's, or --processes 1's, all in this process. began: when the measuring
    began, where something this process did first is in --time-budget (the kernels loaded);
    job: more of what each worker is asked. -> Measurements"""
    start = time.monotonic() if began is None else began
    job = {"threads": args.threads, "again": timing.again_for(args), "start": start, **job,
           **({"repeat": {}, "bridge_s": 0.0} if args.quick else {})}  # a smoke run: each row
    #   once a round, no bridge between the groups
    worker = lambda j: spawn(script, args.argv, j)  # noqa: E731
    here = lambda j: {**measure_here(args, j), **on_the_device(args.on)}  # noqa: E731
    if args.processes == 1:
        done = Measurements()
        done.take({**here({**job, "rounds": list(range(args.runs)), "process": 0,
                            "processes": 1}), "process": 0})
    else:
        done = planned(job, kinds or (Kind(),), worker, args.processes, args.runs,
                       args.time_budget, start)
    if done.gpu_others:
        warn(f"disturbed: {nvidia.busy_words(done.gpu_others)} while the rounds ran: the GPU's "
             f"timings may be slower than it can do")
    if throttled(done.gpu_clock):
        warn(throttled(done.gpu_clock))
    if done.device_bytes:
        note(f"{args.on.name} held at most {done.device_bytes / 1e9:.2f} GB")
    return done


THROTTLED = 0.9  # an SM clock under this share of its most, under the work, is said


def throttled(clock):
    """The GPU's clock under the work in words, where it was under THROTTLED of its most: ''
    where it was not (or nvidia-smi did not say)."""
    if not clock or clock[0] >= THROTTLED * clock[1]:
        return ""
    return (f"the GPU's SM clock was {clock[0]} of its {clock[1]} MHz as a process's rounds "
            f"ended (power or heat): its timings are that much slower than it can do")


@dataclasses.dataclass(frozen=True)
class Kind:
    """Rows measured together in processes of their own: their trials' names (None: every trial
    the script makes), and the fewest processes of them. Rows that no claim holds against each
    other's need not share a process, and a process that makes only its own rows' notebooks
    starts in seconds: more fresh processes for the same
    time (pyperf's point: a figure's spread from process to process is only seen across many)."""
    name: str = ""
    trials: tuple = None
    least: int = None  # processes of it at least (None: --processes); 1 for rows no claim uses
    extra: bool = False  # its rows a cheaper part of another kind's: measured only in the time
    #   the others leave (no pilot, no products alone), each process of it (its rounds and its
    #   breakdown's recordings) one more behind the claims on those rows, while the other kinds
    #   keep their least
    most: int = None  # an extra kind's processes at most (None: while the time holds), so that
    #                   the extra kinds after it get the time left


MOST_ROUNDS = 8  # rounds one process measures at most: beyond, a fresh process tells more


@dataclasses.dataclass
class Cost:
    """What one process of a kind took, from its first (the pilot): its start (the script's
    start, its tables and notebooks, warm-ups), one round, and what only a kind's first
    processes do besides (the breakdown's recordings, the table products alone)."""
    start_s: float
    round_s: float
    first_s: float = 0.0

    def of(self, rounds, first=False):
        return self.start_s + rounds * self.round_s + (self.first_s if first else 0.0)

    def rounds(self):
        """The rounds a process of this kind measures: 1, unless its start takes many times as
        long as a round (a quarter of it in rounds, at most MOST_ROUNDS). A verdict's interval
        counts processes (its t quantile falls fast with each one), and a process's rounds share
        its one draw of memory and threads: a fresh process tells more than a round of the same
        one, until starting one costs far more than a round."""
        return max(1, min(MOST_ROUNDS, round(self.start_s / max(self.round_s, 1e-9) / 4)))


def planned(job, kinds, worker, least, runs, budget_s, start):
    """Every kind's processes, one after another, the kinds taking turns: first one of each (the
    pilot, one round: what a process of it costs), then the rest as plan() makes them from the
    pilots' costs alone, never from a figure: no claim's verdict decides how long a run
    measures; then, where a kind is extra, processes of it while the budget holds one more
    (its cost its own first process's, until then priced from its main kind's: its rows are a
    part of those). The first process chooses the paths and times how often a round visits
    each row; the others take both, so that every process's rounds are alike. A stop while the
    processes beyond --processes are measured keeps the ones before, and so does a worker
    process that fails once every kind has measured (done.stopped says so): a worker the OOM
    killer takes throws nothing away."""
    done, costs, count, wanted, repeat = Measurements(), {}, {}, {}, {}
    order = [k.name for k in kinds if not k.extra]
    extras = [k for k in kinds if k.extra]
    by_name = {k.name: k for k in kinds}

    def one(name, rounds):
        kind, i = by_name[name], count.get(name, 0)
        part = {**job, "rounds": list(range(done.rounds, done.rounds + rounds)),
                "trials": None if kind.trials is None else list(kind.trials), "process": i,
                "processes": least, "kind": name, "paths": job.get("paths") or done.paths,
                "left_s": left(), "repeat": job.get("repeat", repeats(kind)),
                "record": job.get("record", True) and (i < least or kind.extra),
                "alone": job.get("alone", False) and not kind.extra}  # the breakdown's
        #   recordings: one in each of a kind's first processes and in each extra one (the
        #   claims on a trip's parts gain its processes too), each the middle of its parts
        began = time.monotonic()
        result = worker(part)
        took = time.monotonic() - began
        done.take({**result, "process": done.processes})
        count[name] = i + 1
        if result.get("repeat"):
            repeat.setdefault(name, result["repeat"])
        return took, result

    def known():
        """{trial: how often a round visits it}, as the processes before chose."""
        return {t: n for counts in repeat.values() for t, n in counts.items()}

    def repeats(kind):
        """How often a round visits each of the kind's trials, where a process before timed
        them all; None: its process times them."""
        counts = known()
        if kind.name in repeat or kind.trials is None:
            return repeat.get(kind.name)
        return {t: counts[t] for t in kind.trials} if all(t in counts for t in kind.trials) \
            else None

    def priced(kind, main):
        """What a first process of an extra kind will cost: its main kind's start (at most: its
        rows are a part of those), a round of its own rows as the processes before visited
        them, and a visit of each more (its recordings)."""
        counts, seen = known(), [t for t in kind.trials if done.visits.get(t)]
        return Cost(costs[main].start_s, sum(done.visit_s(t) * counts.get(t, 1) for t in seen),
                    sum(done.visit_s(t) for t in seen))

    def cost_of(result, took, rounds):
        first = result.get("record_s", 0.0) + result.get("alone_s", 0.0)
        spent = result.get("rounds_s", 0.0)
        return Cost(max(took - spent - first, 0.0), spent / rounds, first)

    def left():
        """The measuring's estimate of its end, from the costs seen so far."""
        if len(wanted) < len(order):
            return None
        planned_s = sum(costs[k].of(wanted[k][1], i < least) for k in order
                        for i in range(count.get(k, 0), wanted[k][0]))
        return max(time.monotonic() - start + planned_s, budget_s if extras else 0.0)

    def added(k, rounds, stops=True):
        """One more process of kind k once every kind has measured: -> (its seconds, its
        result); None where a failed worker, or a stop (beyond the kind's least: else the run
        stops), ends the measuring with what came before (done.stopped says which)."""
        try:
            return one(k, rounds)
        except stopping.Stopped as e:
            if not stops:
                raise
            stopping.stopped()
            done.stopped = e.signum
        except WorkerFailed as e:  # every row has a round by now: the run stands on them
            done.stopped = str(e)
        return None
    fewest = {k.name: least if k.least is None else min(k.least, least) for k in kinds}
    for name in order:  # the pilots (a kind of one process: all its rounds)
        pilot = 1 if fewest[name] > 1 else runs
        took, result = one(name, pilot)
        costs[name] = cost_of(result, took, pilot)
    wanted.update(plan(costs, fewest, runs, 0.0 if extras else  # extras take the time left
                       start + budget_s - time.monotonic()))
    note("the plan, from the first process of each kind: " + "; ".join(
        f"{k + ' ' if k else ''}{wanted[k][0]} {plural(wanted[k][0], 'process')}, each after "
        f"the first {wanted[k][1]} {plural(wanted[k][1], 'round')} (about "
        f"{costs[k].of(wanted[k][1]):.0f} s)" for k in order) + "".join(
        f"; then {k.name} alone in " + (f"{k.most} more {plural(k.most, 'process')} where the "
                                        f"time holds" if k.most else
                                        "more processes while the time holds")
        for k in extras))
    end = start + budget_s
    while any(count[k] < wanted[k][0] for k in order):
        for k in order:
            processes, rounds = wanted[k]
            if count[k] >= processes:
                continue
            beyond = count[k] >= fewest[k]
            if beyond and time.monotonic() + costs[k].of(rounds) > end:
                wanted[k] = count[k], rounds  # slower than the pilot said: no more of it
            elif added(k, rounds, stops=beyond) is None:
                return done
    done.process_s = sum(costs[k].of(wanted[k][1]) for k in order if fewest[k] > 1)  # one more
    #   process of each kind that backs claims: what --processes + 1 costs
    for kind in extras:
        main = next(k for k in order if by_name[k].trials is None
                    or set(kind.trials) <= set(by_name[k].trials))
        rounds = wanted[main][1]
        most = kind.most or MOST_PROCESSES
        while count.get(kind.name, 0) < most and time.monotonic() + costs.get(
                kind.name, priced(kind, main)).of(rounds, True) <= end:
            made = added(kind.name, rounds)
            if made is None:
                return done
            took, result = made
            costs.setdefault(kind.name, cost_of(result, took, rounds))
    return done


def plan(costs, least, runs, seconds):
    """{kind: (processes, rounds in each after its pilot)}: each kind in least[kind] processes at
    least, its rows in `runs` rounds at least (a process measuring more rounds where too few
    processes fit), then a process more of each kind that backs claims (least over 1) in turn
    while all of them fit in `seconds`. costs: {kind: Cost}, from each kind's pilot (one process,
    one round)."""
    count = dict(least)

    def rounds(k):
        return max(costs[k].rounds(), math.ceil((runs - 1) / max(count[k] - 1, 1)))

    def spent():
        return sum(costs[k].of(rounds(k), i < least[k]) for k in costs
                   for i in range(1, count[k]))
    grown = True
    while grown:
        grown = False
        for k in costs:
            if count[k] >= MOST_PROCESSES or least[k] < 2:
                continue
            count[k] += 1
            if spent() <= seconds:
                grown = True
            else:
                count[k] -= 1
    return {k: (count[k], rounds(k)) for k in costs}


MOST_PROCESSES = 64  # fresh processes of one kind at most, however long the budget
