"""The post's claims: every rule on hand-made figures, one case that holds and one that does not;
the post's own figures satisfy the post's claims; and the report holds every full run's table."""
import argparse
import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from harness.experiments.registry import TOLD
from harness.experiments import registry
from harness.judging import check, judge, rules
from harness.showing import report, sheets
from harness.keeping import records, schema
from conftest import ROOT, made, reported
from harness.keeping.records import KEYS, col
from harness.measuring.speeds import Speeds

POST = os.path.join(ROOT, "references", "post")
SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")
ROOFS = Speeds(12.0e9, 120.9e9)  # the post's machine


def the_posts_figures():
    """The post's records as its scripts would save them; what the post printed only in words
    (the summary, the check table's bounds, the dial's ends) filled in from its text."""
    found = []
    for script in ("machine_speed", "two_phases", "cube_bug"):
        found += schema.load(os.path.join(POST, script + ".json"), script)["records"]
    key = col("experiment", "experiment", "", "s", key=True)
    extra = [made("check", [key, col("prompt", "prompt", "tokens", "d", key=True),
                            col("bound by", "bound by", "", "s")],
                  [{"experiment": "prefill", "prompt": 256, "bound by": "workbench"},
                   {"experiment": "prefill", "prompt": 1024, "bound by": "workbench"}]),
             made("bug", [col("trip", "trip", "", "s", key=True),
                          col("power", "h**3 ms", "ms", ".1f"),
                          col("product", "h*h*h ms", "ms", ".1f")],  # "about 2x", "barely"
                  [{"trip": "reading", "power": 454.7, "product": 222.9},
                   {"trip": "typing", "power": 37.6, "product": 37.5}]),
             made("dial", [col("chunk", "chunk", "tokens", "d", key=True),
                           col("first word", "TTFT ms", "ms", ".1f"),
                           col("worst gap", "worst gap ms", "ms", ".1f")],
                  [{"chunk": 128, "first word": 5400.0, "worst gap": 671.2},
                   {"chunk": 1024, "first word": 4723.0, "worst gap": 4723.0}])]
    return found + [r for extra_records in extra for r in extra_records]


def changed(*cells):
    """The post's records with these figures changed: (experiment, figure, keys, value) each."""
    found = json.loads(json.dumps(the_posts_figures()))
    for experiment, figure, keys, value in zip(*[iter(cells)] * 4):
        r = next(r for r in found if records.matches(r, experiment, figure, keys or {}))
        r["value"] = value
    return found


def verdict(tables, says, settings=None):
    found = [v for v in judge.verdicts(tables, ROOFS, ("machine_speed", "two_phases",
                                                        "cube_bug"), settings, claims=TOLD.claims)
             if v[0].says == says]
    assert len(found) == 1, says
    return found[0]


def test_the_posts_own_figures_satisfy_every_claim():
    for c, here, said, why, _ in judge.verdicts(the_posts_figures(), ROOFS, (
            "machine_speed", "two_phases", "cube_bug"), claims=TOLD.claims):
        if c.post == rules.NOT_PRINTED:  # the post says it in words: no figure of its to judge
            assert said == rules.UNKNOWN and why.startswith("not measured here"), c.says
            continue
        assert said == rules.HOLDS, (c.says, here, why)


H100_BF16 = ("machine_speed", "math speed", None, 989_000.0,  # an H100 SXM in bfloat16: 989
             "machine_speed", "memory speed", None, 3_350.0,  # TFLOP/s against 3.35 TB/s
             "machine_speed", "balance", None, 989_000 / 3_350)
