"""Every figure vouched for, sample by sample: a sample knows how much of the cores other work
took while it ran, a disturbed one is measured again and backs no verdict, and neither do too
few rounds; an outlier is named, not a veto; the speeds of every round carry their interval.
The machine's conditions here are made by hand: no test needs the machine idle or busy."""
import json
import types

import pytest

from harness.experiments.registry import TOLD
from harness.judging import judge, rules
from harness.showing import sheets
from harness.keeping import records
from harness.measuring import host, processes, rounds, timing
from harness.keeping.records import Measured, col, timed
from conftest import made
from test_claims import IN_WORDS, ROOFS, changed, the_posts_figures, verdict


def shares(*seen):
    """A watch of the machine that sees these shares of the cores taken by other work, run by
    run (the warm-up first), then quiet."""
    it = iter(seen)
    return lambda: (lambda: next(it, 0.0))


def timed_as(*seconds):
    """A timer for a trial's visits: each sample takes the next of `seconds`."""
    it = iter(seconds)
    return types.SimpleNamespace(mark=lambda: 0.0, between=lambda start, end: next(it))


def test_a_sample_knows_the_share_of_the_cores_other_work_took():
    before = (10.0, 1.0, 1000, 0)  # wall s, own CPU s, busy ticks, waited us
    after = (11.0, 2.0, 1000 + 3 * host.TICK, 0)  # 3 s of busy cores, 1 of them ours
    assert host.others(before, after, cores=4) == pytest.approx(0.5)  # 2 s of 4 cores x 1 s
    short = (10.01, 1.01, 1000 + 1, 4000)  # 10 ms: too few ticks to tell; PSI: 4 ms waited
    assert host.others(before, short, cores=2) == pytest.approx(0.4)
    assert host.others(before, (10.01, 1.01, None, None), cores=2) is None  # unknown
    coarse = (10.1, 1.1, 1000 + int(0.2 * host.TICK), None)  # no PSI: the ticks, coarse
    assert host.others(before, coarse, cores=2) == pytest.approx(0.5)
    done = host.watch()  # the machine's own counters, read twice: a share, or unknown
    share = done()
    assert share is None or 0.0 <= share <= 1.0


def test_a_disturbed_visit_is_measured_again_and_the_clean_one_kept(monkeypatch):
    monkeypatch.setattr(timing, "PAUSE_S", 0.0)
    trial = rounds.Trial("t", [lambda: None], timer=timed_as(5.0, 1.0))  # slow while disturbed
    (seconds,), share, again = rounds.visited(trial, timing.AGAIN, shares(0.6, 0.0))
    assert seconds == pytest.approx(1.0) and (share, again) == (0.0, 1)  # the slow one left out


def test_a_figure_without_enough_clean_samples_is_marked_disturbed():
    done = processes.Measurements()  # three rounds' visits, each measured again twice, none clean
    done.take({"visits": {"t": [[r, [1.0], share, 2] for r, share in enumerate((0.5, 0.3, 0.5))]}})
    runs = done.runs("t")
    assert runs.disturbed and runs.again == 2 * 3 and 0.3 in runs.others  # the least disturbed
    t = timing.taken([s[0] for s in runs.steps], runs=runs, what="a figure")
    assert t.disturbed and t.share == 0.5
    figure = records.make(records_layout(), [{"time": timed(1.0, t)}], {})[0]
    assert figure["disturbed"] is True and figure["others"] == 0.5 and figure["again"] == 6


def records_layout():
    from harness.keeping.records import Layout
    return Layout("demo", [col("time", "time ms", "ms", ".1f")])


def test_a_quick_run_measures_nothing_again():
    assert timing.again_for(type("A", (), {"quick": True})) == 0
    trial = rounds.Trial("t", [lambda: None], timer=timed_as(5.0, 1.0))
    (seconds,), share, again = rounds.visited(trial, 0, shares(0.9, 0.0))
    assert seconds == pytest.approx(5.0) and (share, again) == (0.9, 0)  # kept as it came


def with_figure(found, experiment, figure, keys, **fields):
    r = next(r for r in found if records.matches(r, experiment, figure, keys or {}))
    r.update(fields)
    return found


def test_a_verdict_on_a_disturbed_figure_cannot_be_told_and_one_on_clean_ones_stays_firm():
    says = "Batching 16 users gives about 3.7x the tokens per second"
    clean = with_figure(the_posts_figures(), "decode", "tokens per second", {"users": 16},
                        samples=[97.0, 98.5, 99.0], rounds=[0, 1, 2], shares=[0.02, 0.0, 0.05],
                        statistic="median", runs=3, others=0.05, disturbed=False)
    assert verdict(clean, says)[2] == rules.HOLDS
    noisy = with_figure(clean, "decode", "tokens per second", {"users": 16},
                        shares=[0.45, 0.0, 0.3], others=0.45, disturbed=True)
    c, here, said, why, _ = verdict(noisy, says)  # one clean round of three: too few
    assert said == rules.UNKNOWN and why == (
        "disturbed: other work took up to 45% of the cores during runs of decode users 16: "
        "tokens per second, leaving fewer than 3 clean rounds: rerun when the machine is "
        "quieter")  # one process's rounds (none saved): the rounds stand in for processes
    accounting = "At 64 users the notebooks outweigh the tables, 7x over"  # no timing behind it
    assert verdict(noisy, accounting)[2] == rules.HOLDS


