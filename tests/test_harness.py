"""The harness: timing statistics, the machine line, the printers, and results that survive a
crash."""
import json
import os

import pytest

from harness import cli, machine, printers, results, timing
from harness.printers import Sheet


def fake_clock(times):
    it = iter(times)
    return lambda: next(it)


def test_best_and_middle_ignore_the_warm_up():
    # start/stop pairs: warm-up 10 s (not counted), then 1, 3, 2
    times = [0, 10, 10, 11, 11, 14, 14, 16]
    best = timing.measure(lambda: None, 3, "best", clock=fake_clock(times))
    middle = timing.measure(lambda: None, 3, "middle", clock=fake_clock(times))
    assert best.samples == middle.samples == (1, 3, 2)
    assert best.seconds == 1 and best.label == "best of 3"
    assert middle.seconds == 2 and middle.label == "middle of 3"
    assert middle.spread == 3


def test_setup_runs_before_every_call_outside_the_timer():
    now, calls = [0.0], []

    def clock():
        now[0] += 1  # every reading of the clock moves it by 1 s
        return now[0]

    def setup():
        calls.append("setup")
        now[0] += 100  # slow setup that must not be counted

    def fn():
        calls.append("fn")

    t = timing.measure(fn, 2, setup=setup, clock=clock)
    assert calls == ["setup", "fn"] * 3
    assert t.samples == (1, 1)


def test_short_calls_are_repeated_inside_each_sample():
    now, calls = [0.0], []

    def clock():  # every reading moves the clock by 1 ms: a call "takes" 1 ms
        now[0] += 0.001
        return now[0]
    t = timing.time_runs(lambda: calls.append(1), 3, clock=clock, min_sample_s=0.01)
    # one call to calibrate (1 ms, so 10 calls per sample), then a warm-up and 3 samples of 10
    assert len(calls) == 1 + (1 + 3) * 10
    assert t == pytest.approx([0.0001] * 3)  # each sample is the time per call


def test_noise_warning_fires_when_samples_spread(capsys):
    timing.timing([1.0, 1.5, 1.1], what="a noisy figure")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "noisy" in err and "1.50x" in err and "a noisy figure" in err


def test_noise_warning_stays_quiet_when_samples_agree(capsys):
    timing.timing([1.0, 1.1, 1.05])
    assert capsys.readouterr().err == ""


def test_time_steps_keeps_every_step_of_every_counted_run():
    times = [0, 5, 5, 9,  10, 11, 11, 13,  20, 22, 22, 23]  # warm-up run, then 2 counted runs
    runs = timing.time_steps([lambda: None] * 2, 2, clock=fake_clock(times))
    assert runs == [[1, 2], [2, 1]]


# ---- the machine line

def test_machine_line_has_every_field():
    m = machine.facts()
    line = machine.line(m)
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
        monkeypatch.setattr(machine, name, broken)
    monkeypatch.setattr(machine.platform, "system", broken)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: None)
    m = machine.facts()
    line = machine.line(m)
    assert "unknown CPU" in line and "BLAS unknown" in line and "unknown OS" in line
    assert machine.machine_id(m) == "unknown-0c"


def test_machine_id_is_a_readable_slug():
    assert machine.machine_id({"cpu": "AMD EPYC", "cores": 2}) == "amd-epyc-2c"
    assert machine.machine_id({"cpu": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
                              "cores": 8}) == "intel-xeon-platinum-8375c-8c"


