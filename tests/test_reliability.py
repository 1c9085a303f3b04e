"""Nothing a user saved is ever lost or mixed up, and no input gets a traceback: one test per way
a careful user found to break an earlier version (interrupts, kills, full disks, two runs at once,
bad values found late, broken result files)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import cube_bug
import machine_speed
import two_phases
from harness import flags, runner
from harness.keeping import results, schema
from harness.measuring import host, timing
from conftest import (EPYC, ROOT, SHIPPED, compared, in_process, one_line, python, reference,
                      script, sheet_of, silent, started)
from harness.showing import report
from harness.showing.printers import Picture
from harness.keeping.records import col, timed


def demo(args, facts):
    t = timing.taken([0.0010, 0.0012, 0.0011])  # three samples, as a run keeps them
    yield sheet_of("demo", [col("n", "n", "", "d"), col("time", "time ms", "ms", ".3f")],
                   [{"n": 1, "time": timed(t.seconds * 1e3, t)}], layout={"timed": ("time",)})


def args_for(tmp_path, *given):
    return flags.parse(flags.parser("demo\n", runs=3, prog="demo.py"),
                       ["--out", str(tmp_path), "--label", "box", *given], {})


def saved(tmp_path):
    box = tmp_path / "box"
    return {p.name: p.read_text() for p in sorted(box.iterdir())
            if p.name != results.LOCK and p.is_file()}


# ---- 1. a quick run's picture, and machine_speed's: see test_plot.py

# ---- 2. --quick keeps a flag the user gave, even when it equals the full default

@pytest.mark.parametrize("parse,argv,name,value", [
    (two_phases.parse_args, ["--quick", "--typers", "8"], "typers", 8),
    (two_phases.parse_args, ["--quick"], "typers", two_phases.QUICK["typers"]),
    (cube_bug.parse_args, ["--quick", "--tokens", "256"], "tokens", 256),
    (machine_speed.parse_args, ["--quick", "--size", "10000"], "size", 10_000),
    (two_phases.parse_args, ["--typers", "8"], "chunk", [128, 256, 512, 1024]),
])
def test_quick_keeps_every_flag_given(parse, argv, name, value):
    assert getattr(parse(argv + ["--no-save"]), name) == value


def test_quick_with_a_budget_no_larger_than_the_typers_is_refused():
    one_line(in_process(two_phases.main, "--quick", "--typers", "8", "--budget", "8"), 2,
             "--budget")


# ---- 3. a result is one unit: its files are replaced together or not at all

def killed_between_renames(folder):
    """A save killed (SIGKILL) after its first rename, in a process of its own."""
    code = ("import os, signal\nfrom harness.keeping import results\n"
            "real, n = os.replace, [0]\n"
            "def replace(a, b, **kw):\n"
            "    real(a, b, **kw)\n"
            "    n[0] += 1\n"
            "    if n[0] == 2:  # the journal, then the first file: now die\n"
            "        os.kill(os.getpid(), signal.SIGKILL)\n"
            "os.replace = replace\n"
            f"results.replace_together({str(folder)!r}, {{'r.json': 'new', 'r.txt': 'new'}})\n")
    r = python(code)
    assert r.returncode == -signal.SIGKILL


def test_a_save_killed_halfway_is_finished_by_the_next(tmp_path):
    results.replace_together(str(tmp_path), {"r.json": "old", "r.txt": "old"})
    killed_between_renames(tmp_path)
    assert {(tmp_path / n).read_text() for n in ("r.json", "r.txt")} == {"old", "new"}  # mixed
    results.replace_together(str(tmp_path), {"other.txt": "x"})  # the next save, any save
    assert (tmp_path / "r.json").read_text() == (tmp_path / "r.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "other.txt", "r.json",
                                                         "r.txt"]


def test_compare_never_reads_half_a_save(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    data = {"schema_version": 2, "script": "cube_bug", "quick": False, "settings": {},
            "machine": {"cpu": "Test CPU", "cores": 2, "os": "x", "python": "3", "numpy": "2",
                        "blas": [], "env": {}, "date": "2026-01-01"},
            "tables": {"cube": {"columns": [{"header": "numbers", "unit": ""},
                                            {"header": "h**3 ms", "unit": "ms"}],
                                "rows": [["mixed (real)", 1.0]]}}}
    results.replace_together(str(box), {"cube_bug.json": json.dumps(data)})
    data["tables"]["cube"]["rows"] = [["mixed (real)", 55.0]]
    code = ("import os, signal\nfrom harness.keeping import results\n"
            "real = os.replace\n"
            "def replace(a, b, **kw):\n"
            "    if b.endswith('cube_bug.json'): os.kill(os.getpid(), signal.SIGKILL)\n"
            "    real(a, b, **kw)\n"
            "os.replace = replace\n"
            f"results.replace_together({str(box)!r}, {{'cube_bug.json': {json.dumps(data)!r}}})\n")
    assert python(code).returncode == -signal.SIGKILL
    r = compared(str(box))
    assert r.returncode == 0, r.stderr
    assert "55.00" in r.stdout.split("mixed (real): h**3 ms")[1].splitlines()[0]


def test_a_second_run_waits_for_the_first_to_finish_saving(tmp_path):
    import fcntl
    box = tmp_path / "box"
    box.mkdir()
    lock = os.open(box / results.LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # a first run is saving
    run = started("cube_bug.py", "--quick", "--runs", "1", "--out", str(tmp_path), "--label", "box")
    wait_for(run, "waiting for another run")
    assert run.poll() is None and not (box / "cube_bug.quick.json").exists()
    os.close(lock)  # the first run is done
    run.communicate(timeout=60)
    assert run.returncode == 0
    assert (box / "cube_bug.quick.json").exists()


def numbered(n):
    """A run whose table holds its number n."""
    def body(args, facts):
        yield sheet_of("demo", [col("run", "run", "", "d")], [{"run": n}])
    return body


def test_ctrl_c_during_the_renames_waits_for_the_unit(tmp_path, monkeypatch, capsys):
    runner.run("demo", args_for(tmp_path), numbered(1))
    real = os.replace

    def replace(a, b, **kw):
        if b == "demo.json":  # found in the folder held open by its descriptor
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between the two files' renames
        real(a, b, **kw)
    monkeypatch.setattr(results.os, "replace", replace)
    assert runner.run("demo", args_for(tmp_path), numbered(2)) == 130
    files = saved(tmp_path)
    assert [r["value"] for r in json.loads(files["demo.json"])["records"]] == [2]
    assert files["demo.txt"].splitlines()[1:3] == ["run", "  2"]  # the same run's, whole
    assert "interrupted: the results were saved just before" in capsys.readouterr().err


# ---- 4. stray temps are removed and ignored; SIGTERM says so

def test_a_killed_runs_temps_are_removed_by_the_next_save_and_ignored_by_git(tmp_path):
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / ".tmp-abc123.json").write_text("{half")
    assert runner.run("demo", args_for(tmp_path), demo) == 0
    assert sorted(saved(tmp_path)) == ["demo.json", "demo.txt"]
    for name in (".tmp-abc123.json", ".replacing.json", ".lock", "x.quick.png"):
        r = subprocess.run(["git", "check-ignore", "-q", f"results/box/{name}"], cwd=ROOT)
        assert r.returncode == 0, name


def wait_for(run, text, seconds=60):
    """Read the run's stderr until `text` appears."""
    deadline, seen = time.monotonic() + seconds, ""
    while text not in seen and time.monotonic() < deadline:
        seen += run.stderr.readline()
    assert text in seen, seen
    return seen


