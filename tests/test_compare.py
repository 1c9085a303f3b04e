"""compare.py: saved results side by side, whatever state the files are in."""
import json
import os

import pytest

import compare
import model
from conftest import ROOT, script

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


def run(*argv):
    return script("compare.py", *argv)


def test_figures_and_ratios_side_by_side(machines):
    r = run("--out", str(machines))
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("a: machine: Test CPU, 4 cores") and lines[1].startswith("b: ")
    forklift = next(line for line in lines if line.startswith("forklift"))
    assert forklift.split()[-4:] == ["10.00", "20.00", "2.00", "faster"]
    one = next(line for line in lines if line.startswith("decode step (users 1)"))
    assert one.split()[-4:] == ["40.00", "20.00", "0.50", "faster"]


def test_a_row_missing_on_one_machine_is_blank(machines):
    names = ["a", "b"]
    found = [compare.read_machine(str(machines / n), []) for n in names]
    headers, rows = compare.comparison(names, found, "two_phases")
    row = next(r for r in rows if r[0] == "decode step (users 64)")
    assert row == ["decode step (users 64)", "ms", 400.0, None, None, None]
    assert "decode step (users 64)" in run("--out", str(machines)).stdout


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
    r = run("--out", str(machines))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr and "b/two_phases.json" in r.stderr
    assert "forklift" in r.stdout and "decode step (users 1)" in r.stdout  # the rest prints


def test_a_missing_folder_is_named_and_the_rest_prints(machines):
    r = run(str(machines / "a"), str(machines / "nowhere"))
    assert r.returncode == 1 and "nowhere: no such results folder" in r.stderr
    assert "forklift" in r.stdout


def test_no_results_at_all_is_one_line(tmp_path):
    r = run("--out", str(tmp_path / "empty"))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and r.stdout == ""


def test_markdown_output(machines):
    assert "|---" in run("--out", str(machines), "--tablefmt", "github").stdout