def test_fewer_than_3_rounds_back_no_verdict_and_a_far_run_counts_like_the_rest():
    says = "Batching 16 users gives about 3.7x the tokens per second"
    two = with_figure(the_posts_figures(), "decode", "tokens per second", {"users": 16},
                      samples=[98.0, 99.0], statistic="median", runs=2)
    c, here, said, why, _ = verdict(two, says)
    assert said == rules.UNKNOWN and why == ("fewer than 3 rounds behind decode users 16: "
                                              "tokens per second: rerun with --runs 3 or more")
    steady = [97.0, 98.5, 99.0, 98.0, 99.5, 98.8, 98.2]
    firm = with_figure(the_posts_figures(), "decode", "tokens per second", {"users": 16},
                       samples=steady, statistic="median", runs=7)
    assert verdict(firm, says)[2] == rules.HOLDS
    odd = with_figure(the_posts_figures(), "decode", "tokens per second", {"users": 16},
                      samples=[40.0, *steady[1:]], statistic="median", runs=7)  # one far off:
    #   named under its table, and in the interval like any undisturbed run: it widens it
    assert verdict(odd, says)[2] == rules.UNKNOWN and "from 7 rounds" in verdict(odd, says)[3]


def speeds(workbench):
    """The speeds records of a run of five rounds: the forklift 12 GB/s in each, the workbench
    these GFLOP/s, round by round (each round's ceiling; the figure their middle)."""
    rounds = tuple(range(5))
    return made("speeds", [col("memory speed", "memory speed", "GB/s", ".1f"),
                           col("math speed", "math speed", "GFLOP/s", ".1f")],
                [{"memory speed": timed(12.0, timing.Timing((1 / 12,) * 5, rounds=rounds), -1),
                  "math speed": timed(sorted(workbench)[2], timing.Timing(
                      tuple(1 / w for w in workbench), rounds=rounds), -1)}])


def test_the_speeds_of_every_round_carry_their_interval_into_a_verdict():
    says = "One typing user uses under 4% of the workbench"
    found = changed("decode", "math speed", {"users": 1}, 9.0)  # 9 GFLOP/s of the workbench
    c, here, said, why, tested = verdict(found + speeds([120.9, 119, 120.9, 118, 121]), says)
    assert said == rules.HOLDS and tested.startswith("the share 7.5% (7.3% to 7.7%)")  # each round
    c, here, said, why, _ = verdict(found + speeds([120.9, 60, 100, 130, 100]), says)
    assert said == rules.UNKNOWN and "straddles the edge" in why  # the rounds' own spread


def test_a_claim_that_does_not_hold_says_which_way():
    says = "Batching 16 users gives about 3.7x the tokens per second"
    high = verdict(changed("decode", "tokens per second", {"users": 16}, 500.0), says)
    low = verdict(changed("decode", "tokens per second", {"users": 16}, 40.0), says)
    assert high[2] == low[2] == rules.FAILS
    assert high[3].startswith("not below 2.00") and low[3].startswith("not above 0.50")
    assert all(why for _, _, said, why, _ in judge.verdicts(
        changed("decode", "tokens per second", {"users": 16}, 40.0), ROOFS, ("two_phases",),
        claims=TOLD.claims)
        if said != rules.HOLDS)  # a verdict other than holds always says why


def test_a_ratio_that_does_not_hold_names_the_row_further_over_its_limit():
    found = changed("prefill", "time per token", {"prompt": 1024}, 2.0)  # 1,024 now cheaper
    keys = [col("experiment", "experiment", "", "s", key=True),
            col("prompt", "prompt", "tokens", "d", key=True)]
    found += made("check", [*keys, col("measured", "measured", "ms", ".1f"),
                            col("limit", "limit", "ms", ".1f")],
                  [{"experiment": "prefill", "prompt": 256, "measured": 726.4, "limit": 150.0},
                   {"experiment": "prefill", "prompt": 1024, "measured": 2048.0,
                    "limit": 1400.0}])
    c, here, said, why, _ = verdict(found, "At 1,024 tokens each token costs more than at 256")
    assert said == rules.FAILS and why.startswith("no more; 1,024 tokens: 2.00 ms a token")
    assert why.endswith("256 tokens is further over its limit, which shrinks 1,024 tokens's "
                        "lead: the suite's distance from the limits, not the machine")
    found += IN_WORDS[0][1]  # the breakdown's parts, as a run records them
    because = verdict(found, "... because the notebook's part grows faster than the question")
    assert because[2] == rules.HOLDS  # the notebook's part grows all the same: judged alone


