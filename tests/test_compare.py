"""compare.py: saved results side by side, whatever state the files are in."""
import json
import os
import subprocess
import sys

import pytest

import common
import compare
import model
from conftest import ROOT

MACHINE = {"cpu": "Test CPU", "cores": 4, "llc_bytes": None, "os": "TestOS", "python": "3",
           "numpy": "2", "blas": [], "env": {}, "date": "2026-01-01T00:00:00"}


def result(script, tables, version=common.SCHEMA_VERSION, **extra):
    return {"schema_version": version, "script": script, "quick": False, "machine": MACHINE,
            "settings": {}, "tables": tables, **extra}


def speed(gbs, gflops):
    cols = [{"header": h, "unit": u} for h, u in [("memory speed", "GB/s"),
                                                  ("math speed", "GFLOP/s")]]
    return result("machine_speed", {"machine_speed": {"columns": cols, "rows": [[gbs, gflops]]}})


def decode(rows):
    cols = [{"header": h, "unit": u} for h, u in [("users", "users"), ("step ms", "ms"),
                                                  ("tokens/s", "tokens/s")]]
    return result("two_phases", {"decode": {"columns": cols, "rows": rows}})


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
    return subprocess.run([sys.executable, os.path.join(ROOT, "compare.py"), *argv],
                          capture_output=True, text=True)


def test_figures_and_ratios_side_by_side(machines):
    r = run("--out", str(machines))
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("a: machine: Test CPU, 4 cores") and lines[1].startswith("b: ")
    forklift = next(line for line in lines if line.startswith("forklift"))
    assert forklift.split()[-3:] == ["10.00", "20.00", "2.00"]
    one = next(line for line in lines if line.startswith("decode step (users 1)"))
    assert one.split()[-3:] == ["40.00", "20.00", "0.50"]


def test_a_row_missing_on_one_machine_is_blank(machines):
    names = ["a", "b"]
    found = [compare.read_machine(str(machines / n), []) for n in names]
    headers, rows = compare.comparison(names, found, "two_phases")
    row = next(r for r in rows if r[0] == "decode step (users 64)")
    assert row == ["decode step (users 64)", "ms", 400.0, None, None]
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
        assert round(model.bytes_read([(512, 1)] * users) / 1e6) == published


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
    assert line.split()[-3:] == ["4.00", "3.00", "0.75"]
    assert next(s for s in section if s.startswith("tables alone (1 user)")).split()[-1] == "0.43"
    assert any(s.startswith("tables (16 tokens)") for s in section)  # only a has it: blank in b


def test_results_of_the_older_schema_still_compare(machines):
    old = decode([[1, 40.0, 25.0]]) | {"schema_version": 1}
    write(machines / "a", "two_phases.json", old)
    r = run("--out", str(machines))
    assert r.returncode == 0 and r.stderr == ""
    one = next(line for line in r.stdout.splitlines() if line.startswith("decode step (users 1)"))
    assert one.split()[-3:] == ["40.00", "20.00", "0.50"]