@pytest.mark.parametrize("signum,code,word", [(signal.SIGTERM, 143, "terminated"),
                                              (signal.SIGINT, 130, "interrupted")])
def test_a_signal_mid_run_ends_it_in_one_line(tmp_path, signum, code, word):
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "two_phases.quick.json").write_text("earlier")
    run = started("two_phases.py", "--quick", "--out", str(tmp_path), "--label", "box")
    assert run.stdout.readline().startswith("machine: ")  # the run has started: it measures
    run.send_signal(signum)
    out, err = run.communicate(timeout=60)
    assert run.returncode == code and "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"{word}: nothing saved, earlier results untouched"
    assert (tmp_path / "box" / "two_phases.quick.json").read_text() == "earlier"


# ---- 5. what can be checked before measuring is checked before measuring

@pytest.mark.parametrize("flags,flag", [
    (["--out", "{tmp}/a-file"], "--out"),
    (["--out", "{tmp}/a-file/deeper"], "--out"),
    (["--label", "x" * 300], "--label"),
])
def test_a_folder_that_cannot_hold_results_is_refused_before_measuring(tmp_path, flags, flag):
    (tmp_path / "a-file").write_text("not a folder")
    r = in_process(cube_bug.parse_args, "--quick", *[f.format(tmp=tmp_path) for f in flags])
    one_line(r, 2, flag)  # refused before anything runs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_read_only_folder_is_refused_before_measuring(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    os.chmod(tmp_path, 0o500)
    try:
        one_line(script("cube_bug.py", "--quick", "--out", str(tmp_path)), 2, "--out",
                 "not writable")
    finally:
        os.chmod(tmp_path, 0o700)