FAILS = [  # (the claim, as the post says it; a real kind of machine on which it would not hold,
    #         and its figures: the post's with these changed), both edges of a two-sided rule
    ("The workbench outpaces the forklift", "a NumPy on the reference BLAS: 3 GFLOP/s",
     ("machine_speed", "math speed", None, 3.0, "machine_speed", "balance", None, 3.0 / 12)),
    ("The workbench outpaces the forklift", "an H100 in bfloat16: a balance of 295", H100_BF16),
    ("A 1-token question costs about", "a machine whose notes are read far slower than its "
     "tables: typing 3x the read", ("decode", "step", {"users": 1}, 100.0)),
    ("A 1-token question costs about", "a GPU whose read of a question pays launches typing "
     "does not: the read 1.6x the step", ("prefill", "time", {"prompt": 1}, 60.0)),
    ("At 64 to 256 tokens each token costs under 3 ms", "a BLAS slow at these shapes",
     ("prefill", "time per token", {"prompt": 256}, 9.0)),
    ("The wait for the first word depends", "a GPU whose reads up to 1,024 tokens all wait on "
     "the forklift: 1,024 tokens 1.2x 256's", ("prefill", "time", {"prompt": 1024}, 870.0)),
    ("... running at about half", "the post's own h**3 bug: 20 of 121 GFLOP/s",
     ("prefill", "math speed", {"prompt": 64}, 20.0, "prefill", "math speed", {"prompt": 256},
      21.0)),
    ("Reading needs about 20 tokens", "a machine whose one-token read is as cheap a token as a "
     "long one (its tables in a 3D V-Cache's 768 MB)",
     ("prefill", "time per token", {"prompt": 1}, 5.0)),
    ("Reading needs about 20 tokens", "a machine whose short reads are slow for other reasons "
     "than the forklift", ("prefill", "time per token", {"prompt": 64}, 6.0)),
    ("At 1,024 tokens each token costs more", "a BLAS that runs the 1,024-token products much "
     "better than the 256-token ones", ("prefill", "time per token", {"prompt": 1024}, 2.0)),
    ("Reading is stuck on the workbench", "a GPU in 16-bit math, whose 256-token read waits on "
     "the forklift", ("check", "bound by", {"experiment": "prefill", "prompt": 256}, "forklift")),
    ("One typing user uses under 4%", "a machine of balance 4 whose typing step is at its "
     "limit: 12% busy", ("decode", "math speed", {"users": 1}, 15.0)),
    ("A faster workbench would barely help", "a machine whose balance is under 5: its math a "
     "third of its fetching", ("decode", "math speed", {"users": 1}, 40.0)),
    ("More than 80% of the typing time", "a slow matrix-vector product: the step 3x its bytes'",
     ("decode", "step", {"users": 1}, 100.0)),
    ("Batching 16 users gives about 3.7x", "a machine whose attention is far slower than its "
     "limit: 1.1x, under half its limits' 6.4x",
     ("decode", "tokens per second", {"users": 16}, 30.0)),
    ("Batching 16 users gives about 3.7x", "a GPU run one launch after another: 16 users in one "
     "user's step, 16x, over twice its limits' 6.4x",
     ("decode", "tokens per second", {"users": 16}, 425.6)),
    ("... and 64 users about 5.2x", "a GPU whose step is its launches: 64 users 4x the tokens "
     "per second of 16", ("decode", "tokens per second", {"users": 64}, 394.0)),
    ("Each user's gap between words grows", "a GPU whose steps are its launches: 4 users' step "
     "as long as one's", ("decode", "step", {"users": 4}, 37.5)),
    ("At 64 users the notebooks outweigh", "another model: notes the same bytes as 1 user's",
     ("decode", "bytes read", {"users": 64}, 400)),
    ("Reading a long question at once freezes", "a GPU whose workbench reads the question in "
     "a few of the typers' fetches", ("collision", "all at once gap", None, 500.0)),
    ("Chunks of 128 give 8 small bumps", "a launch-bound machine: a chunk's step as long as "
     "the whole question's", ("collision", "chunked worst gap", None, 3000.0)),
    ("The chunk size is a dial", "a machine whose workbench slows on large trips: chunks of "
     "1,024 give the first word later than 128", ("dial", "first word", {"chunk": 128}, 4000.0)),
    ("The chunk size is a dial", "a launch-bound machine: the worst gap flat from 128 to 1,024",
     ("dial", "worst gap", {"chunk": 1024}, 600.0)),
    ("Reading is about 14 times cheaper", "a machine whose balance is under 2",
     ("decode", "step", {"users": 1}, 10.0)),
    ("h**3 is about 2x slower", "a NumPy whose power loop is slow for every sign",
     ("cube", "power", {"numbers": "all positive"}, 9.0)),
    ("... about 109x on negative numbers", "a NumPy that cubes by multiplying",
     ("cube", "power", {"numbers": "all negative"}, 5.0)),
    ("... about 55x on a real mix", "a NumPy that cubes by multiplying",
     ("cube", "power", {"numbers": "mixed (real)"}, 5.0)),
    ("With h**3 in the model, reading", "a NumPy that cubes by multiplying",
     ("bug", "power", {"trip": "reading"}, 230.0)),
    ("... and typing barely slower", "a power loop so slow that 3,072 numbers a floor cost "
     "as much as the tables", ("bug", "power", {"trip": "typing"}, 60.0)),
    ("... and typing barely slower", "a launch-bound GPU, where h*h*h's two launches cost "
     "more than h**3's one", ("bug", "power", {"trip": "typing"}, 30.0)),
]


