"""Timing: setup outside the timer, one warm-up run not counted, every counted sample kept, and
the statistic that makes one figure of them named with it."""
import dataclasses
import math
import statistics
import time

from harness.terminal import progress, warn

NOISE_SPREAD = 1.2  # slowest / fastest counted sample above this: the machine looked noisy
STATS = {"best": min, "middle": statistics.median,  # best of N: peaks; middle of N: experiments
         "limit": min}  # a prediction: one "sample", the limit itself


@dataclasses.dataclass(frozen=True)
class Timing:
    """One figure's seconds: every counted sample, and the statistic that makes the figure."""
    samples: tuple
    stat: str = "middle"

    @property
    def seconds(self):
        return STATS[self.stat](self.samples)

    @property
    def spread(self):
        """Slowest over fastest sample."""
        return max(self.samples) / min(self.samples) if min(self.samples) > 0 else math.inf

    @property
    def label(self):
        return f"{self.stat} of {len(self.samples)}"


def taken(samples, stat="middle", what=""):
    """A Timing of samples (seconds), with a warning on stderr when they spread widely."""
    t = Timing(tuple(samples), stat)
    if t.spread > NOISE_SPREAD:
        warn(f"noisy machine: {what or 'samples'} spread {t.spread:.2f}x "
             f"(fastest {min(t.samples) * 1e3:.3g} ms, slowest {max(t.samples) * 1e3:.3g} ms)")
    return t


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


def measure(fn, runs, stat="middle", setup=None, clock=time.perf_counter, what="",
            min_sample_s=0.0):
    """Time fn: -> a Timing of its counted runs, warning on stderr if they spread widely."""
    samples = time_runs(fn, runs, setup=setup, clock=clock, what=what, min_sample_s=min_sample_s)
    return taken(samples, stat, what)


def best_of(fn, runs, what=""):
    """The post's best_of: fn timed `runs` times after a warm-up, the fastest kept (a limit is
    what the machine can do, and only disturbance makes it slower). -> Timing; .seconds is the
    best."""
    return measure(fn, runs, stat="best", what=what)
