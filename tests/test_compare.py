"""compare.py: every table of saved results side by side, each ratio one way (faster or slower),
whatever state the files are in, and exported on request."""
import csv
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import compare
import accounting
import model
import two_phases
from harness.experiments.registry import TOLD
from harness.keeping import exports, older, records, results, schema
from conftest import EPYC, ROOT, compared, in_process, one_line, planted_copy, reference, script
from harness.measuring import host

ROOT_PATH = pathlib.Path(ROOT)

MACHINE = {"cpu": "Test CPU", "cores": 4, "llc_bytes": None, "os": "TestOS", "python": "3",
           "numpy": "2", "blas": [], "env": {}, "date": "2026-01-01T00:00:00"}


def result(script, tables, version=2, **extra):
    """A hand-made result, in schema 2's samples layout, which compare.py still reads (a run of
    the scripts saves the newest: test_beyond and test_reliability read those)."""
    return {"schema_version": version, "script": script, "quick": False, "machine": MACHINE,
            "settings": {}, "tables": tables, **extra}


def runs(seconds, spread=0.002):
    """Five runs around `seconds`, as a script keeps them."""
    return [seconds * (1 + spread * k) for k in (-2, -1, 0, 1, 2)]


def speed(gbs, gflops):
    cols = [{"header": h, "unit": u} for h, u in [("memory speed", "GB/s"),
                                                  ("math speed", "GFLOP/s")]]
    samples = {"forklift": runs(0.4 / gbs), "workbench": runs(17.2 / gflops)}
    return result("machine_speed", {"machine_speed": {"columns": cols, "rows": [[gbs, gflops]],
                                                      "samples_s": samples}})


def decode(rows):
    cols = [{"header": h, "unit": u} for h, u in [("users", "users"), ("step ms", "ms"),
                                                  ("tokens/s", "tokens/s")]]
    samples = [runs(row[1] / 1e3) for row in rows]
    return result("two_phases", {"decode": {"columns": cols, "rows": rows,
                                            "samples_s": samples}})


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture
def machines(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "machine_speed.json", speed(10.0, 100.0))
    write(a, "two_phases.json", decode([[1, 40.0, 25.0], [64, 400.0, 160.0]]))
    write(b, "machine_speed.json", speed(20.0, 150.0))
    write(b, "two_phases.json", decode([[1, 20.0, 50.0]]))  # no 64-user row
    return tmp_path


run = compared  # in this process; test_hostile runs compare.py as a user does


def line_of(stdout, start):
    return next(line for line in stdout.splitlines() if line.startswith(start))


def test_figures_side_by_side_each_ratio_one_way(machines):
    r = run(str(machines))  # a folder of machines
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("a: machine: Test CPU, 4 cores") and lines[1].startswith("b: ")
    said = re.search(r"10\.00 +20\.00 +2\.00x faster \(95% ([0-9.]+)x to ([0-9.]+)x, p (\S+)\)$",
                     line_of(r.stdout, "memory speed"))  # runs 0.2% apart:
    assert said and float(said[3]) < 1e-6  # Welch's t leaves no doubt,
    assert 1.98 < float(said[1]) <= 2.0 <= float(said[2]) < 2.02  # nor does its interval
    step = line_of(r.stdout, "users 1: step ms")  # a time halved and a rate doubled: both faster
    assert re.search(r"40\.00 +20\.00 +2\.00x faster \(95% ", step)  # 5 runs apart: p 0.008
    assert "2.00x faster (95% " in line_of(r.stdout, "users 1: tokens/s")
    assert "b vs a" in line_of(r.stdout, "figure")


def test_a_row_missing_on_one_machine_is_blank(machines):
    names = ["a", "b"]
    found = [compare.read_machine(str(machines / n), []) for n in names]
    decode = next(s for s in compare.sections(found) if s[0] == "decode")
    headers, rows = compare.comparison(names, found, decode, 5)
    assert headers == ["figure", "unit", "a", "b", "b vs a"]
    assert next(r for r in rows if r[0] == "users 64: step ms") == [
        "users 64: step ms", "ms", 400.0, None, None]


@pytest.mark.parametrize("name,content,says", [
    ("two_phases.json", "{not json", "is not JSON"),
    ("two_phases.json", json.dumps(decode([[1, 1.0, 1.0]]) | {"schema_version": 0}),
     "schema version 0, older"),
    ("two_phases.json", json.dumps(decode([[1, 1.0, 1.0]]) | {"schema_version": 99}),
     "schema version 99, newer"),
    ("two_phases.json", json.dumps(speed(1.0, 1.0)), "holds results of 'machine_speed'"),
    ("two_phases.json", "[]", "not a result file"),
])
def test_a_bad_file_is_one_line_and_the_rest_still_prints(machines, name, content, says):
    write(machines / "b", name, content)
    r = run(str(machines))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr and "b/two_phases.json" in r.stderr
    assert "memory speed" in r.stdout and "users 1: step ms" in r.stdout  # the rest prints


