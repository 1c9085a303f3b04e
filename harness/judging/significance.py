"""Whether a difference between two runs is real: each figure's ratio one way (faster or slower)
and, where both sides kept their samples, Welch's t-test of one side's units against the other's
on the log scale (a unit: a process's mean sample, or a round's where one process measured
them, as a verdict's interval counts them); the p-values of one comparison's figures corrected
together (Benjamini and Hochberg's false-discovery rate); a change only where the corrected
test finds one and it is at least --min-change percent; not significant otherwise."""
import math

import numpy as np

from harness.keeping.records import kind
from harness.measuring.timing import DISTURBED

MIN_CHANGE = 10.0  # percent: a smaller change, even a significant one, is no change (pyperf's
#                    --min-speed idea): two quiet runs here differ by a few percent on a figure
ALPHA = 0.05  # of the changes a comparison calls, at most this share expected false
LEVEL = 0.95  # a ratio's interval between two runs: Welch's, each figure's own (not corrected)
MIN_UNITS = 2  # a side of fewer units (processes, or rounds) has no spread to test against


def units(record):
    """A record's units on the log scale: the mean log sample of each process its clean samples
    (those other work did not disturb, as its figure's) were measured in, or each sample where
    one process measured them all; None where it kept no samples above 0."""
    runs = record.get("samples")
    if not runs or not all(isinstance(s, (int, float)) and s > 0 for s in runs):
        return None
    shares = record.get("shares") or [None] * len(runs)
    where = record.get("processes") or list(range(len(runs)))
    by = {}
    for s, share, p in zip(runs, shares, where):
        if share is None or share <= DISTURBED:
            by.setdefault(p, []).append(math.log(s))
    return [sum(v) / len(v) for v in by.values()] or None


def speedup(first, other):
    """How much faster the other run is on a figure: a time's first / other, a rate's other /
    first, higher for anything else. first, other: (value, units or None, unit)."""
    power = -1 if kind(first[2]) == "time" else 1
    return (other[0] / first[0]) ** power


def significance(first, other):
    """The two-sided p-value of Welch's t-test of the two sides' units; None where a side kept
    no samples; "few" where a side has fewer than MIN_UNITS units (no spread to test against)."""
    a, b = first[1], other[1]
    if not a or not b:
        return None
    if min(len(a), len(b)) < MIN_UNITS:
        return "few"
    if np.ptp(a) == 0 and np.ptp(b) == 0:  # nothing varies: the same, or certainly not
        return 1.0 if a[0] == b[0] else 0.0
    p = welch(a, b)
    return p if math.isfinite(p) else 1.0


def welch(a, b):
    """Welch's t-test's two-sided p-value (scipy.stats.ttest_ind with equal_var=False): the
    difference of the means over its standard error, on the Welch-Satterthwaite degrees of
    freedom, through SciPy's special function (scipy.stats would take 2 s to import in every
    compare.py)."""
    from scipy.special import stdtr
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    return float(2 * stdtr(df, -abs(t)))


def interval(first, other, level=LEVEL):
    """The ratio's interval (as speedup() says it) at this level: Welch's for the difference of
    the two sides' mean units on the log scale, on the Welch-Satterthwaite degrees of freedom,
    turned back into a ratio; None where a side has fewer than MIN_UNITS units."""
    from scipy.special import stdtrit
    a, b = first[1], other[1]
    if not a or not b or min(len(a), len(b)) < MIN_UNITS:
        return None
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    power = -1 if kind(first[2]) == "time" else 1
    middle = power * (b.mean() - a.mean())
    if va + vb == 0:
        return math.exp(middle), math.exp(middle)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(stdtrit(df, 1 - (1 - level) / 2)) * math.sqrt(va + vb)
    return math.exp(middle - half), math.exp(middle + half)


def judged(first, other):
    """A figure's comparison, before the correction: {"ratio", "p" (its own test's; None
    without samples, "few" with too few units), "units": (a side's, the other's), "interval":
    the ratio's (None without)}."""
    return {"ratio": speedup(first, other), "p alone": significance(first, other),
            "units": (len(first[1] or ()), len(other[1] or ())),
            "interval": interval(first, other)}


def corrected(ps):
    """Benjamini and Hochberg's adjusted p-values of a comparison's tests, in their order: a
    change is called where its adjusted p is under ALPHA, so that of all the changes called, at
    most ALPHA are expected false however many figures are compared."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 1.0
    for rank in range(len(ps), 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * len(ps) / rank)
        out[i] = running
    return out


def settle(j, p, unit, min_change):
    """A judged figure with its corrected p: its verdict, faster, slower, higher, lower, not
    significant, no change (significant, under min_change percent) or untested."""
    ratio = j["ratio"]
    up, down = ("faster", "slower") if kind(unit) != "other" else ("higher", "lower")
    out = {**j, "p": p, "verdict": up if ratio >= 1 else down}
    if j["p alone"] == "few":
        return {**out, "verdict": "untested", "p": None}
    if j["p alone"] is None or p is None:  # no samples, or a figure that backs no verdict
        return out
    if p >= ALPHA:
        out["verdict"] = "not significant"
    elif abs(math.log(ratio)) < math.log(1 + min_change / 100):
        out["verdict"] = "no change"
    return out


def verdict(j, unit, min_change=MIN_CHANGE):
    """A settled ratio (see settle()) in words, one direction: '1.30x faster (p 0.008)', or
    'not significant (1.03x faster, p 0.31)', or 'no change (1.04x slower, under 10%)'; a '*'
    where there are no samples to test; too few units said so."""
    ratio = j["ratio"]
    up, down = ("faster", "slower") if kind(unit) != "other" else ("higher", "lower")
    said = f"{ratio:.2f}x {up}" if ratio >= 1 else f"{1 / ratio:.2f}x {down}"
    if j.get("verdict") == "untested":
        a, b = j["units"]
        return (f"{said}, untested: {min(a, b)} {'process' if min(a, b) == 1 else 'processes'} "
                f"on a side, no spread to test against (rerun with --processes 3 or more)")
    if j["p"] is None:
        return said + " *"
    within = between(j.get("interval"), ratio >= 1)
    if j["verdict"] == "not significant":
        return f"not significant ({said}{within}, p {j['p']:.2g})"
    if j["verdict"] == "no change":
        return f"no change ({said}{within}, under {min_change:g}%)"
    return f"{said} ({within[2:] + ', ' if within else ''}p {j['p']:.2g})"


def between(ratios, up):
    """A ratio's interval in the words its ratio is said in: ', 95% 1.21x to 1.40x' (the
    slower side's as 1 / ratio); '' where there is none."""
    if not ratios:
        return ""
    lo, hi = ratios if up else (1 / ratios[1], 1 / ratios[0])
    return f", {LEVEL:.0%} {lo:.2f}x to {hi:.2f}x"


def geometric_mean(ratios):
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