@pytest.mark.parametrize("start,machine,change", FAILS,
                         ids=[f"{s} on {m[:30]}" for s, m, _ in FAILS])
def test_each_rule_fails_on_a_real_kind_of_machine_and_says_so_plainly(start, machine, change):
    says = next(c.says for c in registry.CLAIMS if c.says.startswith(start))
    assert verdict(the_posts_figures(), says)[2] == rules.HOLDS
    assert verdict(changed(*change), says)[2] == rules.FAILS, machine


def test_every_rule_with_two_edges_fails_past_each_of_them():
    """A rule of two edges (within) is tried past both: on a machine below and one above."""
    two = {c.says for c in registry.CLAIMS if c.basis != "accounting" and not c.predicted
           and not c.gpu and " and under " in c.rule or "either way" in c.rule}
    tried = {}
    for start, machine, _ in FAILS:
        says = next(c.says for c in registry.CLAIMS if c.says.startswith(start))
        tried[says] = tried.get(says, 0) + 1
    assert two and all(tried.get(says, 0) >= 2 for says in two), two


def breakdown(**rows):
    """Breakdown records of hand-made rows: {name: (experiment, its keys, {part: ms})}."""
    parts = [col(p, p, "ms", ".1f") for p in ("trip", "tables", "attention")]
    return [r for experiment, keys, ms in rows.values()
            for r in made("breakdown", [col("experiment", "experiment", "", "s", key=True)]
                          + parts, [{"experiment": experiment, KEYS: keys, **ms}])]


def depth(none, full):
    """Depth records of one user typing with no notes and with 1,023: each step in ms; the MB
    read, 340 and 415: 6.25 ms more at the post's 12 GB/s."""
    return made("depth", [col("users", "users", "users", "d", key=True),
                          col("notes", "notes", "notes", "d", key=True),
                          col("step", "step ms", "ms", ".1f"),
                          col("bytes read", "MB read", "MB", ".0f")],
                [{"users": 1, "notes": 0, "step": none, "bytes read": 340.0},
                 {"users": 1, "notes": 1023, "step": full, "bytes read": 415.0}])


def negative(percent):
    """The bug's record of how many of the numbers the model cubes are negative."""
    return made("bug", [col("trip", "trip", "", "s", key=True),
                        col("negative share", "negative %", "%", ".0f")],
                [{"trip": "reading", "negative share": percent}])


IN_WORDS = [  # the claims the post makes in words only: hand-made records that hold, then not
    ("... because the notebook's part grows faster",
     breakdown(a=("prefill", {"prompt": 256}, {"trip": 290.0, "tables": 200.0, "attention": 38.0}),
               b=("prefill", {"prompt": 1024}, {"trip": 1050.0, "tables": 700.0,
                                             "attention": 250.0})),
     breakdown(a=("prefill", {"prompt": 256}, {"trip": 290.0, "tables": 200.0, "attention": 38.0}),
               b=("prefill", {"prompt": 1024}, {"trip": 1050.0, "tables": 700.0,
                                             "attention": 100.0}))),
    ("... so at 64 users the forklift mostly carries notebooks",
     breakdown(a=("decode", {"users": 64}, {"trip": 220.0, "tables": 91.0, "attention": 116.0})),
     breakdown(a=("decode", {"users": 64}, {"trip": 220.0, "tables": 130.0, "attention": 80.0}))),
    ("A faster forklift, or fewer bytes", depth(33.0, 40.0), depth(33.0, 34.0)),
    ("About half the numbers in a real model are negative", negative(50.0), negative(20.0)),
]


@pytest.mark.parametrize("start,holds,fails", IN_WORDS, ids=[s for s, *_ in IN_WORDS])
def test_each_claim_the_post_makes_in_words_holds_or_not_on_its_figures(start, holds, fails):
    says = next(c.says for c in registry.CLAIMS if c.says.startswith(start))
    assert verdict(the_posts_figures() + holds, says)[2] == rules.HOLDS
    assert verdict(the_posts_figures() + fails, says)[2] == rules.FAILS


