"""How sure a figure is, from the run's own samples. A judge computes its quantity from records
as a Figure: the value, and how to compute it again from the figure of each record it read. The
quantity is computed within each round its records share (a ratio of two rows measured moments
apart, a share, a difference: the machine's drift between rounds cancels in it), then averaged
over each process's rounds on the log scale, and its interval is Student's t over the processes.
The processes, not the rounds, are the independent samples: a process's one draw of memory and
threads moves all of its rounds together (the forklift read 1.5x faster in one process than in
the next, rounds alike within each). Its half-width is WIDEN times t's, so that its misses stay
within 2x its stated chance for the shapes of process effect these machines show, normal or not
(tests/test_intervals.py simulates them). A sample other work disturbed backs no
interval; every other sample counts, far from the rest or not (a far one is named under its
table, never dropped)."""
import dataclasses
import math

import numpy as np

from harness.measuring.timing import DISTURBED  # a sample other work took more of the cores during

FAMILY = 0.05  # the chance of any wrong firm verdict among a report's claims, at most: each
#                script's claims an equal share of it a claim, spent among them by Holm's
#                step-down (holm(); see rules.resolve for a claim's several tests)
MIN_UNITS = 3  # fewer clean processes (or rounds, where one process measured) back no interval


def tail(claims, tests=1):
    """The chance that one test's interval lies wholly past its true value on a given side,
    among `claims` claims of `tests` tests each: a firm verdict is wrong only where its interval
    misses the truth on the side of the edge, so each side takes FAMILY / (claims x tests)."""
    return FAMILY / max(claims, 1) / max(tests, 1)


