"""The rules a claim's judge applies to figures over their runs: about, above, below, more.
Each holds (True) where the figure's runs' range holds, fails (False) where all of it fails,
and cannot tell (None) where it straddles the margin."""
import dataclasses

from harness.records import Missing, find, span

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "cannot tell here"

ABOUT = 1.5  # "about X" holds within this factor of X either way: as the post means it
FREEZE = 10  # a gap this many times the typers' normal one is "one huge freeze" (the post's: 40x)


@dataclasses.dataclass(frozen=True)
class Claim:
    """script: whose sheets tell; says: the post's words; post: the post's figure; rule: when it
    holds, in words; judge(records, roofs) -> (this machine's figure in words, True, False, or
    None for cannot tell); rows: the check table's rows that say why when it does not hold,
    each (experiment, its keys)."""
    script: str
    says: str
    post: str
    rule: str
    judge: object
    rows: tuple = ()
    why: str = ""  # why it may not hold, where no row of the check table says
    needs: tuple = ()  # the flags the post's figure was measured with: (flag, value)
    measured: bool = True  # its verdict rests on timings (not on the accounting alone)
    predicted: bool = False  # judged on a prediction (--predict), and only there


def figure(found, experiment, name, /, **keys):
    """A figure of the records, with the range of the runs behind it (records.Figure)."""
    return find(found, experiment, name, **keys)


def value(found, experiment, name, /, **keys):
    """A figure of the records with no runs behind it: a count, the accounting, a word."""
    return find(found, experiment, name, **keys).value


def speeds(r):
    """The machine's Speeds the figures are held to, or Missing where the run saved none."""
    if r is None:
        raise Missing("the machine's speeds")
    return r


def tri(holds, fails):
    """A verdict: True where the runs' range holds, False where it all fails, else None."""
    return True if holds else False if fails else None


def about(x, post, factor=ABOUT):
    """x is about the post's figure: within `factor` of it either way, over its runs' range."""
    x = span(x)
    return tri(post / factor <= x.lo and x.hi <= post * factor,
               x.hi < post / factor or x.lo > post * factor)


def above(x, bound):
    x = span(x)
    return tri(x.lo > bound, x.hi <= bound)


def below(x, bound):
    x = span(x)
    return tri(x.hi < bound, x.lo >= bound)


def more(a, b):
    """Figure a is more than figure b: True, False (no more, not even equal figures with no
    spread, as a limit's are), or None when their runs' ranges overlap."""
    return tri(a.lo > b.hi, a.hi <= b.lo)


def every(*verdicts):
    """All of the verdicts: False if any fails, None if any cannot tell, else True."""
    return False if False in verdicts else None if None in verdicts else True