def test_a_missing_folder_or_name_is_said_and_the_rest_prints(machines):
    r = run(str(machines / "a"), str(machines / "nowhere"))
    assert r.returncode == 1 and "nowhere: no such results folder" in r.stderr
    assert "memory speed" in r.stdout


def test_no_results_at_all_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run(str(tmp_path / "empty"))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and r.stdout == ""


def test_markdown_output(machines):
    assert "|---" in run(str(machines), "--tablefmt", "github").stdout


def test_the_shipped_references_compare_by_name_out_of_the_box(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", str(tmp_path))  # no machine of the user's own
    r = run("post", "amd-epyc-2c", "intel-xeon-processor-2c")  # of those names hides them
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("post: the post's published figures")
    for title in ("The forklift and the workbench", "The machines' limits, every measurement",
                  "Phase 1, reading (prefill)", "Phase 2, typing (decode)",
                  "When the two phases share a server", "The chunk-size dial",
                  "Beyond the post: how deep the notebooks are",
                  "Every row against the machine's limits", "Where each row's time goes",
                  "The slow road"):
        assert f"\n{title}" in r.stdout, title
    dial = line_of(r.stdout, "chunk 256: worst gap ms")  # the post gives 128 and all at once
    assert dial.endswith("(vs amd-epyc-2c)") and ("faster" in dial or "slower" in dial)
    for row, published in (("chunk 128: worst gap ms", "671.20"),  # the post's own, as it says
                           ("chunk 1024: worst gap ms", "4723.00"), ("times cheaper", "14.00")):
        assert published in line_of(r.stdout, row).split(), row
    assert line_of(r.stdout, "intel-xeon-processor-2c against post: reading ")
    assert run().returncode == 0  # no names: the post, then the machines there are


def test_the_posts_figures_agree_with_the_models_accounting():
    data = json.load(open(os.path.join(ROOT, "references", "post", "two_phases.json")))
    mb = {r["keys"]["users"]: r["value"] for r in data["records"]
          if r["experiment"] == "decode" and r["figure"] == "bytes read"}
    assert sorted(mb) == [1, 4, 16, 64]
    for users, published in mb.items():
        read = accounting.bytes_read(model.SIZES["small"], [(512, 1)] * users)
        assert round(read / 1e6) == published


def breakdown(rows):
    cols = [{"header": h, "unit": u} for h, u in [
        ("experiment", ""), ("row", ""), ("trip ms", "ms"), ("tables ms", "ms"),
        ("attention ms", "ms"), ("elementwise ms", "ms"), ("other ms", "ms"), ("most excess", "")]]
    return {"breakdown": {"columns": cols, "rows": rows}}


def test_the_breakdown_is_one_line_per_row(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "two_phases.json", result("two_phases", breakdown(
        [["decode", "1 user", 20.0, 15.0, 4.0, 0.5, 0.5, "the BLAS +3.0 ms"],
         ["prefill", "16 tokens", 40.0, 30, 8, 1, 1, "attention +5.0 ms"]])))
    write(b, "two_phases.json", result("two_phases", breakdown(
        [["decode", "1 user", 10.0, 6.0, 3.0, 0.5, 0.5, "attention +1.0 ms"]])))
    r = run(str(a), str(b))
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Where each row's time goes")[1].split("\n\n")[0].splitlines()[2:]
    assert len(section) == 2  # one line per row
    assert section[0].split("  ")[0] == "decode users 1: trip ms"  # the keys its name says
    assert "20.0 = 15.0 + 4.0 + 0.5 + 0.5; most excess the BLAS +3.0 ms" in section[0]
    assert "10.0 = 6.0 + 3.0 + 0.5 + 0.5; most excess attention +1.0 ms" in section[0]
    assert section[0].endswith("2.00x faster *")  # one recorded run: no samples


def test_results_of_the_older_schema_still_compare(machines):
    write(machines / "a", "two_phases.json", decode([[1, 40.0, 25.0]]) | {"schema_version": 1})
    r = run(str(machines))
    assert r.returncode == 0 and r.stderr == ""
    assert "2.00x faster (95% " in line_of(r.stdout, "users 1: step ms")


def test_the_limits_from_every_measurement_and_a_machine_that_disagrees_with_itself(tmp_path):
    a = tmp_path / "a"
    shutil.copytree(SHIPPED, a)
    data = json.load(open(a / "two_phases.json"))
    fork = next(r for r in data["records"]
                if r["experiment"] == "speeds" and r["figure"] == "memory speed")
    fork["value"] /= 3  # the forklift slowed down while two_phases ran
    (a / "two_phases.json").write_text(json.dumps(data))
    r = run(SHIPPED, str(a))
    section = r.stdout.split("The machines' limits, every measurement\n")[1].split("\n\n")[0]
    assert [line.split("  ")[0] for line in section.splitlines()[1:]] == [
        f"{w}: {m}" for w in ("forklift", "workbench")
        for m in ("machine_speed", "two_phases' rounds")]
    said = [line for line in r.stdout.splitlines() if "further apart than its runs' spread" in line]
    assert any(line.startswith(f"a: its forklift measured from {fork['value']:.1f}")
               for line in said), said


# ---- is a difference real? verdicts from the samples behind each figure

SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")


def scaled(folder, factor, to):
    """A copy of a machine's results whose every run took `factor` times as long."""
    os.makedirs(to)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        data = schema.load(os.path.join(folder, name), name.split(".")[0])
        for r in data["records"]:
            power = {"time": 1, "rate": -1}.get(records.kind(r["unit"]), 0)
            if power and r["samples"]:
                r["value"] *= factor ** power
                r["samples"] = [x * factor ** power for x in r["samples"]]
        write(to, name, data)


def verdicts(stdout, title):
    """{figure: verdict} of one section of compare.py's output, from its plain layout."""
    lines = stdout.split(f"\n{title}\n")[1].split("\n\n")[0].splitlines()[1:]
    out = {}
    for line in lines:
        said = line.rsplit("  ", 1)[-1].strip()
        out[line.split("  ")[0]] = next(w for w, test in (
            ("not significant", said.startswith("not significant")),
            ("no change", said.startswith("no change")), ("no samples", said.endswith("*")),
            ("faster", "faster" in said), ("slower", "slower" in said),
            ("higher", "higher" in said), ("lower", "lower" in said)) if test)
    return out


TIMED = ("Phase 1, reading (prefill)", "Phase 2, typing (decode)",
         "When the two phases share a server", "The slow road: h**3 against h*h*h, by sign")


def test_the_same_samples_are_not_significant(tmp_path):
    shutil.copytree(SHIPPED, tmp_path / "a")
    shutil.copytree(SHIPPED, tmp_path / "b")
    r = run(str(tmp_path / "a"), str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    for title in ("The forklift and the workbench",) + TIMED:
        assert set(verdicts(r.stdout, title).values()) == {"not significant"}, title


def test_every_run_half_as_slow_again_is_slower(machines):
    scaled(str(machines / "a"), 1.5, str(machines / "slow"))
    r = run(str(machines / "a"), str(machines / "slow"))
    assert r.returncode == 0, r.stderr
    for title in ("The forklift and the workbench", "Phase 2, typing (decode)"):
        assert set(verdicts(r.stdout, title).values()) == {"slower"}, title


def test_real_runs_three_times_as_slow_are_slower(tmp_path):
    # the shipped runs spread by up to 1.8x: 1.5x slower can be within their noise, 3x cannot
    scaled(SHIPPED, 3.0, str(tmp_path / "slow"))
    r = run(SHIPPED, str(tmp_path / "slow"))
    assert r.returncode == 0, r.stderr
    for title in TIMED:
        assert set(verdicts(r.stdout, title).values()) == {"slower"}, title
    assert line_of(r.stdout, "slow against amd-epyc-2c: reading 3.00x slower, typing 3.00x slower")


def test_a_significant_change_under_the_minimum_is_no_change(machines):
    scaled(str(machines / "a"), 1.02, str(machines / "c"))  # 2% slower, runs 0.8% apart: real
    strict = run(str(machines / "a"), str(machines / "c"), "--min-change", "1")
    said = verdicts(strict.stdout, "Phase 2, typing (decode)")
    assert set(said.values()) == {"slower"}  # the U test separates every run: p 0.008
    loose = run(str(machines / "a"), str(machines / "c"), "--min-change", "5")
    assert set(verdicts(loose.stdout, "Phase 2, typing (decode)").values()) == {"no change"}
    assert "no change (1.02x slower, 95% 1.02x to 1.02x, under 5%)" in loose.stdout


def test_a_figure_of_disturbed_runs_or_a_busy_machine_gets_a_ratio_and_no_verdict(machines):
    scaled(str(machines / "a"), 3.0, str(machines / "c"))  # three times as slow: a change
    data = json.loads((machines / "c" / "two_phases.json").read_text())
    data["records"][0].update(disturbed=True, others=0.4)
    write(machines / "c", "two_phases.json", data)
    data = json.loads((machines / "c" / "machine_speed.json").read_text())
    data["machine"]["busy"] = ["another run of this suite"]
    write(machines / "c", "machine_speed.json", data)
    r = run(str(machines / "a"), str(machines / "c"))
    assert r.returncode == 0, r.stderr
    assert "3.00x slower, no verdict: c: its runs disturbed by other work (up to 40% of the " \
           "cores)" in r.stdout
    assert "no verdict: c: run while the machine was busy (another run of this suite)" in r.stdout


def test_a_small_change_in_noisy_runs_is_not_significant(tmp_path):
    scaled(SHIPPED, 1.02, str(tmp_path / "slightly"))  # runs that spread by up to 1.45x
    said = verdicts(run(SHIPPED, str(tmp_path / "slightly")).stdout, "Phase 2, typing (decode)")
    assert "not significant" in said.values() and set(said.values()) <= {"not significant",
                                                                          "no change"}


def test_the_verdicts_are_the_same_every_time(tmp_path):
    scaled(SHIPPED, 1.04, str(tmp_path / "b"))
    first, second = (run(SHIPPED, str(tmp_path / "b")).stdout for _ in range(2))
    assert first == second


def test_the_posts_figures_have_no_samples_to_tell_noise_from_a_change():
    r = run("post", SHIPPED)
    assert set(verdicts(r.stdout, "Phase 2, typing (decode)").values()) == {"no samples"}
    assert "* one side's figure has no samples behind it" in r.stdout


@pytest.mark.parametrize("value", ["-1", "abc", "nan"])
def test_a_bad_min_change_is_one_line_and_exit_2(value):
    r = run("--min-change", value)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--min-change" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("flags", [["--export", "xml"], ["--out", "results"]])
def test_unknown_exports_and_the_old_out_are_one_line(flags):
    r = run(*flags)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and r.stdout == ""


def parsed(fmt, text):
    """An export read back with the csv or json module: every row, a dict of its fields."""
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(text)))
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    return json.loads(text)


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_each_export_parses_and_holds_every_row(machines, fmt):
    r = run(str(machines / "a"), str(machines / "b"), "--export", fmt)
    assert r.returncode == 0, r.stderr
    rows = parsed(fmt, r.stdout)
    step = next(row for row in rows if row["figure"] == "step" and row["row"] == "users 1"
                and row["machine"] == "b")
    assert float(step["value"]) == 20.0 and step["reference"] == "a"
    assert float(step["ratio"]) == 2.0 and step["verdict"] == "faster"
    assert float(step["p"]) < 0.05  # the U test of the two sides' runs
    assert {(row["section"], row["figure"]) for row in rows} >= {
        ("machine_speed", "memory speed"), ("decode", "step"), ("decode", "tokens per second")}
    assert len({row["machine line"] for row in rows}) == 2


