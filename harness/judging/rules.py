"""The rules a claim's judge applies: above, below, within, more, every. A rule is a test of a
figure against an edge, resolved later at the level the report's claims share (intervals.tail):
it holds where the figure's interval lies wholly past the edge, fails (a Fails, saying which way)
where it lies wholly short of it, and cannot tell (None) where it straddles the edge, saying how
close it came and how many more processes would settle it."""
import dataclasses
import math

from harness.keeping.records import Missing, find, number, rows
from harness.post import CUBE_TOKENS, MODEL, NOTES, QUESTION, TYPERS
from harness.terminal import plural
from harness.judging.intervals import MIN_UNITS, Figure, chances, interval, lift, of, quantile

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

    def count(self):
        return 1

    def said(self, v):
        return format(v, self.fmt)


@dataclasses.dataclass(frozen=True)
class Every:
    """All of its parts: tests, or plain verdicts (True, a Fails). edges: its two parts are one
    figure's lower and upper edges (within)."""
    parts: tuple
    edges: bool = False

    def count(self):
        return sum(p.count() for p in self.parts if isinstance(p, (Test, Every)))


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A rule's verdict (True, a Fails, or None: cannot tell), and the test that decided it: the
    one that failed, the one that could not tell and needs the most processes more, or, where
    all hold, the one that held by the least. interval: its figure's (an intervals.Interval;
    None: fewer than MIN_UNITS clean processes behind it)."""
    verdict: object
    test: Test = None
    interval: object = None

    def margin(self):
        """How far the interval clears the edge, as a share of the edge (the closest call)."""
        if self.test is None or self.interval is None:
            return math.inf
        e = self.test.edge
        return ((self.interval.low - e) if self.test.above else (e - self.interval.high)) \
            / max(abs(e), 1e-300)

    def more_processes(self):
        """About how many more processes, as alike as these, would clear the edge with a chance
        of POWER, were the figure truly where it sits (Student's t at the same level, and its
        quantile for the power); None where the estimate sits on the edge, nothing varies, or
        no number up to MOST_UNITS would do: on the edge here."""
        i = self.interval
        if self.test is None or i is None or i.spread <= 0 or i.units < 2:
            return None
        if i.log and (self.test.edge <= 0 or i.value <= 0):
            return None
        scale = math.log if i.log else (lambda v: v)
        gap = abs(scale(i.value) - scale(self.test.edge))
        if gap <= 1e-9:
            return None
        for units in range(i.units + 1, MOST_UNITS + 1):
            if i.half(units) + quantile(POWER, units - 1) * i.spread / math.sqrt(units) < gap:
                return units - i.units
        return None

    def shown(self):
        """The tested figure with its interval and edge: 'the gain 5.31 (4.90 to 5.62), edge 2'."""
        if self.test is None:
            return ""
        t, f = self.test, self.test.figure
        if not f.leaves:
            return f"{t.label} {t.said(f.value)}, edge {t.said(t.edge)}".strip()
        if self.interval is None:
            return f"{t.label} {t.said(f.value)}, edge {t.said(t.edge)}".strip()
        i = self.interval
        return (f"{t.label} {t.said(i.value)} ({t.said(i.low)} to {t.said(i.high)}), edge "
                f"{t.said(t.edge)}").strip()

    def why(self):
        """Why it cannot tell, how close it came, and what would settle it: the processes more
        (--processes counts each kind of rows' processes) and what they cost."""
        f = self.test.figure
        dropped = [x for x in f.leaves if x.dropped]
        apart = any(x.processes for x in f.leaves)  # the units are processes, else rounds
        unit, flag = ("process", "--processes") if apart else ("round", "--runs")
        if self.interval is None:
            if dropped:
                worst = max(dropped, key=lambda x: x.share)
                return (f"disturbed: other work took up to {worst.share:.0%} of the cores during "
                        f"runs of {worst.name}, leaving fewer than {MIN_UNITS} clean "
                        f"{plural(MIN_UNITS, unit)}: rerun when the machine is quieter")
            return (f"fewer than {MIN_UNITS} {plural(MIN_UNITS, unit)} behind "
                    f"{f.leaves[0].name}: rerun with {flag} {MIN_UNITS} or more")
        i = self.interval
        said = (f"{self.shown()}: the interval straddles the edge, from {i.units} "
                f"{plural(i.units, unit)}") + (
            f" (an interval over {WIDE:g}x wide: its {plural(2, unit)} disagree too much to "
            f"mean anything)" if i.low > 0 and i.high / i.low > WIDE else "")
        more = self.more_processes()
        if more is None:
            return said + (f"; on the edge here: {MOST_UNITS} {plural(MOST_UNITS, unit)} as "
                           f"alike as these would not settle it")
        cost = max((x.process_s or 0.0 for x in f.leaves), default=0.0) if apart else sum(
            {x.trials or x.name: x.visit_s or 0.0 for x in f.leaves}.values())
        spent = f", about {cost * more:,.0f} s more" if cost else ""
        return said + (f"; about {more} more {plural(more, unit)} would settle it ({flag} "
                       f"{i.units + more}{spent})")


MOST_UNITS = 64  # processes a why considers at most (--processes takes up to 64)
WIDE = 10.0  # an interval whose high is over this many times its low tells nothing: said so
POWER = 0.8  # what would settle it: processes enough to clear the edge with this chance


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
    return Every((above(x, lo, label=label, fmt=fmt), below(x, hi, label=label, fmt=fmt)),
                 edges=True)


def more(a, b, label="the ratio", way="no more"):
    """Figure a is more than figure b: their ratio above 1 (rounds paired, drift cancelled)."""
    return above(lift(a) / lift(b), 1, way, label)


def every(*parts):
    return Every(parts)


def plain(holds, way=""):
    """A verdict no interval decides (a word, a count): True, or a Fails saying why."""
    return True if holds else Fails(way)


def count(rule):
    """The tests a rule holds (both edges of a within each one): what its claim's share of the
    chance of a wrong "does not hold" is shared among (see resolve)."""
    return rule.count() if isinstance(rule, (Test, Every)) else 0


def chance(rule):
    """The smallest tail at which the rule would be firm, as resolve(rule, tail, tail /
    count(rule)) judges it: the larger of its tests' chances for "holds" (every one must),
    against the smallest of their chances for "does not hold" times their count (any one
    does); None where it can be firm at no tail (no rule, or no test with an interval)."""
    sides = chances_of(rule)
    if sides is None:
        return None
    holds, fails = sides
    return min(holds, fails * max(count(rule), 1))


def chances_of(rule):
    """(the chance for "holds", the smallest test's chance for "does not hold") of a rule (see
    intervals.chances): a plain verdict's are 0 or 1; None where no part has an interval."""
    if isinstance(rule, Test):
        return chances(rule.figure, rule.edge, rule.above)
    if isinstance(rule, Every):
        parts = [chances_of(p) for p in rule.parts]
        if all(p is None for p in parts):
            return None
        return (max(1.0 if p is None else p[0] for p in parts),
                min(1.0 if p is None else p[1] for p in parts))
    if rule is None:
        return None
    return (0.0, 1.0) if rule else (1.0, 0.0)


def resolve(rule, tail_holds, tail_fails=None):
    """A rule's verdict as a Resolved: it holds where every one of its tests' intervals, each
    missing on each side with chance tail_holds, lies past its edge; it does not hold where one
    test's interval at tail_fails (tail_holds where not given) lies short of it. A claim of
    several tests holds only where all of them do, so a wrong "holds" needs a test that does not
    hold in truth to clear its edge: chance tail_holds at most, however many tests (Berger's
    intersection-union test). A wrong "does not hold" can come from any one of them: the claim
    gives each a share of its chance (tail_fails = the claim's over count(rule))."""
    tail_fails = tail_holds if tail_fails is None else tail_fails
    if isinstance(rule, Test):
        ci = interval(rule.figure, tail_holds)
        if ci is None:
            return Resolved(None, rule, None)
        wide = ci if tail_fails == tail_holds else interval(rule.figure, tail_fails)
        past = ci.low > rule.edge if rule.above else ci.high < rule.edge
        short = wide.high <= rule.edge if rule.above else wide.low >= rule.edge
        verdict = True if past else Fails(rule.way) if short else None
        return Resolved(verdict, rule, wide if isinstance(verdict, Fails) else ci)
    if isinstance(rule, Every):
        done = [resolve(part, tail_holds, tail_fails) for part in rule.parts]
        for d in done:
            if d.verdict is not None and not d.verdict:
                return d if isinstance(d.verdict, Fails) else Resolved(Fails(""), d.test,
                                                                       d.interval)
        unknown = [d for d in done if d.verdict is None]
        if unknown:
            return max(unknown, key=lambda d: d.more_processes() or math.inf)
        tested = [d for d in done if d.test is not None]
        return min(tested, key=Resolved.margin) if tested else Resolved(True)
    if rule is None:
        return Resolved(None)
    return Resolved(True) if rule else Resolved(rule if isinstance(rule, Fails) else Fails(""))


def speeds(found, r):
    """The machine's two speeds the figures are held to, as Figures {bytes_per_s, flops_per_s,
    balance}: measured in the run's every round (its "speeds" records, each round's ceiling),
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


# ---- what the claims share: their words' edges, the flags the post measured with, and how
#      they read their figures

ABOUT = 1.5  # "about the same": within this factor either way
TIE = 0.05  # "no later", "no faster": a ratio this much the wrong way or less is a tie (two
#             chunks' nearly equal reads), held like any edge: past it holds, short of it does
#             not, straddling it cannot tell


def no_less(x, way, label="the ratio", fmt=".2f", because=""):
    """x, a ratio that should not fall under 1, above 1 - TIE: a tie within the margin holds
    where its interval clears the margin, and its error is spent like any other test's."""
    return above(x, 1 - TIE, f"{way} by more than {TIE:.0%}" + (f": {because}" if because
                                                                   else ""), label, fmt)
FAR = 4  # "far more": this many times


def sizes(t, experiment, key):
    """The numbers a key takes in an experiment's rows, smallest first: a row without the key,
    or with text there (an older or edited file's), names no size and is left out."""
    return sorted({v for keys in rows(t, experiment) for v in [dict(keys).get(key)]
                   if number(v)})


def further(found, experiment, first, second, per=1):
    """The two rows' distances from their limits (check records; per: a row's keys -> the count
    its ms are divided by), and which is further over: the one that works against a claim that
    the first is the larger."""
    def over(keys):
        n = per(keys) if callable(per) else per
        ms = value(found, "check", "measured", experiment=experiment, **keys) / n
        limit = value(found, "check", "limit", experiment=experiment, **keys) / n
        return ms, limit
    try:
        (a, la), (b, lb) = over(first[1]), over(second[1])
    except Missing:
        return ""
    unit = " a token" if callable(per) else ""
    said = (f"{first[0]}: {a:.2f} ms{unit}, {a / la:.2f}x its limit of {la:.2f} (+{a - la:.2f}); "
            f"{second[0]}: {b:.2f} ms{unit}, {b / lb:.2f}x its limit of {lb:.2f} (+{b - lb:.2f})")
    if b / lb > a / la:
        return said + (f": {second[0]} is further over its limit, which shrinks {first[0]}'s "
                       f"lead: the suite's distance from the limits, not the machine")
    return said + f": {first[0]} is the further over its limit"


SMALL = (("model", MODEL),)  # the flags each claim's figures were measured with, as the post's
WITH_NOTES = (*SMALL, ("notes", NOTES))
SERVER = (*WITH_NOTES, ("typers", TYPERS), ("question", QUESTION))
CUBE = (*SMALL, ("tokens", CUBE_TOKENS))
NOT_PRINTED = "in words only"  # the post gives no figure: judged on this machine's figures
