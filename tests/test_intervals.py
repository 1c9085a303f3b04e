"""Intervals from the run's own samples: a figure computed from records is computed within each
round its records share (a ratio of two rows measured moments apart carries only its own
spread), averaged over each process's rounds, and Student's t is taken over the processes; its
stated level is its real coverage, with a process effect or without (simulated here); what
backs no interval is said. Synthetic samples only."""
import numpy as np
import pytest

from harness.judging import intervals, rules
from harness.judging.intervals import Figure, interval, of


def record(samples, rounds=None, shares=None, processes=None, value=None, name="t"):
    import statistics
    return {"experiment": "demo", "keys": {"row": name}, "figure": "time", "unit": "ms",
            "statistic": "median", "samples": list(samples),
            "rounds": list(rounds or range(len(samples))), "shares": shares,
            "processes": processes, "value": value if value is not None
            else statistics.median(samples), "predicted": False}


def test_a_figure_with_no_runs_behind_it_is_its_value():
    made = interval(Figure(3.0), 0.01)
    assert (made.value, made.low, made.high) == (3.0, 3.0, 3.0)
    assert of({"value": 2.0, "samples": None, "statistic": "computed"}).leaves == ()


def test_a_ratio_of_two_rows_paired_by_round_cancels_their_shared_drift():
    drift = [1.0, 1.3, 0.8, 1.1, 1.25, 0.9, 1.05]  # the machine's speed, round by round
    a = of(record([10 * d for d in drift], name="a"))
    b = of(record([20 * d for d in drift], name="b"))
    both = interval(b / a, 0.001)
    assert both.low == pytest.approx(2.0) and both.high == pytest.approx(2.0)  # drift cancels
    alone = interval(b, 0.001)
    assert alone.high / alone.low > 1.3  # each row alone carries the drift


def test_the_processes_not_the_rounds_are_the_units():
    # two processes' rounds alike within each, far apart between them: 6 rounds, 2 units
    a = of(record([10.0, 10.1, 9.9, 13.0, 13.1, 12.9], processes=[0, 0, 0, 1, 1, 1]))
    assert interval(a, 0.01) is None  # two processes back no interval
    three = of(record([10.0, 10.1, 13.0, 13.1, 11.0, 11.1], processes=[0, 0, 1, 1, 2, 2]))
    made = interval(three, 0.01)
    assert made.units == 3 and made.rounds == 6
    per_round = interval(of(record([10.0, 10.1, 13.0, 13.1, 11.0, 11.1])), 0.01)
    assert per_round.units == 6  # one process's rounds (no processes saved): rounds are units
    assert made.high / made.low > per_round.high / per_round.low  # 2 df, not 5: wider


def test_an_interval_needs_three_clean_units_shared_by_its_records():
    a = of(record([1.0, 1.1, 1.2], rounds=[0, 1, 2], name="a"))
    b = of(record([2.0, 2.1, 2.2], rounds=[2, 3, 4], name="b"))
    assert interval(b / a, 0.01) is None  # one round in common
    busy = of(record([1.0, 1.1, 1.2, 1.3], shares=[0.0, 0.5, 0.02, 0.4]))
    assert busy.leaves[0].rounds == (0, 2) and busy.leaves[0].dropped == 2
    assert interval(busy, 0.01) is None  # two disturbed: two clean left


def test_a_far_sample_is_named_but_counts_and_a_fast_one_is_never_dropped():
    runs = [0.5, 0.30, 0.29, 0.31, 0.30]
    assert intervals.outliers(runs) == [0]  # hyperfine's own example: named under its table
    assert intervals.outliers([-0.2, 0.0, 0.2]) == []
    f = of(record(runs))
    assert f.leaves[0].samples == tuple(runs)  # every clean sample counts
    assert interval(f, 0.001).high > 0.33  # the slow round widens the interval
    fast = of(record([1.0, 1.0, 1.01, 0.99, 0.5]))
    assert 0.5 in fast.leaves[0].samples


