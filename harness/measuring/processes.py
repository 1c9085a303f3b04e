"""The run's side of the rounds: its rows' rounds spread over many fresh worker processes, each
the script itself run with --worker (as pyperf spreads its runs), so that what differs between
processes (where memory lands, how the BLAS's threads start) is in the samples instead of
assumed: a verdict's interval counts processes, not rounds (judging/intervals.py). Rows no claim
holds against each other's are measured in processes of their own kind (Kind), each making only
what its rows need. The processes are planned from each kind's first (planned(), plan()); what
they say back is gathered in Measurements."""
import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time

from harness import stopping
from harness.terminal import clock, note, plural, warn
from harness.measuring import nvidia, timing
from harness.measuring.worker import DEVICE_EXIT, FAILED, MARK, Job, on_the_device, under_work

PROCESSES = 3  # fresh processes of each kind at least: the fewest an interval stands on


class WorkerFailed(Exception):
    """A worker process ended without its result: the run stops, saying so in one line."""


class DeviceFailed(WorkerFailed):
    """The device's library failed in a worker (out of memory, no kernel for this GPU, a
    driver too old, the GPU busy): the run stops with its cause in one line, exit 2."""


def spawn(script, job):
    """One worker: `python script --worker`, given the job (a Job: the run's words in it), -> its
    result. It starts in a
    session of its own, so that the terminal's signals (Ctrl-C) reach this run alone, which
    ends it and speaks (see stopping). Its progress shows on this process's stderr, and so does
    anything else it printed on stdout (a sitecustomize, a library): its result is what follows
    MARK there. A worker that fails raises WorkerFailed, saying how it ended."""
    done = subprocess.run([sys.executable, script, "--worker"], input=job.sent(),
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


@dataclasses.dataclass(frozen=True)
class Sample:
    """One visit of a trial, as a worker measured it: its round (the run's own id), each step's
    seconds, the share of the cores other work took meanwhile (None: the OS does not say), and
    how many times it was measured again because other work disturbed it."""
    round: int
    seconds: tuple
    others: float
    again: int


KNOWN = ("visits", "recorded", "alone", "paths", "chosen", "setup_s", "device_bytes",
         "gpu_others", "gpu_clock", "process", "rounds_s", "record_s", "alone_s",
         "repeat")  # a result's own


@dataclasses.dataclass
class Measurements:
    """Every process's result merged: each trial's visits and recorded parts, the table
    products alone, the paths the first process chose, what each trial's visit takes, and the
    process each round was measured in (round ids are the run's own: no two processes share
    one)."""
    visits: dict = dataclasses.field(default_factory=dict)  # {trial: [Sample]}
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
            samples = [Sample(r, tuple(seconds), others, again) for r, seconds, others, again in vs]
            self.visits.setdefault(name, []).extend(samples)
            self.process_of.update({v.round: process for v in samples})
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
        self.rounds = max([self.rounds, *(v.round + 1 for vs in self.visits.values() for v in vs)])

    def runs(self, name):
        """A trial's visits as timing.Runs, in round order."""
        vs = sorted(self.visits[name], key=lambda v: v.round)
        clean = sum(not timing.disturbed(v.others) for v in vs)
        return timing.Runs([list(v.seconds) for v in vs], [v.others for v in vs],
                           sum(v.again for v in vs), clean < min(timing.MIN_RUNS, len(vs)),
                           tuple(range(len(vs))), tuple(v.round for v in vs), name,
                           tuple(self.process_of.get(v.round, 0) for v in vs), self.process_s)

    def visit_s(self, name):
        """What one visit of a trial takes, its middle."""
        return statistics.median(sum(v.seconds) for v in self.visits[name])


def measured(args, script, measure_here, kinds=None, began=None, **job):
    """A script's whole measuring: its rows' rounds in fresh worker processes (each the script
    itself, `python script --worker`, running measure_here(args, job) on the Job it is given),
    planned by kind (plan()); a quick run's, or --processes 1's, all in this process. began:
    when the measuring began, where something this process did first is in --time-budget (the
    kernels loaded); job: more of what each worker is asked (Job's fields). -> Measurements"""
    start = time.monotonic() if began is None else began
    job = {"threads": args.threads, "again": timing.again_for(args), "start": start, **job,
           **({"repeat": {}, "bridge_s": 0.0} if args.quick else {})}  # a smoke run: each row
    #   once a round, no bridge between the groups
    job = {"argv": tuple(args.argv), **job}
    worker = lambda j: spawn(script, j)  # noqa: E731
    def here(j):
        result, clocks = under_work(args.on, lambda: measure_here(args, j))
        return {**result, **on_the_device(args.on, clocks)}
    if args.processes == 1:
        done = Measurements()
        done.take({**here(Job(**{**job, "rounds": tuple(range(args.runs)), "process": 0,
                                 "processes": 1})), "process": 0})
    else:
        note(f"measuring in fresh processes for about {clock(args.time_budget)} "
             f"(--time-budget; at least --processes {args.processes} of each kind, however "
             f"long they take), then the tables")
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
        part = Job(**{
            **job, "rounds": tuple(range(done.rounds, done.rounds + rounds)),
            "trials": None if kind.trials is None else tuple(kind.trials), "process": i,
            "processes": least, "kind": name, "paths": job.get("paths") or done.paths,
            "left_s": left(), "repeat": job.get("repeat", repeats(kind)),
            "record": job.get("record", True) and (i < least or kind.extra),
            "alone": job.get("alone", False) and not kind.extra})  # the breakdown's
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
