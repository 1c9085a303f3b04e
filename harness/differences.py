"""Whether a difference between two machines is real: each figure's ratio one way (faster or
slower), and a verdict from a bootstrap of the runs behind both figures."""
import math
import zlib

import numpy as np

from harness import schema, timing

MIN_CHANGE = 10.0  # percent: a smaller change is no change (pyperf's idea), whatever else says
BETWEEN = timing.BETWEEN  # how far separate runs differ where neither side keeps earlier runs
RESAMPLES, CONFIDENCE, SEED = 2000, 0.95, 0  # the bootstrap behind every verdict



kind = schema.kind


def speedup(first, other, label):
    """How much faster the other machine is on a figure (a time's first / other, a rate's other /
    first; higher for anything else), and RESAMPLES bootstrap draws of it from the runs behind
    both (None without them): each side's runs resampled with replacement and their median
    taken, from a generator seeded by the figure's name, so the same files always give the same
    verdicts. first, other: (value, samples or None, unit). -> (ratio, draws or None)"""
    power = -1 if kind(first[2]) == "time" else 1
    ratio = (other[0] / first[0]) ** power
    if first[1] is None or other[1] is None:
        return ratio, None
    rng = np.random.default_rng([SEED, zlib.crc32(label.encode())])

    def resampled(runs):  # the figure in each draw, over the figure measured
        s = np.asarray(runs, dtype=np.float64)
        return np.median(rng.choice(s, size=(RESAMPLES, s.size)), axis=1) / np.median(s)
    return ratio, ratio * (resampled(other[1]) / resampled(first[1])) ** power


def between_runs(r, data, alike):
    """How far separate runs of this figure on this machine may differ, and how that is known:
    (factor, words). The most of: how far the runs its folder's history keeps differ (alike(a,
    b): '' where two records' settings match), else BETWEEN, measured once; and how far its own
    run's speeds moved from start to end."""
    same = [e["value"] for found in data.get("earlier") or [] for e in found
            if (e["experiment"], e["figure"], e["keys"]) == (r["experiment"], r["figure"],
                                                             r["keys"])
            and isinstance(e["value"], (int, float)) and e["value"] > 0
            and not alike(e["settings"], r["settings"])]
    values = [r["value"], *same]
    known = [(max(values) / min(values), f"{len(values)} runs of it here") if same
             else (BETWEEN, "measured once here")]
    roofs = data.get("roofs") if isinstance(data.get("roofs"), dict) else {}
    start, end = roofs.get("start"), roofs.get("end")
    if isinstance(start, dict) and isinstance(end, dict):
        moved = [max(end[k] / start[k], start[k] / end[k]) for k in ("bytes_per_s", "flops_per_s")
                 if schema.number(start.get(k), 0) and schema.number(end.get(k), 0)
                 and start[k] > 0 and end[k] > 0]
        if moved:
            known.append((max(moved), "its run's speeds, start to end"))
    return max(known, key=lambda k: k[0])


def judged(ratio, draws, unit, min_change, between=1.0):
    """A ratio's verdict as fields: {"ratio", "low", "high" (its CONFIDENCE interval, None
    without samples), "verdict": faster, slower, higher, lower, within the noise, no change}.
    A change under min_change percent, or within `between` (how far separate runs of it
    differ), is no change."""
    up, down = ("faster", "slower") if kind(unit) != "other" else ("higher", "lower")
    out = {"ratio": ratio, "low": None, "high": None, "verdict": up if ratio >= 1 else down}
    if draws is None:
        return out
    out["low"], out["high"] = (float(q) for q in np.quantile(
        draws, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2]))
    if out["low"] <= 1 <= out["high"]:
        out["verdict"] = "within the noise"
    elif abs(math.log(ratio)) < math.log(max(1 + min_change / 100, between)):
        out["verdict"] = "no change"
    return out


def verdict(j, unit):
    """A judged ratio (see judged()) in words, one direction: '1.30x faster' or '1.30x slower'
    ('higher'/'lower' for a figure that is neither a time nor a rate); 'within the noise' when
    the CONFIDENCE interval of the draws holds 1, 'no change' when the change is under
    min_change percent; a '*' when there are no samples to tell noise from a change."""
    ratio = j["ratio"]
    up, down = ("faster", "slower") if kind(unit) != "other" else ("higher", "lower")
    said = f"{ratio:.2f}x {up}" if ratio >= 1 else f"{1 / ratio:.2f}x {down}"
    if j["low"] is None:
        return said + " *"
    return f"{j['verdict']} ({said})" if j["verdict"] in ("within the noise", "no change") \
        else said


def geometric_mean(ratios):
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
