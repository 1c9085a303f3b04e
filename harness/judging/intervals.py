"""How sure a figure is, from the run's own rounds. A judge computes its quantity from records
as a Figure: the value, and how to compute it again from the statistic of each record it read;
its interval is a paired bootstrap over the rounds those records share (SciPy's), so that a
ratio of two rows measured moments apart in each round carries only the spread of the ratio,
never the worst case of two spreads. Samples far from the rest are named (hyperfine's modified
z-score) and kept in the figure, but left out of its interval; samples other work disturbed
back no interval."""
import dataclasses
import inspect
import math
import zlib

import numpy as np

from harness.measuring.timing import DISTURBED  # a sample other work took more of the cores during

FAMILY = 0.05  # the chance of any wrong firm verdict among a run's claims, at most: each of its
#                tests' intervals is taken at 1 - FAMILY / tests (Bonferroni's bound)
RESAMPLES = 9999  # bootstrap resamples of the rounds behind each interval
MIN_ROUNDS = 3  # fewer clean rounds shared by a figure's records back no interval
OUTLIER = 1.4826 * 10  # a sample further than this many MADs from the median is an outlier:
#                        hyperfine's threshold (10 standard deviations, the MAD made one)
STATISTICS = {"median": np.median, "min": np.min, "max": np.max}


