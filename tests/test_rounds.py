"""Measuring in rounds: each round visits every trial once, group by group, shuffled; the rounds
measured in fresh worker processes of each kind, planned from the first one's cost, more while
the time budget allows, and a stop meanwhile keeps what was measured. Every clock and every
process here is made by hand or tiny: no test depends on the machine's speed or quiet."""
import signal
import subprocess
import sys

import pytest

from harness import stopping
from harness.measuring import processes, rounds, timing
from harness.measuring.rounds import Trial
from harness.measuring.worker import Job
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
    for r, o in enumerate(orders):  # group by group, forward then backward: one bridge a round
        first, last = (["a", "b", "c"], ["x", "y", "z"])[::1 if r % 2 == 0 else -1]
        assert sorted(o[:3]) == first and sorted(o[3:]) == last
    assert len({tuple(sorted(o[:3]) and o) for o in orders}) > 1  # shuffled each round ...
    assert orders == [rounds.order(trials, r) for r in range(6)]  # ... the same every run


def test_a_worker_warms_visits_every_round_then_records_once(monkeypatch):
    monkeypatch.setattr(rounds, "BRIDGE_S", 0.0)
    log = []
    trials = [counting("a", log, recorded=True), counting("b", log)]
    result = rounds.run(trials, Job((4, 5, 6), again=0, repeat={"a": 2, "b": 1}))
    assert log[:2] == [("a", "warm"), ("b", "visit")]  # each warms up once, uncounted
    assert sorted(log[2:11]) == [("a", "visit")] * 6 + [("b", "visit")] * 3  # the rounds: "a"
    assert log[11:] == [("a", "recorded")]  # twice in each; then the breakdown's, once, warm
    assert [v[0] for v in result["visits"]["a"]] == [4, 5, 6]  # a sample in each round
    assert all(len(v[1]) == 1 and v[3] == 0 for v in result["visits"]["b"])
    assert result["recorded"] == {"a": [[6, {"trip": 1.0, "tables": 0.5}]]}


def test_a_row_whose_parts_back_no_claim_is_recorded_in_one_first_process_each(monkeypatch):
    monkeypatch.setattr(rounds, "BRIDGE_S", 0.0)
    log = []
    trials = [counting(n, log, recorded=True) for n in "abcd"]
    trials = [t if t.name == "d" else rounds.dataclasses.replace(t, once=True) for t in trials]
    taken = []
    for process in range(4):
        log.clear()
        rounds.run(trials, Job((process,), again=0, repeat={}, process=process, processes=3))
        taken.append(sorted(n for n, what in log if what == "recorded"))
    assert taken == [["a", "d"], ["b", "d"], ["c", "d"], ["a", "d"]]  # the claims' rows in
    #   each; the rest in turns, each once among the first 3 (the 4th records none: see planned)


def test_a_short_row_is_visited_again_and_again_in_a_round_as_its_first_process_chose():
    quick, slow = Trial("quick", [lambda: None]), Trial("slow", [lambda: rounds.time.sleep(0.3)])
    assert rounds.repeats(quick) == rounds.MOST_REPEAT and rounds.repeats(slow) == 1
    ceiling = Trial("ceiling", [lambda: None], best=3)
    assert rounds.repeats(ceiling) == 1  # a ceiling is the fastest of its tries, once a round
    seen = iter([1.0, 4.0, 2.0, 8.0])  # two repeats of two steps: each its geometric mean
    clock = rounds.types.SimpleNamespace(mark=lambda: 0.0, between=lambda a, b: next(seen))
    seconds, _ = rounds.visit(Trial("t", [lambda: None, lambda: None], repeat=2, timer=clock),
                              watch=lambda: (lambda: None))
    assert seconds == pytest.approx([2 ** 0.5, 32 ** 0.5])  # step 1: 1 then 2, step 2: 4, 8
    result = rounds.run([Trial("q", [lambda: None])], Job((0,), again=0))
    assert result["repeat"] == {"q": rounds.MOST_REPEAT}  # the first process says its counts


