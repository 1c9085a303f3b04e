"""Timing's records: every counted sample kept with how much of the cores other work took while
it ran (Runs), and the statistic that makes one figure of them named with it (Timing). Samples
are taken in one place, rounds.visit: a warm-up first, setup outside the timer, a disturbed
visit measured again (rounds.visited)."""
import dataclasses
import math
import statistics

from harness.terminal import warn

NOISE_SPREAD = 1.2  # slowest / fastest counted sample above this: the machine looked noisy
DISTURBED = 0.1  # a sample during which other work took more than this share of the cores is
#                  disturbed: a quiet machine's trips stay well under it, one core busy with
#                  other work (which slows a trip) well over
MIN_RUNS = 3  # fewer clean runs than this back no verdict: their figure is marked disturbed
AGAIN = 2  # a disturbed visit is measured again at most this many times, the least disturbed
#            kept ...
PAUSE_S = 0.1  # ... each after this pause, so that the visits again fall in the other work's gaps
STATS = {"best": min, "middle": statistics.median,  # best of N: peaks; middle of N: experiments
         "limit": min}  # a prediction: one "sample", the limit itself


@dataclasses.dataclass(frozen=True)
class Timing:
    """One figure's seconds: every counted sample, the statistic that makes the figure, and the
    samples' conditions: others, the share of the cores other work took during each (None where
    the OS does not say); again, how many samples were measured again because other work
    disturbed them; disturbed, whether too few were clean even so, and the figure backs no
    verdict."""
    samples: tuple
    stat: str = "middle"
    others: tuple = ()
    again: int = 0
    disturbed: bool = False
    rounds: tuple = ()  # the round each sample was measured in (a run in rounds: rounds.py)
    trial: str = ""  # what was visited: the row measured
    visit_s: float = None  # what one visit of it takes, its middle
    processes: tuple = ()  # the process each sample was measured in, where they were many
    process_s: float = None  # what one more process of every kind costs (--processes + 1)

    @property
    def clean(self):
        """The samples other work did not disturb (all where none say so)."""
        kept = [s for s, o in zip(self.samples, self.others or [None] * len(self.samples))
                if not disturbed(o)]
        return kept or list(self.samples)

    @property
    def share(self):
        """The most of the cores other work took during any kept sample, or None: unknown."""
        known = [o for o in self.others if o is not None]
        return max(known) if known else None

    @property
    def seconds(self):
        """The statistic of the clean samples (of all, where none is clean)."""
        return STATS[self.stat](self.clean)

    @property
    def spread(self):
        """Slowest over fastest sample."""
        return max(self.samples) / min(self.samples) if min(self.samples) > 0 else math.inf

    @property
    def label(self):
        return f"{self.stat} of {len(self.samples)}"


def taken(samples, stat="middle", what="", runs=None, said=False):
    """A Timing of samples (seconds), with their conditions from runs (a Runs, where they were
    watched); a warning on stderr when they spread widely, or when other work disturbed them
    (said: already said for these runs)."""
    t = Timing(tuple(samples), stat, *((tuple(runs.others), runs.again, runs.disturbed,
                                        tuple(runs.rounds), runs.trial, runs.visit_s,
                                        tuple(runs.processes), runs.process_s)
                                       if runs is not None else ()))
    if said:
        return t
    if t.disturbed:
        warn(f"disturbed: {what or 'samples'}: other work took up to {t.share:.0%} of the cores "
             f"during its runs, even measured again {t.again} times: it backs no verdict")
    elif t.spread > NOISE_SPREAD:
        warn(f"noisy machine: {what or 'samples'} spread {t.spread:.2f}x "
             f"(fastest {min(t.samples) * 1e3:.3g} ms, slowest {max(t.samples) * 1e3:.3g} ms)")
    return t


@dataclasses.dataclass(frozen=True)
class Runs:
    """A schedule's counted runs: the seconds of every step in each, the share of the cores
    other work took during each (None: unknown), how many runs were measured again in place of
    disturbed ones, and whether too few were clean even so."""
    steps: list
    others: list
    again: int = 0
    disturbed: bool = False
    kept: list = ()  # which of the counted runs these are, in order
    rounds: tuple = ()  # the round of each run, where they were measured in rounds
    trial: str = ""  # the trial visited
    processes: tuple = ()  # the process of each run, where they were measured in rounds
    process_s: float = None  # what one more process of every kind costs, where planned

    @property
    def visit_s(self):
        """What one run of every step takes, its middle."""
        return statistics.median(sum(s) for s in self.steps) if self.steps else None


def jointly(a, b):
    """Timings a and b with a run that other work disturbed in either counted as disturbed in
    both (paired by round): their ratio's figure then stands on the same runs as its samples,
    each run's own ratio (a run clean in one and not the other put the figure outside them)."""
    if not (a.rounds and b.rounds and a.others and b.others):
        return a, b
    worst = {}
    for t in (a, b):
        for r, o in zip(t.rounds, t.others):
            if o is not None:
                worst[r] = max(o, worst.get(r, o))
    return tuple(dataclasses.replace(t, others=tuple(worst.get(r, o) for r, o in
                                                     zip(t.rounds, t.others)))
                 for t in (a, b))


def disturbed(share):
    return share is not None and share > DISTURBED


def again_for(args):
    """How many disturbed runs a run's figures measure again: none for a quick (smoke) run."""
    return 0 if args.quick else AGAIN


@dataclasses.dataclass(frozen=True)
class Measured:
    """A figure and the timings behind it, which never part: value is the product of each
    timing's seconds to its power (1 for a time, -1 for a rate), times a constant, and, where
    over holds terms, over the largest of their weighted seconds (a limit that is the slower of
    two jobs: max(bytes over the forklift, FLOPs over the workbench), the slower in each round)."""
    value: float
    parts: tuple  # ((power, Timing), ...)
    over: tuple = ()  # ((weight, Timing), ...): the figure over max(weight * seconds)

    @property
    def timing(self):
        """The first timing behind it: its statistic and run count name the figure's."""
        return self.parts[0][1]

    @property
    def timings(self):
        """Every Timing behind the figure, the parts' and the terms' it is over."""
        return [t for _, t in (*self.parts, *self.over)]


def timed(value, t, power=1):
    """A figure of one timing: a time (power 1) or a rate (power -1)."""
    return Measured(value, ((power, t),))


def ms(t):
    """A Timing as a figure in milliseconds."""
    return timed(t.seconds * 1e3, t)