def test_the_notes_that_do_not_outlast_the_tables_say_so():
    says = next(c.says for c in registry.CLAIMS if c.says.startswith(IN_WORDS[1][0]))
    *_, said, why, _ = verdict(the_posts_figures() + IN_WORDS[1][2], says)
    assert said == rules.FAILS and why.startswith("the tables take as long or longer")


def test_every_claim_is_tried_both_ways():
    assert {c.says for c in registry.CLAIMS if not c.predicted and not c.gpu} == {  # GPU claims:
        #   test_predict; a GPU run's launches: test_gpu_path
        next(c.says for c in registry.CLAIMS if c.says.startswith(s))
        for s in [s for s, *_ in FAILS] + [s for s, *_ in IN_WORDS]}


def test_a_claim_that_does_not_hold_says_why_from_the_check_and_breakdown_tables():
    found = changed("decode", "step", {"users": 1}, 100.0)
    keys = [col("experiment", "experiment", "", "s", key=True),
            col("users", "users", "users", "d", key=True)]
    found += made("check", [*keys, col("x limit", "x limit", "x", ".2f")],
                  [{"experiment": "decode", "users": 1, "x limit": 3.1}])
    excess = {"the BLAS": 1.1, "our tables": 2.8, "attention": 3.5, "elementwise": 2.0,
              "other": 0.9}  # 10.3 ms over the limit: 20% is 2.06 ms
    found += made("breakdown", keys, [{"experiment": "decode", "users": 1,
                                       **{f"excess: {p}": ms for p, ms in excess.items()}}],
                  unprinted=check.BREAKDOWN.unprinted)
    c, here, said, why, tested = verdict(found, "More than 80% of the typing time is the forklift")
    assert said == rules.FAILS and here == "31%" and tested == ""  # no runs behind it
    assert why == ("not above 80%; decode users 1: 3.10x its limit, 10.3 ms over it: "
                   "attention +3.5, our tables +2.8 ms")  # which way, then every part with a
    #                                                      fifth of the excess or more


def test_each_claim_is_judged_as_measured_and_at_this_machines_limits():
    measured = changed("decode", "math speed", {"users": 1}, 15.0)  # the suite: 12% busy
    ideal = changed("decode", "math speed", {"users": 1}, 6.0)  # at the limits: 5% busy
    says = "One typing user uses under 4% of the workbench"
    found = {c.says: rest for c, *rest in judge.both(measured, ROOFS, ("two_phases",), None,
                                                      (), ideal, claims=TOLD.claims)}
    here, said, why, at, _ = found[says]
    assert said == rules.FAILS and at == ("5.0%", rules.HOLDS)
    assert why.startswith("not below 10.0%; it holds at this machine's limits: the suite's "
                          "distance from them")  # which way, then whose is why
    here, said, why, at, _ = {c.says: rest for c, *rest in judge.both(
        measured, ROOFS, ("two_phases",), None, (), measured,
        claims=TOLD.claims)}[says]  # the limits too
    assert at[1] == rules.FAILS and why.startswith("not below 10.0%; it fails at this "
                                                    "machine's limits too")
    assert {c.says: rest for c, *rest in judge.both(measured, ROOFS, ("two_phases",), None,
                                                    claims=TOLD.claims)}[
        says][3] is None  # no rows at the limits (the post's own figures): no second verdict
    # a claim true at the limits by how a limit is made (100% forklift) blames neither
    slow = changed("decode", "step", {"users": 1}, 100.0)
    forklift = "More than 80% of the typing time is the forklift"
    here, said, why, at, _ = {c.says: rest for c, *rest in judge.both(
        slow, ROOFS, ("two_phases",), None, (), changed("decode", "step", {"users": 1},
                                                         31.4), claims=TOLD.claims)}[forklift]
    assert said == rules.FAILS and at[1] == rules.HOLDS and why.startswith("not above 80%")
    forklift_claim = next(c for c in registry.CLAIMS if c.says == forklift)
    assert sheets.limited(at, forklift_claim).endswith("holds by construction (on any CPU)")