def test_each_claim_takes_an_equal_share_of_the_reports_chance_of_a_wrong_verdict():
    assert intervals.tail(1) == pytest.approx(0.05)
    assert intervals.tail(25, 2) == pytest.approx(0.001)
    made = interval(of(record([3.0, 3.1, 2.9, 3.05, 2.95])), intervals.tail(25))
    assert made.level == pytest.approx(1 - 2 * 0.002)


def test_holms_step_down_judges_the_clearest_first_and_lets_the_rest_share_what_is_left():
    """Four claims in a family of 5%: the clearest at 5%/4, each firm one letting the next be
    judged at a share of what is left, until one is not firm at its step: it and the rest wait
    at that step's tail (and a claim with no chance at all takes it too)."""
    tails = intervals.holm([0.02, 0.001, 0.012, None, 0.04], 0.05)  # each firm at its step
    assert tails == pytest.approx([0.05 / 2, 0.05 / 4, 0.05 / 3, 0.05 / 1, 0.05 / 1])
    stuck = intervals.holm([0.03, 0.001, 0.02, 0.5], 0.05)  # 0.02 is not under 0.05 / 3
    assert stuck == pytest.approx([0.05 / 3, 0.05 / 4, 0.05 / 3, 0.05 / 3])


def test_a_rules_chance_is_the_tail_at_which_it_turns_firm():
    """rules.chance: resolving the rule just above its chance is firm (holds, or does not
    hold), just below it is not; a claim of several tests as resolve() judges it (every test
    for holds, any one at its share for does not hold)."""
    up = of(record([3.0, 3.1, 2.9, 3.05, 2.95, 3.2], processes=[0, 0, 1, 1, 2, 2], name="up"))
    flat = of(record([1.0, 1.3, 0.9, 1.2, 1.1, 0.8], processes=[0, 0, 1, 1, 2, 2], name="f"))
    for rule in (rules.above(up, 2.6), rules.below(up, 2.6), rules.within(up, 2.6, 3.5),
                 rules.every(rules.above(up, 2.5), rules.above(flat, 0.8))):
        p = rules.chance(rule)
        assert 0 < p < 0.05, rule
        firm = rules.resolve(rule, p * 1.01, p * 1.01 / rules.count(rule))
        waits = rules.resolve(rule, p * 0.99, p * 0.99 / rules.count(rule))
        assert firm.verdict is not None and waits.verdict is None, rule
    assert rules.chance(rules.above(of(record([1.0, 1.1])), 0.5)) is None  # no interval


def test_the_processes_that_would_settle_it_clear_the_edge_four_times_in_five():
    """What would settle it is counted at 80% power: with that many processes as alike as
    these, and the figure truly where it sits, the interval clears the edge in about 80% of
    runs (simulated with the suite's own interval); a figure on its edge says so instead."""
    rng, tail = np.random.default_rng(3), 0.002
    made = rules.resolve(rules.above(of(record([2.0, 2.6, 2.2, 2.5, 2.3, 1.9, 2.4],
                                                processes=list(range(7)))), 2.0), tail)
    i, more = made.interval, made.more_processes()
    units = i.units + more
    logs = rng.standard_normal((20_000, units)) * i.spread + np.log(i.value)
    low, _ = intervals.student(logs, tail)
    assert 0.75 <= np.mean(low > np.log(2.0)) <= 0.9  # about 80% power, not 50%
    fewer = rng.standard_normal((20_000, units - 1)) * i.spread + np.log(i.value)
    assert np.mean(intervals.student(fewer, tail)[0] > np.log(2.0)) < 0.8  # the least that do
    edge = rules.resolve(rules.above(of(record([2.0, 2.2, 2.1, 2.05, 2.15],
                                                processes=list(range(5)))), 2.1), tail)
    assert edge.verdict is None and "on the edge here" in edge.why()


