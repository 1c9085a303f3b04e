"""The post's claims: every rule on hand-made figures, one case that holds and one that does not;
the post's own figures satisfy the post's claims; and the report holds every full run's table."""
import json
import os
import shutil

import pytest

from harness import claims, report, schema
from conftest import ROOT
from harness.printers import Sheet, entry

POST = os.path.join(ROOT, "references", "post")
SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")
ROOFS = {"bytes_per_s": 12.0e9, "flops_per_s": 120.9e9}  # the post's machine


def the_posts_figures():
    """The post's tables as its scripts would save them; what the post printed only in words
    (the summary, the check table's bounds, the dial's ends) filled in from its text."""
    tables = {}
    for script in ("machine_speed", "two_phases", "cube_bug"):
        tables.update(schema.load(os.path.join(POST, script + ".json"), script)["tables"])
    extra = [Sheet("summary", [("reading ms/token", "ms", ""), ("at prompt", "tokens", ""),
                               ("typing ms/token", "ms", ""), ("times cheaper", "x", "")],
                   [[2.84, 256, 37.5, 13.2]]),
             Sheet("check", [("experiment", "", "s"), ("row", "", "s"), ("bound by", "", "s")],
                   [["prefill", "256 tokens", "workbench"], ["prefill", "1024 tokens",
                                                             "workbench"]]),
             Sheet("dial", [("chunk", "tokens", ""), ("TTFT ms", "ms", ""),
                            ("worst gap ms", "ms", "")],
                   [[128, 5400.0, 671.2], [1024, 4723.0, 4723.0]])]
    return {**tables, **{s.name: entry(s) for s in extra}}


def changed(*cells):
    """The post's figures with these cells changed: (sheet, column, row key, value) each."""
    tables = json.loads(json.dumps(the_posts_figures()))
    for sheet, column, key, value in zip(*[iter(cells)] * 4):
        t = tables[sheet]
        heads = [c["header"] for c in t["columns"]]
        row = next(r for r in t["rows"] if key is None or r[:len(key)] == list(key))
        row[heads.index(column)] = value
    return tables


def verdict(tables, says, settings=None):
    found = [v for v in claims.verdicts(tables, ROOFS, ("machine_speed", "two_phases",
                                                        "cube_bug"), settings)
             if v[0].says == says]
    assert len(found) == 1, says
    return found[0]


def test_the_posts_own_figures_satisfy_every_claim():
    for c, here, said, why in claims.verdicts(the_posts_figures(), ROOFS, ("machine_speed",
                                                                           "two_phases",
                                                                           "cube_bug")):
        assert said == claims.HOLDS, (c.says, here, why)


FAILS = [  # (the claim, as the post says it), then one figure changed so that it no longer holds
    ("The workbench outpaces the forklift", ("machine_speed", "balance", None, 0.5)),
    ("A trip needs about 20 tokens", ("machine_speed", "tokens a trip needs", None, 300)),
    ("A 1-token question costs about", ("prefill", "time ms", [1], 100.0)),
    ("At 64 to 256 tokens each token costs under 3 ms", ("prefill", "ms/token", [256], 3.5)),
    ("... running at about half", ("prefill", "GFLOP/s", [64], 20.0, "prefill", "GFLOP/s",
                                   [256], 21.0)),
    ("At 1,024 tokens each token costs more", ("prefill", "ms/token", [1024], 2.0)),
    ("Reading is stuck on the workbench", ("check", "bound by", ["prefill", "256 tokens"],
                                           "forklift")),
    ("One typing user uses under 4%", ("decode", "GFLOP/s", [1], 10.0)),
    ("More than 80% of the typing time", ("decode", "step ms", [1], 100.0)),
    ("Batching 16 users gives about 3.7x", ("decode", "tokens/s", [16], 30.0)),
    ("... and 64 users about 5.2x", ("decode", "tokens/s", [64], 40.0)),
    ("Each user's gap between words grows", ("decode", "step ms", [16], 50.0)),
    ("At 64 users the notebooks outweigh", ("decode", "MB read", [64], 400)),
    ("Reading a long question at once freezes", ("collision", "all at once gap ms", None,
                                                 500.0)),
    ("Chunks of 128 give 8 small bumps", ("collision", "chunked worst gap ms", None, 5000.0)),
    ("The chunk size is a dial", ("dial", "TTFT ms", [128], 4000.0)),
    ("Reading is about 14 times cheaper", ("summary", "times cheaper", None, 3.0)),
    ("h**3 is about 2x slower", ("cube", "ratio", ["all positive"], 9)),
    ("... about 109x on negative numbers", ("cube", "ratio", ["all negative"], 500)),
    ("... about 55x on a real mix", ("cube", "ratio", ["mixed (real)"], 5)),
]


