"""What a careful user tried: folders that point outside themselves, extreme values, files
compare.py cannot use, signals at chosen moments, closed and full streams, ASCII terminals."""
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

import two_phases
from harness import flags, runner, stopping
from harness.keeping import results
from conftest import ROOT, compared, in_process, one_line, python, script, sheet_of, sheets
from harness.keeping.records import col

POST = os.path.join(ROOT, "references", "post")
SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")
OLDER = os.path.join(ROOT, "tests", "older")  # the shipped results as schema 7 saved them (and
#                                               the sweep as schema 4): files in the wild


def snapshot(folder):
    """Every file under folder with its bytes: to see that nothing changed."""
    return {os.path.join(d, n): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(folder) for n in names}


# ---- 1. a results folder never reaches outside itself, and reading it changes nothing

@pytest.fixture
def evil(tmp_path):
    """A results folder whose journal names a file outside it."""
    box = tmp_path / "box"
    box.mkdir()
    (tmp_path / "outside.txt").write_text("the user's own file")
    shutil.copy(os.path.join(SHIPPED, "cube_bug.json"), box / "cube_bug.json")
    (box / results.JOURNAL).write_text(json.dumps({"../stolen.txt": str(tmp_path / "outside.txt"),
                                                   "cube_bug.txt": "../outside.txt"}))
    return tmp_path


def test_reading_a_folder_whose_journal_points_outside_moves_nothing(evil):
    before = snapshot(evil)
    r = compared(str(evil / "box"))
    assert r.returncode == 0 and "h**3 ms" in r.stdout  # its files are compared as they are
    assert "refused" in r.stderr and snapshot(evil) == before


def test_saving_into_such_a_folder_is_refused_and_touches_nothing(evil):
    before = snapshot(evil)
    r = script("cube_bug.py", "--quick", "--runs", "1", "--out", str(evil), "--label", "box")
    one_line(r, 2, "--out", "refused")  # before measuring
    assert r.stdout == "" and snapshot(evil) == before


