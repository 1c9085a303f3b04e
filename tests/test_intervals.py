"""Intervals from the run's own rounds: a figure computed from records is resampled round by
round, so a ratio of two rows measured moments apart carries only its own spread; the level
keeps the chance of any wrong firm verdict small; what backs no interval is said. Synthetic
samples only."""
import pytest

from harness.judging import intervals, rules
from harness.judging.intervals import Figure, interval, of


def record(samples, rounds=None, shares=None, statistic="median", value=None, name="t"):
    import statistics
    return {"experiment": "demo", "keys": {"row": name}, "figure": "time", "unit": "ms",
            "statistic": statistic, "samples": list(samples),
            "rounds": list(rounds or range(len(samples))), "shares": shares,
            "value": value if value is not None else statistics.median(samples),
            "predicted": False}


def test_a_figure_with_no_runs_behind_it_is_its_value():
    assert interval(Figure(3.0), 0.99) == (3.0, 3.0)
    assert of({"value": 2.0, "samples": None, "statistic": "computed"}).leaves == ()


def test_a_ratio_of_two_rows_paired_by_round_cancels_their_shared_drift():
    drift = [1.0, 1.3, 0.8, 1.1, 1.25, 0.9, 1.05]  # the machine's speed, round by round
    a = of(record([10 * d for d in drift], name="a"))
    b = of(record([20 * d for d in drift], name="b"))
    lo, hi = interval(b / a, 0.998)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)  # drift cancels exactly
    alone = interval(b, 0.998)
    assert alone[1] / alone[0] > 1.3  # each row alone carries the drift


def test_an_interval_needs_three_clean_rounds_shared_by_its_records():
    a = of(record([1.0, 1.1, 1.2], rounds=[0, 1, 2], name="a"))
    b = of(record([2.0, 2.1, 2.2], rounds=[2, 3, 4], name="b"))
    assert interval(b / a, 0.99) is None  # one round in common
    busy = of(record([1.0, 1.1, 1.2, 1.3], shares=[0.0, 0.5, 0.02, 0.4]))
    assert busy.leaves[0].rounds == (0, 2) and busy.leaves[0].dropped == 2
    assert interval(busy, 0.99) is None  # two disturbed: two clean left


def test_the_interval_is_the_same_for_the_same_records():
    f = of(record([1.0, 1.4, 1.1, 0.9, 1.2, 1.05]))
    assert interval(f, 0.99, "a claim") == interval(f, 0.99, "a claim")


def test_an_outlier_is_named_and_left_out_of_the_interval_not_the_figure():
    runs = [0.5, 0.30, 0.29, 0.31, 0.30]
    assert intervals.outliers(runs) == [0]  # hyperfine's own example
    assert intervals.outliers([-0.2, 0.0, 0.2]) == []
    f = of(record(runs))
    assert f.value == 0.30 and 0 not in f.leaves[0].rounds  # the median keeps it
    assert interval(f, 0.999)[1] < 0.5
    best = of(record([2.0, 1.0, 1.0, 1.0, 1.0], statistic="best", value=2.0))
    assert best.leaves[0].statistic == "max" and 0 in best.leaves[0].rounds  # a best's extreme


def test_the_level_shares_the_chance_of_a_wrong_verdict_among_the_tests():
    assert intervals.level(1) == pytest.approx(0.95)
    assert intervals.level(25) == pytest.approx(0.998)


def test_a_rule_holds_fails_or_cannot_tell_and_says_how_many_rounds_would_settle_it():
    clear = of(record([3.0, 3.1, 2.9, 3.05, 2.95]))
    assert rules.resolve(rules.above(clear, 2), 0.998).verdict is True
    assert not rules.resolve(rules.above(clear, 4), 0.998).verdict  # a Fails
    near = rules.resolve(rules.above(of(record([2.0, 2.6, 2.2, 2.5, 2.3, 1.9, 2.4])), 2.1),
                         0.998)
    assert near.verdict is None and near.more_rounds() > 0
    assert "straddles the edge, from 7 rounds; about" in near.why()
    tie = rules.Test(of(record([1.0, 1.0, 1.0])), 1.0, True, "", ties=True)
    assert rules.resolve(tie, 0.998).verdict is True  # an equal figure holds where ties do
