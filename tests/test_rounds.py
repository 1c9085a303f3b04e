"""Measuring in rounds: each round visits every trial once, group by group, shuffled; the rounds
spread over fresh worker processes; rounds added for the claims that cannot be told yet while
the time budget allows, and a stop meanwhile keeps what was measured. Every clock and every
process here is made by hand or tiny: no test depends on the machine's speed or quiet."""
import signal
import subprocess
import sys

import pytest

from harness import stopping
from harness.measuring import rounds, timing
from harness.measuring.rounds import Trial
from conftest import ROOT, in_process, one_line


def counting(name, log, group=1, recorded=False):
    """A trial that logs each call: (name, 'visit' or 'recorded' or 'warm')."""
    def record(watch):
        log.append((name, "warm" if watch is None else "recorded"))
        if watch is not None:
            watch.update(trip=1.0, tables=0.5)
    return Trial(name, [lambda: log.append((name, "visit"))], group=group,
                 recorded=record if recorded else None)


def test_a_round_visits_each_trial_once_group_by_group_in_a_shuffled_order():
    trials = {n: Trial(n, [], group=g) for n, g in (("a", 0), ("b", 0), ("c", 0), ("x", 1),
                                                     ("y", 1), ("z", 1))}
    orders = [rounds.order(trials, r) for r in range(6)]
    for o in orders:  # the BLAS's own threads' trials first, then the rest
        assert sorted(o[:3]) == ["a", "b", "c"] and sorted(o[3:]) == ["x", "y", "z"]
    assert len({tuple(o) for o in orders}) > 1  # shuffled each round ...
    assert orders == [rounds.order(trials, r) for r in range(6)]  # ... the same every run


def test_a_worker_warms_visits_every_round_then_records_once(monkeypatch):
    monkeypatch.setattr(rounds, "BRIDGE_S", 0.0)
    log = []
    trials = [counting("a", log, recorded=True), counting("b", log)]
    result = rounds.run(trials, {"rounds": [4, 5, 6], "again": 0})
    assert log[:2] == [("a", "warm"), ("b", "visit")]  # each warms up once, uncounted
    assert sorted(log[2:8]) == [("a", "visit")] * 3 + [("b", "visit")] * 3  # the rounds
    assert log[8:] == [("a", "recorded")]  # then the breakdown's recording, once, warm
    assert [v[0] for v in result["visits"]["a"]] == [4, 5, 6]  # a sample in each round
    assert all(len(v[1]) == 1 and v[3] == 0 for v in result["visits"]["b"])
    assert result["recorded"] == {"a": [[6, {"trip": 1.0, "tables": 0.5}]]}


def test_a_disturbed_visit_is_measured_again_and_the_least_disturbed_kept(monkeypatch):
    monkeypatch.setattr(timing, "PAUSE_S", 0.0)
    seen = iter([0.5, 0.3, 0.02])  # other work's share of the cores in each try
    watch = lambda: (lambda: next(seen))  # noqa: E731
    seconds, share, tried = rounds.visited(Trial("t", [lambda: None]), 2, watch)
    assert (share, tried) == (0.02, 2)
    seen = iter([0.5, 0.6, 0.7])
    assert rounds.visited(Trial("t", [lambda: None]), 2, watch)[1:] == (0.5, 2)


def test_the_rounds_spread_over_processes_and_the_first_chooses_the_paths():
    asked = []

    def worker(job):
        asked.append(job)
        return {"visits": {"t": [[r, [1.0], 0.0, 0] for r in job["rounds"]]},
                "paths": {"attention": "vec"} if job["process"] == 0 else None,
                "setup_s": 2.0}
    done = rounds.measure({"rounds": list(range(5))}, 3, worker, None)
    assert [j["rounds"] for j in asked] == [[1, 2], [3, 4], [0]]  # every round once
    assert [j["paths"] for j in asked] == [None, {"attention": "vec"}, {"attention": "vec"}]
    assert done.processes == 3 and done.rounds == 5 and done.runs("t").rounds == (0, 1, 2, 3, 4)
    assert rounds.spread(2, 3) == [[0], [1]]  # fewer rounds than processes: fewer processes