def test_reading_a_half_saved_folder_reads_the_new_files_and_changes_nothing(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    data = json.load(open(os.path.join(SHIPPED, "cube_bug.json")))
    (box / "cube_bug.json").write_text(json.dumps(data))
    power = next(r for r in data["records"] if r["figure"] == "power"
                 and r["keys"]["numbers"] == "mixed (real)")
    power["value"] = 77.0  # the new result, still in its temp file
    (box / ".tmp-new.json").write_text(json.dumps(data))
    (box / results.JOURNAL).write_text(json.dumps({"cube_bug.json": ".tmp-new.json"}))
    before = snapshot(tmp_path)
    r = compared(str(box))
    assert r.returncode == 0 and "77.00" in r.stdout and "cut short" in r.stderr
    assert snapshot(tmp_path) == before


# ---- 2 to 5. extreme values: one line, exit 2, before anything is measured

EXTREME = [
    (["--quick", "--users", "100000000000"], "--users"),
    (["--quick", "--users", "1" * 40], "--users"),
    (["--quick", "--experiments", "collision", "--typers", "100000000000"], "--typers"),
    (["--predict", "--forklift", "12", "--workbench", "121", "--users", "1" * 40], "--users"),
    (["--predict", "--forklift", "1e300", "--workbench", "1e300"], "--forklift"),
    (["--predict", "--forklift", "1e-300", "--workbench", "1e300"], "--forklift"),
    (["--predict", "--forklift", "1e308", "--workbench", "1"], "--forklift"),
    (["--predict", "--forklift", "5e-324", "--workbench", "1"], "--forklift"),
    (["--quick", "--forklift", "1e300", "--workbench", "1e300"], "--forklift"),
    (["--quick", "--out", ""], "--out"),
    (["--predict", "--forklift", "1", "--workbench", "1", "--seed", "9" * 5000], "--seed"),
]


@pytest.mark.parametrize("flags,flag", EXTREME, ids=[" ".join(f)[:50] for f, _ in EXTREME])
def test_extreme_values_are_one_line_before_measuring(tmp_path, flags, flag):
    extra = [] if "--out" in flags else ["--out", str(tmp_path)]
    r = in_process(two_phases.parse_args, *flags, *extra)  # refused before anything runs
    one_line(r, 2, flag)
    assert r.stdout == "" and len(r.stderr) < 300 and not any(tmp_path.iterdir())


def speeds_file(path, text):
    """A machine_speed.json whose memory speed is `text`, as written in the file."""
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["roofs"]["bytes_per_s"] = "SPEED"
    path.write_text(json.dumps(data).replace('"SPEED"', text))
    return str(path)


@pytest.mark.parametrize("text,says", [("1e-300", "from 0.001 to 1e+06"),
                                       ("1e300", "from 0.001 to 1e+06"), ("true", "above 0"),
                                       ("NaN", "above 0"), ('"fast"', "above 0")])
def test_roofs_files_with_speeds_out_of_range_are_one_line(tmp_path, text, says):
    r = in_process(two_phases.parse_args, "--predict", "--no-plot", "--roofs",
                   speeds_file(tmp_path / "s.json", text), "--out", str(tmp_path / "out"))
    one_line(r, 2, "--roofs", says)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("blocks, says", [
    ([{"roofs": {"bytes_per_s": 1e10, "flops_per_s": 1e11}}], "whole number of threads"),
    ([{"threads": 1, "roofs": {"bytes_per_s": -5, "flops_per_s": -1e9}}], "above 0"),
    ([{"threads": 1}, {"threads": "2"}], "whole number of threads"), ({"a": 1}, "threads")])
def test_a_schema_7_file_with_blocks_of_its_own_is_one_line(tmp_path, blocks, says):
    """Schema 7 never had a top-level "blocks": one passed through the upgrade unchecked, and
    --roofs or --predict ended in KeyError, TypeError or, with speeds under 0, a run that died
    midway in ZeroDivisionError. An older file's every field is checked as the newest's."""
    data = json.load(open(os.path.join(OLDER, "machine_speed.json")))
    path = tmp_path / "machine_speed.json"
    path.write_text(json.dumps({**data, "schema_version": 7, "blocks": blocks}))
    one_line(script("two_phases.py", "--predict", "--roofs", str(path), "--no-save"), 2,
             "--roofs", says)


def test_a_file_of_nested_brackets_is_one_line_and_the_rest_compares(tmp_path):
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "machine_speed.json").write_text("[" * 200_000 + "]" * 200_000)
    one_line(script("two_phases.py", "--predict", "--roofs", str(deep / "machine_speed.json"),
                    "--no-save"), 2, "--roofs", "not JSON")
    shutil.copy(os.path.join(SHIPPED, "cube_bug.json"), deep / "cube_bug.json")
    r = compared(str(deep))
    one_line(r, 1, "machine_speed.json", "not JSON")
    assert "h**3 ms" in r.stdout


def test_a_file_nested_past_what_cleaning_walks_is_one_line_and_the_rest_compares(tmp_path):
    """600 nested lists that json reads, with one character to clean: cleaned() recursed past
    Python's limit in a traceback, in compare.py, --roofs and every script's start."""
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "machine_speed.json").write_text('{"x": ' + "[" * 600 + '"\u00e9"' + "]" * 600 + "}")
    one_line(script("two_phases.py", "--predict", "--roofs", str(deep / "machine_speed.json"),
                    "--no-save"), 2, "--roofs", "nested deeper than 32")
    shutil.copy(os.path.join(SHIPPED, "cube_bug.json"), deep / "cube_bug.json")
    r = compared(str(deep))
    one_line(r, 1, "machine_speed.json", "nested deeper than 32")
    assert "h**3 ms" in r.stdout


@pytest.mark.parametrize("argv", [("machine_speed.py", "--help"), ("two_phases.py", "--help"),
                                  ("cube_bug.py", "--help"), ("compare.py", "--help"),
                                  ("cube_bug.py", "--quick", "--no-save")])