def test_blas_env_lists_only_blas_variables(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("HOME_SWEET_HOME", "x")
    env = machine.blas_env()
    assert env["OPENBLAS_NUM_THREADS"] == "1" and "HOME_SWEET_HOME" not in env


# ---- results

def args_for(tmp_path, **kw):
    p = cli.parser("test\n", runs=3)
    args = p.parse_args(["--out", str(tmp_path), "--label", "box"])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def body(args, facts):
    t = timing.measure(lambda: None, 3)
    yield Sheet("demo", [("n", "tokens", "d"), ("time ms", "ms", ".3f")], [[1, t.seconds * 1e3]],
                [{1: [(1, t)]}], timed=(1,))


def test_results_round_trip_through_json(tmp_path, capsys):
    args = args_for(tmp_path)
    assert cli.run("demo", args, body) == 0
    printed = capsys.readouterr().out
    folder = tmp_path / "box"
    saved = (folder / "demo.txt").read_text()  # what was printed, then how the run was made
    assert saved.startswith(printed) and saved[len(printed):].startswith("\n(made by the suite at ")
    data = json.loads((folder / "demo.json").read_text())
    assert data["schema_version"] == results.SCHEMA_VERSION and data["script"] == "demo"
    table = data["tables"]["demo"]
    assert [c["unit"] for c in table["columns"]] == ["tokens", "ms"]
    assert table["rows"][0][0] == 1 and isinstance(table["rows"][0][1], float)
    assert table["samples_s"][0]["time ms"][0][0] == 1  # a time: to the power 1
    assert len(table["samples_s"][0]["time ms"][0][1]) == 3 and table["stat"] == "middle of 3"
    assert data["machine"]["cpu"] and data["settings"]["runs"] == 3
    assert set(data["made"]) == {"version", "command", "warnings"}


def test_a_quick_run_never_overwrites_a_full_run(tmp_path):
    cli.run("demo", args_for(tmp_path), body)
    full = (tmp_path / "box" / "demo.json").read_text()
    cli.run("demo", args_for(tmp_path, quick=True), body)
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
    assert cli.run("demo", args, body) == 1
    out, err = capsys.readouterr()
    assert "time ms" in out
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "could not save results to" in errors[0]
    assert blocker.read_text() == "not a folder"


def test_ctrl_c_saves_nothing_and_keeps_earlier_results(tmp_path, capsys):
    cli.run("demo", args_for(tmp_path), body)
    before = (tmp_path / "box" / "demo.json").read_text()

    def interrupted(args, facts):
        yield from body(args, facts)
        raise KeyboardInterrupt
    assert cli.run("demo", args_for(tmp_path), interrupted) == 130
    assert "interrupted" in capsys.readouterr().err
    assert (tmp_path / "box" / "demo.json").read_text() == before


def test_threads_flag_sets_the_blas_threads_recorded(tmp_path):
    seen = {}

    def record(args, facts):
        seen.update(threads=[b["threads"] for b in machine.blas_info()], used=args.threads)
        yield "recorded"
    cli.run("demo", args_for(tmp_path, threads=[1], no_save=True), record)
    assert seen["threads"] and set(seen["threads"]) == {1} and seen["used"] == 1


def test_saved_files_get_the_usual_permissions(tmp_path):
    results.replace_together(str(tmp_path), {"a.txt": "x"})
    (tmp_path / "b.txt").write_text("x")  # as open() makes them
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.txt").stat().st_mode


def test_the_machine_line_says_how_quiet_the_machine_was():
    m = machine.facts(busy=["another run of this suite"])
    m.update(load=0.4, frequency={"mhz": 2400.4, "max_mhz": 3700.0, "governor": "performance"})
    line = machine.line(m)
    assert line.endswith("| load 0.4 | 2400 MHz (max 3700) governor performance | BUSY: another "
                         "run of this suite")
    m.update(load=None, frequency={}, busy=[])  # where the sources are missing: left out
    assert machine.line(m).endswith(m["date"][:10])


def test_spread_puts_a_plus_minus_column_beside_each_timed_figure():
    t = timing.Timing((1.0, 2.0, 3.0))
    sheet = Sheet("demo", [("n", "", "d"), ("time ms", "ms", ".1f")], [[1, 2000.0]],
                  [{1: [(1, t)]}], timed=(1,), text="the post's own layout")
    out = printers.render(sheet, spread=True)
    assert out.splitlines()[0].split() == ["n", "time", "ms", "±", "time", "ms"]
    assert out.splitlines()[1].split() == ["1", "2000.0", "1000.0"]  # sd of 1, 2, 3 s, in ms
    assert out.splitlines()[2] == "(middle of 3 runs per row; spread slowest/fastest 3.00x)"
    assert printers.render(sheet).splitlines()[0] == "the post's own layout"


def test_every_sheet_saves_its_samples_in_one_layout():
    """samples_s[row][column] = [[power, seconds]]: a time to 1, a rate to -1, a ratio both."""
    a, b = timing.Timing((1.0, 2.0, 3.0)), timing.Timing((0.5, 0.5), "best")
    sheet = Sheet("demo", [("n", "", "d"), ("time ms", "ms", ".1f"), ("tokens/s", "/s", ".1f"),
                           ("ratio", "x", ".1f")], [[1, 2000.0, 0.5, 4.0]],
                  [{1: [(1, a)], 2: [(-1, a)], 3: [(1, a), (-1, b)]}], timed=(1,))
    saved = printers.entry(sheet)
    assert saved["samples_s"] == [{"time ms": [[1, [1.0, 2.0, 3.0]]],
                                   "tokens/s": [[-1, [1.0, 2.0, 3.0]]],
                                   "ratio": [[1, [1.0, 2.0, 3.0]], [-1, [0.5, 0.5]]]}]
    assert saved["stat"] == "middle of 3" and saved["spread"] == [3.0]
    assert "samples_s" not in printers.entry(Sheet("bare", sheet.columns, sheet.rows))
