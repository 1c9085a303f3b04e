"""The 20 failures a hostile probe found, each reproduced as it was found and held mended; each
test keeps the failure's number in its name."""
import contextlib
import copy
import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

import cube_bug
import machine_speed
import two_phases
from conftest import ROOT, compared, in_process, one_line
from harness import flags, runner
from harness.keeping import exports, older, results, schema
from harness.measuring import host
from harness.showing import pictures, report
from harness.keeping.exports import for_csv

EPYC = os.path.join(results.REFERENCES, "amd-epyc-2c")
ESC = "\x1b[31mred\x1b]0;title\x07"  # a colour and a window title: what a file must not send


def reference(name):
    with open(os.path.join(EPYC, name + ".json")) as f:
        return json.load(f)


def planted(folder, name, change):
    """A copy of the shipped machine with one file changed: -> the folder."""
    shutil.copytree(EPYC, folder)
    data = reference(name)
    change(data)
    (folder / f"{name}.json").write_text(json.dumps(data))
    return folder


def silent(fn, *args):
    """fn(*args) with stdout and stderr caught: -> (its value or exit code, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            value = fn(*args)
        except SystemExit as e:
            value = e.code
    return value, out.getvalue(), err.getvalue()


# ---- security

def test_1_a_temp_file_swapped_for_a_link_is_never_written_through_nor_saved(tmp_path,
                                                                               monkeypatch):
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own")
    folder = tmp_path / "box"
    folder.mkdir()

    def swap(d, temp):  # another process swaps the new temp file for a link, as a race could
        if temp.endswith((".png", ".md")):
            os.unlink(d.at(temp))
            os.symlink(outside, d.at(temp))
    monkeypatch.setattr(results, "made", swap)
    files = {"roofline.png": lambda f: f.write(b"\x89PNG a picture"), "report.md": "# report\n",
             "two_phases.json": "{}\n"}
    _, _, err = silent(results.save, str(folder), files)
    assert outside.read_text() == "the user's own"  # nothing written through the link
    assert "was replaced by something else" in err
    assert not any(os.path.islink(folder / n) for n in os.listdir(folder))
    assert not (folder / "two_phases.json").exists()  # one unit: none of it saved


def test_2_escapes_in_a_results_file_never_reach_the_terminal(tmp_path):
    def dirty(data):
        data["machine"]["cpu"] = ESC
        data["machine"]["date"] = "2026-01-01" + ESC
        data["records"][0]["keys"] = {"prompt": ESC}
    folder = planted(tmp_path / "box", "machine_speed", dirty)
    r = compared(str(folder), "--export", "csv")
    assert r.returncode == 0 and "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout
    roofs = schema.read_roofs(str(folder / "machine_speed.json"))
    assert "\x1b" not in roofs.source  # the date in the sources note
    bad = reference("two_phases")
    bad["records"][0].update(experiment=ESC, value="fast")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError) as refused:
        schema.load(str(tmp_path / "bad.json"), "two_phases")
    assert "\x1b" not in str(refused.value) and "red" in str(refused.value)
    (folder / results.JOURNAL).write_text(json.dumps({"cube_bug" + ESC: ".tmp-x"}))
    (folder / ".tmp-x").write_text("{}")
    _, note = results.as_saved(str(folder))
    assert note is not None and "\x1b" not in note  # a planted journal's entry name


def test_3_a_note_makes_no_markup_in_the_report():
    cmarkgfm = pytest.importorskip("cmarkgfm")
    data = reference("two_phases")

    def rendered(note):
        changed = copy.deepcopy(data)
        next(iter(changed["sheets"].values()))["note"] = note
        text = report.markdown({"two_phases": older.upgrade(schema.cleaned(changed))}, [])
        return cmarkgfm.github_flavored_markdown_to_html(text)
    plain = rendered("a plain note")
    hostile = rendered("~~~\n===\n| a | b |\n| - | - |\n1. one\n---\n    code\n> quoted\n"
                       "see https://evil.example and www.evil.example ~~gone~~ <b>x</b>")
    for tag in ("<pre", "<h1", "<h2", "<h3", "<table", "<ol", "<ul", "<hr", "<a ", "<del",
                "<b>", "<blockquote", "<code"):
        assert hostile.count(tag) == plain.count(tag), tag  # the note made none of its own
    assert "see https://evil.example and www.evil.example ~~gone~~ &lt;b&gt;x&lt;/b&gt;" in \
        hostile  # shown character for character
    assert hostile.index("evil.example") < hostile.index("Appendix")  # the rest still follows


def test_4_a_folder_named_as_a_formula_makes_no_formula_in_a_csv_cell(tmp_path):
    folder = tmp_path / "=HYPERLINK(\"http://evil.example\",\"click\")"
    shutil.copytree(EPYC, folder)
    r = compared(str(folder), "--export", "csv")
    assert r.returncode == 0
    cells = [c for line in r.stdout.splitlines()[1:] for c in line.split(",")]
    assert not any(c.lstrip('"').startswith(("=", "+", "@")) for c in cells)
    assert for_csv("=1+1") == "'=1+1" and for_csv("-3") == "'-3" and for_csv(-3) == -3


# ---- data loss

@pytest.mark.parametrize("change", [
    lambda d: [r.update(value=0) for r in d["records"]
               if r["experiment"] == "decode" and r["figure"] == "bytes read"],
    lambda d: [r.update(value="fast", unit="") for r in d["records"]
               if r["experiment"] == "decode" and r["figure"] == "step"],
    lambda d: [r["keys"].pop("chunk") for r in d["records"] if r["experiment"] == "dial"]],
    ids=["bytes read 0", "text for a time", "a dial row without its chunk"])
def test_5_an_earlier_file_no_reader_can_read_is_refused_by_the_schema(change, tmp_path):
    data = reference("two_phases")
    change(data)
    (tmp_path / "two_phases.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="record"):  # told by the schema's check, so
        schema.load(str(tmp_path / "two_phases.json"), "two_phases")  # every reader is spared
    shutil.copy(os.path.join(EPYC, "cube_bug.json"), tmp_path / "cube_bug.json")
    runs, _, err = silent(report.saved_runs, str(tmp_path))
    assert list(runs) == ["cube_bug"] and "the report leaves out two_phases.json" in err


def test_6_saves_killed_before_their_renames_never_push_real_results_out_of_history(tmp_path):
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


def test_6_a_hang_up_stops_a_run_in_one_line_leaving_nothing(tmp_path):
    run = subprocess.Popen([sys.executable, "-c", SLOW, str(tmp_path / "r")], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert run.stdout.readline() == "probing\n"
    run.send_signal(signal.SIGHUP)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 129 and err.strip().splitlines()[-1] == \
        "hung up: nothing saved, earlier results untouched", err
    assert not (tmp_path / "r").exists()


def test_7_an_unreadable_earlier_result_is_never_replaced_unkept(tmp_path, monkeypatch):
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


# ---- crashes

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
def test_8_a_number_compare_cannot_use_is_one_line_and_the_rest_compares(tmp_path, name, change,
                                                                         says):
    folder = planted(tmp_path / "box", name, change)
    r = compared("post", str(folder))
    assert "Traceback" not in r.stderr
    one_line(r, 1, says, "left out")  # the schema's check refuses it: no reader meets it
    assert "h**3 ms" in r.stdout  # the machine's other files still compared
    assert exports.write("json", [{"ratio": float("inf")}]) == '[\n {\n  "ratio": null\n }\n]'


def test_8_an_old_file_beyond_the_upgrades_arithmetic_is_one_line(tmp_path, monkeypatch):
    bad = reference("cube_bug")
    (tmp_path / "c.json").write_text(json.dumps(bad))
    monkeypatch.setattr(older, "upgrade", lambda d: 1e308 * 1e308 / 0)
    with pytest.raises(ValueError, match="newest layout"):
        schema.load(str(tmp_path / "c.json"), "cube_bug")


def test_9_a_result_without_its_core_count_makes_a_machine_line(tmp_path):
    facts = reference("cube_bug")["machine"]
    facts.pop("cores")
    assert ", ? cores" in host.line(facts)
    folder = planted(tmp_path / "box", "cube_bug", lambda d: d["machine"].pop("cores"))
    r = compared(str(folder), "intel-xeon-processor-2c")
    assert r.returncode == 0 and "Traceback" not in r.stderr


def test_10_a_folder_compare_cannot_list_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "machines").mkdir()
    real = os.listdir

    def unlistable(path="."):
        if os.path.basename(str(path)) == "machines":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(os, "listdir", unlistable)
    r = compared(str(tmp_path / "machines"))
    assert r.returncode == 1 and "Traceback" not in r.stderr and "cannot be" in r.stderr


def test_11_a_plan_too_big_is_refused_before_it_is_made(monkeypatch):
    made = []
    e = two_phases.EXPERIMENTS["collision"]
    monkeypatch.setitem(two_phases.EXPERIMENTS, "collision", dataclasses.replace(
        e, plan=lambda args: made.append(args) or e.plan(args)))
    code, _, err = silent(two_phases.parse_args, [
        "--typers", "1000000", "--chunk", "1", "--question", "1000", "--notes", "10",
        "--experiments", "collision", "--runs", "1", "--no-save"])
    assert code == 2 and "argument --typers" in err and "--chunk" in err and not made


def test_12_a_closed_stdout_ends_cleanly(tmp_path):
    r = subprocess.run([sys.executable, "two_phases.py", "--predict", "h100-sxm", "--no-save"],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       pass_fds=(), preexec_fn=lambda: os.close(1))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_13_a_journal_naming_a_folder_is_refused_before_the_run(tmp_path):
    box = tmp_path / "box"
    (box / ".tmp-d").mkdir(parents=True)
    (box / results.JOURNAL).write_text(json.dumps({"cube_bug.txt": ".tmp-d"}))
    r = in_process(cube_bug.parse_args, "--quick", "--runs", "1", "--out", str(tmp_path),
                   "--label", "box")  # refused before anything runs
    one_line(r, 2, "--out", results.JOURNAL, "not a file")


# ---- wrong output

def test_14_a_prediction_is_never_compared_with_a_measurement(tmp_path):
    assert two_phases.main(["--predict", "post", "--out", str(tmp_path), "--label", "p",
                            "--no-plot"]) == 0
    for first in ("post", EPYC):
        r = compared(first, str(tmp_path / "p"))
        said = [line for line in r.stdout.splitlines() if "prompt 256: ms/token" in line]
        assert said and all("not compared: a prediction against a measurement" in line
                            for line in said)
        assert "faster" not in said[0] and "no change" not in said[0]


def test_15_a_result_its_reader_would_refuse_is_never_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(schema, "ALL_SAMPLES_MAX", 3)
    code, out, err = silent(machine_speed.main, ["--quick", "--runs", "2", "--out",
                                                 str(tmp_path), "--label", "m"])
    assert code == 1 and "would not read back" in err and "memory speed" in out
    assert not (tmp_path / "m" / "machine_speed.quick.json").exists()


# ---- smaller

def test_16_an_unwritable_home_gives_matplotlib_a_folder_of_the_runs_removed_after(
        tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", os.path.join(os.devnull, "home"))  # nothing can be made there
    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(pictures, "_config", {"made": None})
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    pictures.own_config()  # before matplotlib is imported: it takes MPLCONFIGDIR, says nothing
    made = os.environ["MPLCONFIGDIR"]
    assert os.path.isdir(made) and made.startswith(str(tmp_path))
    pictures.tidy()
    assert not os.path.exists(made) and "MPLCONFIGDIR" not in os.environ
    monkeypatch.setenv("HOME", str(tmp_path))  # a writable home: matplotlib's own folder
    pictures.own_config()
    assert "MPLCONFIGDIR" not in os.environ


def test_17_the_version_leaves_the_checkouts_index_as_it_was():
    index = os.path.join(ROOT, ".git", "index")
    if not os.path.exists(index):
        pytest.skip("not a git checkout")
    before = os.stat(index).st_mtime_ns
    runner.version()
    assert os.stat(index).st_mtime_ns == before


def test_18_a_roofs_file_the_user_names_may_be_a_link(tmp_path):
    os.symlink(os.path.join(EPYC, "machine_speed.json"), tmp_path / "link.json")
    code, out, _ = silent(two_phases.main, ["--predict", "--roofs", str(tmp_path / "link.json"),
                                            "--experiments", "decode", "--no-save"])
    assert code == 0 and "given (float32)" in out


def test_19_too_many_users_name_the_users():
    code, _, err = silent(two_phases.parse_args, ["--predict", "h100-sxm", "--users", "1000000",
                                                  "--no-save"])
    assert code == 2 and "argument --users" in err and "--typers" not in err


@pytest.mark.parametrize("out", ["/", "/dev", "/proc/self"])
def test_20_a_system_folder_is_no_results_folder(out):
    code, _, err = silent(two_phases.parse_args, ["--quick", "--out", out])
    assert code == 2 and "argument --out" in err and "folder of your own" in err


def test_20_a_path_the_terminal_cannot_show_is_pasted_as_its_bytes(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    said = runner.pasteable("results/caf\u00e9 box")
    assert said == "$'results/caf\\xc3\\xa9 box'" and "?" not in said
    assert subprocess.run(["bash", "-c", f"printf %s {said}"], capture_output=True).stdout \
        == "results/caf\u00e9 box".encode()


def test_20_threads_are_held_to_the_cpus_this_run_may_use(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert flags.usable_cpus() == 1
    code, _, err = silent(two_phases.parse_args, ["--quick", "--threads", "2", "--no-save"])
    assert code == 2 and "the logical CPUs this run may use" in err


def test_20_an_unusable_history_is_refused_before_the_run(tmp_path, monkeypatch):
    (tmp_path / results.HISTORY).mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p).endswith(results.HISTORY)
                        else real(p, m))
    assert "cannot be used by this user" in results.refusal(str(tmp_path))


def test_20_no_lock_file_is_shipped():
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "references"], capture_output=True,
                             text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    assert not [t for t in tracked if os.path.basename(t) == results.LOCK]