def test_rounds_are_added_until_the_claims_are_told_or_the_budget_runs_out():
    def worker(job):
        return {"visits": {"t": [[r, [0.5], 0.0, 0] for r in job["rounds"]],
                           "u": [[r, [0.5], 0.0, 0] for r in job["rounds"]]}, "setup_s": 1.0}
    job, start = {"rounds": [0, 1, 2]}, rounds.time.monotonic()
    done = rounds.measure(job, 1, None, worker)
    asked = []

    def undecided(d):  # "t" needs 4 more rounds in all, then its claim is told
        asked.append(d.rounds)
        return {"t": 7 - d.rounds} if d.rounds < 7 else {}
    rounds.until_told(job, done, None, worker, 1, 60.0, start, undecided)
    assert asked == [3, 7] and done.rounds == 7 and len(done.visits["t"]) == 7
    assert len(done.visits["u"]) == 3 + 4  # what the fake worker says: a real one, only "t"
    tight = rounds.measure(job, 1, None, worker)
    rounds.until_told(job, tight, None, worker, 1, 2.0, start, undecided)  # 1 s setup + 0.5 s
    assert tight.rounds == 3  # a round, its warm-up and its recording do not fit in 2 s


def test_a_stop_during_the_added_rounds_keeps_what_was_measured_before():
    def worker(job):
        if job["rounds"][0] >= 3:
            raise stopping.Stopped(signal.SIGINT)
        return {"visits": {"t": [[r, [0.1], 0.0, 0] for r in job["rounds"]]}, "setup_s": 0.1}
    job = {"rounds": [0, 1, 2]}
    done = rounds.measure(job, 1, None, worker)
    rounds.until_told(job, done, None, worker, 1, 60.0, rounds.time.monotonic(),
                      lambda d: {"t": 5})
    assert done.stopped == signal.SIGINT and done.rounds == 3


def test_a_run_stopped_while_adding_rounds_saves_them_marked(tmp_path, monkeypatch):
    import machine_speed
    from harness.judging import judge
    monkeypatch.setattr(judge, "undecided", lambda *a: {"forklift": 3, "workbench": 3})
    real = machine_speed.measure_here

    def measure_here(args, job):
        if job["rounds"][0] >= 3:  # the rounds added: a Ctrl-C arrives
            raise stopping.Stopped(signal.SIGINT)
        return real(args, job)
    monkeypatch.setattr(machine_speed, "measure_here", measure_here)
    r = in_process(machine_speed.main, "--size", "300", "--matmul", "64", "--runs", "3",
                   "--processes", "1", "--out", str(tmp_path), "--label", "box")
    assert r.returncode == 130 and "interrupted while adding rounds" in r.stderr
    saved = (tmp_path / "box" / "machine_speed.txt").read_text()
    assert "STOPPED: interrupted while adding rounds" in saved  # the claims say so


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "1e9", "soon"])
def test_a_bad_time_budget_is_one_line_exit_2_and_nothing_saved(tmp_path, value):
    import machine_speed
    r = in_process(machine_speed.main, "--time-budget", value, "--out", str(tmp_path))
    one_line(r, 2, "--time-budget", "seconds above 0 and at most 86,400")
    assert not list(tmp_path.iterdir())


def test_worker_processes_measure_the_rounds_of_a_real_run(tmp_path):
    r = subprocess.run([sys.executable, f"{ROOT}/machine_speed.py", "--quick", "--no-save",
                        "--processes", "2", "--runs", "4"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "(best of 4 rounds per figure" in r.stdout and "Traceback" not in r.stderr


def test_the_claims_judged_between_added_rounds_warn_nothing_twice(capsys):
    from harness.terminal import kept, warn
    worker = lambda job: {"visits": {"t": [[r, [0.1], 0.0, 0] for r in job["rounds"]]}}  # noqa
    job = {"rounds": [0, 1, 2]}
    done = rounds.measure(job, 1, None, worker)
    with kept() as warned:  # the records made after the last round say them, once
        rounds.until_told(job, done, None, worker, 1, 60.0, rounds.time.monotonic(),
                          lambda d: (warn("noisy machine: a figure spread 1.3x"), {})[1])
    assert warned == [] and "noisy" not in capsys.readouterr().err


def test_a_worker_flag_given_by_hand_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, f"{ROOT}/machine_speed.py", "--worker"], input="not a job",
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    one_line(r, 2, "--worker", "worker processes")
    assert r.stdout == ""


def test_a_figure_is_disturbed_only_where_other_work_left_too_few_clean_rounds():
    done = rounds.Measured()
    done.take({"visits": {"two": [[0, [1.0], 0.0, 0], [1, [1.0], 0.0, 0]],  # two rounds, quiet
                          "busy": [[0, [1.0], 0.5, 2], [1, [1.0], 0.0, 0], [2, [1.0], 0.4, 2]]}})
    assert not done.runs("two").disturbed  # fewer rounds than 3 are few, not disturbed
    assert done.runs("busy").disturbed and done.runs("busy").again == 4