def test_a_disturbed_visit_is_measured_again_and_the_least_disturbed_kept(monkeypatch):
    monkeypatch.setattr(timing, "PAUSE_S", 0.0)
    seen = iter([0.5, 0.3, 0.02])  # other work's share of the cores in each try
    watch = lambda: (lambda: next(seen))  # noqa: E731
    seconds, share, tried = rounds.visited(Trial("t", [lambda: None]), 2, watch)
    assert (share, tried) == (0.02, 2)
    seen = iter([0.5, 0.6, 0.7])
    assert rounds.visited(Trial("t", [lambda: None]), 2, watch)[1:] == (0.5, 2)


def fake(log, visit_s=0.5, fail=None):
    """A worker that takes no time: each of its rounds' visits `visit_s` of one trial per kind;
    it says what it was asked, and raises `fail` when asked for that process of a kind."""
    def worker(job):
        log.append(job)
        if fail and (job.kind, job.process) == fail[:2]:
            raise fail[2]
        name = job.trials[0] if job.trials else "t"
        return {"visits": {name: [[r, [visit_s], 0.0, 0] for r in job.rounds]},
                "paths": {"attention": "vec"} if len(log) == 1 else None,
                "rounds_s": visit_s * len(job.rounds)}
    return worker


def test_a_pilot_of_each_kind_then_the_rest_the_kinds_in_turn_the_first_choosing_the_paths():
    asked = []
    kinds = [processes.Kind("a", ("ta",)), processes.Kind("b", ("tb",))]
    done = processes.planned({}, kinds, fake(asked), 3, 3, 1e-9, rounds.time.monotonic())
    assert [(j.kind, j.process) for j in asked] == [("a", 0), ("b", 0), ("a", 1),
                                                           ("b", 1), ("a", 2), ("b", 2)]
    assert [j.paths for j in asked] == [None] + [{"attention": "vec"}] * 5  # the first's
    assert [len(j.rounds) for j in asked] == [1, 1, 1, 1, 1, 1]  # the pilots one round each
    ids = [r for j in asked for r in j.rounds]
    assert ids == list(range(6)) and done.processes == 6  # every round the run's own ...
    assert done.runs("ta").processes == (0, 2, 4)  # ... each in the process that measured it
    assert [j.record for j in asked] == [True] * 6  # the least processes each record


def test_an_extra_kind_fills_the_time_left_and_every_process_takes_the_first_ones_counts(
        monkeypatch):
    """Three processes of every row, then processes of the cheaper rows alone while the budget
    holds one more (priced at first from the whole kind's start and their rows' visits, then
    at their own cost); they record their rows' breakdown too (the claims on a trip's parts
    gain them) and measure no products alone. Every process after the first visits each row
    as often as the first chose. The clock is the workers' own: no test waits."""
    now, asked = [0.0], []
    monkeypatch.setattr(rounds.time, "monotonic", lambda: now[0])

    def worker(job):
        asked.append(job)
        now[0] += (4.0 if job.kind == "all" else 1.0) + len(job.rounds)  # start, rounds
        return {"visits": {t: [[r, [0.1], 0.0, 0] for r in job.rounds] for t in job.trials},
                "rounds_s": float(len(job.rounds)),
                "repeat": job.repeat or {t: 2 for t in job.trials}}
    kinds = [processes.Kind("all", ("speeds", "read", "dial")),
             processes.Kind("more", ("speeds", "read"), extra=True)]
    done = processes.planned({"alone": True}, kinds, worker, 3, 3, 25.0, 0.0)
    assert [j.kind for j in asked] == ["all"] * 3 + ["more"] * 5  # 15 s, then 2 s each
    assert [j.record for j in asked] == [True] * 8
    assert [j.alone for j in asked] == [True] * 3 + [False] * 5
    assert asked[0].repeat is None and all(j.repeat == {t: 2 for t in j.trials}
                                              for j in asked[1:])
    assert len(set(done.runs("read").processes)) == 8 and len(done.runs("dial").rounds) == 3
    assert done.process_s == pytest.approx(5.0)  # one more of the kind that backs claims: its
    assert done.runs("dial").process_s == done.process_s  # start and a round; what a why says
    now[0], asked[:] = 0.0, []
    processes.planned({}, kinds, worker, 3, 3, 19.0, 0.0)  # the first extra priced from "all"'s
    #                                       start, 4 s, its rows' 0.4 s and their recordings
    assert [j.kind for j in asked] == ["all"] * 3