# ---- keeping everything: history, the shipped references, exports of a run

def test_a_rerun_keeps_the_previous_result_and_says_so(tmp_path, capsys, monkeypatch):
    import cube_bug  # in this process: the same run, sooner
    flags = ["--runs", "1", "--processes", "1", "--tokens", "8", "--no-in-model", "--out",
             str(tmp_path), "--label", "box"]
    monkeypatch.setattr(sys, "argv", ["cube_bug.py", *flags])
    assert cube_bug.main(flags) == 0
    earlier = json.loads((tmp_path / "box" / "cube_bug.json").read_text())
    capsys.readouterr()
    assert cube_bug.main(flags) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "is kept in" in line]
    assert len(said) == 1 and earlier["machine"]["date"][:19] in said[0]
    kept = [p for p in (tmp_path / "box" / "history").iterdir()]
    assert len(kept) == 1 and json.loads((kept[0] / "cube_bug.json").read_text()) == earlier
    assert (kept[0] / "cube_bug.txt").exists()


def test_no_run_writes_into_the_shipped_references(tmp_path):
    before = {p: p.stat().st_mtime for p in (ROOT_PATH / "references").rglob("*")}
    r = script("cube_bug.py", "--quick", "--out", str(ROOT_PATH / "references"), "--label", "post")
    assert r.returncode == 2 and "--out" in r.stderr and len(r.stderr.splitlines()) == 1
    assert {p: p.stat().st_mtime for p in (ROOT_PATH / "references").rglob("*")} == before
    from harness import flags
    from harness.keeping import results
    assert flags.parser("x\n", runs=1, prog="demo.py").get_default("out") == results.RESULTS \
        != results.REFERENCES
    assert subprocess.run(["git", "check-ignore", "-q", "results/any-machine/cube_bug.json"],
                          cwd=ROOT).returncode == 0  # your runs: git leaves them out


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_a_run_exports_every_row_instead_of_its_tables(tmp_path, fmt):
    r = in_process(two_phases.main, "--predict", "--no-plot", "--forklift", "12",
                   "--workbench", "121", "--export", fmt, "--out", str(tmp_path), "--label", "p")
    assert r.returncode == 0, r.stderr
    saved = json.loads((tmp_path / "p" / "two_phases.json").read_text())
    rows = parsed(fmt, r.stdout)
    assert len(rows) == len(saved["records"])  # one row per figure
    prefill = [row for row in rows if row["experiment"] == "prefill" and row["figure"] == "time"]
    record = next(x for x in saved["records"] if x["experiment"] == "prefill"
                  and x["figure"] == "time" and x["keys"]["prompt"] == 256)
    mine = next(row for row in prefill if int(row["prompt"]) == 256)
    assert float(mine["value"]) == record["value"] and mine["unit"] == "ms"  # unrounded
    assert str(mine["predicted"]) in ("True", "true") and mine["statistic"] == "limit"
    assert "machine" in mine and "PREDICTED" in mine["machine"]  # not this machine's line
    assert "prompt  time ms" in (tmp_path / "p" / "two_phases.txt").read_text()  # saved as ever