def test_every_script_runs_under_python_oo(argv, tmp_path):
    """python -OO strips docstrings, which --help's description was read from: every script,
    --help too, ended in AttributeError."""
    r = script(*argv, env={**os.environ, "PYTHONOPTIMIZE": "2"})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_a_sweep_of_machine_speed_gives_its_most_threads_speeds():
    from harness.keeping import schema
    roofs = schema.read_roofs(os.path.join(SHIPPED, "machine_speed.sweep.json"))
    sweep = json.load(open(os.path.join(SHIPPED, "machine_speed.sweep.json")))
    most = max(sweep["blocks"], key=lambda b: b["threads"])
    assert most["threads"] == 2 and "2 threads" in roofs.source
    assert roofs.bytes_per_s == most["roofs"]["bytes_per_s"]


def test_a_sweep_of_an_older_layout_reads_as_blocks_and_reads_the_same_saved_anew(tmp_path):
    from harness.keeping import older, results, schema
    path = os.path.join(OLDER, "machine_speed.sweep.json")
    old = json.load(open(path))  # schema 4: "roofs @1", a sheet "machine_speed @2"
    data = schema.load(path, "machine_speed")
    assert data["schema_version"] == results.SCHEMA_VERSION == 8
    assert [(t["name"], t["threads"]) for t in data["sheets"]] == [
        (older.block_of(n)[0], int(older.block_of(n)[1])) for n in old["sheets"]]
    assert [b["threads"] for b in data["blocks"]] == [1, 2] and not any(" @" in k for k in data)
    assert data["blocks"][0]["roofs"] == old["roofs @1"]
    (tmp_path / "machine_speed.sweep.json").write_text(json.dumps(data))  # as a run saves it now
    anew = str(tmp_path / "machine_speed.sweep.json")
    for n in (1, 2, None):  # the same speeds, and the same block said
        now, then = schema.read_roofs(anew, threads=n), schema.read_roofs(path, threads=n)
        assert (now.bytes_per_s, now.flops_per_s, now.origin[1:]) == (
            then.bytes_per_s, then.flops_per_s, then.origin[1:])
    for blocks in ([{**data["blocks"][1], "threads": "2"}], [{"threads": 0}], {"1": {}},
                   [{"threads": 2, "roofs": {"bytes_per_s": -1.0, "flops_per_s": 1e9}}]):
        (tmp_path / "bad.json").write_text(json.dumps({**data, "blocks": blocks}))
        with pytest.raises(ValueError, match="blocks|roofs"):
            schema.read_roofs(str(tmp_path / "bad.json"))


# ---- 6 and 7. compare.py on files it cannot use: left out in one line, the rest compares

def shipped(change):
    data = json.load(open(os.path.join(SHIPPED, "two_phases.json")))
    change(data)
    return data


def cell(experiment, figure, keys, value):
    def change(data):
        r = next(r for r in data["records"] if r["experiment"] == experiment
                 and r["figure"] == figure and r["keys"] == keys)
        r["value"] = value
    return change


@pytest.mark.parametrize("change,says", [
    (cell("prefill", "time", {"prompt": 1}, 0), "(prefill: time): not a finite number above 0"),
    (cell("decode", "tokens per second", {"users": 4}, -3.0),
     "(decode: tokens per second): not a finite number above 0"),
    (cell("decode", "step", {"users": 4}, "fast"), "(decode: step)"),
    (cell("decode", "step", {"users": 4}, float("nan")), "(decode: step)"),
    (cell("decode", "step", {"users": 4}, float("inf")), "(decode: step)"),
    (lambda d: d["machine"].update(llc_bytes="32M"), "machine 'llc_bytes'"),
    (lambda d: d["machine"].update(load="high"), "machine 'load'"),
    (lambda d: d["machine"].update(frequency=[1]), "machine 'frequency'"),
    (lambda d: d["machine"].update(busy=5), "machine 'busy'"),
    (lambda d: d.update(predicted=1), "'predicted' that is not text"),
    (lambda d: d["roofs"].update(bytes_per_s=0), "'roofs' without finite speeds"),
])
def test_compare_leaves_out_a_file_with_a_wrong_field(tmp_path, change, says):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "two_phases.json").write_text(json.dumps(shipped(change)))
    shutil.copy(os.path.join(SHIPPED, "cube_bug.json"), bad / "cube_bug.json")
    r = compared(POST, str(bad))
    one_line(r, 1, "left out", says)
    assert "h**3 ms" in r.stdout and "nan" not in r.stdout


