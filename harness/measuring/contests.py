"""Two ways of doing the same work timed against each other, as the start of a run chooses the
kernels (tuning.py): the ways take turns, the order flipped each turn, so that a drift of the
machine falls on both alike; a way wins only beyond the spread of its tries (won())."""
import statistics
import time

from harness.measuring import rounds
from harness.measuring.rounds import BRIDGE_S

TRIAL_TRIPS = 6  # each way timed this often, taking turns with the other (see won())
WIN = 5 / 6  # the share of pairs the compiled way must win: with 6 tries each, 30 of 36, which
#              two ways as fast reach with chance 30/924 = 0.032, and a way faster in every try
#              but one that other work slowed still reaches
POOLED_S = 0.02  # the rest between two ways that both run on the pool's threads, the BLAS held
#                  to one (NumPy's trips of several tokens and their compiled parts): no library's
#                  threads are left spinning, so the coming way's first call is warmed, no more


def each_in_turn(ways, times=TRIAL_TRIPS):
    """Each way {key: a function to time} `times` times after a warm-up, the ways taking turns,
    the order reversed each turn, so that a drift of the machine falls on all alike:
    -> {key: [seconds of each try]}"""
    timed, order = {key: [] for key in ways}, list(ways)
    for tried in range(times + 1):  # (the first turn warms up)
        for key in order if tried % 2 == 0 else order[::-1]:
            seconds = sample(ways[key])
            if tried:
                timed[key].append(seconds)
    return timed


def alternately(ways, rest=None, warm=True):
    """Each of two ways {way: {count: a function to time}} (NumPy's and the compiled kernels',
    or the way kept and the one it is timed against, in that order) TRIAL_TRIPS times after a
    warm-up (which compiles the kernels), the ways taking turns: one way's every count, then
    the other's, the order flipped each turn, so that a drift of the machine falls on both
    alike. Where the way changes, the coming way's first function runs untimed for `rest`
    seconds first (BRIDGE_S, or POOLED_S where both ways run on the pool's threads alone): the
    other way's threads stop spinning meanwhile (the BLAS's, or Numba's), and fall on neither.
    The counts
    neither way won (undecided()) are timed as often again, once, and judged on all their
    tries: a few tries that other work slowed would otherwise keep the slower way.
    -> {count: {way: [seconds of each try]}}"""
    timed, order, last = {}, list(ways), None
    old, new = (("numpy", "compiled") if set(order) == {"numpy", "compiled"} else order)
    for tried in range(TRIAL_TRIPS + 1) if warm else range(1, TRIAL_TRIPS + 1):
        for way in order if tried % 2 == 0 else order[::-1]:  # (the first turn warms up)
            if way != last:
                bridge(next(iter(ways[way].values())), BRIDGE_S if rest is None else rest)
            last = way
            for n, fn in ways[way].items():
                seconds = sample(fn)
                if tried:
                    timed.setdefault(n, {}).setdefault(way, []).append(seconds)
    again = [n for n, t in timed.items() if undecided(t, new, old)]
    if warm and again:
        more = alternately({way: {n: fns[n] for n in again if n in fns}
                            for way, fns in ways.items()}, rest, warm=False)
        for n, t in more.items():
            for way, seconds in t.items():
                timed[n][way] += seconds
    return timed


def bridge(fn, rest):
    """fn, untimed, again and again for about `rest` seconds."""
    end = time.perf_counter() + rest
    while time.perf_counter() < end:
        fn()


def sample(fn):
    """fn's seconds, one call timed as a round times a visit (rounds.visit: the one place a
    sample is taken), its share of the cores not asked: the ways take turns instead."""
    return rounds.visit(rounds.Trial("sample", [fn]), watch=rounds.unwatched)[0][0]


def best(fn, runs):
    """The best of `runs` calls after a warm-up, in seconds (a disturbed call only loses)."""
    fn()  # the warm-up: not counted
    return rounds.visit(rounds.Trial("best", [fn], best=runs), watch=rounds.unwatched)[0][0]


def fastest(timed):
    """{way: [seconds]} -> {way: the best seconds}, as a run saves what it timed."""
    return {way: min(seconds) for way, seconds in timed.items()}


def won(timed):
    """The counts whose compiled way won beyond its spread: faster in WIN of the pairs of its
    tries against NumPy's (the Mann-Whitney count), or, where neither way did so even after
    its count was timed again (alternately()), faster in the middle of all its tries. timed:
    {count: {"numpy": [seconds], "compiled": [seconds]}}, the ways taking turns. One try that
    other work slowed does not decide it (the slowest try against the fastest would), nor do a
    few; a way clearly faster that stays undecided on a noisy machine is still taken where its
    middle is faster. Two ways as fast may then go either way from run to run, at no cost."""
    return tuple(n for n, t in timed.items() if beats(t))


def beats(t, new="compiled", old="numpy"):
    """Whether the new way beat the old (see won()). t: {way: [seconds]}"""
    return (wins(t, new, old) or 0) >= WIN or (
        len(t.get(new, [])) >= 2 * TRIAL_TRIPS and undecided(t, new, old)
        and statistics.median(t[new]) < statistics.median(t[old]))


def kept_unless_beaten(t, kept, other):
    """The way kept, unless the other won beyond its spread: WIN of the pairs, and its middle
    under the kept way's fastest try. A tie, a win by the middles alone, or pairs won by less
    than the kept way's own tries differ (ways of one speed whose tries each keep still) keeps
    it. t: {way: [seconds]}"""
    return other if (wins(t, other, kept) or 0) >= WIN \
        and statistics.median(t[other]) < min(t[kept]) else kept


def wins(t, new="compiled", old="numpy"):
    """The new way's share of the pairs of its tries against the old way's that it won (a tie
    counts half), or None where either has none. t: {way: [seconds]}"""
    pairs = [(a > b) - (a < b) for a in t.get(new, []) for b in t.get(old, [])]
    return (sum(p < 0 for p in pairs) + sum(p == 0 for p in pairs) / 2) / len(pairs) \
        if pairs else None


def undecided(t, new="compiled", old="numpy"):
    """Whether neither way won WIN of the pairs: noise, or two ways as fast."""
    share = wins(t, new, old)
    return share is not None and 1 - WIN < share < WIN