def test_figures_of_unlike_settings_are_shown_but_not_compared(tmp_path):
    other = tmp_path / "notes128"
    shutil.copytree(SHIPPED, other)
    data = schema.load(str(other / "two_phases.json"), "two_phases")
    for r in data["records"]:
        r["settings"]["notes"] = 128
    (other / "two_phases.json").write_text(json.dumps(data))
    r = run(SHIPPED, str(other))
    assert r.returncode == 0, r.stderr
    step = line_of(r.stdout, "users 1: step ms")
    assert step.endswith("not compared: --notes 128 against 512")
    assert "faster" not in step and "slower" not in step and "noise" not in step
    assert "not significant" in line_of(r.stdout, "memory speed")  # the rest as ever
    assert "notes 128" in r.stdout.splitlines()[1] and "notes 512" in r.stdout.splitlines()[0]
    assert "notes128 against amd-epyc-2c" not in r.stdout  # no summary from unlike figures


def test_the_same_machine_twice_calls_nothing_faster_or_slower(tmp_path):
    # two runs in a row differ by more than each run's own tight spread shows (here 8%, as
    # measured on a quiet Xeon): no figure is called faster or slower
    scaled(SHIPPED, 1.08, str(tmp_path / "again"))
    for name in os.listdir(tmp_path / "again"):
        data = json.load(open(tmp_path / "again" / name))
        for r in data["records"]:
            if r["samples"]:  # each run's own runs within 1% of its figure
                n = len(r["samples"])
                r["samples"] = [r["value"] * (0.995 + 0.01 * k / max(n - 1, 1))
                                for k in range(n)]
        (tmp_path / "again" / name).write_text(json.dumps(data))
    r = run(SHIPPED, str(tmp_path / "again"))
    for title in ("Phase 2, typing (decode)", "The slow road: h**3 against h*h*h, by sign"):
        assert set(verdicts(r.stdout, title).values()) <= {"no change", "not significant"}, title


