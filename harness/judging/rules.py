"""The rules a claim's judge applies: above, below, within, more, every. A rule is a test of a
figure against an edge, resolved later at the run's confidence level (intervals.level): it holds
where the figure's interval lies wholly past the edge, fails (a Fails, saying which way) where it
lies wholly short of it, and cannot tell (None) where it straddles the edge, saying how close it
came and how many more rounds would settle it."""
import dataclasses
import math

from harness.keeping.records import Missing, find
from harness.judging.intervals import Figure, interval, lift, of, shared

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "cannot tell here"

FREEZE = 10  # a gap this many times the typers' normal one is "one huge freeze" (the post's: 40x)


@dataclasses.dataclass(frozen=True)
class Claim:
    """script: whose sheets tell; says: the post's words; post: the post's figure; rule: the
    claim as judged, in words, with its edge where the post's conclusion would change (not the
    post's machine's number); judge(records, roofs) -> (this machine's figure in words, a rule
    or a plain verdict); rows: the check table's rows whose distance from their limits say why
    it does not hold, each (experiment, its keys); fails_on: the kind of machine on which it
    would not hold; explain(records) -> why it does not hold, where its rows' distances alone
    would mislead (a ratio of two rows: which of them is further over its limit)."""
    script: str
    says: str
    post: str
    rule: str
    judge: object
    rows: tuple = ()
    why: str = ""  # why it may not hold, where no row of the check table says
    needs: tuple = ()  # the flags the post's figure was measured with: (flag, value)
    basis: str = "timings"  # what its verdict rests on: the run's timings; "accounting", the
    #                         model's counts alone (the same on every machine); or "speeds",
    #                         the counts at this machine's two speeds
    predicted: bool = False  # judged on a prediction (--predict), and only there
    effect: str = ""  # a "because": the claim (says) it explains
    explain: object = None
    construction: bool = False  # at the machine's limits it holds by how the limit is made
    fails_on: str = ""  # a machine on which it would not hold
    gpu: bool = False  # judged on a run whose arrays lived on a GPU only (--device torch:cuda)

    @property
    def measured(self):
        """Whether its verdict rests on the run's timings."""
        return self.basis == "timings"


@dataclasses.dataclass(frozen=True)
class Fails:
    """A rule that does not hold, and which way: 'not above 10'."""
    way: str

    def __bool__(self):
        return False


@dataclasses.dataclass(frozen=True)
class Test:
    """One figure against one edge: past it (above, or below where not above) it holds. label
    and fmt: how the figure is said ('the gain', '.2f')."""
    figure: Figure
    edge: float
    above: bool
    way: str  # how it fails, in words
    label: str = ""
    fmt: str = ".3g"
    ties: bool = False  # an interval that straddles the edge holds too: it fails only where
    #                     it lies wholly short of it ("no longer question is read faster")

    def count(self):
        return 1

    def said(self, v):
        return format(v, self.fmt)