def level(tests):
    """The confidence level of each interval among `tests` tests: Bonferroni's, so that the
    chance that any of them misses is at most FAMILY."""
    return 1 - FAMILY / max(tests, 1)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One record as a judge reads it: its statistic over its clean samples, each with the round
    it was measured in; dropped: how many samples other work disturbed (and the most of the
    cores it took, share), which back nothing."""
    name: str
    statistic: str  # "median", "min" (a best time) or "max" (a best rate)
    rounds: tuple
    samples: tuple
    dropped: int = 0
    share: float = 0.0
    visit_s: float = None  # what one more round of the record's rows takes, where known
    trials: tuple = ()  # the trials (rows) the record's samples were measured in


class Figure:
    """A quantity computed from records: its value (from the records' own values), the records
    it rests on (leaves) and make(stats), the same quantity from each leaf's statistic, in
    order, so that a resample of the rounds gives the quantity again. A plain number is a
    Figure with no leaves. Only + - * / are needed by the judges."""

    def __init__(self, value, leaves=(), make=None, record=None):
        self.value, self.leaves, self.record = value, tuple(leaves), record
        self.make = make or (lambda stats: value)

    @property
    def measured(self):
        """Whether runs of a timing stand behind it, not only counts and limits."""
        return bool(self.leaves)

    def __format__(self, spec):
        return format(self.value, spec)

    def __repr__(self):
        return f"Figure({self.value!r}, {len(self.leaves)} leaves)"

    def _with(self, other, op, swap=False):
        a, b = (lift(other), self) if swap else (self, lift(other))
        leaves = list(a.leaves) + [x for x in b.leaves if x not in a.leaves]
        ia, ib = ([leaves.index(x) for x in f.leaves] for f in (a, b))
        return Figure(op(a.value, b.value), leaves, lambda s: op(a.make([s[i] for i in ia]),
                                                                 b.make([s[i] for i in ib])))

    def __add__(self, o): return self._with(o, lambda x, y: x + y)
    def __radd__(self, o): return self._with(o, lambda x, y: x + y, swap=True)
    def __sub__(self, o): return self._with(o, lambda x, y: x - y)
    def __rsub__(self, o): return self._with(o, lambda x, y: x - y, swap=True)
    def __mul__(self, o): return self._with(o, lambda x, y: x * y)
    def __rmul__(self, o): return self._with(o, lambda x, y: x * y, swap=True)
    def __truediv__(self, o): return self._with(o, lambda x, y: x / y)
    def __rtruediv__(self, o): return self._with(o, lambda x, y: x / y, swap=True)


def lift(v):
    """A plain number as a Figure with nothing behind it."""
    return v if isinstance(v, Figure) else Figure(v)


def statistic(record):
    """How a record's value is made of its samples: the median, or a best (the least time, the
    most of a rate)."""
    if record.get("statistic") != "best":
        return "median"
    runs = record["samples"]
    return "min" if abs(record["value"] - min(runs)) <= abs(record["value"] - max(runs)) \
        else "max"


def leaf(record):
    """A measured record as a Leaf; None where no runs stand behind it (a count, a limit, a
    prediction, text). A sample is kept with its round (the records of one run share rounds; an
    older record, which kept none, pairs by order) unless other work disturbed it or it lies far
    from the rest (an outlier, named under its table: at the levels the verdicts take, a
    bootstrap of five rounds would otherwise reach it in one resample of twenty)."""
    runs = record.get("samples")
    if not runs or record.get("predicted") or record.get("statistic") in ("limit", "computed") \
            or isinstance(record.get("value"), str):
        return None
    rounds = record.get("rounds") or list(range(len(runs)))
    shares = record.get("shares") or [None] * len(runs)
    odd = set(outliers(runs)) if statistic(record) == "median" else set()  # far from the rest
    #     (a best is its runs' extreme: none is odd)
    clean = [(r, s) for i, (r, s, o) in enumerate(zip(rounds, runs, shares))
             if not disturbed(o) and i not in odd]
    others = [o for o in shares if disturbed(o)]
    return Leaf(named_of(record), statistic(record), tuple(r for r, _ in clean),
                tuple(s for _, s in clean), len(others), max(others, default=0.0),
                record.get("visit_s"), tuple(record.get("trials") or ()))


def disturbed(share):
    return share is not None and share > DISTURBED


def named_of(record):
    keys = " ".join(f"{k} {v}" for k, v in record["keys"].items())
    return f"{record['experiment']}{' ' + keys if keys else ''}: {record['figure']}"


def of(record):
    """A record as a Figure: its value, resting on its runs where it has any."""
    one = leaf(record)
    if one is None:
        return Figure(record["value"], record=record)
    return Figure(record["value"], (one,), lambda s: s[0], record)


def shared(figure):
    """The rounds every leaf of the figure has a clean sample in."""
    if not figure.leaves:
        return []
    common = set(figure.leaves[0].rounds)
    for x in figure.leaves[1:]:
        common &= set(x.rounds)
    return sorted(common)


def interval(figure, confidence, name=""):
    """(low, high): the figure's confidence interval at this level, a percentile bootstrap of
    the rounds its records share, resampled together; the value itself for a figure with no runs
    behind it; None where fewer than MIN_ROUNDS clean rounds are shared. The resamples are
    seeded by the figure's name, so the same records always give the same interval."""
    if not figure.leaves:
        return figure.value, figure.value
    rounds = shared(figure)
    if len(rounds) < MIN_ROUNDS:
        return None
    data = [np.array([dict(zip(x.rounds, x.samples))[r] for r in rounds]) for x in figure.leaves]
    stats = [STATISTICS[x.statistic] for x in figure.leaves]

    def computed(*columns, axis=-1):
        return figure.make([stat(c, axis=axis) for stat, c in zip(stats, columns)])
    if all(np.ptp(d) == 0 for d in data):  # nothing varies: nothing to resample
        v = float(computed(*(d[None, :] for d in data))[0])
        return min(v, figure.value), max(v, figure.value)
    from scipy import stats as sp
    seed = np.random.default_rng(zlib.crc32(name.encode()))
    seeded = {"rng" if "rng" in inspect.signature(sp.bootstrap).parameters  # SciPy 1.15 on
              else "random_state": seed}
    with np.errstate(all="ignore"):
        ci = sp.bootstrap(data, computed, paired=True, vectorized=True,
                          n_resamples=RESAMPLES, confidence_level=confidence,
                          method="percentile", **seeded).confidence_interval
    lo, hi = float(ci.low), float(ci.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return min(lo, figure.value), max(hi, figure.value)


def outliers(samples):
    """The indices of the samples far from the rest: a modified z-score (distance from the
    median over the median absolute deviation) beyond OUTLIER, as hyperfine flags them."""
    from scipy.stats import median_abs_deviation
    x = np.asarray(samples, dtype=float)
    if x.size < 3:
        return []
    mad = median_abs_deviation(x) or np.finfo(float).eps
    return [i for i, z in enumerate(np.abs(x - np.median(x)) / mad) if z > OUTLIER]