def test_a_history_that_is_a_link_is_never_read_through(tmp_path):
    """compare.py reads each machine's saved runs, not history/: a history that is a link, or
    holds a link, is never followed, and changes nothing compared."""
    elsewhere = tmp_path / "elsewhere" / "cube_bug.2026-01-01T000000"
    elsewhere.mkdir(parents=True)
    data = json.load(open(SHIPPED + "/cube_bug.json"))
    data["records"] = "not records"  # read, it would be refused, in a line
    (elsewhere / "cube_bug.json").write_text(json.dumps(data))
    box = tmp_path / "box"
    box.mkdir()
    shutil.copy(SHIPPED + "/cube_bug.json", box / "cube_bug.json")
    alone = run(str(box))
    (box / "history").symlink_to(tmp_path / "elsewhere")
    linked = run(str(box))
    (box / "history").unlink()
    (box / "history").mkdir()
    (box / "history" / elsewhere.name).symlink_to(elsewhere)  # an entry that is a link
    entry = run(str(box))
    assert alone.returncode == linked.returncode == entry.returncode == 0
    assert alone.stdout == linked.stdout == entry.stdout and "refused" not in linked.stderr


@pytest.mark.kernels  # the tiles' workbench
def test_the_posts_claims_side_by_side_as_each_run_judged_them(tmp_path):
    import machine_speed
    r = in_process(machine_speed.main, "--size", "300", "--matmul", "64", "--runs", "3",
                   "--processes", "1", "--out", str(tmp_path), "--label", "a")
    assert r.returncode == 0, r.stderr
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    data = json.loads((tmp_path / "b" / "machine_speed.json").read_text())
    verdict = next(r for r in data["records"] if r["experiment"] == "claims"
                   and r["figure"] == "verdict")
    verdict["value"] = "cannot tell here"
    (tmp_path / "b" / "machine_speed.json").write_text(json.dumps(data))
    out = run(str(tmp_path / "a"), str(tmp_path / "b")).stdout
    section = out.split("The post's claims, machine by machine\n")[1].splitlines()
    assert section[0].split() == ["the", "post", "says", "a", "b"]
    line = next(s for s in section if s.startswith(verdict["keys"]["claim"]))
    assert line.split("  ")[-1].strip() == "cannot tell here"


