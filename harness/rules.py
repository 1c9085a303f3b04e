"""The rules a claim's judge applies to figures over their runs: about, above, below, more, within.
Each holds (True) where the figure's runs' range holds, fails (a Fails, saying which way) where
all of it fails, and cannot tell (None) where it straddles the margin."""
import dataclasses
import types

from harness.records import Figure, Missing, find, span
from harness.timing import BETWEEN

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "cannot tell here"

ABOUT = 1.5  # "about X" holds within this factor of X either way: as the post means it
FREEZE = 10  # a gap this many times the typers' normal one is "one huge freeze" (the post's: 40x)
APART = BETWEEN ** 0.5  # a measured figure's range, widened either way (see figure())


@dataclasses.dataclass(frozen=True)
class Claim:
    """script: whose sheets tell; says: the post's words; post: the post's figure; rule: the
    claim as judged, in words (where it differs from the post's words, it says why); judge(
    records, roofs) -> (this machine's figure in words, True, a Fails, or None for cannot tell);
    rows: the check table's rows whose distance from their limits say why it does not hold,
    each (experiment, its keys); explain(records) -> why it does not hold, where its rows'
    distances alone would mislead (a ratio of two rows: which of them is further over its
    limit)."""
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
    effect: str = ""  # a "because": the claim (says) it explains, judged only where that holds
    explain: object = None
    construction: bool = False  # at the machine's limits it holds by how the limit is made

    @property
    def measured(self):
        """Whether its verdict rests on the run's timings."""
        return self.basis == "timings"


@dataclasses.dataclass(frozen=True)
class Fails:
    """A rule that does not hold, and which way: 'below the post's 14 by more than 1.5x'."""
    way: str

    def __bool__(self):
        return False


def figure(found, experiment, name, /, **keys):
    """A figure of the records, with the range of the runs behind it (records.Figure)."""
    return find(found, experiment, name, **keys)


def apart(x):
    """x's range as a rule weighs it: a measured one widened either way by how far separate
    runs of it may differ (BETWEEN's square root), since what one run shows, another run on the
    same machine may not; a count, a limit or a word as it is."""
    x = span(x)
    return Figure(x.value, x.lo / APART, x.hi * APART, x.record, True) if x.measured else x


def value(found, experiment, name, /, **keys):
    """A figure of the records with no runs behind it: a count, the accounting, a word."""
    return find(found, experiment, name, **keys).value


def speeds(r):
    """The machine's speeds the figures are held to: each a Figure that spans the speeds
    measured at the start and the end of the run, where it kept both (a rule whose margin the
    machine's own drift crosses cannot tell); Missing where the run saved none."""
    if r is None:
        raise Missing("the machine's speeds")
    if r.start is None or r.end is None:
        return r
    moved = {k: Figure(getattr(r, k), min(getattr(r.start, k), getattr(r.end, k)),
                       max(getattr(r.start, k), getattr(r.end, k)))
             for k in ("bytes_per_s", "flops_per_s")}
    return types.SimpleNamespace(**moved, balance=moved["flops_per_s"] / moved["bytes_per_s"])


def tri(holds, fails, way):
    """A verdict: True where the runs' range holds, a Fails where it all fails, else None."""
    return True if holds else Fails(way) if fails else None


def about(x, post, factor=ABOUT):
    """x is about the post's figure: within `factor` of it either way, over its runs' range."""
    x = apart(x)
    if x.hi < post / factor:
        return Fails(f"below the post's {post:g} by more than {factor:g}x")
    return tri(post / factor <= x.lo and x.hi <= post * factor, x.lo > post * factor,
               f"above the post's {post:g} by more than {factor:g}x")


def above(x, bound):
    x = apart(x)
    return tri(x.lo > bound, x.hi <= bound, f"not above {bound:g}")


def below(x, bound):
    x = apart(x)
    return tri(x.hi < bound, x.lo >= bound, f"not below {bound:g}")


def within(x, lo, hi):
    """lo < x < hi over its runs' range; fails, saying which side, where all of it is out."""
    x = apart(x)
    if x.hi <= lo:
        return Fails(f"not above {lo:g}")
    return tri(lo < x.lo and x.hi < hi, x.lo >= hi, f"not below {hi:g}")


def more(a, b):
    """Figure a is more than figure b: True, a Fails (no more, not even equal figures with no
    spread, as a limit's are), or None when their runs' ranges overlap (measured, as far apart
    as separate runs may be: see apart())."""
    r = apart(span(a) / span(b))
    return tri(r.lo > 1, r.hi <= 1, "no more")


def every(*verdicts):
    """All of the verdicts: the first that fails if any does (a plain False among them fails
    too), None if any cannot tell, else True."""
    for v in verdicts:
        if v is not None and not v:
            return v if isinstance(v, Fails) else Fails("")
    return None if None in verdicts else True
