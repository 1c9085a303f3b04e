"""Measuring in rounds. A round visits every trial (a row's trips, a speed) once, in an order
shuffled each round, so that a claim's ratio of two rows is taken from visits moments apart and
the machine's drift between rows cancels. The rounds are spread over several fresh worker
processes, each the script itself run with --worker (as pyperf spreads its runs), so that what
differs between processes (where memory lands, how the BLAS's threads start) is in the samples
instead of assumed. Each process warms every trial once, records the breakdown's trips once,
then visits; a visit other work disturbed is measured again after a pause.

A job (what a worker is asked) and a result (what it says back) are plain JSON:
  job    {"rounds": [ids], "trials": [names] or null (all), "record": bool, "paths": {...} or
          null (choose them), "threads": n, "again": n, "process": i, "processes": n,
          "start": the run's monotonic start, "left_s": the measuring's estimate}
  result {"visits": {trial: [[round, [seconds of each step], share or null, again], ...]},
          "recorded": {trial: [[round, {part: seconds}], ...]}, "alone": {tokens: [seconds]},
          "paths": {...}, "chosen": {...}, "setup_s": seconds}
"""
import contextlib
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import types

import numpy as np

from harness import stopping
from harness.terminal import clock, hushed, note, plural, progress, warn
from harness.measuring import host, nvidia, timing

PROCESSES = 3  # worker processes a full run spreads its rounds over (pyperf's point: several)
SEED = 0  # the orders the rounds visit their trials in: the same every run
BRIDGE_S = 0.15  # between a round's groups, the next group's cheapest trial runs untimed this
#                  long: the BLAS's threads stop spinning meanwhile (OpenBLAS's default timeout
#                  is 2^28 cycles, about 0.1 s), which would otherwise slow the next visit by
#                  up to 1.7x (measured: a 16-token read after a 1-token one, 80 ms against 47)


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


HOST = types.SimpleNamespace(mark=time.perf_counter, between=lambda start, end: end - start)


def visit(trial, watch=host.watch):
    """One visit: setup, then each step timed, its `number` calls between two marks of the
    trial's timer. -> ([seconds per call of each step], the share of the cores other work took
    meanwhile, or None where the OS does not say). A signal that came before it and was lost on
    its way stops the run here (stopping.check)."""
    stopping.check()
    if trial.setup is not None:
        trial.setup()
    timer, done, seconds = trial.timer or HOST, watch(), []
    for step in trial.steps:
        start = timer.mark()
        for _ in range(trial.number):
            step()
        seconds.append(timer.between(start, timer.mark()) / trial.number)
    return seconds, done()


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
    the same round. trials: {name: Trial}"""
    rng, out = np.random.default_rng([SEED, round_id]), []
    for g in sorted({t.group for t in trials.values()}):
        names = sorted(n for n, t in trials.items() if t.group == g)
        out += [names[i] for i in rng.permutation(len(names))]
    return out


class Bridged:
    """A round's order, with a bridge between its groups: before the first trial of a group
    other than the last visited, the group's cheapest trial runs untimed for BRIDGE_S."""

    def __init__(self, trials):
        self.trials, self.cost, self.group = trials, {}, None

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
        end = time.perf_counter() + BRIDGE_S
        while time.perf_counter() < end:
            visit(cheapest, watch=lambda: (lambda: None))


def calibrate(trial, min_sample_s):
    """The trial with each sample a burst lasting at least min_sample_s: a visit, warm (one
    untimed first), timed once decides how many calls a sample repeats."""
    if min_sample_s <= 0:
        return trial
    visit(trial, watch=lambda: (lambda: None))  # warm: a first call pays for what it readies
    took = max(sum(visit(trial, watch=lambda: (lambda: None))[0]), 1e-9)
    return dataclasses.replace(trial, number=min(int(min_sample_s / took) + 1, 10_000))


def run(trials, job):
    """A worker's part of the rounds, in this process: the trials that warm up on their own
    warmed (by their recorded trip, or a visit: the largest of each experiment, which readies
    the memory the others use too), then the job's rounds, each a shuffled visit of every trial,
    then each trial's breakdown recorded once, every trial warm by then. -> the result's
    "visits" and "recorded" (see the module's docstring)"""
    trials = {t.name: t for t in trials}
    rounds, again = list(job["rounds"]), job.get("again", timing.AGAIN)
    for t in trials.values():
        if t.warm:
            say(job, f"warming up: {t.name}")
            if t.recorded is not None:
                t.recorded(None)
            else:
                visit(t, watch=lambda: (lambda: None))
    visits, recorded = {name: [] for name in trials}, {name: [] for name in trials}
    bridged = Bridged(trials)
    for i, r in enumerate(rounds):
        for name in bridged.order(r):
            say(job, f"round {i + 1} of {len(rounds)}: {name}")
            seconds, share, tried = visited(trials[name], again)
            visits[name].append([r, seconds, share, tried])
            bridged.cost[name] = sum(seconds)
    last = rounds[-1] if rounds else 0
    for name in bridged.order(last) if job.get("record", True) else ():  # every trial warm now
        if trials[name].recorded is not None:
            say(job, f"recording the parts of {name}")
            parts = {}
            trials[name].recorded(parts)
            recorded[name].append([last, dict(parts)])
    progress("")
    return {"visits": visits, "recorded": {k: v for k, v in recorded.items() if v}}