@pytest.mark.parametrize("speed", ["NaN", "Infinity", "0", "-20.7", '"fast"', "null"])
def test_roofs_that_are_not_finite_positive_speeds_are_refused(tmp_path, speed):
    path = tmp_path / "machine_speed.json"
    data = {**RESULT, "script": "machine_speed", "tables": {},
            "roofs": {"bytes_per_s": "SPEED", "flops_per_s": 1e11}}
    path.write_text(json.dumps(data).replace('"SPEED"', speed))
    one_line(in_process(two_phases.parse_args, "--quick", "--roofs", str(path), "--out",
                        str(tmp_path)), 2, "--roofs", "above 0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["machine_speed.json"]


def test_a_failed_save_leaves_no_empty_folder(tmp_path, monkeypatch):
    def no_space(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(results, "_write_temp", no_space)
    assert runner.run("demo", args_for(tmp_path), demo) == 1
    assert not (tmp_path / "box").exists()


def test_a_folder_swapped_for_a_link_while_the_run_measures_is_never_written_through(
        tmp_path, capsys):
    """`rm -rf O/box; ln -s VICTIM O/box` while a run measures: the save refuses the link, and
    nothing reaches the folder it points to."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "report.md").write_text("theirs")
    runner.run("demo", args_for(tmp_path), demo)  # O/box holds a result, and history to come

    def swapped(args, facts):
        yield from demo(args, facts)
        shutil.rmtree(tmp_path / "box")  # another local user, meanwhile
        (tmp_path / "box").symlink_to(victim)
    assert runner.run("demo", args_for(tmp_path), swapped) == 1
    assert "is a link or not a folder" in capsys.readouterr().err
    assert sorted(p.name for p in victim.iterdir()) == ["report.md"]
    assert (victim / "report.md").read_text() == "theirs"


def test_a_folder_swapped_during_the_save_keeps_its_files_where_the_save_began(tmp_path,
                                                                              monkeypatch):
    """Swapped after the save has opened the folder: every file still goes into the folder it
    opened (now moved aside), none through the link."""
    victim, box, aside = tmp_path / "victim", tmp_path / "box", tmp_path / "aside"
    victim.mkdir()

    def swap(d, temp):
        if not aside.exists():
            os.rename(box, aside)
            box.symlink_to(victim)
    monkeypatch.setattr(results, "made", swap)
    assert results.save(str(box), {"demo.json": "{}", "demo.txt": "t"}, "demo") == 0
    assert list(victim.iterdir()) == []
    assert sorted(p.name for p in aside.iterdir()) == [results.LOCK, "demo.json", "demo.txt"]


# ---- 6. another run measuring on the same machine

def own_temp(tmp_path):
    """The environment of a run whose machine-wide mark is its own (TMPDIR), not the one that
    another run of the suite on this machine may hold."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


def test_a_run_says_when_another_is_measuring(tmp_path):
    import fcntl
    env = own_temp(tmp_path)
    path = os.path.join(env["TMPDIR"], f"prefill-vs-decode-{os.getuid()}.lock")
    mark = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(mark, fcntl.LOCK_SH)  # another run is measuring
    try:
        r = script("cube_bug.py", "--quick", "--runs", "1", "--out", str(tmp_path), "--label",
                   "box", env=env)
    finally:
        os.close(mark)
    assert r.returncode == 0
    assert "the machine is busy (another run of this suite)" in r.stderr
    assert "BUSY: another run of this suite" in r.stdout.splitlines()[0]
    data = json.loads((tmp_path / "box" / "cube_bug.quick.json").read_text())
    assert "another run of this suite" in data["machine"]["busy"]


def test_a_quiet_machine_is_not_called_busy(tmp_path):
    r = script("cube_bug.py", "--quick", "--runs", "1", "--no-save", env=own_temp(tmp_path))
    assert "BUSY: another run" not in r.stdout and "load" in r.stdout.splitlines()[0]


# ---- 8 and 14. compare.py on result files it cannot use, and on folders it should explain

RESULT = {"schema_version": 2, "script": "cube_bug", "quick": False, "settings": {},
          "machine": {"cpu": "Test CPU", "cores": 2, "os": "x", "python": "3", "numpy": "2",
                      "blas": [{"library": "openblas", "version": "0.3", "threads": 2}],
                      "env": {}, "date": "2026-01-01"},
          "tables": {"cube": {"columns": [{"header": "numbers", "unit": ""},
                                          {"header": "h**3 ms", "unit": "ms"}],
                              "rows": [["mixed (real)", 55.0]],
                              "samples_s": [[[0.055, 0.056, 0.054], [0.001, 0.001, 0.001]]]}}}


def broken(change):
    data = json.loads(json.dumps(RESULT))
    change(data)
    return data


@pytest.mark.parametrize("data,says", [
    (broken(lambda d: d["machine"].pop("cpu")), "machine 'cpu'"),
    (broken(lambda d: d.update(machine=[])), "has no machine"),
    (broken(lambda d: d["machine"]["blas"][0].pop("threads")), "BLAS entry"),
    (broken(lambda d: d["machine"].update(cores="two")), "machine 'cores'"),
    (broken(lambda d: d["tables"]["cube"]["rows"].append([1])), "do not match its columns"),
    (broken(lambda d: d["tables"]["cube"]["columns"][0].pop("unit")), "without usable columns"),
    (broken(lambda d: d.update(tables=None)), "has no tables"),
    (broken(lambda d: d.update(schema_version="2")), "'2', which is not a whole number"),
    (broken(lambda d: d.pop("schema_version")), "has no schema version"),
])
def test_compare_names_an_unusable_file_and_compares_the_rest(tmp_path, data, says):
    for name, result in (("good", RESULT), ("bad", data)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cube_bug.json").write_text(json.dumps(result))
    r = compared(str(tmp_path))
    one_line(r, 1, "bad/cube_bug.json", says)
    assert "good: machine: Test CPU" in r.stdout and "55.00" in r.stdout


def test_compare_says_a_folder_holds_only_quick_runs(tmp_path):
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "cube_bug.quick.json").write_text(json.dumps(RESULT))
    one_line(compared(str(tmp_path)), 1, "only quick runs",
             "cube_bug.quick.json")


def test_compare_says_a_file_is_not_a_folder(tmp_path):
    (tmp_path / "cube_bug.json").write_text(json.dumps(RESULT))
    r = compared(str(tmp_path / "cube_bug.json"))
    assert "is a file, not a results folder" in r.stderr and "no such" not in r.stderr


def test_compare_tells_apart_two_folders_of_the_same_name(tmp_path):
    for where in ("monday", "tuesday"):
        (tmp_path / where / "box").mkdir(parents=True)
        (tmp_path / where / "box" / "cube_bug.json").write_text(json.dumps(RESULT))
    r = compared(str(tmp_path / "monday" / "box"), str(tmp_path / "tuesday" / "box"))
    assert r.returncode == 0, r.stderr
    head = next(line for line in r.stdout.splitlines() if line.startswith("figure"))
    assert "monday/box" in head and "tuesday/box vs monday/box" in head


# ---- 9, 12, 13, 15: bad values: see BAD in test_scripts.py; and the memory margin

def test_memory_is_refused_without_a_margin(monkeypatch):
    p = flags.parser("demo\n", runs=1, prog="demo.py")
    monkeypatch.setattr(host, "memory_room", lambda: (24.9e9, "available"))  # whatever else
    #                                                    the machine runs meanwhile
    flags.need_memory(p, 20e9, "this", "--x")  # 20 GB of 24.9: room to spare
    with pytest.raises(SystemExit):
        flags.need_memory(p, 24.5e9, "this", "--x")  # fits, but leaves the machine nothing


def test_threads_above_the_cpus_run_only_when_asked(capsys):
    more = str((os.cpu_count() or 1) + 1)
    p = flags.parser("demo\n", runs=1, prog="demo.py")
    with pytest.raises(SystemExit):
        flags.parse(p, ["--threads", more, "--no-save"], {})
    assert "--oversubscribe" in capsys.readouterr().err
    args = flags.parse(p, ["--threads", more, "--oversubscribe", "--no-save"], {})
    assert args.threads == (int(more),) and "take turns" in capsys.readouterr().err


# ---- 10. a table the terminal cannot show

def test_a_unicode_table_on_an_ascii_terminal_prints_and_saves(tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    r = script("cube_bug.py", "--quick", "--runs", "1", "--tablefmt", "double_grid", "--out",
               str(tmp_path), "--label", "box", env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "?" in r.stdout
    assert "\u2550" in (tmp_path / "box" / "cube_bug.quick.txt").read_text(encoding="utf-8")


# ---- 11. Ctrl-C at any moment: while Python loads, while saving, while drawing

def test_ctrl_c_while_the_script_loads_is_one_line():
    code = ("import os, signal, sys, runpy\n"
            "class Finder:  # Ctrl-C arrives while NumPy is being imported\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'numpy': os.kill(os.getpid(), signal.SIGINT)\n"
            "sys.meta_path.insert(0, Finder())\n"
            "sys.argv = ['two_phases.py', '--quick', '--no-save']\n"
            "runpy.run_path('two_phases.py', run_name='__main__')\n")
    one_line(python(code), 130, "interrupted: nothing saved")


@pytest.mark.parametrize("where", ["_write_temp", "picture"])
def test_ctrl_c_while_saving_or_drawing_saves_nothing(tmp_path, monkeypatch, capsys, where):
    runner.run("demo", args_for(tmp_path), demo)
    before = saved(tmp_path)

    def ctrl_c(*a, **k):
        signal.raise_signal(signal.SIGINT)  # its handler runs before this returns

    def with_picture(args, facts):
        yield from demo(args, facts)
        yield Picture("picture.png", ctrl_c)
    if where == "_write_temp":
        monkeypatch.setattr(results, "_write_temp", ctrl_c)
    assert runner.run("demo", args_for(tmp_path), with_picture) == 130
    assert "interrupted: nothing saved, earlier results untouched" in capsys.readouterr().err
    assert saved(tmp_path) == before


# ---- 16. results go beside the scripts, wherever they are run from, and compare.py looks there

def test_results_and_compare_share_one_default_folder_beside_the_scripts(tmp_path):
    assert flags.parser("demo\n", runs=1, prog="demo.py").get_default("out") == results.RESULTS
    assert os.path.isabs(results.RESULTS) and os.path.dirname(results.RESULTS) == ROOT
    r = script("compare.py", cwd=tmp_path)  # from another folder: the suite's own results
    assert r.returncode == 0 and r.stdout.startswith("post: ")  # then results/ or references/


def test_busy_means_busy_now_not_a_minute_ago(monkeypatch, tmp_path):
    """A load average left by a run that just ended marks nothing: other work is watched sample
    by sample, while it runs."""
    cores = os.cpu_count() or 1
    monkeypatch.setattr(host, "load_average", lambda: 2.0 * cores)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this test's own mark
    with host.measuring() as busy:
        assert busy == []


def test_importing_a_script_changes_no_signal_handler_and_no_umask():
    code = ("import os, signal\n"
            "handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]\n"
            "mask = os.umask(0o022); os.umask(mask)\n"
            "import two_phases, machine_speed, cube_bug, compare\n"
            "assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers\n"
            "assert os.umask(mask) == mask\n"
            "print('untouched')\n")
    r = python(code)
    assert r.returncode == 0 and r.stdout == "untouched\n", r.stderr


def test_a_signal_lost_on_its_way_still_stops_the_run_at_the_next_visit():
    from harness import stopping
    from harness.measuring import rounds
    stopping.begin()
    with stopping.stoppable():
        with pytest.raises(stopping.Stopped):
            try:  # a Stopped raised where a finalizer swallows it ('Exception ignored in')
                stopping._unwind(signal.SIGTERM, None)
            except stopping.Stopped:
                pass
            rounds.visit(rounds.Trial("t", [lambda: None]), watch=lambda: (lambda: None))
    stopping.stopped()
    stopping.begin()


# ---- earlier results, history and memory


@pytest.mark.parametrize("change", [
    lambda d: [r.update(value=0) for r in d["records"]
               if r["experiment"] == "decode" and r["figure"] == "bytes read"],
    lambda d: [r.update(value="fast", unit="") for r in d["records"]
               if r["experiment"] == "decode" and r["figure"] == "step"],
    lambda d: [r["keys"].pop("chunk") for r in d["records"] if r["experiment"] == "dial"]],
    ids=["bytes read 0", "text for a time", "a dial row without its chunk"])
def test_an_earlier_file_no_reader_can_read_is_refused_by_the_schema(change, tmp_path):
    data = reference("two_phases")
    change(data)
    (tmp_path / "two_phases.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="record"):  # told by the schema's check, so
        schema.load(str(tmp_path / "two_phases.json"), "two_phases")  # every reader is spared
    shutil.copy(os.path.join(EPYC, "cube_bug.json"), tmp_path / "cube_bug.json")
    runs, _, err = silent(report.saved_runs, str(tmp_path))
    assert list(runs) == ["cube_bug"] and "the report leaves out two_phases.json" in err


def test_saves_killed_before_their_renames_never_push_real_results_out_of_history(tmp_path):
    folder, stem = str(tmp_path), "two_phases"
    for day in range(1, 4):  # three real results, two of them kept
        results.save(folder, {f"{stem}.json": json.dumps({"machine": {"date": f"2026-01-0{day}"},
                                                          "day": day})}, stem)
    kept = sorted(os.listdir(tmp_path / results.HISTORY))
    files = {f"{stem}.json": "{}"}
    for _ in range(12):  # killed (kill -9) after keeping the earlier result, before renaming
        results.keep_earlier(folder, files, stem)
    assert len(os.listdir(tmp_path / results.HISTORY)) == len(kept) + 1  # one copy, not 12
    results.save(folder, {f"{stem}.json": json.dumps({"machine": {"date": "2026-01-09"}})},
                 stem)
    assert set(kept) <= set(os.listdir(tmp_path / results.HISTORY))  # the real ones all stay


SLOW = ("import runpy, sys, time\nfrom harness.measuring import host\nreal = host.facts\n"
        "def probe(*a, **k):\n    print('probing', flush=True)\n    time.sleep(5)\n"
        "    return real(*a, **k)\nhost.facts = probe\n"
        "sys.argv = ['cube_bug.py', '--quick', '--runs', '1', '--out', sys.argv[1]]\n"
        "runpy.run_path('cube_bug.py', run_name='__main__')\n")


def test_a_hang_up_stops_a_run_in_one_line_leaving_nothing(tmp_path):
    run = subprocess.Popen([sys.executable, "-c", SLOW, str(tmp_path / "r")], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert run.stdout.readline() == "probing\n"
    run.send_signal(signal.SIGHUP)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 129 and err.strip().splitlines()[-1] == \
        "hung up: nothing saved, earlier results untouched", err
    assert not (tmp_path / "r").exists()


def test_an_unreadable_earlier_result_is_never_replaced_unkept(tmp_path, monkeypatch):
    folder, stem = str(tmp_path), "cube_bug"
    (tmp_path / f"{stem}.json").write_text('{"machine": {"date": "2026-01-01"}}')
    real_open, real_access = os.open, os.access
    mine = str(tmp_path / f"{stem}.json")

    def no_read(path, *args, **kw):  # chmod 000 by another user: root reads anyway, so fake it
        if str(path) in (mine, f"{stem}.json"):  # by its path, or by name in its folder
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kw)
    monkeypatch.setattr(os, "open", no_read)
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == mine else real_access(p, m))
    assert "cannot be read" in results.refusal(folder, [f"{stem}.json"])
    code, _, err = silent(results.save, folder, {f"{stem}.json": "{}"}, stem)
    assert code == 1 and "cannot be read" in err
    monkeypatch.undo()
    assert (tmp_path / f"{stem}.json").read_text() == '{"machine": {"date": "2026-01-01"}}'


def test_a_result_its_reader_would_refuse_is_never_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(schema, "ALL_SAMPLES_MAX", 3)
    code, out, err = silent(machine_speed.main, ["--quick", "--runs", "2", "--out",
                                                 str(tmp_path), "--label", "m"])
    assert code == 1 and "would not read back" in err and "memory speed" in out
    assert not (tmp_path / "m" / "machine_speed.quick.json").exists()


def test_the_memory_check_holds_a_run_to_its_address_space_limit(monkeypatch):
    import resource
    import two_phases
    from conftest import one_line
    from harness.measuring import host
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda what: (3 * 2 ** 30, 3 * 2 ** 30)
                        if what == resource.RLIMIT_AS else real(what))
    have, why = host.memory_room()
    assert have < 3 * 2 ** 30 and "ulimit -v" in why
    r = in_process(two_phases.parse_args, "--experiments", "decode", "--users", "40", "--notes",
                   "1000", "--runs", "1", "--no-save")
    one_line(r, 2, "ulimit -v", "use a smaller")


def test_a_cgroup_limit_is_read_where_there_is_one(monkeypatch):
    from harness.measuring import host
    monkeypatch.setattr(host, "cgroup_left", lambda: 2 * 2 ** 30)
    monkeypatch.setattr(host, "address_space_left", lambda: None)
    assert host.memory_room() == (2 * 2 ** 30, "left under this process's cgroup memory limit "
                                                "(a container's)")


def test_after_a_copy_history_keeps_the_newest_runs(tmp_path):
    import time
    from conftest import python  # noqa: F401  (the helpers' module)
    from harness.keeping import history as r
    history = tmp_path / "box" / "history"
    history.mkdir(parents=True)
    days = list(range(1, 12))
    for day in reversed(days):  # made newest first: a copy's order, which ctime would follow
        entry = history / f"cube_bug.2026-01-{day:02}T00-00-00"
        entry.mkdir()
        data = json.load(open(os.path.join(SHIPPED, "cube_bug.json")))
        data["machine"]["date"] = f"2026-01-{day:02}T00:00:00+00:00"
        (entry / "cube_bug.json").write_text(json.dumps(data))
        time.sleep(0.01)
    assert [os.path.basename(e)[9:19] for e in r.entries(str(history), "cube_bug")] == [
        f"2026-01-{day:02}" for day in days]  # oldest first, as the runs recorded
    r.trim(str(tmp_path / "box"), "cube_bug")
    assert sorted(os.listdir(history)) == [f"cube_bug.2026-01-{day:02}T00-00-00"
                                           for day in days[1:]]  # only the oldest went


def test_a_read_only_file_system_is_named_so(tmp_path, monkeypatch):
    (tmp_path / results.HISTORY).mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: type("V", (), {"f_flag": os.ST_RDONLY})())
    assert "is on a read-only file system" in results.refusal(str(tmp_path))


def test_an_earlier_runs_pictures_go_to_history_with_it(tmp_path):
    data = json.load(open(os.path.join(SHIPPED, "two_phases.json")))
    data["pictures"] = ["roofline.png", "dial.png"]
    (tmp_path / "two_phases.json").write_text(json.dumps(data))
    for name in ("roofline.png", "dial.png"):
        (tmp_path / name).write_bytes(b"the earlier run's picture")
    again = {**data, "pictures": ["roofline.png"]}
    again["machine"] = {**data["machine"], "date": "2026-12-31T00:00:00+00:00"}
    assert results.save(str(tmp_path), {"two_phases.json": json.dumps(again),
                                        "two_phases.txt": "",
                                        "roofline.png": b"this run's".decode()},
                        "two_phases") == 0
    assert not (tmp_path / "dial.png").exists()  # it stands beside no result that drew it
    (entry,) = (tmp_path / "history").glob("two_phases.*")
    assert (entry / "dial.png").read_bytes() == b"the earlier run's picture"
    assert (entry / "roofline.png").read_bytes() == b"the earlier run's picture"