def test_a_rule_holds_fails_or_cannot_tell_and_says_how_many_processes_would_settle_it():
    clear = of(record([3.0, 3.1, 2.9, 3.05, 2.95]))
    assert rules.resolve(rules.above(clear, 2), 0.001).verdict is True
    assert not rules.resolve(rules.above(clear, 4), 0.001).verdict  # a Fails
    near = rules.resolve(rules.above(of(record([2.0, 2.6, 2.2, 2.5, 2.3, 1.9, 2.4],
                                               processes=[0, 1, 2, 3, 4, 5, 6])), 2.0), 0.001)
    assert near.verdict is None and near.more_processes() > 0
    assert "straddles the edge, from 7 processes; about" in near.why()
    assert f"(--processes {7 + near.more_processes()}" in near.why()
    wild = rules.resolve(rules.above(of(record([0.2, 9.0, 0.5, 6.0], processes=[0, 1, 2, 3])),
                                     1.0), 0.001)  # "1.03 (0.000296 to 3.58e+03)" stood bare
    assert wild.verdict is None and "over 10x wide: its processes disagree" in wild.why()
    assert "wide" not in near.why()
    tie = rules.no_less(of(record([1.0, 1.0, 1.0])), "slower")  # an equal figure: a tie,
    assert rules.resolve(tie, 0.001).verdict is True  # which holds past the margin


# ---- the interval's level is its real coverage: simulated with the suite's own interval


def simulated(tail, processes, rounds, effect, trials, seed):
    """How often the suite's interval of a paired ratio misses the true ratio below and above:
    two rows measured in each round, log-normal noise (a round's own, 0.1) and a process's
    draw (`effect`, its sd on the log scale) moving each row's rounds in that process, each row
    its own way (a memory placement is a row's own, so it does not cancel in the ratio)."""
    rng, true, misses = np.random.default_rng(seed), 1.7, [0, 0]
    where = np.repeat(np.arange(processes), rounds)
    for _ in range(trials):
        draw = rng.standard_normal((2, processes))[:, where] * effect
        noise = rng.standard_normal((2, where.size)) * 0.1
        a = 10.0 * np.exp(draw[0] + noise[0])
        b = 10.0 * true * np.exp(draw[1] + noise[1])
        ratio = of(record(b, processes=list(where), name="b")) / of(
            record(a, processes=list(where), name="a"))
        made = interval(ratio, tail)
        misses[0] += made.low > true
        misses[1] += made.high < true
    return [m / trials for m in misses]


@pytest.mark.parametrize("effect", [0.0, 0.1, 0.3])
def test_the_interval_misses_no_more_often_than_it_says_with_a_process_effect(effect):
    """At the shape a default run measures (4 processes of 1 round, and 3 of 2), each side's
    miss rate within 2x of the interval's own tail, whether processes differ or not (a 3-sigma
    allowance for the simulation's own noise)."""
    tail, trials = 0.05, 400
    for processes, rounds in ((4, 1), (3, 2)):
        for missed in simulated(tail, processes, rounds, effect, trials, seed=processes):
            allowed = 2 * tail + 3 * np.sqrt(2 * tail / trials)
            assert missed <= allowed, (processes, rounds, effect, missed)


def test_at_the_reports_own_level_the_miss_rate_is_the_tail():
    """The suite's t interval itself (intervals.student), many times over, at the tail a claim
    of the report takes: each side misses within 2x of it, processes differing or not."""
    rng = np.random.default_rng(7)
    tail, trials = intervals.tail(27), 200_000
    for processes, effect in ((4, 0.0), (4, 0.2), (6, 0.2)):
        units = rng.standard_normal((trials, processes)) * np.hypot(effect, 0.1)  # true mean 0
        low, high = intervals.student(units, tail)
        for missed in (np.mean(low > 0), np.mean(high < 0)):
            assert missed <= 2 * tail + 3 * np.sqrt(2 * tail / trials), (processes, missed)