def test_a_claim_measured_with_other_settings_or_within_the_noise_cannot_be_told():
    says = "Each user's gap between words grows with the batch"
    c, _, said, why, _ = verdict(the_posts_figures(), says, {"model": "small", "notes": 128})
    assert said == rules.UNKNOWN and why == "the post measured it with --notes 512"
    found = the_posts_figures()  # 16 users' runs spread over 4 users' step
    step = next(r for r in found if records.matches(r, "decode", "step", {"users": 4}))
    step.update(samples=[50.0, 85.3, 200.0], statistic="median")
    assert verdict(found, says)[2] == rules.UNKNOWN


def test_a_judge_that_meets_a_bug_raises_and_only_an_absent_figure_is_not_measured():
    found = [r for r in the_posts_figures() if r["experiment"] != "collision"]
    c, here, said, why, _ = verdict(found, "Reading a long question at once freezes the typers "
                                           "for about 40x their normal gap")
    assert said == rules.UNKNOWN and why.startswith("not measured here (collision")
    broken = [dataclasses.replace(c, judge=lambda t, r: 1 / 0) for c in registry.CLAIMS]
    with pytest.raises(ZeroDivisionError):
        judge.verdicts(found, ROOFS, ("two_phases",), claims=broken)


# ---- the report

def test_the_report_holds_every_table_of_the_full_runs_and_nothing_of_quick_ones(tmp_path):
    box = tmp_path / "box"
    shutil.copytree(SHIPPED, box)
    quick = json.load(open(box / "cube_bug.json"))
    cube = next(t for t in quick["sheets"] if t["name"] == "cube")
    quick["quick"], cube["title"] = True, "A QUICK RUN'S TABLE"
    (box / "cube_bug.quick.json").write_text(json.dumps(quick))
    reported(str(box))
    text = (box / "report.md").read_text()
    for script in ("machine_speed", "two_phases", "cube_bug"):
        for t in json.load(open(box / f"{script}.json"))["sheets"]:
            name = t["name"]
            if name == "claims":
                continue
            title = t.get("title") or name
            assert f"### {report.md(title)}" in text or report.repeats(
                title, report.SECTIONS[script]) and f"## {report.md(report.SECTIONS[script])}" \
                in text, name  # its own heading, or its section's, which says the same
    assert "QUICK" not in text and "## The post's claims on this machine" in text
    assert sum(text.count(f"\n| {report.marked(v)} |") for v in (  # the verdict column
        "holds", "does not hold", "cannot tell here")) == len([c for c in registry.CLAIMS
                                             if not c.predicted and not c.gpu])
    assert text.index("## The post's claims") < text.index("### ")  # the verdicts first
    assert "![The roofline](roofline.png)" in text


# ---- noise, load and predictions

def rounds_of(found, experiment, figure, keys, samples, rounds=None):
    """The post's record of this figure, given runs in rounds (0, 1, ... unless said)."""
    r = next(r for r in found if records.matches(r, experiment, figure, keys))
    r.update(samples=list(samples), rounds=list(rounds or range(len(samples))),
             value=float(np.median(samples)), statistic="median")
    return r


def test_a_dial_step_the_wrong_way_inside_its_margin_cannot_tell_and_outside_does_not_hold():
    """The dial's first word, chunks of 128 against 1,024: a tie within rules.TIE holds only
    where its interval clears the margin. 3% the wrong way, its interval straddling 0.95:
    cannot tell; 20% the wrong way, wholly short: does not hold; 2% the right way: holds."""
    says = "The chunk size is a dial: bigger chunks give the newcomer its first word sooner, " \
           "smaller ones keep the typers smoother"
    found = the_posts_figures()
    later = 4723.0  # the 1,024-chunk's first word in every round; 128's around this ratio of it:
    rounds_of(found, "dial", "worst gap", {"chunk": 128}, [671.0, 672, 670, 671, 673])
    rounds_of(found, "dial", "worst gap", {"chunk": 1024}, [4723.0] * 5)
    rounds_of(found, "dial", "first word", {"chunk": 1024}, [later] * 5)
    for ratios, expected in (([0.99, 0.93, 0.97, 0.95, 1.0], rules.UNKNOWN),
                             ([0.80, 0.81, 0.79, 0.80, 0.80], rules.FAILS),
                             ([1.02, 1.03, 1.01, 1.02, 1.02], rules.HOLDS)):
        rounds_of(found, "dial", "first word", {"chunk": 128}, [later * r for r in ratios])
        c, here, said, why, tested = verdict(found, says)
        assert said == expected, (ratios, why, tested)
        if expected == rules.UNKNOWN:
            assert "first word, 128 over 1024 0.97" in why and "edge 0.95" in why
        if expected == rules.FAILS:
            assert why.startswith("chunks of 1024 give the first word later than 128 by more "
                                  "than 5%")