def test_a_figure_is_tested_on_the_processes_its_value_is_made_of():
    from harness.judging import significance
    record = {"samples": [10.0, 10.2, 12.0, 12.2, 11.0, 50.0], "processes": [0, 0, 1, 1, 2, 2],
              "shares": [0.0, 0.0, 0.0, 0.0, 0.0, 0.6]}  # the last disturbed: out, as from
    units = significance.units(record)  #                  its figure
    assert len(units) == 3 and max(units) < 2.6  # three processes, each its mean log
    one = {"samples": [10.0, 10.1, 10.2], "processes": [0, 0, 0]}
    j = significance.judged((10.0, significance.units(one), "ms"), (5.0, units, "ms"))
    said = significance.verdict(significance.settle(j, None, "ms", 10), "ms")
    assert said.startswith("2.00x faster, untested: 1 process on a side")  # never 'not
    assert significance.MIN_UNITS == 2  #                                    significant'


def test_a_comparisons_p_values_are_corrected_together():
    from harness.judging import significance
    ps = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    adjusted = significance.corrected(ps)  # Benjamini and Hochberg's own example's shape
    assert adjusted[0] == pytest.approx(0.01) and adjusted[1] == pytest.approx(0.04)
    assert all(a >= p for a, p in zip(adjusted, ps))
    assert [a < significance.ALPHA for a in adjusted] == [True, True] + [False] * 8
    assert significance.corrected([0.03]) == [0.03]


@pytest.mark.parametrize("a,b", [((0.1, 0.2, 0.15), (0.3, 0.35, 0.2, 0.31)), ((1.0, 1.0, 1.1),
                                  (1.0, 1.2)), ((5.0, 5.1), (4.9, 5.0, 5.05, 4.95, 5.2)),
                                 ((0.0, 0.0, 0.0), (0.1, 0.3, 0.2))])
def test_welchs_test_is_scipys(a, b):
    """compare.py's own Welch's t-test gives scipy.stats' p-value (which it does not import:
    two seconds at every start)."""
    from scipy.stats import ttest_ind
    from harness.judging import significance
    assert significance.welch(a, b) == pytest.approx(
        float(ttest_ind(a, b, equal_var=False).pvalue), rel=1e-9, abs=1e-15)


# ---- files compare.py cannot use, and runs it must not compare


@pytest.mark.parametrize("name,change,says", [
    ("machine_speed", lambda d: [r.update(value=5e-324) for r in d["records"]
                                 if r["figure"] == "memory speed"], "memory speed"),
    ("machine_speed", lambda d: [r.update(value="fast", unit="") for r in d["records"]
                                 if r["figure"] == "memory speed"], "where its sheet says GB/s"),
    ("two_phases", lambda d: [r.update(value="slow", unit="") for r in d["records"]
                              if r["experiment"] == "check" and r["figure"] == "x limit"],
     "(check: x limit) in no unit, where its sheet says x"),
    ("two_phases", lambda d: [r.update(value="1 + 2", unit="") for r in d["records"]
                              if r["experiment"] == "breakdown" and r["figure"] == "tables"],
     "(breakdown: tables) in no unit, where its sheet says ms")],
    ids=["a subnormal speed", "text for a speed", "text for x limit", "text in the breakdown"])