def test_an_extra_kind_with_a_most_takes_that_many_and_leaves_the_time_to_the_next(
        monkeypatch):
    """The collision alone takes one process more than the first kind's (its claims then on
    4), then reading and typing take the time left: an extra kind with no most would take it
    all."""
    now, asked = [0.0], []
    monkeypatch.setattr(rounds.time, "monotonic", lambda: now[0])

    def worker(job):
        asked.append(job.kind)
        now[0] += 2.0 + len(job.rounds)
        return {"visits": {t: [[r, [0.1], 0.0, 0] for r in job.rounds] for t in job.trials},
                "rounds_s": float(len(job.rounds))}
    kinds = [processes.Kind("all", ("speeds", "read", "dial")),
             processes.Kind("dial", ("speeds", "dial"), extra=True, most=1),
             processes.Kind("more", ("speeds", "read"), extra=True)]
    done = processes.planned({}, kinds, worker, 3, 3, 21.0, 0.0)
    assert asked == ["all"] * 3 + ["dial"] + ["more"] * 3  # 3 s each: 21 s in all
    assert len(set(done.runs("dial").processes)) == 4


def test_the_plan_grows_each_kind_in_turn_while_it_fits_and_never_from_a_figure():
    costs = {"cheap": processes.Cost(1.0, 0.5), "dear": processes.Cost(5.0, 10.0)}
    assert processes.plan(costs, {"cheap": 3, "dear": 3}, 3, 0.0) == {"cheap": (3, 1),
                                                                   "dear": (3, 1)}
    grown = processes.plan(costs, {"cheap": 3, "dear": 3}, 3, 2 * 1.5 + 2 * 15.0 + 3 * 1.5)
    assert grown == {"cheap": (6, 1), "dear": (3, 1)}  # the dear kind's fourth did not fit
    assert processes.plan(costs, {"cheap": 3, "dear": 3}, 9, 1e6)["cheap"][0] == 64  # at most
    few = processes.plan({"k": processes.Cost(1.0, 0.1)}, {"k": 3}, 9, 0.0)
    assert few == {"k": (3, 4)}  # too few processes fit: more rounds in each, 1 + 2 x 4 >= 9
    assert processes.Cost(8.0, 0.25).rounds() == 8 and processes.Cost(8.0, 4.0).rounds() == 1
    alone = processes.plan(costs, {"cheap": 3, "dear": 1}, 3, 1e3)
    assert alone["dear"][0] == 1  # a kind no claim rests on: one process, never more


def test_a_stop_beyond_the_least_processes_keeps_what_was_measured_before():
    asked = []
    worker = fake(asked, 0.0, ("a", 3, stopping.Stopped(signal.SIGINT)))
    done = processes.planned({}, [processes.Kind("a", ("ta",))], worker, 3, 3, 1e6,
                          rounds.time.monotonic())
    assert done.stopped == signal.SIGINT and done.processes == 3  # three kept, the fourth not
    with pytest.raises(stopping.Stopped):  # within the least: the run itself stops
        processes.planned({}, [processes.Kind("a", ("ta",))],
                       fake([], 0.0, ("a", 1, stopping.Stopped(signal.SIGINT))), 3, 3, 1e6,
                       rounds.time.monotonic())


@pytest.mark.kernels  # the tiles' workbench
def test_a_run_stopped_while_adding_processes_saves_them_marked(tmp_path, monkeypatch):
    import machine_speed
    real = machine_speed.measure_here

    def spawn(script, job):  # a worker in this process, as fast as a call
        if job.process >= 3:  # the processes the budget added: a Ctrl-C arrives
            raise stopping.Stopped(signal.SIGINT)
        return real(machine_speed.parse_args(list(job.argv)).replace(threads=job.threads), job)
    monkeypatch.setattr(processes, "spawn", spawn)
    r = in_process(machine_speed.main, "--size", "300", "--matmul", "64", "--runs", "3",
                   "--time-budget", "5", "--out", str(tmp_path), "--label", "box")
    assert r.returncode == 130 and "interrupted while adding processes" in r.stderr
    saved = (tmp_path / "box" / "machine_speed.txt").read_text()
    assert "STOPPED: interrupted while adding processes" in saved  # the claims say so
    text = (tmp_path / "box" / "report.md").read_text()  # and so does the report
    assert "> **Stopped:** `machine_speed.py` (interrupted while adding processes)" in text
    assert text.index("**Stopped:**") < text.index("## The post's claims")  # above them


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "1e9", "soon"])
def test_a_bad_time_budget_is_one_line_exit_2_and_nothing_saved(tmp_path, value):
    import machine_speed
    r = in_process(machine_speed.main, "--time-budget", value, "--out", str(tmp_path))
    one_line(r, 2, "--time-budget", "seconds above 0 and at most 86,400")
    assert not list(tmp_path.iterdir())


