"""Every script as a user runs it: quick runs print only the machine line and tables, save both
files, and every bad flag costs one line and exit code 2 with nothing saved (each bad flag is
refused in this process, as fast as a parse; one of each script's also as a user runs it)."""
import dataclasses
import importlib
import json
import os
import sys

import numpy as np
import pytest

from harness.measuring import bench

import cube_bug
import two_phases
from harness import flags
from harness.keeping import records, schema
from conftest import ROOT, SHIPPED, in_process, script, silent


def run(name, *flags, out):
    return script(name, *flags, "--out", str(out), "--label", "box")


QUICK = {  # script: (flags, lines stdout must hold)
    "machine_speed.py": ((), ["memory speed :", "math speed   :", "balance      :",
                              "tokens a trip needs to keep the math busy: about"]),
    "cube_bug.py": ((), ["all positive   h**3:", "all negative   h**3:", "mixed (real)   h**3:",
                         "numpy "]),
    "two_phases.py": (("--runs", "2"), ["prompt  time ms  ms/token  GFLOP/s",
                                        "users  step ms  tokens/s  GFLOP/s  MB read",
                                        "normal gap between words for the 2 typers",
                                        "gap if the engine reads all 64 at once",
                                        "gap if it reads 16 tokens between steps",
                                        "reading costs"]),
}