def say(job, words):
    """The progress line: which process, what it measures, the time so far and left."""
    start, left = job.get("start"), job.get("left_s")
    took = time.monotonic() - start if start is not None else None
    when = "" if took is None else f"{clock(took)} in" + (
        f", about {clock(max(left - took, 0))} left" if left else "") + ": "
    who = (f"process {job['process'] + 1} of {job['processes']}, "
           if job.get("processes", 1) > 1 else "")
    progress(f"{when}{who}{words}")


# ---------------------------------------------------------------------------------------------
# the worker processes


def serve(args, measure):
    """A worker's whole life: its job from stdin, measure(args, job) -> result under the job's
    threads, the result as JSON on the stdout it was started with (nothing else is written
    there), then exit."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the run that started it says what happened
        signal.signal(signum, lambda n, _: os._exit(128 + n))
    try:
        job = None if sys.stdin is None or sys.stdin.isatty() else json.loads(sys.stdin.read())
    except ValueError:
        job = None
    if not isinstance(job, dict) or not isinstance(job.get("rounds"), list):
        sys.stderr.write(f"{os.path.basename(sys.argv[0])}: error: argument --worker: only the "
                         f"run's own worker processes take it, their job as JSON on stdin\n")
        return 2
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print goes to stderr
    from threadpoolctl import threadpool_limits
    block = args.replace(threads=job.get("threads"))
    with threadpool_limits(block.threads) if block.threads else contextlib.nullcontext():
        block.on.threads(block.threads)
        result = {**measure(block, job), **on_the_device(block.on)}
    json.dump(result, out)
    out.flush()
    return 0


def on_the_device(on):
    """What a process says of a GPU library's device once its rounds are done: the most memory
    it held there, and the other processes computing on the GPU meanwhile (None: unknown)."""
    return {"device_bytes": on.memory_used(), "gpu_others": on.others()}


class WorkerFailed(Exception):
    """A worker process ended without its result: the run stops, saying so in one line."""


def spawn(script, argv, job):
    """One worker: `python script argv --worker`, given the job, -> its result. Its progress
    shows on this process's stderr. A worker that fails stops the run with its own words."""
    done = subprocess.run([sys.executable, script, *argv, "--worker"], input=json.dumps(job),
                          stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise WorkerFailed(f"a worker process failed (exit {done.returncode}); its own words "
                           f"are above")
    return json.loads(done.stdout)


def spread(rounds, processes):
    """Round ids 0..rounds-1 in consecutive shares, one per process, the first the largest."""
    cuts = [rounds * i // processes for i in range(processes + 1)]
    shares = [list(range(a, b)) for a, b in zip(cuts, cuts[1:])]
    return sorted((s for s in shares if s), key=len, reverse=True)


KNOWN = ("visits", "recorded", "alone", "paths", "chosen", "setup_s", "device_bytes",
         "gpu_others")  # a result's own keys


@dataclasses.dataclass
class Measured:
    """Every process's result merged: each trial's visits and recorded parts, the table
    products alone, the paths the first process chose, and what each trial's visit takes."""
    visits: dict = dataclasses.field(default_factory=dict)
    recorded: dict = dataclasses.field(default_factory=dict)
    alone: dict = dataclasses.field(default_factory=dict)
    paths: dict = None
    chosen: dict = None
    setup_s: list = dataclasses.field(default_factory=list)
    processes: int = 0
    rounds: int = 0  # the most round ids any trial was visited in
    stopped: int = None  # the signal that stopped the rounds added for undecided claims
    extra: dict = dataclasses.field(default_factory=dict)  # what else a process said (first's)
    device_bytes: int = None  # the most memory any process held on a GPU library's device
    gpu_others: list = dataclasses.field(default_factory=list)  # other processes on the GPU

    def take(self, result):
        for name, vs in result["visits"].items():
            self.visits.setdefault(name, []).extend(vs)
        for name, rs in result.get("recorded", {}).items():
            self.recorded.setdefault(name, []).extend(rs)
        for n, samples in result.get("alone", {}).items():
            self.alone.setdefault(int(n), []).extend(samples)
        self.paths = self.paths or result.get("paths")
        self.chosen = self.chosen or result.get("chosen")
        self.setup_s.append(result.get("setup_s", 0.0))
        if result.get("device_bytes") is not None:
            self.device_bytes = max(self.device_bytes or 0, result["device_bytes"])
        self.gpu_others += [tuple(o) for o in result.get("gpu_others") or ()
                            if tuple(o) not in self.gpu_others]
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
                           tuple(v[0] for v in vs), name)

    def visit_s(self, name):
        """What one visit of a trial takes, its middle."""
        return statistics.median(sum(v[1]) for v in self.visits[name])


def measured(args, script, measure_here, undecided=None, **job):
    """A script's whole measuring: its --runs rounds over --processes fresh workers (each the
    script itself, `python script ... --worker`, running measure_here(args, job)), then, unless
    a quick run, rounds added while undecided(done) names trials behind claims that cannot be
    told yet and --time-budget allows. job: more of what each worker is asked. -> Measured"""
    start = time.monotonic()
    job = {"rounds": list(range(args.runs)), "threads": args.threads,
           "again": timing.again_for(args), "start": start, **job}
    worker = lambda j: spawn(script, args.argv, j)  # noqa: E731
    here = lambda j: {**measure_here(args, j), **on_the_device(args.on)}  # noqa: E731
    done = measure(job, args.processes, worker, here)
    if undecided is not None and not args.quick:
        until_told(job, done, worker, here, args.processes, args.time_budget, start, undecided)
    if done.gpu_others:
        warn(f"disturbed: {nvidia.busy_words(done.gpu_others)} while the rounds ran: the GPU's "
             f"timings may be slower than it can do")
    if done.device_bytes:
        note(f"{args.on.name} held at most {done.device_bytes / 1e9:.2f} GB")
    return done


def measure(job, processes, worker, here):
    """The job's rounds spread over `processes` fresh workers, one after another (worker(job)
    -> result runs one), or all in this process (here(job) -> result) where processes is 1.
    The first process chooses the paths; the others take them. -> Measured"""
    done = Measured()
    shares = spread(len(job["rounds"]), processes) if processes > 1 else [list(job["rounds"])]
    base = job["rounds"][0] if job["rounds"] else 0
    for i, share in enumerate(shares):
        part = {**job, "rounds": [base + r for r in share] if processes > 1 else share,
                "process": i, "processes": len(shares), "paths": job.get("paths") or done.paths}
        if done.visits and job.get("start") is not None:  # the rest, from what the first took
            part["left_s"] = time.monotonic() - job["start"] + sum(
                estimate(done, done.visits, len(s)) for s in shares[i:])
        done.take(worker(part) if processes > 1 else here(part))
    return done


def estimate(done, names, rounds):
    """Seconds a worker would take for these trials and rounds: its setup (the slowest seen),
    a warm-up and a recorded trip of each, and the rounds."""
    visit = sum(done.visit_s(n) for n in names if n in done.visits)
    return max(done.setup_s or [0.0]) + visit * (rounds + 2)


def added(job, done, names, worker, here, processes, budget_s, start, needed):
    """Rounds added for the trials behind claims that cannot be told yet (names), in one more
    worker, as many as needed (at most) that fit in what is left of the time budget: -> the
    rounds added (0: none fit). Ctrl-C or SIGTERM meanwhile stops them; what was measured before
    is kept, and done.stopped says so."""
    left = budget_s - (time.monotonic() - start)
    one = sum(done.visit_s(n) for n in names if n in done.visits)
    fits = int((left - estimate(done, names, 0)) / one) if one > 0 else 0
    more = min(needed, fits, 4 * max(done.rounds, 1))
    if more < 1:
        return 0
    ids = list(range(done.rounds, done.rounds + more))
    note(f"adding {more} {plural(more, 'round')} of {len(names)} "
         f"{plural(len(names), 'row')} for the claims that cannot be told yet")
    part = {**job, "rounds": ids, "trials": sorted(names), "record": True, "alone": False,
            "process": 0, "processes": 1, "paths": done.paths,
            "left_s": time.monotonic() - start + estimate(done, names, more)}
    try:
        done.take(worker(part) if processes > 1 else here(part))
    except stopping.Stopped as e:
        stopping.stopped()
        done.stopped = e.signum
        return 0
    return more


def until_told(job, done, worker, here, processes, budget_s, start, undecided, tries=3):
    """Rounds added while claims cannot be told yet and the time budget allows it, a few times
    at most: undecided(done) -> {trial: the rounds more it needs} for the trials behind the
    claims whose interval still straddles its edge."""
    for _ in range(tries):
        with hushed():  # the records made of every round say their warnings, once
            wanted = undecided(done)
        if not wanted or done.stopped:
            return
        if not added(job, done, set(wanted), worker, here, processes, budget_s, start,
                     max(wanted.values())):
            return