def test_worker_processes_measure_the_rounds_of_a_real_run(tmp_path):
    r = subprocess.run([sys.executable, f"{ROOT}/machine_speed.py", "--quick", "--no-save",
                        "--processes", "2", "--runs", "3", "--time-budget", "1"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    plan = next(line for line in r.stderr.splitlines() if line.startswith("the plan"))
    planned = int(plan.split("of each kind: ")[1].split()[0])  # at least --processes, more
    rounds_each = int(plan.split("each after the first ")[1].split()[0])  # where the budget
    assert planned >= 2  # holds them (a fast moment fits a third in 1 s); each after the
    #                      first as many rounds as its start is worth, the first one round
    rounds = int(r.stdout.split("(middle of ")[1].split()[0])
    assert rounds in [1 + later * rounds_each for later in range(1, planned)]  # (a process
    assert "Traceback" not in r.stderr  # beyond the least is left out where time runs out)


def test_a_worker_flag_given_by_hand_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, f"{ROOT}/machine_speed.py", "--worker"], input="not a job",
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    one_line(r, 2, "--worker", "worker processes")
    assert r.stdout == ""


def test_a_figure_is_disturbed_only_where_other_work_left_too_few_clean_rounds():
    done = processes.Measurements()
    done.take({"visits": {"two": [[0, [1.0], 0.0, 0], [1, [1.0], 0.0, 0]],  # two rounds, quiet
                          "busy": [[0, [1.0], 0.5, 2], [1, [1.0], 0.0, 0], [2, [1.0], 0.4, 2]]}})
    assert not done.runs("two").disturbed  # fewer rounds than 3 are few, not disturbed
    assert done.runs("busy").disturbed and done.runs("busy").again == 4


def test_the_kinds_keep_each_claims_rows_together_and_every_row_in_one_kind():
    """two_phases: every row a claim uses shares one kind (claims pair them round by round);
    the deep notebooks of many users have theirs; cube_bug: the cases apart from the model's
    trips. Every planned row is in exactly one kind."""
    import cube_bug
    import two_phases
    from harness import model_run
    from harness.predicting import plans
    args = two_phases.parse_args([])
    rows = {n: e.plan(args) for n, e in two_phases.EXPERIMENTS.items() if n in args.experiments}
    made = model_run.kinds(args, two_phases.EXPERIMENTS, rows)
    kinds = {k.name: set(k.trials) for k in made if not k.extra}
    names = [plans.trial_name(e, r) for e in rows for r in rows[e]]
    assert all(sum(n in k for k in kinds.values()) == 1 for n in names)
    collision, extra = [k for k in made if k.extra]  # the collision alone, one process more
    #   (its claims on 4 processes), then reading and typing alone: each a part of the first's
    assert collision.most == 1 and set(collision.trials) < kinds[""]
    assert {n.split()[0] for n in collision.trials if not n.startswith("speeds")} == {"collision"}
    assert set(extra.trials) < kinds[""] and extra.most is None and not any(
        n.startswith("collision") for n in extra.trials)
    assert {n.split()[0] for n in kinds[""] if not n.startswith("speeds")} == {
        "prefill", "decode", "depth", "collision"}
    assert all("1 user " in n for n in kinds[""] if n.startswith("depth"))
    args = cube_bug.parse_args([])
    kinds = cube_bug.kinds(args)
    cases = {f"{label} {way}" for label, _ in cube_bug.CASES for way in ("power", "product")}
    assert [set(k.trials) for k in kinds] == [cases, set(cube_bug.IN_MODEL)]