@pytest.mark.parametrize("script", QUICK)
def test_quick_run_prints_tables_only_and_saves_both_files(script, tmp_path, request):
    flags, expected = QUICK[script]
    if script == "two_phases.py":  # the quick run the other tests share: --runs 2
        r, _, folder = request.getfixturevalue("quick_run")
        tmp_path = folder.parent
    else:
        r = run(script, "--quick", *flags, out=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("machine: ")
    for text in expected:
        assert any(line.startswith(text) for line in lines), text
    assert "saved" not in r.stdout and "warning" not in r.stdout and "Traceback" not in r.stderr
    stem = str(tmp_path / "box" / script.replace(".py", ".quick"))
    saved = open(stem + ".txt").read()  # the tables as printed, then how the run was made
    footer = saved[len(r.stdout):].splitlines()
    assert saved.startswith(r.stdout) and footer[1].startswith("(made by the suite at ")
    assert footer[2:] == [line for line in r.stderr.splitlines() if line.startswith("warning")]
    data = json.loads(open(stem + ".json").read())
    assert data["quick"] and data["records"] and data["sheets"] and "tables" not in data
    for sheet in data["sheets"]:  # each sheet saved as it was printed
        assert sheet["printed"] in r.stdout
    runs = data["settings"]["runs"]
    for record in data["records"]:  # every figure a plain number or text, named by plain keys
        assert all(isinstance(v, (int, float, str)) for v in record["keys"].values())
        assert isinstance(record["value"], (int, float, str)), record
        assert record["settings"]["runs"] == runs and record["settings"]["quick"] is True
        if record["statistic"] == "computed":
            assert record["samples"] is None and record["runs"] is None
            continue
        # a timed figure: the figure in each of the --runs counted runs, around the figure
        samples = record["samples"]
        assert record["statistic"] in ("median", "best", "mean") and record["runs"] == len(
            samples)  # (the balance: the mean of the processes', as its claim tells it)
        if record["figure"] == "one call":  # the table products alone: the best of 2 calls
            assert len(samples) == bench.ALONE_RUNS and "rounds" not in record
            continue
        assert len(samples) == len(record["rounds"]) == len(record["shares"]), record
        assert len(samples) == (1 if record["experiment"] == "breakdown" else runs), record
        #                       a trip recorded part by part: once in each process
        if record["unit"] in ("x", "FLOPs/byte", "tokens"):  # a ratio of two figures'
            continue  # statistics (the balance too): its rounds' ratios scatter around it, and
        #             need not hold it between them where a round was left out as disturbed
        assert min(samples) <= record["value"] * (1 + 1e-9), record
        assert max(samples) >= record["value"] * (1 - 1e-9), record
    if script == "machine_speed.py":  # the speeds two_phases --roofs reads are the printed ones
        roofs = schema.read_roofs(stem + ".json")
        found = data["records"]
        assert roofs.bytes_per_s == pytest.approx(
            records.find(found, "machine_speed", "memory speed")["value"] * 1e9)
        assert roofs.flops_per_s == pytest.approx(
            records.find(found, "machine_speed", "math speed")["value"] * 1e9)


BAD = [
    ("machine_speed.py", ["--runs", "0"], "--runs"),
    ("machine_speed.py", ["--runs", "-3"], "--runs"),
    ("machine_speed.py", ["--runs", "abc"], "--runs"),
    ("machine_speed.py", ["--threads", "0"], "--threads"),
    ("machine_speed.py", ["--size", "0"], "--size"),
    ("machine_speed.py", ["--size", "1000000"], "--size"),  # 4 TB: more than the machine has
    ("machine_speed.py", ["--tablefmt", "nope"], "--tablefmt"),
    ("machine_speed.py", ["--label", "../x"], "--label"),
    ("two_phases.py", ["--label", "__init__"], "starting with a letter or digit"),
    ("machine_speed.py", ["--bogus"], "--bogus"),
    ("cube_bug.py", ["--runs", "abc"], "--runs"),
    ("cube_bug.py", ["--tokens", "0"], "--tokens"),
    ("cube_bug.py", ["--tokens", "2048"], "--tokens"),  # the model reads at most 1,024 tokens
    ("cube_bug.py", ["--threads", "-1"], "--threads"),
    ("two_phases.py", ["--runs", "0"], "--runs"),
    ("two_phases.py", ["--prompts", "0"], "--prompts"),
    ("two_phases.py", ["--prompts", "16", "2048"], "--prompts"),  # GPT-2 holds 1024 tokens
    ("two_phases.py", ["--prompts", "1.5"], "--prompts"),
    ("two_phases.py", ["--users", "-4"], "--users"),
    ("two_phases.py", ["--notes", "abc"], "--notes"),
    ("two_phases.py", ["--notes", "1024"], "--notes"),  # no room left to type
    ("two_phases.py", ["--typers", "0"], "--typers"),
    ("two_phases.py", ["--question", "0"], "--question"),
    ("two_phases.py", ["--chunk", "0"], "--chunk"),
    ("two_phases.py", ["--chunk", "1"], "--chunk"),  # 1,024 steps: the typers' notebooks overflow
    ("two_phases.py", ["--chunk", "-5"], "--chunk"),
    ("two_phases.py", ["--chunk", "64", "x"], "--chunk"),
    ("two_phases.py", ["--budget", "0"], "--budget"),
    ("two_phases.py", ["--budget", "8"], "--budget"),  # no room left over the 8 typers
    ("two_phases.py", ["--budget", "100", "--chunk", "64"], "--chunk"),  # one spelling at a time
    ("two_phases.py", ["--typers", "-1"], "--typers"),
    ("two_phases.py", ["--typers", "2.5"], "--typers"),
    ("two_phases.py", ["--experiments", "lunch"], "--experiments"),
    ("two_phases.py", ["--users", "100000"], "--users"),  # far more memory than there is
    ("two_phases.py", ["--roofs", "no-such-file.json"], "--roofs"),
    ("two_phases.py", ["--roofs", "README.md"], "--roofs"),  # not a machine_speed result
    # each refusal names the flag to change, and says why
    ("cube_bug.py", ["--tokens", "10000000"], "--tokens"),  # 983 GB of numbers
    ("two_phases.py", ["--roofs", "/dev/zero"], "is not a results file"),  # endless, not a file
    ("two_phases.py", ["--roofs", "references/post/two_phases.json"], "not 'machine_speed'"),
    ("two_phases.py", ["--roofs", "references/post/machine_speed.json"], "has no saved speeds"),
    ("machine_speed.py", ["--matmul", "100000"], "use a smaller --matmul"),
    ("two_phases.py", ["--budget", "9", "--typers", "8", "--notes", "1000"], "larger --budget"),
    ("two_phases.py", ["--threads", "100000"], "--threads"),
    ("cube_bug.py", ["--label", "x" * 300], "--label"),
]


def refused(name, flags, out, capsys, monkeypatch):
    """`python <name> <flags>` refused, run in this process (as fast as a parse): -> (exit code,
    stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", [name])  # argparse names the script by it
    with pytest.raises(SystemExit) as stopped:
        importlib.import_module(name[:-3]).main([*flags, "--out", str(out), "--label", "box"])
    out_, err = capsys.readouterr()
    return stopped.value.code, out_, err


@pytest.mark.parametrize("script,flags,flag", BAD, ids=[f"{s} {' '.join(f)}" for s, f, _ in BAD])
def test_bad_input_is_one_line_exit_2_and_nothing_saved(script, flags, flag, tmp_path, capsys,
                                                        monkeypatch):
    code, out, err = refused(script, flags, tmp_path, capsys, monkeypatch)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"{script}: error: ")
    assert flag in err
    assert not any(tmp_path.iterdir())


AS_A_USER = [("machine_speed.py", ["--runs", "0"], "--runs"),
             ("cube_bug.py", ["--tokens", "10000000"], "--tokens"),
             ("two_phases.py", ["--roofs", "/dev/zero"], "is not a results file")]


@pytest.mark.parametrize("script,flags,flag", AS_A_USER, ids=[s for s, _, _ in AS_A_USER])
def test_bad_input_as_a_user_runs_it_is_one_line_exit_2_and_nothing_saved(script, flags, flag,
                                                                           tmp_path):
    r = run(script, *flags, out=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    assert flag in r.stderr
    assert not any(tmp_path.iterdir())


def test_cube_both_ways_give_the_same_answer():
    for label, make in cube_bug.CASES:
        h = cube_bug.inputs(8, make)
        assert h.dtype == np.float32
        assert cube_bug.largest_relative_difference(h ** 3, h * h * h) <= cube_bug.SAME, label
    assert (cube_bug.inputs(8, cube_bug.CASES[1][1]) <= 0).all()


def test_ci_runs_exactly_the_readme_test_command():
    readme = open(os.path.join(ROOT, "README.md")).read()
    ci = open(os.path.join(ROOT, ".ci", "run")).read().strip().splitlines()[-1]
    assert ci in readme


def test_quick_keeps_a_size_the_user_asked_for():
    assert flags.parse(cube_bug.build_parser(), ["--quick"], cube_bug.QUICK).tokens == 16
    assert flags.parse(cube_bug.build_parser(), ["--quick", "--tokens", "32"],
                        cube_bug.QUICK).tokens == 32


@pytest.mark.parametrize("name", ["machine_speed.py", "two_phases.py", "cube_bug.py",
                                  "compare.py"])
def test_help_shows_the_whole_description_with_its_examples(name):
    import importlib
    module = importlib.import_module(name[:-3])
    doc = module.__doc__.strip()
    r = in_process(module.main, "--help")
    assert r.returncode == 0 and doc in r.stdout
    assert f"python {name}" in r.stdout


# ---- plans too big, threads, sizes and --roofs


def test_a_plan_too_big_is_refused_before_it_is_made(monkeypatch):
    made = []
    e = two_phases.EXPERIMENTS["collision"]
    monkeypatch.setitem(two_phases.EXPERIMENTS, "collision", dataclasses.replace(
        e, plan=lambda args: made.append(args) or e.plan(args)))
    code, _, err = silent(two_phases.parse_args, [
        "--typers", "1000000", "--chunk", "1", "--question", "1000", "--notes", "10",
        "--experiments", "collision", "--runs", "1", "--no-save"])
    assert code == 2 and "argument --typers" in err and "--chunk" in err and not made


def test_too_many_users_name_the_users():
    code, _, err = silent(two_phases.parse_args, ["--predict", "h100-sxm", "--users", "1000000",
                                                  "--no-save"])
    assert code == 2 and "argument --users" in err and "--typers" not in err


def test_threads_are_held_to_the_cpus_this_run_may_use(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert flags.usable_cpus() == 1
    code, _, err = silent(two_phases.parse_args, ["--quick", "--threads", "2", "--no-save"])
    assert code == 2 and "the logical CPUs this run may use" in err


def roofs_file(tmp_path, change=None):
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.sweep.json")))
    if change:
        change(data)
    path = tmp_path / "machine_speed.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_roofs_file_changed_after_its_run_is_refused(tmp_path):
    import two_phases
    from conftest import one_line

    def faster(data):
        next(b for b in data["blocks"] if b["threads"] == 2)["roofs"]["bytes_per_s"] = 2e12
    r = in_process(two_phases.parse_args, "--quick", "--no-save", "--roofs",
                   roofs_file(tmp_path, faster))
    one_line(r, 2, "--roofs", "changed after its run")


def test_a_sweeps_roofs_give_the_block_of_this_runs_threads(tmp_path, monkeypatch):
    import two_phases
    from harness.measuring import host
    monkeypatch.setattr(host, "cpu_model", lambda: "AMD EPYC")  # the file's own machine
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    path = roofs_file(tmp_path)
    args = two_phases.parse_args(["--quick", "--no-save", "--roofs", path, "--threads", "1"])
    assert args.roofs.bytes_per_s == pytest.approx(21.256161563754e9)  # the 1-thread block
    args = two_phases.parse_args(["--quick", "--no-save", "--roofs", path])
    assert args.roofs.bytes_per_s == pytest.approx(31.496058032745e9)  # the most threads'


def test_another_machines_roofs_are_said(tmp_path, monkeypatch):
    import two_phases
    from harness.measuring import host
    monkeypatch.setattr(host, "cpu_model", lambda: "Intel(R) Xeon(R) Processor")
    r = in_process(two_phases.parse_args, "--quick", "--no-save", "--roofs", roofs_file(tmp_path))
    assert r.returncode == 0 and "was measured on AMD EPYC with 2 cores, not on this machine" \
        in r.stderr


def test_sizes_too_small_to_measure_are_refused_before_measuring():
    import machine_speed
    from conftest import one_line
    for flag, value in (("--size", "1"), ("--matmul", "1")):
        one_line(in_process(machine_speed.parse_args, flag, value, "--no-save"), 2, flag,
                 "from 256" if flag == "--size" else "from 16")