def holm(chances, alpha):
    """Holm's step-down: each claim's chance (the smallest level at which it is firm; None: it
    cannot be firm at any) -> the tail each is judged at, so that the chance of any wrong firm
    verdict among them stays under alpha, whatever their dependence. The clearest first, at
    alpha / m; each firm one lets the next be judged at alpha / (m - 1), and so on, until one
    is not firm at its step: it and every claim after it are judged at that step's tail (and
    cannot be firm there). A claim with no chance takes the last step's."""
    ranked = sorted((c, i) for i, c in enumerate(chances) if c is not None)
    tails, m = [None] * len(chances), len(ranked)
    step, waiting = alpha / max(m, 1), False
    for k, (chance, i) in enumerate(ranked):
        step = step if waiting else alpha / (m - k)
        tails[i] = step
        waiting = waiting or chance >= step  # the first not firm at its step: the rest wait
    return [step if t is None else t for t in tails]


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One record as a judge reads it: its clean samples, each with the round and process it was
    measured in (processes: None where one process measured them all, or the record is older);
    dropped: how many samples other work disturbed (and the most of the cores it took, share),
    which back nothing."""
    name: str
    rounds: tuple
    samples: tuple
    processes: tuple = None
    dropped: int = 0
    share: float = 0.0
    visit_s: float = None  # what one more round of the record's rows takes, where known
    trials: tuple = ()  # the trials (rows) the record's samples were measured in
    process_s: float = None  # what one more process of every kind takes (--processes + 1)


class Figure:
    """A quantity computed from records: its value (from the records' own values), the records
    it rests on (leaves) and make(values), the same quantity from each leaf's value, in order
    (arrays of them alike: one per round), so that it can be computed within each round. A plain
    number is a Figure with no leaves. Only + - * / are needed by the judges."""

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


def leaf(record):
    """A measured record as a Leaf; None where no runs stand behind it (a count, a limit, a
    prediction, text). A sample is kept with its round (the records of one run share rounds; an
    older record, which kept none, pairs by order) and process, unless other work disturbed
    it."""
    runs = record.get("samples")
    if not runs or record.get("predicted") or record.get("statistic") in ("limit", "computed") \
            or isinstance(record.get("value"), str):
        return None
    rounds = record.get("rounds") or list(range(len(runs)))
    shares = record.get("shares") or [None] * len(runs)
    where = record.get("processes") or [None] * len(runs)
    clean = [(r, s, p) for r, s, o, p in zip(rounds, runs, shares, where) if not disturbed(o)]
    others = [o for o in shares if disturbed(o)]
    return Leaf(named_of(record), tuple(r for r, _, _ in clean), tuple(s for _, s, _ in clean),
                tuple(p for *_, p in clean) if record.get("processes") else None,
                len(others), max(others, default=0.0), record.get("visit_s"),
                tuple(record.get("trials") or ()), record.get("process_s"))


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


@dataclasses.dataclass(frozen=True)
class Interval:
    """A figure's estimate and interval: value, its center (the geometric mean of its processes'
    quantities, or their mean where one may be 0 or less); low and high; units, the processes
    (or rounds) behind it; rounds; tail, the chance it misses on each side; spread, the units'
    standard deviation (on the log scale where log)."""
    value: float
    low: float
    high: float
    units: int = 0
    rounds: int = 0
    tail: float = 0.0
    spread: float = 0.0
    log: bool = False

    @property
    def level(self):
        """Its coverage: the chance that it holds the true value."""
        return 1 - 2 * self.tail

    def half(self, units):
        """Its half-width, on its own scale, were it made of `units` units as alike as these."""
        return WIDEN * quantile(1 - self.tail, units - 1) * self.spread / math.sqrt(units)


def per_round(figure, rounds):
    """The figure's quantity within each of these rounds, from each leaf's sample in it."""
    data = [np.array([dict(zip(x.rounds, x.samples))[r] for r in rounds], dtype=float)
            for x in figure.leaves]
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(figure.make(data), dtype=float), (len(rounds),))


def units_of(figure, rounds):
    """Each round's unit: its process, where its records say (the same for every leaf), else
    the round itself."""
    where = {}
    for x in figure.leaves:
        if x.processes is not None:
            where.update(zip(x.rounds, x.processes))
    return [where.get(r, ("round", r)) for r in rounds]


def interval(figure, tail_each):
    """The figure's Interval: each unit's quantity (the mean of its rounds', on the log scale
    where every quantity is above 0), then Student's t over the units, each side missing with
    chance tail_each; the value itself for a figure with no runs behind it; None where fewer
    than MIN_UNITS units have clean samples of every leaf, or the quantity is not finite."""
    if not figure.leaves:
        return Interval(figure.value, figure.value, figure.value)
    made = unit_means(figure)
    if made is None:
        return None
    means, rounds, log = made
    low, high = (float(v[0]) for v in student(means[None, :], tail_each))
    center = float(np.mean(means))
    return Interval(at(center, log), at(low, log), at(high, log), len(means), rounds,
                    tail_each, float(np.std(means, ddof=1)), log)


def unit_means(figure):
    """(each unit's quantity: the mean of its rounds', on the log scale where every quantity is
    above 0; the rounds behind them; whether on the log scale), or None where fewer than
    MIN_UNITS units have clean samples of every leaf, or a quantity is not finite."""
    rounds = shared(figure)
    if not rounds:
        return None
    q = per_round(figure, rounds)
    if not np.all(np.isfinite(q)):
        return None
    log = bool(np.all(q > 0))
    y = np.log(q) if log else q
    units = {}
    for u, v in zip(units_of(figure, rounds), y):
        units.setdefault(u, []).append(v)
    means = np.array([np.mean(v) for v in units.values()])
    return (means, len(rounds), log) if len(means) >= MIN_UNITS else None


def chances(figure, edge, above):
    """The figure against an edge, one-sided: (the chance of an estimate at least this far past
    the edge where the truth lies on it, the chance of one at least this far short of it), by
    Student's t over the units on the interval's scale: the smallest tail at which interval()
    lies wholly past the edge, and wholly short of it. A figure with no runs behind it: 0 or
    1 each. None where interval() would give none."""
    if not figure.leaves:
        past = figure.value > edge if above else figure.value < edge
        short = figure.value <= edge if above else figure.value >= edge
        return float(not past), float(not short)
    made = unit_means(figure)
    if made is None:
        return None
    means, _, log = made
    if log and edge <= 0:  # every quantity above 0: past an edge at 0 or under, surely
        return (0.0, 1.0) if above else (1.0, 0.0)
    e = math.log(edge) if log else edge
    n, center, spread = len(means), float(np.mean(means)), float(np.std(means, ddof=1))
    if spread == 0:
        t = math.inf if center > e else -math.inf if center < e else 0.0
    else:
        t = (center - e) / (WIDEN * spread / math.sqrt(n))  # (student()'s widened scale)
    below_t = cdf(t, n - 1)  # the chance of an estimate this low or lower, were it the edge
    return (1 - below_t, below_t) if above else (below_t, 1 - below_t)


def cdf(t, df):
    """Student's t distribution's cumulative chance at t (SciPy's special function)."""
    from scipy.special import stdtr
    return float(stdtr(df, t)) if math.isfinite(t) else float(t > 0)


def student(units, tail_each):
    """Student's t interval of the mean of each row of units (one row of processes' quantities
    each), each side missing with chance tail_each, its half-width WIDEN times t's: ->
    (lows, highs)."""
    n = units.shape[1]
    center = units.mean(axis=1)
    half = WIDEN * quantile(1 - tail_each, n - 1) * units.std(axis=1, ddof=1) / math.sqrt(n)
    return center - half, center + half


WIDEN = 1.5  # Student's t assumes the processes' draws are normal; on these machines they are
#              not always: two states of the machine a round falls in, one slow process in ten,
#              drift from one process to the next. At a report's tail and 3 to 8 processes, t's
#              own width missed those up to 5x as often as it said; this much wider, each stays
#              within 2x (tests/test_intervals.py simulates all four, normal too)


def quantile(p, df):
    """Student's t distribution's p-quantile with df degrees of freedom (SciPy's special
    function: scipy.stats would take a second to import in every run)."""
    from scipy.special import stdtrit
    return float(stdtrit(df, p))


def at(y, log):
    """A point of an interval's scale (a log where log) as a figure."""
    return math.exp(y) if log else y


def outliers(samples):
    """The indices of the samples far from the rest: a modified z-score (distance from the
    median over the median absolute deviation) beyond OUTLIER, as hyperfine flags them. They are
    named under their table, and count in every figure and interval like the rest."""
    x = np.asarray(samples, dtype=float)
    if x.size < 3:
        return []
    mad = np.median(np.abs(x - np.median(x))) or np.finfo(float).eps  # the median absolute
    #                                                                    deviation
    return [i for i, z in enumerate(np.abs(x - np.median(x)) / mad) if z > OUTLIER]


OUTLIER = 1.4826 * 10  # a sample further than this many MADs from the median is named:
#                        hyperfine's threshold (10 standard deviations, the MAD made one)


def centered(record):
    """The record with its value its interval's center over the run's processes (the estimate a
    verdict on it says), its samples alike rescaled, where an interval stands behind it."""
    made = interval(of(record), FAMILY)
    if made is None:
        return record
    return {**record, "value": made.value, "statistic": "mean"}
