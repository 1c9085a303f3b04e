"""Measuring in rounds, inside one process. A round visits every trial (a row's trips, a speed)
once, in an order shuffled each round, so that a claim's ratio of two rows is taken from visits
moments apart and the machine's drift between rows cancels. Each process warms every trial once,
records the breakdown's trips once, then visits; a visit other work disturbed is measured again
after a pause. The rounds are spread over fresh worker processes (processes.py plans them and
gathers what they say; worker.py is a worker's side: its job in, its result out)."""
import dataclasses
import math
import time
import types

import numpy as np

from harness import stopping
from harness.terminal import clock, progress
from harness.measuring import host, timing

ORDER_SEED = 0  # the orders the rounds visit their trials in: the same every run
BRIDGE_S = 0.15  # between a round's groups, the next group's cheapest trial runs untimed this
#                  long: the BLAS's threads stop spinning meanwhile, which would otherwise slow
#                  the next visit (a short read after a one-token trip most): the suite sets
#                  OpenBLAS's timeout to 2^16 cycles (harness/__init__.py), but a user's own
#                  setting, or another BLAS, may keep its default (OpenBLAS's 2^28, about 0.1 s)


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
    rng, out = np.random.default_rng([ORDER_SEED, round_id]), []
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
    rounds, again = list(job.rounds), job.again
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
    chosen = job.repeat  #       the first process of a kind times each trial once, and the
    if chosen is None:  #          rest take its counts: every process's rounds alike
        say(job, "timing each row once: how often a round visits it")
        chosen = {name: repeats(t, warmed.get(name)) for name, t in trials.items()}
    trials = {name: dataclasses.replace(t, repeat=chosen.get(name, 1))
              for name, t in trials.items()}
    visits, recorded = {name: [] for name in trials}, {name: [] for name in trials}
    bridged, began = Bridged(trials, job.bridge_s), time.perf_counter()
    for i, r in enumerate(rounds):
        for name in bridged.order(r):
            say(job, f"round {i + 1} of {len(rounds)}: {name}")
            seconds, share, tried = visited(trials[name], again)
            visits[name].append([r, seconds, share, tried])
            bridged.cost[name] = sum(seconds)
    last, ended = rounds[-1] if rounds else 0, time.perf_counter()
    once = sorted(n for n, t in trials.items() if t.once)
    for name in bridged.order(last) if job.record else ():  # every trial warm now
        mine = name not in once or once.index(name) % job.processes == job.process % job.processes
        if trials[name].recorded is not None and mine:
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
    start, left = job.start, job.left_s
    took = time.monotonic() - start if start is not None else None
    when = "" if took is None else f"{clock(took)} in" + (
        f", about {clock(max(left - took, 0))} left" if left else "") + ": "
    who = (f"{job.kind + ' ' if job.kind else ''}process {job.process + 1}, "
           if job.processes > 1 else "")
    progress(f"{when}{who}{words}")