def test_a_table_without_its_key_column_is_refused_in_one_line(tmp_path):
    def drop_prompt(data):
        for r in data["records"]:
            if r["experiment"] == "prefill":
                r["keys"] = {}
    (tmp_path / "two_phases.json").write_text(json.dumps(shipped(drop_prompt)))
    shutil.copy(os.path.join(SHIPPED, "machine_speed.json"), tmp_path / "machine_speed.json")
    r = compared(POST, str(tmp_path))
    one_line(r, 1, "two_phases.json", "without its key 'prompt'", "left out")
    assert "forklift" in r.stdout and "Traceback" not in r.stderr  # the rest compares


def test_a_fifo_in_a_folder_is_left_out_without_a_hang(tmp_path):
    os.mkfifo(tmp_path / "cube_bug.json")
    shutil.copy(os.path.join(SHIPPED, "machine_speed.json"), tmp_path / "machine_speed.json")
    r = script("compare.py", str(tmp_path), timeout=60)
    one_line(r, 1, "cube_bug.json", "not a results file")
    assert "forklift" in r.stdout


# ---- 8 to 10. a signal at any moment: one true line, 130 or 143

def demo(args, facts):
    yield sheet_of("demo", [col("n", "n", "", "d")], [{"n": 1}])


@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "terminated")])
def test_a_signal_right_after_saving_says_the_results_were_saved(tmp_path, monkeypatch, capsys,
                                                                 signum, code, word):
    real = results.save

    def save_then_signal(*a):
        done = real(*a)
        signal.raise_signal(signum)  # right after the "saved" line
        return done
    monkeypatch.setattr(results, "save", save_then_signal)
    args = flags.parse(flags.parser("demo\n", runs=1, prog="demo.py"),
                       ["--out", str(tmp_path), "--label", "box"], {})
    assert runner.run("demo", args, demo) == code
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"{word}: the results were saved just before" and err[-2].startswith("saved")
    assert (tmp_path / "box" / "demo.json").exists()


def test_two_signals_close_together_give_one_line(tmp_path, capsys):
    def twice(args, facts):
        yield from demo(args, facts)
        try:
            signal.raise_signal(signal.SIGTERM)
        finally:
            signal.raise_signal(signal.SIGTERM)  # a second one while the first unwinds
    args = flags.parse(flags.parser("demo\n", runs=1, prog="demo.py"), ["--no-save"], {})
    assert runner.run("demo", args, twice) == 143
    assert capsys.readouterr().err.count("terminated") == 1


FLAGS = {"cube_bug.py": ["--quick", "--runs", "1", "--out"], "compare.py": [],
         "two_phases.py": ["--predict", "--no-plot", "--forklift", "12", "--workbench", "121",
                           "--out"]}


@pytest.mark.parametrize("name", FLAGS)
def test_a_signal_once_the_run_is_done_still_ends_in_one_true_line(tmp_path, name):
    """After the run returns its code, a signal still gives one line and 128 + its number."""
    code = ("import os, signal, sys, runpy\nfrom harness import stopping\n"
            "real = stopping.leave\n"
            "def leave(code):\n"
            "    signal.raise_signal(signal.SIGTERM)\n"
            "    real(code)\n"
            "stopping.leave = leave\n"
            f"sys.argv = [{name!r}, *{FLAGS[name] + [str(tmp_path)]!r}]\n"
            f"runpy.run_path({name!r}, run_name='__main__')\n")
    r = python(code)
    assert r.returncode == 143 and "Traceback" not in r.stderr
    said = r.stderr.strip().splitlines()[-1]
    assert said == "terminated: " + (stopping.NOTHING_SAVED if name == "compare.py" else
                                     stopping.SAVED)