def test_the_chunks_of_128_claim_without_128_on_the_dial_says_so():
    found = changed("collision", "chunk", None, 16)
    c, here, said, why, _ = verdict(found, "Chunks of 128 give 8 small bumps instead")
    assert said == rules.UNKNOWN and why == (
        "not measured here (collision: chunks of 128 (the dial's chunk here is 16))")


def test_typing_barely_slower_is_not_judged_on_a_faster_h3():
    said = verdict(changed("bug", "power", {"trip": "typing"}, 32.0),
                   "... and typing barely slower")
    assert said[2] == rules.FAILS and "noise between the trips" in said[3]
    tie = verdict(changed("bug", "power", {"trip": "typing"}, 37.5),  # as fast: barely slower
                  "... and typing barely slower")
    assert tie[2] == rules.HOLDS


def test_a_run_says_how_disturbed_it_was_on_its_machine_line_and_claims_sheet():
    quiet = {"figures": 40, "disturbed": 0, "again": 0, "others": 0.03}
    assert host.disturbed_words(quiet) == ""
    assert host.disturbed_words({**quiet, "again": 3}) == (
        "3 runs measured again, disturbed by other work")
    assert host.disturbed_words({**quiet, "disturbed": 2, "others": 0.45}) == (
        "DISTURBED: 2 of 40 rows, other work up to 45% of the cores")
    assert host.disturbed_words({"figures": "x"}) == ""  # a planted one says nothing
    found = with_figure(the_posts_figures(), "decode", "step", {"users": 1},
                        samples=[37.0, 37.5, 38.0], runs=3, others=0.4, disturbed=True)
    assert records.disturbance(found)["disturbed"] == 1
    assert sheets.banner(found)[0].startswith("DISTURBED: other work took up to 40% of the "
                                              "cores while 1 of ")


def test_a_timed_figure_keeps_its_runs_conditions_in_its_record():
    t = timing.Timing((0.01, 0.011, 0.012), others=(0.0, 0.05, None), again=2)
    r = records.make(records_layout(), [{"time": timed(11.0, t)}], {})[0]
    assert (r["others"], r["again"], r["disturbed"]) == (0.05, 2, False)
    both = Measured(2.0, ((1, t), (-1, timing.Timing((0.005,) * 3, disturbed=True))))
    assert records.conditions(both)["disturbed"] is True
    json.dumps(r)  # saved as it is


def test_a_disturbed_runs_report_opens_with_it_and_what_to_do(tmp_path):
    import shutil
    from conftest import ROOT, reported
    box = tmp_path / "box"
    shutil.copytree(f"{ROOT}/references/amd-epyc-2c", box)
    data = json.loads((box / "two_phases.json").read_text())
    data["machine"]["disturbance"] = {"figures": 57, "disturbed": 24, "again": 40,
                                      "others": 0.53}
    (box / "two_phases.json").write_text(json.dumps(data))
    reported(str(box))
    text = (box / "report.md").read_text()
    assert ("> **Disturbed:** `two_phases.py` (DISTURBED: 24 of 57 rows, other work up to 53% "
            "of the cores)") in text and "Rerun when the machine is quieter" in text
    assert "| DISTURBED: 24 of 57 rows" in text  # on its machine line too


def test_a_measured_runs_records_keep_their_runs_conditions(quick_run):
    _, data, _ = quick_run
    timed = [r for r in data["records"] if r.get("samples")]
    assert timed and all(type(r["again"]) is int and type(r["disturbed"]) is bool
                         and (r["others"] is None or 0 <= r["others"] <= 1) for r in timed)
    assert all(r["again"] == 0 for r in timed)  # a quick run measures nothing again
    assert isinstance(data["machine"]["disturbance"]["figures"], int)


def test_a_run_that_saw_the_machine_move_says_what_to_do_as_pyperf_does():
    from harness.measuring import host
    quiet = {"frequency": {"mhz": 2600.0, "governor": "schedutil"},
             "disturbance": {"figures": 9, "disturbed": 0, "again": 0}, "busy": []}
    assert host.advice(quiet, {"mhz": 2580.0}) == ""  # nothing moved: nothing to say
    busy = {**quiet, "disturbance": {"figures": 9, "disturbed": 2, "again": 3}}
    said = host.advice(busy, {"mhz": 2580.0})
    assert said.startswith("for steadier figures (other work took the cores): close what else")
    assert "governor" not in said
    moved = host.advice(quiet, {"mhz": 1900.0})
    assert "the clock moved from 2600 to 1900 MHz" in moved and "cpupower frequency-set" in moved
    assert host.advice({}, {}) == ""  # a machine that says nothing of either