@pytest.mark.parametrize("start,change", FAILS, ids=[s for s, _ in FAILS])
def test_each_rule_says_plainly_when_its_claim_does_not_hold(start, change):
    says = next(c.says for c in claims.CLAIMS if c.says.startswith(start))
    assert verdict(the_posts_figures(), says)[2] == claims.HOLDS
    assert verdict(changed(*change), says)[2] == claims.FAILS


def test_every_claim_is_tried_both_ways():
    assert {c.says for c in claims.CLAIMS} == {
        next(c.says for c in claims.CLAIMS if c.says.startswith(s)) for s, _ in FAILS}


def test_a_claim_that_does_not_hold_says_why_from_the_check_and_breakdown_tables():
    tables = changed("decode", "step ms", [1], 100.0)
    tables["check"]["rows"].append(["decode", "1 user", "forklift"])
    tables["check"]["columns"].append({"header": "x limit", "unit": "x"})
    for row in tables["check"]["rows"]:
        row.append(3.1)
    tables["breakdown"] = entry(Sheet("breakdown", [("experiment", "", "s"), ("row", "", "s"),
                                                    ("most excess", "", "s")],
                                      [["decode", "1 user", "attention +12.0 ms"]]))
    c, here, said, why = verdict(tables, "More than 80% of the typing time is the forklift")
    assert said == claims.FAILS and here == "31%"
    assert why == "decode 1 user: 3.10x its limit, most excess attention +12.0 ms"


def test_a_claim_measured_with_other_settings_or_within_the_noise_cannot_be_told():
    says = "Each user's gap between words grows with the batch"
    c, _, said, why = verdict(the_posts_figures(), says, {"model": "small", "notes": 128})
    assert said == claims.UNKNOWN and why == "the post measured it with --notes 512"
    tables = the_posts_figures()  # 16 users' runs spread over 4 users' step
    tables["decode"]["samples_s"] = [{} for _ in tables["decode"]["rows"]]
    tables["decode"]["samples_s"][1] = {"step ms": [[1, [0.05, 0.0853, 0.2]]]}
    assert verdict(tables, says)[2] == claims.UNKNOWN


# ---- the report

def test_the_report_holds_every_table_of_the_full_runs_and_nothing_of_quick_ones(tmp_path):
    box = tmp_path / "box"
    shutil.copytree(SHIPPED, box)
    quick = json.load(open(box / "cube_bug.json"))
    quick["quick"], quick["tables"]["cube"]["title"] = True, "A QUICK RUN'S TABLE"
    (box / "cube_bug.quick.json").write_text(json.dumps(quick))
    report.update(str(box))
    text = (box / "report.md").read_text()
    for script in ("machine_speed", "two_phases", "cube_bug"):
        for name, t in json.load(open(box / f"{script}.json"))["tables"].items():
            assert f"### {t.get('title') or name}" in text, name
    assert "QUICK" not in text and "## The post's claims on this machine" in text
    assert text.count("| holds ") + text.count("| does not hold ") + text.count(
        "| cannot tell here ") == len(claims.CLAIMS)
    assert "![The roofline](roofline.png)" in text