# ---- 11 and 12. closed or full stdout, ASCII terminals

@pytest.mark.parametrize("flags", [["cube_bug.py", "--quick", "--runs", "1"],
                                   ["two_phases.py", "--predict", "--no-plot", "--forklift", "12",
                                    "--workbench", "121"], ["compare.py"]],
                         ids=["cube_bug", "predict", "compare"])
def test_a_full_stdout_is_one_line_and_the_result_is_still_saved(tmp_path, flags):
    code = ("import sys, runpy\n"
            "sys.stdout = open('/dev/full', 'w')\n"
            f"sys.argv = {flags + (['--out', str(tmp_path)] * (flags[0] != 'compare.py'))!r}\n"
            f"runpy.run_path({flags[0]!r}, run_name='__main__')\n")
    r = python(code)
    assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr
    assert sum("stdout took no more" in line for line in r.stderr.splitlines()) == 1
    if flags[0] != "compare.py":
        assert any(name.endswith(".json") for _, _, names in os.walk(tmp_path) for name in names)


def test_a_closed_pipe_still_saves_the_result(tmp_path):
    import subprocess
    import sys
    run = subprocess.Popen([sys.executable, "cube_bug.py", "--quick", "--runs", "1", "--out",
                            str(tmp_path), "--label", "box"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    run.stdout.readline()  # `| head -1`: one line read, then the pipe closed
    run.stdout.close()
    err = run.stderr.read()
    assert run.wait(timeout=60) == 0 and "Traceback" not in err
    assert "stdout took no more" in err and (tmp_path / "box" / "cube_bug.quick.json").exists()


@pytest.mark.parametrize("argv", [["cube_bug.py", "--help"], ["two_phases.py", "--help"],
                                  ["machine_speed.py", "--help"],
                                  ["compare.py", "--tablefmt", "fancy_grid"]])
def test_an_ascii_terminal_gets_every_output(argv):
    r = script(*argv, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0 and "Traceback" not in r.stderr and r.stdout, r.stderr


# ---- 13 to 16. what can be checked is checked before measuring

def test_a_folder_name_that_is_not_utf8_is_saved_or_refused_in_one_line(tmp_path):
    import subprocess
    import sys
    out = os.fsencode(str(tmp_path)) + b"/r\xff"
    r = subprocess.run([sys.executable, b"cube_bug.py", b"--quick", b"--runs", b"1", b"--out",
                        out], cwd=ROOT, capture_output=True)
    assert b"Traceback" not in r.stderr and r.returncode in (0, 2), r.stderr


@pytest.mark.parametrize("make,flags,says", [
    (lambda t: os.symlink(t / "nowhere", t / "dangling"), ["--label", "dangling"], "not a folder"),
    (lambda t: os.symlink(t / "loop", t / "loop"), ["--label", "loop"], "not a folder"),
    (lambda t: os.symlink(t / "loop", t / "loop"), ["--label", "x", "--out", "{t}/loop/deeper"],
     "--out"),
    (lambda t: None, ["--out", "{t}/" + "/".join(["d" * 200] * 30)], "--out"),
    (lambda t: os.makedirs(t / "box" / "cube_bug.quick.json"), ["--label", "box"], "not a file"),
    (lambda t: os.makedirs(t / "box" / results.LOCK), ["--label", "box"], "not a file"),
    (lambda t: None, ["--out", "/proc/no-such-results"], "--out"),
], ids=["dangling label", "label loop", "out through a loop", "path too long",
        "a folder named like a result", "a folder as the lock", "/proc"])
def test_a_folder_that_cannot_take_the_result_is_refused_before_measuring(tmp_path, make, flags,
                                                                         says):
    make(tmp_path)
    before = sorted(os.listdir(tmp_path))
    flags = [f.format(t=tmp_path) for f in flags]
    if "--out" not in flags:
        flags += ["--out", str(tmp_path)]
    import cube_bug
    r = in_process(cube_bug.main, "--quick", "--runs", "1", *flags)  # (refused before it runs)
    one_line(r, 2, "--out", says)
    assert r.stdout == "" and sorted(os.listdir(tmp_path)) == before


def test_a_list_flag_keeps_each_value_once(tmp_path):
    r = in_process(two_phases.main, "--predict", "--forklift", "12", "--workbench", "121",
                   "--experiments", "prefill", "prefill", "--prompts", "16", "16", "1", "--out",
                   str(tmp_path), "--label", "p", "--no-plot")
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "p" / "two_phases.json").read_text())
    assert "prefill" in sheets(data) and "decode" not in sheets(data) and [
        r["keys"]["prompt"] for r in data["records"] if r["figure"] == "time"] == [16, 1]
    assert (tmp_path / "p" / "two_phases.txt").read_text().count("prompt  time ms") == 1


def test_a_long_bad_number_is_not_echoed_in_full():
    import machine_speed
    r = in_process(machine_speed.main, "--size", "9" * 5000)
    one_line(r, 2, "--size")
    assert len(r.stderr) < 200


def test_compare_of_a_file_or_a_missing_folder_says_so(tmp_path):
    (tmp_path / "a-file").write_text("x")
    one_line(compared(str(tmp_path / "a-file")), 1, "is a file, not a results folder")
    one_line(compared(str(tmp_path / "missing")), 1, "no such results folder")


# ---- closed and full streams


def test_a_closed_stdout_ends_cleanly(tmp_path):
    r = subprocess.run([sys.executable, "two_phases.py", "--predict", "h100-sxm", "--no-save"],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       pass_fds=(), preexec_fn=lambda: os.close(1))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [
    ["compare.py", "post", "amd-epyc-2c", "--export", "csv"],
    ["machine_speed.py", "--quick", "--runs", "1", "--size", "300", "--matmul", "32",
     "--no-save", "--export", "csv"],
    ["two_phases.py", "--predict", "h100-sxm", "--no-save", "--export", "json"],
])