def test_shipped_results_compare_with_the_post_out_of_the_box():
    r = run("--out", os.path.join(ROOT, "results"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("post: the post's published figures")
    assert "decode step (users 64)" in r.stdout and "h**3 / h*h*h" in r.stdout


def test_the_posts_figures_agree_with_the_models_accounting():
    data = json.load(open(os.path.join(ROOT, "results", "post", "two_phases.json")))
    mb = {row[0]: row[4] for row in data["tables"]["decode"]["rows"]}
    for users, published in mb.items():
        assert round(model.bytes_read(model.SIZES["small"], [(512, 1)] * users) / 1e6) == published


def breakdown(rows):
    cols = [{"header": h, "unit": u} for h, u in [("experiment", ""), ("row", ""),
                                                  ("trip ms", "ms"), ("tables ms", "ms"),
                                                  ("alone ms", "ms"), ("attention ms", "ms")]]
    return {"breakdown": {"columns": cols, "rows": rows}}


def test_the_parts_of_each_trip_side_by_side(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "two_phases.json", result("two_phases", breakdown(
        [["decode", "1 user", 20.0, 15.0, 14.0, 4.0], ["prefill", "16 tokens", 40.0, 30, 29, 2]])))
    write(b, "two_phases.json", result("two_phases", breakdown(
        [["decode", "1 user", 10.0, 6.0, 6.0, 3.0]])))
    r = run(str(a), str(b))
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("two_phases: where the time goes")[1].splitlines()
    line = next(s for s in section if s.startswith("attention (1 user)"))
    assert line.split()[-5:] == ["4.00", "3.00", "0.75", "no", "samples"]  # one recorded run
    assert next(s for s in section if s.startswith("tables alone (1 user)")).split()[-3] == "0.43"
    assert any(s.startswith("tables (16 tokens)") for s in section)  # only a has it: blank in b


def test_results_of_the_older_schema_still_compare(machines):
    old = decode([[1, 40.0, 25.0]]) | {"schema_version": 1}
    write(machines / "a", "two_phases.json", old)
    r = run("--out", str(machines))
    assert r.returncode == 0 and r.stderr == ""
    one = next(line for line in r.stdout.splitlines() if line.startswith("decode step (users 1)"))
    assert one.split()[-4:] == ["40.00", "20.00", "0.50", "faster"]


# ---- is a difference real? verdicts from the samples behind each figure

SHIPPED = os.path.join(ROOT, "results", "amd-epyc-2c")


def scaled(folder, factor, to):
    """A copy of a machine's results whose every run took `factor` times as long."""
    os.makedirs(to)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        data = json.load(open(os.path.join(folder, name)))
        for t in data["tables"].values():
            if "samples_s" not in t:
                continue
            t["samples_s"] = json.loads(json.dumps(t["samples_s"]), parse_float=lambda s: float(s)
                                        * factor)
            for row in t["rows"]:
                for i, c in enumerate(t["columns"]):
                    if compare.kind(c["unit"]) == "time":
                        row[i] *= factor
                    elif compare.kind(c["unit"]) == "rate":
                        row[i] /= factor
        write(to, name, data)


def verdicts(stdout, section):
    """{figure: verdict} of one section of compare.py's output, from its plain layout."""
    lines = stdout.split(f"\n{section}\n")[1].split("\n\n")[0].splitlines()[1:]
    out = {}
    for line in lines:
        for words in ("published: no samples", "no samples", "within the noise", "no change",
                      "faster", "slower", "higher", "lower"):
            if line.endswith(" " + words):
                out[line.split("  ")[0]] = words
                break
    assert len(out) == len(lines), lines
    return out


def test_the_same_samples_are_within_the_noise(tmp_path):
    import shutil
    shutil.copytree(SHIPPED, tmp_path / "a")
    shutil.copytree(SHIPPED, tmp_path / "b")
    r = run(str(tmp_path / "a"), str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    for section in ("machine_speed", "two_phases", "cube_bug"):
        assert set(verdicts(r.stdout, section).values()) == {"within the noise"}, section
    assert set(verdicts(r.stdout, "two_phases: where the time goes").values()) == {"no samples"}


def test_every_run_half_as_slow_again_is_slower(machines):
    scaled(str(machines / "a"), 1.5, str(machines / "slow"))
    r = run(str(machines / "a"), str(machines / "slow"))
    assert r.returncode == 0, r.stderr
    for section in ("machine_speed", "two_phases"):
        assert set(verdicts(r.stdout, section).values()) == {"slower"}, section


def test_real_runs_three_times_as_slow_are_slower(tmp_path):
    # the shipped runs spread by up to 1.8x: 1.5x slower can be within their noise, 3x cannot
    scaled(SHIPPED, 3.0, str(tmp_path / "slow"))
    r = run(SHIPPED, str(tmp_path / "slow"))
    assert r.returncode == 0, r.stderr
    for section in ("machine_speed", "two_phases", "cube_bug"):
        for figure, said in verdicts(r.stdout, section).items():
            timed = not figure.startswith(("balance", "tokens a trip", "h**3"))
            assert said == ("slower" if timed else "within the noise"), (figure, said)
    assert verdicts(r.stdout, "two_phases")["geometric mean, as time"] == "slower"


def test_a_real_change_below_min_change_is_no_change(machines):
    scaled(str(machines / "a"), 1.02, str(machines / "c"))  # runs that agree within 2%
    small = run(str(machines / "a"), str(machines / "c"), "--min-change", "5")
    assert set(verdicts(small.stdout, "two_phases").values()) == {"no change"}
    strict = run(str(machines / "a"), str(machines / "c"), "--min-change", "1")
    assert set(verdicts(strict.stdout, "two_phases").values()) == {"slower"}


def test_a_small_change_in_noisy_runs_is_within_the_noise(tmp_path):
    scaled(SHIPPED, 1.02, str(tmp_path / "slightly"))  # runs that spread by up to 1.45x
    said = verdicts(run(SHIPPED, str(tmp_path / "slightly")).stdout, "two_phases")
    assert "within the noise" in said.values() and set(said.values()) <= {"within the noise",
                                                                           "no change"}


def test_the_verdicts_are_the_same_every_time(tmp_path):
    scaled(SHIPPED, 1.04, str(tmp_path / "b"))
    first, second = (run(SHIPPED, str(tmp_path / "b")).stdout for _ in range(2))
    assert first == second


def test_the_geometric_mean_of_hand_made_ratios():
    ratio, draws = compare.geometric_mean([(2.0, None), (0.5, None), (8.0, None)])
    assert ratio == pytest.approx(2.0) and draws is None  # (2 x 0.5 x 8) ** (1/3)
    import numpy as np
    ratio, draws = compare.geometric_mean([(4.0, np.array([4.0, 1.0])),
                                           (1.0, np.array([1.0, 4.0]))])
    assert ratio == pytest.approx(2.0) and draws == pytest.approx([2.0, 2.0])


def test_the_geometric_mean_counts_rates_as_times(machines):
    names = ["a", "b"]
    found = [compare.read_machine(str(machines / n), []) for n in names]
    _, rows = compare.comparison(names, found, "machine_speed")
    mean = next(r for r in rows if r[0] == "geometric mean, as time")
    assert mean[4] == pytest.approx(((10 / 20) * (100 / 150)) ** 0.5)  # 2x and 1.5x faster
    assert mean[5] == "faster"


def test_the_posts_figures_say_they_have_no_samples():
    r = run(os.path.join(ROOT, "results", "post"), SHIPPED)
    assert set(verdicts(r.stdout, "two_phases").values()) == {"published: no samples"}


@pytest.mark.parametrize("value", ["-1", "abc", "nan"])
def test_a_bad_min_change_is_one_line_and_exit_2(value):
    r = run("--min-change", value)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--min-change" in r.stderr
    assert r.stdout == ""


def test_a_file_without_samples_is_one_line_and_the_rest_prints(machines):
    data = decode([[1, 30.0, 33.3]])
    del data["tables"]["decode"]["samples_s"]
    write(machines / "b", "two_phases.json", data)
    r = run("--out", str(machines))
    assert r.returncode == 0 and len(r.stderr.splitlines()) == 1
    assert "b/two_phases.json has no samples" in r.stderr
    one = next(line for line in r.stdout.splitlines() if line.startswith("decode step (users 1)"))
    assert one.split()[-5:] == ["40.00", "30.00", "0.75", "no", "samples"]
    forklift = next(line for line in r.stdout.splitlines() if line.startswith("forklift"))
    assert forklift.endswith("faster")  # the other file still has its samples
