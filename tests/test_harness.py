"""The harness: timing statistics, the machine line, the printers, and results that survive a
crash."""
import io
import json
import os
import subprocess
import sys
import types

import pytest

import harness
from harness import flags, runner
from harness.keeping import records, results
from harness.measuring import host, timing
from harness.showing import printers
from harness.keeping.records import Measured, col, timed
from conftest import ROOT, made, sheet_of, sheets


def fake_clock(times):
    it = iter(times)
    return lambda: next(it)


def quiet():
    """A machine where no other work ever runs: every sample clean."""
    return lambda: 0.0


def test_best_and_middle_name_their_statistic():
    best, middle = timing.taken([1, 3, 2], "best"), timing.taken([1, 3, 2], "middle")
    assert best.samples == middle.samples == (1, 3, 2)
    assert best.seconds == 1 and best.label == "best of 3"
    assert middle.seconds == 2 and middle.label == "middle of 3"
    assert middle.spread == 3


def test_setup_runs_before_every_visit_outside_the_timer():
    from harness.measuring import rounds
    now, calls = [0.0], []

    def mark():
        now[0] += 1  # every reading of the timer moves it by 1 s
        return now[0]

    def setup():
        calls.append("setup")
        now[0] += 100  # slow setup that must not be counted

    timer = types.SimpleNamespace(mark=mark, between=lambda start, end: end - start)
    trial = rounds.Trial("t", [lambda: calls.append("fn")], setup=setup, timer=timer)
    assert [rounds.visit(trial, watch=quiet)[0] for _ in range(2)] == [[1.0], [1.0]]
    assert calls == ["setup", "fn"] * 2


def test_short_calls_are_repeated_inside_each_sample():
    """A call shorter than a sample's least time is repeated inside each sample, as timeit
    does, and the sample is the time per call: sized once, warm (rounds.calibrate)."""
    from harness.measuring import rounds
    now, calls = [0.0], []

    def mark():  # every reading moves the clock by 1 ms: a sample "takes" 1 ms
        now[0] += 0.001
        return now[0]
    timer = types.SimpleNamespace(mark=mark, between=lambda start, end: end - start)
    trial = rounds.calibrate(rounds.Trial("t", [lambda: calls.append(1)], timer=timer), 0.01)
    assert trial.number >= 10 and len(calls) == 2  # a warm call, then one that sizes the burst
    (per_call,), _ = rounds.visit(trial, watch=quiet)
    assert len(calls) == 2 + trial.number and per_call == pytest.approx(0.001 / trial.number)


def test_noise_warning_fires_when_samples_spread(capsys):
    timing.taken([1.0, 1.5, 1.1], what="a noisy figure")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "noisy" in err and "1.50x" in err and "a noisy figure" in err


def test_noise_warning_stays_quiet_when_samples_agree(capsys):
    timing.taken([1.0, 1.1, 1.05])
    assert capsys.readouterr().err == ""


# ---- the machine line

def test_machine_line_has_every_field():
    m = host.facts()
    line = host.line(m)
    for key in ("cpu", "cores", "os", "python", "numpy", "blas", "env", "date"):
        assert key in m
    assert line.startswith("machine: ") and "\n" not in line
    for part in ("cores", "Python", "NumPy", "BLAS", "thread", "env", m["date"][:10]):
        assert part in line


def test_machine_line_survives_missing_sources(monkeypatch):
    def broken(*a, **k):
        raise OSError("not here")
    for name in ("cpu_model", "last_level_cache_bytes", "blas_info", "blas_env", "load_average",
                 "cpu_frequency"):
        monkeypatch.setattr(host, name, broken)
    monkeypatch.setattr(host.platform, "system", broken)
    monkeypatch.setattr(host.os, "cpu_count", lambda: None)
    m = host.facts()
    line = host.line(m)
    assert "unknown CPU" in line and "BLAS unknown" in line and "unknown OS" in line
    assert host.machine_id(m) == "unknown-0c"