def test_an_export_cut_short_by_a_full_disk_exits_non_zero(argv):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, os.path.join(ROOT, argv[0]), *argv[1:]],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert r.returncode == 1 and "did not arrive whole" in r.stderr
    assert "Traceback" not in r.stderr


def test_tables_into_head_still_exit_zero(tmp_path):
    r = subprocess.run(f"{sys.executable} compare.py post amd-epyc-2c | head -1", shell=True,
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr


@pytest.mark.parametrize("argv", [
    ["machine_speed.py", "--quick", "--runs", "1", "--size", "300", "--matmul", "32"],
    ["two_phases.py", "--predict", "h100-sxm", "--no-save"],
    ["compare.py", "post", "amd-epyc-2c"],
])


def test_a_closed_stderr_is_no_crash(argv, tmp_path):
    out = ["--out", str(tmp_path)] if argv[0] == "machine_speed.py" else []
    r = subprocess.run(f"{sys.executable} {' '.join(argv + out)} 2>&-", shell=True, cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout
    assert not any(word in r.stdout for word in ("wall time", "saved ", "Traceback"))  # notes
    #   go nowhere, never into the tables
    if out:
        assert list(tmp_path.glob("*/machine_speed.quick.json"))  # saved, as ever


def test_stderr_into_a_closed_pipe_is_no_failure(tmp_path):
    r = subprocess.run(f"{sys.executable} machine_speed.py --quick --size 300 --matmul 32 "
                       f"--runs 3 --out {tmp_path} --label pipe2 2>&1 | head -2; "
                       f"exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash", cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and (tmp_path / "pipe2" / "machine_speed.quick.json").exists()
    if os.path.exists("/dev/full"):
        r = subprocess.run(f"{sys.executable} machine_speed.py --quick --size 300 --matmul 32 "
                           f"--runs 1 --out {tmp_path} --label full 2>/dev/full", shell=True,
                           cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0 and (tmp_path / "full" / "machine_speed.quick.json").exists()