@dataclasses.dataclass(frozen=True)
class Every:
    """All of its parts: tests, or plain verdicts (True, a Fails)."""
    parts: tuple

    def count(self):
        return sum(p.count() for p in self.parts if isinstance(p, (Test, Every)))


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A rule's verdict at a confidence level (True, a Fails, or None: cannot tell), and the test
    that decided it: the one that failed, the one that could not tell and needs the most rounds
    more, or, where all hold, the one that held by the least. interval: its figure's (None:
    fewer than MIN_ROUNDS clean rounds); rounds: the clean rounds behind it."""
    verdict: object
    test: Test = None
    interval: tuple = None
    rounds: int = 0

    def margin(self):
        """How far the interval clears the edge, as a share of the edge (the closest call)."""
        if self.test is None or self.interval is None:
            return math.inf
        lo, hi = self.interval
        e = self.test.edge
        return ((lo - e) if self.test.above else (e - hi)) / max(abs(e), 1e-300)

    def more_rounds(self):
        """About how many more rounds would narrow the interval past the edge (an interval
        narrows as the square root of its rounds); None where the value sits on the edge or
        there is no interval."""
        if self.test is None or self.interval is None:
            return None
        v, e = self.test.figure.value, self.test.edge
        half = (v - self.interval[0]) if v > e else (self.interval[1] - v)
        gap = abs(v - e)
        if gap <= 1e-9 * max(abs(v), 1e-300) or not math.isfinite(half):
            return None
        return max(1, math.ceil(self.rounds * (half / gap) ** 2 * 1.1) - self.rounds)

    def shown(self):
        """The tested figure with its interval and edge: 'the gain 5.31 (4.90 to 5.62), edge 2'."""
        if self.test is None:
            return ""
        t, f = self.test, self.test.figure
        if not f.leaves:
            return f"{t.label} {t.said(f.value)}, edge {t.said(t.edge)}".strip()
        ci = ("" if self.interval is None else
              f" ({t.said(self.interval[0])} to {t.said(self.interval[1])})")
        return f"{t.label} {t.said(f.value)}{ci}, edge {t.said(t.edge)}".strip()

    def why(self):
        """Why it cannot tell, how close it came, and what would settle it."""
        f = self.test.figure
        dropped = [x for x in f.leaves if x.dropped]
        if self.interval is None:
            if dropped:
                worst = max(dropped, key=lambda x: x.share)
                return (f"disturbed: other work took up to {worst.share:.0%} of the cores during "
                        f"runs of {worst.name}, leaving fewer than 3 clean rounds: rerun when "
                        f"the machine is quieter")
            return (f"fewer than 3 rounds behind {f.leaves[0].name}: rerun with --runs 3 or "
                    f"more")
        said = f"{self.shown()}: the interval straddles the edge, from {self.rounds} rounds"
        more = self.more_rounds()
        if more is None:
            return said + "; it sits on the edge: no number of rounds would settle it"
        cost = sum({x.trials or x.name: x.visit_s or 0 for x in f.leaves}.values())
        spent = (f" (with --time-budget: their visits take about {cost * more:,.0f} s, and a "
                 f"worker's start more)") if cost else ""
        return said + f"; about {more} more rounds of its rows{spent} would settle it"


def figure(found, experiment, name, /, **keys):
    """A figure of the records, resting on the rounds behind it (intervals.Figure)."""
    return of(find(found, experiment, name, **keys))


def value(found, experiment, name, /, **keys):
    """A figure of the records with no runs behind it: a count, the accounting, a word."""
    return find(found, experiment, name, **keys)["value"]


def above(x, edge, way=None, label="", fmt=".3g"):
    return Test(lift(x), edge, True, way or f"not above {edge:{fmt}}", label, fmt)


def below(x, edge, way=None, label="", fmt=".3g"):
    return Test(lift(x), edge, False, way or f"not below {edge:{fmt}}", label, fmt)


def within(x, lo, hi, label="", fmt=".3g"):
    """lo < x < hi; fails, saying which side, where its interval is all out."""
    return Every((above(x, lo, label=label, fmt=fmt), below(x, hi, label=label, fmt=fmt)))


def more(a, b, label="the ratio", way="no more"):
    """Figure a is more than figure b: their ratio above 1 (rounds paired, drift cancelled)."""
    return above(lift(a) / lift(b), 1, way, label)


def every(*parts):
    return Every(parts)


def plain(holds, way=""):
    """A verdict no interval decides (a word, a count): True, or a Fails saying why."""
    return True if holds else Fails(way)


def count(rule):
    """The tests a rule holds: what a run's confidence level is shared among."""
    return rule.count() if isinstance(rule, (Test, Every)) else 0


def resolve(rule, confidence, name=""):
    """A rule's verdict at this confidence level, as a Resolved."""
    if isinstance(rule, Test):
        ci = interval(rule.figure, confidence, name)
        rounds = len(shared(rule.figure))
        if ci is None:
            return Resolved(None, rule, None, rounds)
        lo, hi = ci
        past = lo > rule.edge if rule.above else hi < rule.edge
        short = hi <= rule.edge if rule.above else lo >= rule.edge
        if rule.ties:  # an equal figure is no failure: only one wholly short of the edge
            short = hi < rule.edge if rule.above else lo > rule.edge
        verdict = True if past or rule.ties and not short else Fails(rule.way) if short \
            else None
        return Resolved(verdict, rule, ci, rounds)
    if isinstance(rule, Every):
        done = [resolve(part, confidence, f"{name}/{i}") for i, part in enumerate(rule.parts)]
        for d in done:
            if d.verdict is not None and not d.verdict:
                return d if isinstance(d.verdict, Fails) else Resolved(Fails(""), d.test,
                                                                       d.interval, d.rounds)
        unknown = [d for d in done if d.verdict is None]
        if unknown:
            return max(unknown, key=lambda d: d.more_rounds() or math.inf)
        tested = [d for d in done if d.test is not None]
        return min(tested, key=Resolved.margin) if tested else Resolved(True)
    if rule is None:
        return Resolved(None)
    return Resolved(True) if rule else Resolved(rule if isinstance(rule, Fails) else Fails(""))


def speeds(found, r):
    """The machine's two speeds the figures are held to, as Figures {bytes_per_s, flops_per_s,
    balance}: measured in the run's every round (its "speeds" records, each the best of them),
    else the speeds the run held its rows to (given, or saved by an older run) with nothing
    behind them. Missing where there are neither."""
    try:
        forklift = figure(found, "speeds", "memory speed") * 1e9
        workbench = figure(found, "speeds", "math speed") * 1e9
    except Missing:
        if r is None:
            raise Missing("the machine's speeds") from None
        forklift, workbench = lift(r.bytes_per_s), lift(r.flops_per_s)
    return _Speeds(forklift, workbench, workbench / forklift)


@dataclasses.dataclass(frozen=True)
class _Speeds:
    bytes_per_s: Figure
    flops_per_s: Figure
    balance: Figure
