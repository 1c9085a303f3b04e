"""Whether a difference between two runs is real: each figure's ratio one way (faster or slower)
and, where both sides kept their rounds' samples, the Mann-Whitney U test of one side's samples
against the other's (as Google Benchmark's compare.py tests two runs): a change only where the
test finds one and it is at least --min-change percent; not significant otherwise."""
import math

from harness.keeping.records import kind

MIN_CHANGE = 10.0  # percent: a smaller change, even a significant one, is no change (pyperf's
#                    --min-speed idea): two quiet runs here differ by a few percent on a figure
ALPHA = 0.05  # a two-sided p-value under this is significant (Google Benchmark's default)


def speedup(first, other):
    """How much faster the other run is on a figure: a time's first / other, a rate's other /
    first, higher for anything else. first, other: (value, samples or None, unit)."""
    power = -1 if kind(first[2]) == "time" else 1
    return (other[0] / first[0]) ** power


def significance(first, other):
    """The two-sided p-value of the Mann-Whitney U test of the two sides' samples; None where a
    side kept none, or too few for any test to tell (fewer than 3)."""
    if not first[1] or not other[1] or min(len(first[1]), len(other[1])) < 3:
        return None
    from scipy.stats import mannwhitneyu
    return float(mannwhitneyu(first[1], other[1], alternative="two-sided").pvalue)


def judged(first, other, min_change):
    """A figure's comparison as fields: {"ratio", "p" (None without samples), "verdict": faster,
    slower, higher, lower, not significant, or no change (significant, under min_change
    percent)}. first, other: (value, samples or None, unit)."""
    unit = first[2]
    ratio, p = speedup(first, other), significance(first, other)
    up, down = ("faster", "slower") if kind(unit) != "other" else ("higher", "lower")
    out = {"ratio": ratio, "p": p, "verdict": up if ratio >= 1 else down}
    if p is None:
        return out
    if p >= ALPHA:
        out["verdict"] = "not significant"
    elif abs(math.log(ratio)) < math.log(1 + min_change / 100):
        out["verdict"] = "no change"
    return out


def verdict(j, unit, min_change=MIN_CHANGE):
    """A judged ratio (see judged()) in words, one direction: '1.30x faster (p 0.008)', or
    'not significant (1.03x faster, p 0.31)', or 'no change (1.04x slower, under 10%)'; a '*'
    where there are no samples to test."""
    ratio = j["ratio"]
    up, down = ("faster", "slower") if kind(unit) != "other" else ("higher", "lower")
    said = f"{ratio:.2f}x {up}" if ratio >= 1 else f"{1 / ratio:.2f}x {down}"
    if j["p"] is None:
        return said + " *"
    if j["verdict"] == "not significant":
        return f"not significant ({said}, p {j['p']:.2g})"
    if j["verdict"] == "no change":
        return f"no change ({said}, under {min_change:g}%)"
    return f"{said} (p {j['p']:.2g})"


def geometric_mean(ratios):
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