def effects(model, processes, rounds, trials, rng):
    """(trials, processes, rounds) quantities on the log scale, their true mean 0: each round's
    own noise (0.1), and a process effect as these machines show them: normal (0.1); two
    states 1.5x apart, each round in either half the time (the workbench read 190 or 320
    GFLOP/s, within one process too); one process in ten 1.5x slow; drift, each process's
    draw half its predecessor's (rho 0.5)."""
    noise = rng.standard_normal((trials, processes, rounds)) * 0.1
    d = np.log(1.5)
    if model == "normal":
        return rng.standard_normal((trials, processes, 1)) * 0.1 + noise
    if model == "two states":
        return d * (rng.random((trials, processes, rounds)) < 0.5) - d / 2 + noise
    if model == "one slow in ten":
        return d * (rng.random((trials, processes, 1)) < 0.1) - 0.1 * d + noise
    draw, drift = rng.standard_normal((trials, 1)) * 0.1, np.empty((trials, processes, 1))
    for p in range(processes):
        draw = 0.5 * draw + np.sqrt(0.75) * rng.standard_normal((trials, 1)) * 0.1
        drift[:, p, 0] = draw[:, 0]
    return drift + noise


@pytest.mark.parametrize("model", ["normal", "two states", "one slow in ten", "drift"])
def test_at_the_reports_tail_every_process_effect_these_machines_show_misses_within_2x(model):
    """The suite's interval (intervals.student over each process's mean of its rounds) at the
    tail a report's first claim takes, at the process counts a default run measures (the
    collision's 3 processes of a round, cube_bug's and the readings' more): each side misses
    within 2x its tail, whatever the shape of the processes' draws."""
    rng, tail, trials = np.random.default_rng(5), intervals.tail(21), 100_000
    for processes, rounds in ((3, 1), (4, 1), (4, 2), (6, 2), (8, 1)):
        means = effects(model, processes, rounds, trials, rng).mean(axis=2)
        low, high = intervals.student(means, tail)
        for missed in (np.mean(low > 0), np.mean(high < 0)):
            allowed = 2 * tail + 3 * np.sqrt(2 * tail / trials)
            assert missed <= allowed, (processes, rounds, missed / tail)


def test_a_wrong_holds_or_does_not_hold_happens_at_most_at_the_claims_share(monkeypatch):
    """A claim of several tests holds only where all of them clear their edges at the claim's
    own share (Berger's intersection-union test): a wrong "holds" needs a test false in truth to
    clear, so it is as rare as one test's miss, however many tests. A wrong "does not hold" may
    come from any test (both edges of a within included), so for it each test takes a share.
    Simulated with the suite's own rules on 4 processes of log-normal noise, at a large share
    so that 800 claims show the rates: each within 2x of the share."""
    rng, share, trials = np.random.default_rng(11), 0.05, 800
    assert rules.count(rules.within(of(record([3.0, 3.1, 2.9])), 1, 5)) == 2

    def claims(truths):  # one claim of tests "figure above 1", each figure's truth given
        logs = rng.standard_normal((trials, len(truths), 4)) * 0.1 + np.log(truths)[:, None]
        for t in range(trials):
            figures = [of(record(np.exp(x), processes=[0, 1, 2, 3], name=str(i)))
                       for i, x in enumerate(logs[t])]
            rule = rules.every(*(rules.above(f, 1) for f in figures))
            yield rules.resolve(rule, share, share / rules.count(rule)).verdict
    on_the_edge = list(claims([1.0, 3.0, 3.0]))  # false in truth by a hair: may not hold
    assert np.mean([v is True for v in on_the_edge]) <= 2 * share
    all_true = list(claims([1.0 + 1e-9, 1.0 + 1e-9, 1.0 + 1e-9]))  # true by a hair: may hold
    assert np.mean([v is not None and not v for v in all_true]) <= 2 * share
    within = rules.within(of(record([0.9, 1.1, 1.0, 1.05], processes=[0, 1, 2, 3])), 0.5, 2)
    assert rules.resolve(within, share, share / 2).verdict is True