def test_a_rule_holds_fails_or_cannot_tell_over_its_interval():
    says = "Batching 16 users gives about 3.7x the tokens per second"
    found = the_posts_figures()  # one user: 26.6 tokens/s in every round
    rounds_of(found, "decode", "tokens per second", {"users": 1}, [26.6] * 5)
    rounds_of(found, "decode", "tokens per second", {"users": 16}, [97.0, 98.5, 99.0, 98, 97.5])
    c, here, said, why, tested = verdict(found, says)  # 3.7x of the limits' 6.4x: 0.57 clears
    assert said == rules.HOLDS and tested.startswith("the gain over the limits' 0.58 (0.5")
    rounds_of(found, "decode", "tokens per second", {"users": 16}, [45.0, 60, 98.5, 105, 50])
    c, here, said, why, tested = verdict(found, says)  # 0.19 to 0.82 (at its step): straddles
    assert said == rules.UNKNOWN and why.startswith("the gain over the limits' 0.40 (0.19 to 0.82)")
    assert "straddles the edge, from 5 rounds; about" in why and "more rounds" in why
    # where a round's visits are timed, what more rounds cost: those
    rounds_of(found, "decode", "tokens per second", {"users": 1}, [26.6] * 5)["visit_s"] = 0.5
    rounds_of(found, "decode", "tokens per second", {"users": 16},
              [45.0, 60, 98.5, 105, 50])["visit_s"] = 0.5
    why = verdict(found, says)[3]
    assert " would settle it (--runs " in why and " s more)" in why
    rounds_of(found, "decode", "tokens per second", {"users": 16}, [44.0, 48, 49, 50, 51])
    c, here, said, why, tested = verdict(found, says)  # under 0.5 in every resample: fails
    assert said == rules.FAILS and why.startswith("not above 0.50")


def test_a_busy_run_tells_nothing_by_its_timings_and_says_what_to_do():
    busy = ("1.9 of 2 cores busy with other work",)
    found = judge.verdicts(the_posts_figures(), ROOFS, ("machine_speed", "two_phases",
                                                         "cube_bug"), None, busy,
                           claims=TOLD.claims)
    for c, here, said, why, _ in found:
        if c.post == rules.NOT_PRINTED:  # figures the post never printed: not measured
            assert said == rules.UNKNOWN and why.startswith("not measured here")
        elif c.measured:
            assert said == rules.UNKNOWN and why == "busy: " + busy[0], c.says
        else:  # the accounting alone: the same on any machine, busy or not
            assert said == rules.HOLDS, c.says
    args = argparse.Namespace(quick=False, tablefmt="plain", model="small", notes=512)
    text = sheets.claims(the_posts_figures(), ROOFS, ("two_phases",), args, busy, told=TOLD).text
    assert text.splitlines()[0].startswith("BUSY: the machine was busy while this ran (1.9 of")
    assert "rerun on a quiet machine, with more --runs, or with fewer --threads" in text
    said = [line for line in text.splitlines()[2:] if not line.startswith(" ")]  # the busy
    assert text.splitlines()[1].startswith("0 of 19 findings hold, 19 cannot tell here; 2 more "
                                           "follow from the accounting")
    accounting = [c.rule for c in registry.CLAIMS if not c.measured]  # the same busy or not
    assert said and all(line.startswith(rules.UNKNOWN) or any(a in line for a in accounting)
                        for line in said)


def test_a_prediction_says_so_in_every_verdict_and_in_the_report(tmp_path):
    found = judge.verdicts(the_posts_figures(), ROOFS, ("two_phases",), {"predict": True},
                           claims=TOLD.claims)
    assert {v for _, _, v, *_ in found} <= {"predicted: holds", "predicted: does not hold",
                                            rules.UNKNOWN}
    from conftest import script
    r = script("two_phases.py", "--predict", "--no-plot", "--forklift", "12", "--workbench",
               "121",
               "--out", str(tmp_path), "--label", "p")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p" / "report.md").read_text()
    assert text.startswith("# Prefill vs Decode, predicted: every figure a limit")
    assert "machine: PREDICTED, nothing was run" in text
    assert "given, float32 tables/activations/notes: 12.0 GB/s, 121 GFLOP/s" in text
    assert "nothing was run, so no figure has an interval" in text  # never the run's processes
    assert "interval from the run's processes" not in text
    assert f"| {report.marked('predicted: holds')} " in text and "**holds**" not in text