def test_a_number_compare_cannot_use_is_one_line_and_the_rest_compares(tmp_path, name, change,
                                                                         says):
    folder = planted_copy(tmp_path / "box", name, change)
    r = compared("post", str(folder))
    assert "Traceback" not in r.stderr
    one_line(r, 1, says, "left out")  # the schema's check refuses it: no reader meets it
    assert "h**3 ms" in r.stdout  # the machine's other files still compared
    assert exports.write("json", [{"ratio": float("inf")}]) == '[\n {\n  "ratio": null\n }\n]'


def test_an_old_file_beyond_the_upgrades_arithmetic_is_one_line(tmp_path, monkeypatch):
    bad = reference("cube_bug")
    (tmp_path / "c.json").write_text(json.dumps(bad))
    monkeypatch.setattr(older, "upgrade", lambda d: 1e308 * 1e308 / 0)
    with pytest.raises(ValueError, match="newest layout"):
        schema.load(str(tmp_path / "c.json"), "cube_bug")


def test_a_result_without_its_core_count_makes_a_machine_line(tmp_path):
    facts = reference("cube_bug")["machine"]
    facts.pop("cores")
    assert ", ? cores" in host.line(facts)
    folder = planted_copy(tmp_path / "box", "cube_bug", lambda d: d["machine"].pop("cores"))
    r = compared(str(folder), "intel-xeon-processor-2c")
    assert r.returncode == 0 and "Traceback" not in r.stderr


def test_a_folder_compare_cannot_list_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "machines").mkdir()
    real = os.listdir

    def unlistable(path="."):
        if os.path.basename(str(path)) == "machines":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(os, "listdir", unlistable)
    r = compared(str(tmp_path / "machines"))
    assert r.returncode == 1 and "Traceback" not in r.stderr and "cannot be" in r.stderr


def test_a_prediction_is_never_compared_with_a_measurement(tmp_path):
    assert two_phases.main(["--predict", "post", "--out", str(tmp_path), "--label", "p",
                            "--no-plot"]) == 0
    for first in ("post", EPYC):
        r = compared(first, str(tmp_path / "p"))
        said = [line for line in r.stdout.splitlines() if "prompt 256: ms/token" in line]
        assert said and all("not compared: a prediction against a measurement" in line
                            for line in said)
        assert "faster" not in said[0] and "no change" not in said[0]