def test_machine_id_is_a_readable_slug():
    assert host.machine_id({"cpu": "AMD EPYC", "cores": 2}) == "amd-epyc-2c"
    assert host.machine_id({"cpu": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
                              "cores": 8}) == "intel-xeon-platinum-8375c-8c"


def test_blas_env_lists_only_blas_variables(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("HOME_SWEET_HOME", "x")
    env = host.blas_env()
    assert env["OPENBLAS_NUM_THREADS"] == "1" and "HOME_SWEET_HOME" not in env


def test_idle_threads_sleep_soon_unless_the_user_says_otherwise():
    """Every script loads the harness before NumPy: the BLAS's and Numba's idle threads then
    spin briefly (a trip timed after the forklift's read ran at half speed while OpenBLAS's
    spun), a user's own setting stays, and the machine line names what was set."""
    said = "import os, harness; from harness.measuring import host; " \
           "print(os.environ['OPENBLAS_THREAD_TIMEOUT'], os.environ['GOMP_SPINCOUNT'], " \
           "'GOMP_SPINCOUNT' in host.blas_env())"
    env = {k: v for k, v in os.environ.items() if k not in harness.SPIN}
    run = lambda **more: subprocess.run([sys.executable, "-c", said], cwd=ROOT, text=True,
                                        capture_output=True, env={**env, **more}).stdout.split()
    assert run() == ["16", "10000", "True"]
    assert run(GOMP_SPINCOUNT="infinite") == ["16", "infinite", "True"]


# ---- results

def args_for(tmp_path, **kw):
    p = flags.parser("test\n", runs=3, prog="demo.py")
    args = p.parse_args(["--out", str(tmp_path), "--label", "box"])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


DEMO = [col("n", "n", "tokens", "d", key=True), col("time", "time ms", "ms", ".3f")]


def body(args, facts):
    t = timing.taken([0.0010, 0.0012, 0.0011])  # three samples, as a run keeps them
    yield sheet_of("demo", DEMO, [{"n": 1, "time": timed(t.seconds * 1e3, t)}],
                   records.settings_of(args), layout={"timed": ("time",)})


def test_results_round_trip_through_json(tmp_path, capsys):
    args = args_for(tmp_path)
    assert runner.run("demo", args, body) == 0
    printed = capsys.readouterr().out
    folder = tmp_path / "box"
    saved = (folder / "demo.txt").read_text()  # what was printed, then how the run was made
    assert saved.startswith(printed) and saved[len(printed):].startswith("\n(made by the suite at ")
    data = json.loads((folder / "demo.json").read_text())
    assert data["schema_version"] == results.SCHEMA_VERSION == 8 and data["script"] == "demo"
    assert "tables" not in data  # the figures are records; the sheets only say how they printed
    sheet = sheets(data)["demo"]
    assert [(c["figure"], c["header"], c["unit"], c["key"]) for c in sheet["columns"]] == [
        ("n", "n", "tokens", True), ("time", "time ms", "ms", False)]
    assert sheet["printed"] in printed and sheet["printed"].splitlines()[0].split() == [
        "n", "time", "ms"]
    (record,) = data["records"]  # one figure: the key is no record of its own
    assert record["experiment"] == "demo" and record["keys"] == {"n": 1}
    assert record["figure"] == "time" and record["unit"] == "ms" and not record["predicted"]
    assert record["statistic"] == "median" and record["runs"] == 3 and len(record["samples"]) == 3
    assert isinstance(record["value"], float)
    assert min(record["samples"]) <= record["value"] <= max(record["samples"])
    assert sorted(record["samples"])[1] == pytest.approx(record["value"])  # the middle of 3
    assert record["settings"]["runs"] == 3 and record["settings"]["threads"] >= 1
    assert records.find(data["records"], "demo", "time", n=1)["value"] == record["value"]
    assert data["machine"]["cpu"] and data["settings"]["runs"] == 3
    assert set(data["made"]) == {"version", "command", "warnings"}


def test_a_quick_run_never_overwrites_a_full_run(tmp_path):
    runner.run("demo", args_for(tmp_path), body)
    full = (tmp_path / "box" / "demo.json").read_text()
    runner.run("demo", args_for(tmp_path, quick=True), body)
    assert (tmp_path / "box" / "demo.json").read_text() == full
    assert (tmp_path / "box" / "demo.quick.json").exists()


def test_a_failed_write_keeps_every_old_file(tmp_path, monkeypatch):
    results.replace_together(str(tmp_path), {"a.json": "old a", "a.txt": "old b"})
    real_fsync, calls = os.fsync, []

    def fail_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)
    monkeypatch.setattr(results.os, "fsync", fail_second)
    with pytest.raises(OSError):
        results.replace_together(str(tmp_path), {"a.json": "new a", "a.txt": "new b"})
    assert (tmp_path / "a.json").read_text() == "old a"
    assert (tmp_path / "a.txt").read_text() == "old b"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "a.json", "a.txt"]