def test_a_busy_runs_report_opens_with_the_warning_and_judges_nothing_by_it(tmp_path):
    box = tmp_path / "box"
    shutil.copytree(SHIPPED, box)
    data = json.load(open(box / "two_phases.json"))
    data["machine"]["busy"] = ["another run of this suite"]  # and, as an older run, no saved
    data["records"] = [r for r in data["records"] if r["experiment"] != "claims"]  # verdicts:
    (box / "two_phases.json").write_text(json.dumps(data))  # the report judges them now
    reported(str(box))
    text = (box / "report.md").read_text()
    assert "> **Busy:** `two_phases.py` (another run of this suite) ran while" in text
    assert text.index("**Busy:**") < text.index("## The post's claims")
    assert f"| {report.marked('cannot tell here')} | Batching 16 users" in text


def test_the_bug_is_timed_in_the_model_both_ways(tmp_path, monkeypatch):
    import cube_bug
    import model
    from engine.blocks import Paths, ways
    x = np.random.default_rng(0).standard_normal((model.TINY.width, 5), dtype=np.float32)
    floors = model.floors(model.TINY)
    one, other = (model.trip(model.TINY, floors, x, [(model.notebook(model.TINY, 1, 5), 5)],
                             ways(Paths(cube=c))) for c in ("power", "product"))
    np.testing.assert_allclose(one, other, rtol=1e-5, atol=1e-5)  # the same answer either way
    monkeypatch.setattr(model, "SIZES", {**model.SIZES, "small": model.TINY})  # small's tables
    #                                                                   would take seconds to draw
    assert cube_bug.main(["--quick", "--in-model", "--runs", "2", "--out", str(tmp_path),
                          "--label", "box"]) == 0
    data = json.load(open(tmp_path / "box" / "cube_bug.quick.json"))
    bug = records.rows(data["records"], "bug")
    assert [dict(keys)["trip"] for keys in bug] == ["reading", "typing"]
    for figures in bug.values():
        assert figures["ratio"] == pytest.approx(figures["power"] / figures["product"])
        assert figures["power"] > 0 and figures["product"] > 0
    assert "--in-model" in cube_bug.build_parser().format_help()


def test_every_rule_names_a_machine_it_would_fail_on_and_the_docs_say_it():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    rules = open(os.path.join(ROOT, "docs", "claims.md"), encoding="utf-8").read()
    assert "(docs/claims.md)" in readme  # the README points its readers there
    for c in registry.CLAIMS:
        if not c.predicted:
            assert c.fails_on and f"| {c.says} | {c.fails_on} |" in rules, c.says
    cpu, gpu = (judge.family(registry.CLAIMS, g) for g in (False, True))  # as the code has it
    assert f"({cpu} on a CPU, {gpu} on a GPU)" in rules and f"5% / {cpu} on a CPU" in rules


@pytest.mark.kernels  # the tiles' workbench
def test_the_claims_are_judged_once_and_the_report_reads_the_verdicts_the_run_saved(tmp_path):
    import machine_speed
    from conftest import in_process
    r = in_process(machine_speed.main, "--size", "300", "--matmul", "64", "--runs", "3",
                   "--processes", "1", "--out", str(tmp_path), "--label", "box")
    assert r.returncode == 0, r.stderr
    path = tmp_path / "box" / "machine_speed.json"
    data = json.loads(path.read_text())
    fork = {r["figure"]: r for r in data["records"] if r["experiment"] == "machine_speed"}
    reads = [fork[f]["samples"] for f in ("matrix-vector read", "streaming read",
                                          "laid-out read")]  # (the kernels load here)
    assert fork["memory speed"]["samples"] == pytest.approx(np.max(reads, axis=0))
    said = {r["keys"]["claim"]: r for r in data["records"]
            if r["experiment"] == "claims" and r["figure"] == "verdict"}
    assert set(said) == {c.says for c in registry.CLAIMS if c.script == "machine_speed"}
    first = next(iter(said.values()))
    first["value"] = rules.FAILS  # as if the run had judged it so: the report must not judge
    path.write_text(json.dumps(data))  # again, but say what the run said
    text = report.markdown({"machine_speed": schema.load(str(path), "machine_speed")}, [], TOLD)
    assert f"| {report.marked('does not hold')} | " \
        f"{report.md(first['keys']['claim'], in_table=True)}" in text