def test_a_run_at_other_threads_in_history_changes_no_verdict(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    for name in ("machine_speed.json", "machine_speed.txt"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    before = compared("post", str(box))
    kept = box / "history" / "machine_speed.2026-01-01T00-00-00"
    kept.mkdir(parents=True)
    data = json.load(open(box / "machine_speed.json"))
    data["settings"]["threads"] = 1
    for record in data["records"]:
        record["settings"]["threads"] = 1
        if record.get("samples"):
            record["samples"] = [x / 2.07 for x in record["samples"]]
    (kept / "machine_speed.json").write_text(json.dumps(data))
    after = compared("post", str(box))
    assert before.returncode == after.returncode == 0 and after.stdout == before.stdout


def test_a_machine_speed_run_at_other_sizes_is_shown_and_compared_with_nothing(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["settings"].update(size=2000, matmul=256)
    for record in data["records"]:
        record["settings"].update(size=2000, matmul=256)
    (box / "machine_speed.json").write_text(json.dumps(data))
    for name in ("two_phases.json", "two_phases.txt"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    r = compared("post", str(box))
    assert r.returncode == 0 and "not compared: --size 2000 against 10000" in r.stdout
    assert "forklift: machine_speed, at --size 2000 --matmul 256" in r.stdout
    assert "(machine_speed's)" not in r.stdout  # the summary takes no speed it refused
    assert "the machine's speed moved" not in r.stdout


def test_a_cache_sized_forklift_backs_no_claim_and_compares_with_none():
    from conftest import made
    from harness.judging import judge, rules
    from harness.keeping.folders import read_from
    from harness.keeping.records import col
    found = made("machine_speed", [col("memory speed", "memory speed", "GB/s", ".1f"),
                                   col("math speed", "math speed", "GFLOP/s", ".1f"),
                                   col("read", "read", "MB", ".0f")],
                 [{"memory speed": 60.0, "math speed": 100.0, "read": 16.0}],
                 {"size": 2000, "cache_bytes": 32 * 2 ** 20})
    for c, here, verdict, why, _ in judge.verdicts(found, None, ("machine_speed",),
                                                   claims=TOLD.claims):
        assert verdict == rules.UNKNOWN and "read the cache, not memory" in why, c.says
    assert read_from({"size": 2000, "cache_bytes": 32 * 2 ** 20}) == "cache"
    assert read_from({"size": 23000, "cache_bytes": 480 * 2 ** 20}) == "memory"
    assert read_from({"size": 10000}) == "memory"  # the post's, which recorded no cache


def test_the_closing_summary_rests_on_undisturbed_figures_only(tmp_path):
    def disturbed(data):  # other work disturbed every reading and typing figure
        for r in data["records"]:
            if r["experiment"] in ("prefill", "decode"):
                r["disturbed"] = True
    busy = planted_copy(tmp_path / "busy", "two_phases", disturbed)
    r = run("post", str(busy))
    assert r.returncode == 0, r.stderr
    assert not any(line.startswith("busy against post:") for line in r.stdout.splitlines())
    quiet = run("post", EPYC)
    assert line_of(quiet.stdout, "amd-epyc-2c against post: reading ")  # (the same, undisturbed)


def test_a_ratio_between_two_runs_has_an_interval_whose_level_is_its_coverage():
    """Simulated: two runs of 3 and 5 processes, each process's mean normal on the log scale
    (spreads unequal), the second run truly 1.3x faster: the 95% interval holds the truth in
    95% of the comparisons (within the simulation's own error)."""
    from harness.judging.significance import interval
    rng, truth, n, held = np.random.default_rng(7), 1.3, 4000, 0
    for _ in range(n):
        a = list(rng.normal(0.0, 0.05, 3))  # log seconds of a time, first run
        b = list(rng.normal(-np.log(truth), 0.02, 5))  # faster: shorter times
        lo, hi = interval((1.0, a, "ms"), (1.0, b, "ms"))
        held += lo <= truth <= hi
    assert abs(held / n - 0.95) < 3 * np.sqrt(0.95 * 0.05 / n) + 0.005
    assert interval((1.0, [0.1], "ms"), (1.0, [0.0, 0.2], "ms")) is None  # one process: none


def test_every_tablefmt_escapes_its_prose_and_tsv_pads_nothing():
    """latex: the lines around the tables escaped as LaTeX ("_" and "%" would break a document);
    html: each line a paragraph of escaped text; tsv: fields unpadded, as a reader splits them."""
    latex = run("post", EPYC, "--tablefmt", "latex")
    assert latex.returncode == 0, latex.stderr
    prose = [line for line in latex.stdout.splitlines() if line and "&" not in line
             and not line.startswith("\\")]
    assert prose and not any(re.search(r"(?<!\\)[_%#$]", line) for line in prose), prose
    assert "machine\\_speed" in latex.stdout and "95\\% interval" in latex.stdout
    page = run("post", EPYC, "--tablefmt", "html").stdout
    assert "<p>The forklift and the workbench</p>" in page and "<p>post: the post&#x27;s" in page
    tsv = run("post", EPYC, "--tablefmt", "tsv").stdout
    rows = [line for line in tsv.splitlines() if "\t" in line]
    assert rows and not any(re.search(r" \t|\t ", line) for line in rows)
    assert "memory speed\tGB/s\t12.00\t" in tsv


def test_the_previous_run_of_a_machine_is_a_comparison_of_its_own(tmp_path):
    """--previous: each folder's run before its last (history/ keeps it) beside it, as the
    reference; read, never written."""
    box = tmp_path / "box"
    shutil.copytree(EPYC, box)
    later = reference("cube_bug")
    later["machine"]["date"] = "2026-12-09T10:00:00+00:00"
    for r in later["records"]:
        if r.get("samples") and isinstance(r.get("value"), (int, float)):
            r["samples"], r["value"] = [s * 1.3 for s in r["samples"]], r["value"] * 1.3
    assert results.save(str(box), {"cube_bug.json": json.dumps(later)}, "cube_bug") == 0
    before = sorted(str(p) for p in box.rglob("*"))
    r = run(str(box), "--previous")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("box (previous): machine: ")
    assert "1.30x slower (95% " in line_of(r.stdout, "mixed (real): h**3 ms")
    assert sorted(str(p) for p in box.rglob("*")) == before  # a reader never writes
    plain = run(EPYC, "--previous")  # no history: the folder alone
    assert plain.returncode == 0 and not plain.stdout.startswith("amd-epyc-2c (previous)")
    (box / "history").rename(tmp_path / "elsewhere")  # history/ a link out of the folder:
    (box / "history").symlink_to(tmp_path / "elsewhere")  # never read through
    assert not run(str(box), "--previous").stdout.startswith("box (previous)")