def test_unwritable_folder_prints_tables_then_one_line_and_exit_1(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    args = args_for(tmp_path)
    args.out = str(blocker)
    assert runner.run("demo", args, body) == 1
    out, err = capsys.readouterr()
    assert "time ms" in out
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "could not save results to" in errors[0]
    assert blocker.read_text() == "not a folder"


def test_ctrl_c_saves_nothing_and_keeps_earlier_results(tmp_path, capsys):
    runner.run("demo", args_for(tmp_path), body)
    before = (tmp_path / "box" / "demo.json").read_text()

    def interrupted(args, facts):
        yield from body(args, facts)
        raise KeyboardInterrupt
    assert runner.run("demo", args_for(tmp_path), interrupted) == 130
    assert "interrupted" in capsys.readouterr().err
    assert (tmp_path / "box" / "demo.json").read_text() == before


def test_threads_flag_sets_the_blas_threads_recorded(tmp_path):
    seen = {}

    def record(args, facts):
        seen.update(threads=[b["threads"] for b in host.blas_info()], used=args.threads)
        yield "recorded"
    runner.run("demo", args_for(tmp_path, threads=[1], no_save=True), record)
    assert seen["threads"] and set(seen["threads"]) == {1} and seen["used"] == 1


def test_saved_files_get_the_usual_permissions(tmp_path):
    results.replace_together(str(tmp_path), {"a.txt": "x"})
    (tmp_path / "b.txt").write_text("x")  # as open() makes them
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.txt").stat().st_mode


def test_the_machine_line_says_how_quiet_the_machine_was():
    m = host.facts(busy=["another run of this suite"])
    m.update(load=0.4, frequency={"mhz": 2400.4, "max_mhz": 3700.0, "governor": "performance"})
    line = host.line(m)
    assert line.endswith("| load 0.4 | 2400 MHz (max 3700) governor performance | BUSY: another "
                         "run of this suite")
    m.update(load=None, frequency={}, busy=[])  # where the sources are missing: left out
    assert host.line(m).endswith(m["date"][:10])


def test_spread_puts_a_range_column_beside_each_timed_figure():
    t = timing.Timing((1.0, 2.0, 3.0))
    sheet = sheet_of("demo", [col("n", "n", "", "d", key=True),
                              col("time", "time ms", "ms", ".1f")],
                     [{"n": 1, "time": timed(2000.0, t)}], layout={"timed": ("time",)},
                     text="the post's own layout")
    out = printers.render(sheet, spread=True).splitlines()
    assert out[0].split() == ["n", "time", "ms", "time", "ms", "range"]
    assert out[1].split() == ["1", "2000.0", "1000.0", "to", "3000.0"]  # its runs, in ms
    assert out[2] == "(middle of 3 runs per row; spread slowest/fastest 3.00x)"
    odd = timing.Timing((1.0, 1.01, 0.99, 1.0, 1.02, 9.0), rounds=(0, 1, 2, 3, 4, 5))
    note = printers.spread_note(made("demo", [col("time", "time ms", "ms", ".1f")],
                                     [{"time": timed(1005.0, odd)}]), "row")
    assert note == ("(middle of 6 rounds per row; spread slowest/fastest 9.09x; far from the "
                    "rest (counted like the rest): demo: time 9000 ms)")  # hyperfine's z-score
    assert printers.render(sheet).splitlines()[0] == "the post's own layout"


def test_every_figure_is_one_record_with_its_runs_in_its_own_unit():
    """A record's samples are the figure in each counted run: a time's scale with its seconds
    (power 1), a rate's against them (-1), a ratio's with both; a figure with no timing behind
    it has none, and neither has a ratio whose timings did not run as often."""
    a, b = timing.Timing((1.0, 2.0, 3.0)), timing.Timing((0.5, 0.25, 1.0), "best")
    columns = [col("n", "n", "", "d", key=True), col("time", "time ms", "ms", ".1f"),
               col("tokens per second", "tokens/s", "tokens/s", ".1f"),
               col("ratio", "ratio", "x", ".1f"), col("uneven", "uneven", "x", ".1f"),
               col("bytes read", "MB read", "MB", ".0f"), col("empty", "empty", "ms", ".1f")]
    row = {"n": 1, "time": timed(2000.0, a), "tokens per second": timed(0.5, a, -1),
           "ratio": Measured(8.0, ((1, a), (-1, b))),
           "uneven": Measured(4.0, ((1, a), (-1, timing.Timing((0.5, 0.5))))),
           "bytes read": 340.0, "empty": None}
    settings = {"model": "small", "runs": 3}
    found = {r["figure"]: r for r in made("demo", columns, [row], settings)}
    assert list(found) == ["time", "tokens per second", "ratio", "uneven", "bytes read"]
    assert all(r["keys"] == {"n": 1} and r["experiment"] == "demo" and r["settings"] == settings
               and r["predicted"] is False for r in found.values())
    assert found["time"]["samples"] == pytest.approx([1000.0, 2000.0, 3000.0])
    assert found["tokens per second"]["samples"] == pytest.approx([1.0, 0.5, 1 / 3])
    assert found["ratio"]["samples"] == pytest.approx([2.0, 8.0, 3.0])  # 1 / 0.5, 2 / 0.25, 3 / 1
    assert [found[f]["statistic"] for f in found] == ["median"] * 4 + ["computed"]
    assert [found[f]["runs"] for f in found] == [3, 3, 3, None, None]
    assert found["uneven"]["samples"] is None and found["bytes read"]["samples"] is None
    assert found["ratio"]["unit"] == "x" and found["bytes read"]["value"] == 340.0
    layout = records.Layout("demo", columns)
    assert records.make(layout, [row], settings, predicted=True)[0]["predicted"] is True
    best = made("best", columns[:2], [{"n": 2, "time": timed(250.0, b)}])
    assert best[0]["statistic"] == "best" and best[0]["samples"] == pytest.approx(
        [500.0, 250.0, 1000.0])


def test_a_sheet_is_saved_as_printed_beside_its_records():
    t = timing.Timing((1.0, 2.0, 3.0))
    sheet = sheet_of("demo", DEMO, [{"n": 1, "time": timed(2000.0, t)}],
                     layout={"timed": ("time",), "title": "A demo"}, settings="one row")
    saved = printers.entry(sheet)
    assert set(saved) == {"title", "settings", "printed", "note", "columns"}
    assert saved["title"] == "A demo" and saved["settings"] == "one row"
    assert saved["printed"] == printers.body(sheet) and "samples" not in json.dumps(saved)
    assert printers.render(sheet).splitlines()[0] == "A demo: one row"
    assert sheet.cells() == [[1, 2000.0]]
    assert saved["columns"][1] == {"figure": "time", "header": "time ms", "unit": "ms",
                                   "format": ".3f", "key": False, "compared": False}


def test_the_records_are_found_by_experiment_figure_and_keys():
    t = timing.Timing((1.0, 2.0, 3.0))
    columns = [col("users", "users", "users", "d", key=True),
               col("notes", "notes", "notes", "d", key=True), col("step", "step ms", "ms", ".1f")]
    found = made("depth", columns, [{"users": u, "notes": n, "step": timed(2000.0 * u, t)}
                                    for u in (1, 16) for n in (0, 512)])
    f = records.find(found, "depth", "step", users=16, notes=512)
    assert f["value"] == pytest.approx(32000.0) and f["keys"] == {"users": 16, "notes": 512}
    assert f["samples"] == pytest.approx([16000.0, 32000.0, 48000.0])
    assert records.find(found, "depth", "step")["keys"] == {"users": 1, "notes": 0}
    with pytest.raises(records.Missing, match="depth: step at users 4"):
        records.find(found, "depth", "step", users=4)
    assert list(records.rows(found, "depth")) == [
        (("users", 1), ("notes", 0)), (("users", 1), ("notes", 512)),
        (("users", 16), ("notes", 0)), (("users", 16), ("notes", 512))]
    assert records.label({"users": 16, "notes": 512}) == "users 16 notes 512"
    assert records.label({"numbers": "all positive"}) == "all positive"  # a word as it is


def test_a_run_ends_by_naming_its_report_and_what_to_run_next(tmp_path):
    from conftest import script
    r = script("two_phases.py", "--predict", "--no-plot", "--forklift", "12", "--workbench",
               "121",
               "--tablefmt", "md", "--out", str(tmp_path), "--label", "p")
    assert r.returncode == 0, r.stderr
    last = r.stderr.splitlines()[-1]
    assert last.startswith("the report: ") and "report.md; next: python compare.py post " in last
    assert any(line.startswith("|---") for line in r.stdout.splitlines())  # md: Markdown


# ---- what a run says of itself: its version, its threads, its paths


def test_the_version_leaves_the_checkouts_index_as_it_was():
    index = os.path.join(ROOT, ".git", "index")
    if not os.path.exists(index):
        pytest.skip("not a git checkout")
    before = os.stat(index).st_mtime_ns
    runner.version()
    assert os.stat(index).st_mtime_ns == before


def test_a_path_the_terminal_cannot_show_is_pasted_as_its_bytes(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    said = runner.pasteable("results/caf\u00e9 box")
    assert said == "$'results/caf\\xc3\\xa9 box'" and "?" not in said
    assert subprocess.run(["bash", "-c", f"printf %s {said}"], capture_output=True).stdout \
        == "results/caf\u00e9 box".encode()


def test_the_run_records_the_threads_the_blas_ran(monkeypatch):
    from harness import runner
    from harness.measuring import host
    monkeypatch.setattr(host, "blas_info", lambda: [{"library": "openblas", "version": "0",
                                                     "threads": 64, "architecture": "x"}])
    from harness.terminal import kept
    with kept() as said:
        assert runner.threads_run(100, {"blas": []}) == 64
    assert said == ["--threads 100: the BLAS runs 64, the most it takes; the run records 64"]
    assert runner.threads_run(2, {"blas": []}) == 2


def test_two_states_of_the_machine_in_a_speeds_rounds_are_said_with_both_levels():
    """The workbench read 187-197 or 295-351 GFLOP/s in one run: two states, said under the
    speeds' table with both levels and their rounds; a speed's ordinary spread, or a single
    far round, is one state."""
    from harness.measuring import speeds
    rounds = [190.0, 187, 197, 295, 320, 351, 192, 340, 310]
    (low, high) = speeds.two_states(rounds)
    assert low == pytest.approx((187.0, 197.0, 4)) and high == pytest.approx((295, 351, 5))
    assert speeds.two_states([100, 104, 98, 110, 101, 97, 103]) is None  # noise: one state
    assert speeds.two_states([100, 101, 99, 102, 150]) is None  # one far round: named, not two
    found = [{"experiment": "speeds", "figure": "math speed", "samples": rounds},
             {"experiment": "speeds", "figure": "memory speed", "samples": [50, 51, 49, 50]}]
    said = speeds.states_note(found, "speeds")
    assert said == ("; two states: the workbench read 187.0 to 197.0 GFLOP/s in 4 rounds, "
                    "295.0 to 351.0 in 5 (each row held to its own round's)")
    assert speeds.states_note(found[1:], "speeds") == ""