def test_a_claim_counted_by_construction_holds_at_the_limits_of_any_cpu():
    """At a machine's limits (every row at max(bytes / forklift, FLOPs / workbench)), a claim
    flagged 'by construction' holds whatever the balance, from 1 to 64 FLOPs per byte (a CPU's,
    a GPU's in float32): its verdict there tells nothing of the machine; every other claim
    judged there fails at some balance of that range."""
    import two_phases
    from harness import model_run
    from harness.experiments import summary
    from harness.predicting import plans
    args = two_phases.parse_args(["--no-plot"])  # the post's experiment
    cfg, seen = model_run.config(args), {}
    for balance in (1, 2, 4, 8, 16, 32, 64):
        roofs = Speeds(20e9, 20e9 * balance)
        found = plans.at_the_limits(cfg, args, two_phases.EXPERIMENTS, roofs,
                                    (summary.figures,))
        for c, here, said, *_ in judge.verdicts(found, roofs, ("two_phases",), vars(args),
                                                claims=TOLD.claims):
            if said in (rules.HOLDS, rules.FAILS):
                seen.setdefault(c.says, []).append(said)
    for c in registry.CLAIMS:
        if c.script != "two_phases" or c.predicted or c.gpu or c.says not in seen \
                or c.basis == "accounting":  # the same at every machine: counted apart
            continue
        if c.construction:
            assert set(seen[c.says]) == {rules.HOLDS} and len(seen[c.says]) >= 5, c.says
        else:
            assert rules.FAILS in seen[c.says], c.says
    assert {c.says for c in registry.CLAIMS if c.construction} <= set(seen)


def layouts():
    """Every Layout the suite's modules declare: the records' experiments and their figures."""
    import importlib
    import pkgutil
    import cube_bug
    import machine_speed
    import two_phases
    from harness import experiments, model_run
    from harness.predicting import fitting, parts, plans, predict, request, turning
    modules = [two_phases, machine_speed, cube_bug, model_run, check, sheets, fitting, parts,
               plans, predict, request, turning] + [
        importlib.import_module(f"harness.experiments.{m.name}")
        for m in pkgutil.iter_modules(experiments.__path__)]
    return [v for m in modules for v in vars(m).values() if isinstance(v, records.Layout)]


def test_every_figure_a_claim_reads_is_a_column_some_layout_makes(monkeypatch):
    """A claim finds its figures by the records' names (an experiment, a figure): each name it
    asks for, judging the post's figures as measured and as predicted, is a column of a Layout
    the code declares, so a renamed column fails here rather than reading 'not measured here'
    in every run."""
    asked, real_find, real_rows = set(), records.find, records.rows

    class Read(dict):  # a row of rows() that notes each figure read from it
        experiment = ""

        def __getitem__(self, figure):
            asked.add((self.experiment, figure))
            return super().__getitem__(figure)

        def get(self, figure, default=None):
            asked.add((self.experiment, figure))
            return super().get(figure, default)

    def find(found, experiment, figure, /, **keys):
        asked.add((experiment, figure))
        return real_find(found, experiment, figure, **keys)

    def rows(found, experiment):
        out = {}
        for keys, figures in real_rows(found, experiment).items():
            out[keys] = Read(figures)
            out[keys].experiment = experiment
        return out

    for module in (rules, *registry.MODULES):  # wherever a claim's judge reads records
        for name, read in (("find", find), ("rows", rows)):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, read)
    scripts = ("machine_speed", "two_phases", "cube_bug")
    for settings in (None, {"predict": True}, {"device": "torch:cuda"}):
        judge.verdicts(the_posts_figures(), ROOFS, scripts, settings, claims=TOLD.claims)
    made = {(layout.name, c.figure) for layout in layouts()
            for c in (*layout.columns, *layout.unprinted)}
    assert len(asked) > 20 and asked - made == set()
