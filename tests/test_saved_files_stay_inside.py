"""What a run saves stays inside its folder, whatever was planted there: links where it writes,
names it would take, dates too long for a folder name, leftovers, journals, system folders, a
signal in a run's first fraction of a second. A run writes only regular files it made, in its
own folder and its history, never through a link; each refusal is one line, exit 2 before
measuring."""
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
import two_phases
from harness import stopping
from harness.keeping import where
from harness.keeping import history, results
from harness.measuring import host
from conftest import EPYC, ROOT, in_process, one_line, reported, script, silent

PREDICT = ["--predict", "--forklift", "10", "--workbench", "100", "--no-plot"]  # saves in under
#                                                                                  a second
STEM = "two_phases"


def predict(out, label="box"):
    """A prediction saved (it measures nothing), in this process: -> as a finished process."""
    return in_process(two_phases.main, *PREDICT, "--out", str(out), "--label", label)


def snapshot(folder):
    """Everything under folder, links not followed: {path: bytes, link target or 'folder'}."""
    seen = {}
    for d, folders, names in os.walk(folder):
        for n in folders + names:
            p = os.path.join(d, n)
            seen[p] = (os.readlink(p) if os.path.islink(p) else "folder" if os.path.isdir(p)
                       else open(p, "rb").read())
    return seen


def saved_date(box):
    return json.loads((box / f"{STEM}.json").read_text())["machine"]["date"]


def entries(box):
    return sorted(p.name for p in (box / results.HISTORY).iterdir())


def result(date, run=0):
    """The files of a result of STEM made at `date` (the run-th of that date), as results.save
    takes them."""
    return results.files(STEM, {"machine": {"date": date}, "run": run}, [date], {}, quick=False)


# ---- 1. history/ that is a link (or not a folder): refused before measuring, nothing touched

@pytest.mark.parametrize("plant", ["link", "file"])
def test_a_history_that_is_not_the_suites_folder_is_refused_before_measuring(tmp_path, plant):
    v = tmp_path / "v"
    for i in range(1, 12):
        (v / f"{STEM}.20{i:02}-x").mkdir(parents=True)
    assert predict(tmp_path / "r").returncode == 0
    box = tmp_path / "r" / "box"
    if plant == "link":
        (box / results.HISTORY).symlink_to(v)
    else:
        (box / results.HISTORY).write_text("not a folder")
    before = snapshot(tmp_path)
    r = predict(tmp_path / "r")
    one_line(r, 2, "--out", f"{results.HISTORY} is a link or not a folder")
    assert r.stdout == "" and snapshot(tmp_path) == before


# ---- 2. a link planted at history/<stem>.<date>: never written through

def test_a_link_planted_where_the_history_entry_goes_is_never_written_through(tmp_path):
    assert predict(tmp_path / "r").returncode == 0
    box = tmp_path / "r" / "box"
    earlier = (box / f"{STEM}.json").read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{STEM}.json").write_text("the user's own file")
    (elsewhere / ".tmp-w").write_text("the user's own temp file")
    planted = box / results.HISTORY / f"{STEM}.{history.stamp(saved_date(box))}"
    planted.parent.mkdir()
    planted.symlink_to(elsewhere)
    before = snapshot(elsewhere)
    r = predict(tmp_path / "r")
    assert r.returncode == 0, r.stderr
    assert snapshot(elsewhere) == before and planted.is_symlink()
    kept = [p for p in planted.parent.iterdir() if not p.is_symlink()]
    assert len(kept) == 1 and (kept[0] / f"{STEM}.json").read_bytes() == earlier
    assert sorted(p.name for p in kept[0].iterdir()) == ["report.md", f"{STEM}.json", f"{STEM}.txt"]
    #      the earlier result, with the report that went with it


# ---- 3. a result file that is a link to a private file: refused, never copied

def test_a_result_file_that_is_a_link_is_refused_before_measuring(tmp_path):
    assert predict(tmp_path / "r").returncode == 0
    box = tmp_path / "r" / "box"
    private = tmp_path / "private.json"
    private.write_text(json.dumps({"machine": {"date": "2026-01-01"}, "secret": 1}))
    private.chmod(0o600)
    (box / f"{STEM}.json").unlink()
    (box / f"{STEM}.json").symlink_to(private)
    r = predict(tmp_path / "r")
    one_line(r, 2, "--out", "is a link, not a file")
    assert not (box / results.HISTORY).exists()


def test_history_copies_only_regular_files_and_keeps_their_permissions(tmp_path):
    """Past the check before measuring (a link made while the run measured): the link is not
    followed into history, and a private result stays private there."""
    private = tmp_path / "private.txt"
    private.write_text("secret")
    private.chmod(0o600)
    assert results.save(str(tmp_path / "box"), result("2026-01-01T00:00:00")) == 0
    (tmp_path / "box" / f"{STEM}.json").chmod(0o600)
    (tmp_path / "box" / f"{STEM}.txt").unlink()
    (tmp_path / "box" / f"{STEM}.txt").symlink_to(private)
    assert results.save(str(tmp_path / "box"), result("2026-01-02T00:00:00"), STEM) == 0
    [kept] = (tmp_path / "box" / results.HISTORY).iterdir()
    assert [p.name for p in kept.iterdir()] == [f"{STEM}.json"]
    assert (kept / f"{STEM}.json").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "box" / f"{STEM}.txt").is_symlink() and private.read_text() == "secret"


# ---- 4. the machine-wide mark: never through a link, only this user's regular file

def test_a_machine_mark_that_is_a_link_is_never_followed(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / f"prefill-vs-decode-{os.getuid()}.lock").symlink_to(tmp_path / "made")
    r = script("cube_bug.py", "--quick", "--runs", "1", "--no-save",
               env={**os.environ, "TMPDIR": str(tmp_path / "t")})
    assert r.returncode == 0 and not os.path.lexists(tmp_path / "made"), r.stderr
    assert [line for line in r.stderr.splitlines() if "machine-wide mark" in line] == [
        f"warning: the machine-wide mark {tmp_path}/t/prefill-vs-decode-{os.getuid()}.lock "
        "cannot be used (a link): this run goes without it, and cannot see another run of this "
        "suite measuring, nor be seen"]


@pytest.mark.parametrize("plant", ["a folder", "another user's file"])
def test_a_machine_mark_that_is_not_this_users_file_is_not_used(tmp_path, monkeypatch, capsys,
                                                               plant):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mark = tmp_path / os.path.basename(host.mark_path())
    if plant == "a folder":
        mark.mkdir()
    elif os.geteuid() == 0:  # only root can give a file away
        mark.write_text("")
        os.chown(mark, 1, 1)
    else:
        pytest.skip("only root can make a file another user's")
    with host.measuring() as busy:
        assert busy == []
    assert "cannot be used (" in capsys.readouterr().err


# ---- 5. the shipped references/ folder itself, not only inside it

@pytest.mark.parametrize("out,label", [(ROOT, "references"), ("{t}", "refs")],
                         ids=["references itself", "a link to it"])
def test_saving_into_the_references_folder_itself_is_refused(tmp_path, out, label):
    os.symlink(os.path.join(ROOT, "references"), tmp_path / "refs")
    before = snapshot(os.path.join(ROOT, "references"))
    one_line(predict(out.format(t=tmp_path), label), 2, "--out", "shipped reference results")
    assert snapshot(os.path.join(ROOT, "references")) == before


# ---- 6. a signal in the first fraction of a second: while the machine's facts are read

SLOW_PROBE = ("import runpy, sys, time\nfrom harness.measuring import host\n"
              "real = host.facts\n"
              "def probe(*args, **kw):\n"
              "    print('probing', flush=True)\n"
              "    time.sleep(5)\n"
              "    return real(*args, **kw)\n"
              "host.facts = probe\n"
              "sys.argv = ['cube_bug.py', '--quick', '--runs', '1', '--out', sys.argv[1]]\n"
              "runpy.run_path('cube_bug.py', run_name='__main__')\n")


@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "terminated")])
def test_a_signal_while_the_machine_is_read_stops_the_run(tmp_path, signum, code, word):
    alone = dict(os.environ, TMPDIR=str(tmp_path))  # its own mark: a quick run beside it is not
    run = subprocess.Popen([sys.executable, "-c", SLOW_PROBE, str(tmp_path / "r")], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=alone)
    assert run.stdout.readline() == "probing\n"  # the run reads the machine, slowly
    run.send_signal(signum)
    out, err = run.communicate(timeout=60)
    assert run.returncode == code and err == f"{word}: {stopping.NOTHING_SAVED}\n", err
    assert out == "" and not (tmp_path / "r").exists()


@pytest.mark.parametrize("stop", [stopping.Stopped(signal.SIGTERM), KeyboardInterrupt()])
def test_a_missing_machine_fact_is_quiet_but_a_stop_is_not(stop):
    def fact():
        raise stop
    assert host.quietly(lambda: 1 / 0, "none") == "none"
    with pytest.raises(type(stop)):
        host.quietly(fact)


# ---- 7. history: an entry per earlier result, trimmed by age, only the suite's own removed

def test_results_saved_within_one_second_each_keep_an_entry(tmp_path):
    for run in range(5):
        assert results.save(str(tmp_path), result("2026-01-01T00:00:00+00:00", run), STEM) == 0
    assert [n.split(".", 1)[1] for n in entries(tmp_path)] == [
        "2026-01-01T00-00-00+00-00", *(f"2026-01-01T00-00-00+00-00.{n}" for n in (2, 3, 4))]


def test_history_keeps_the_newest_by_age_and_removes_only_its_own(tmp_path, monkeypatch):
    history = tmp_path / results.HISTORY
    (history / f"{STEM}.9999-12-31").mkdir(parents=True)  # a name made to look newest
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "mine.txt").write_text("the user's own")
    (history / f"{STEM}.0001-01-01").symlink_to(tmp_path / "elsewhere")
    (history / f"{STEM}.0002-01-01").write_text("a file")
    (history / f"{STEM}.mine").mkdir()
    planted = snapshot(tmp_path / "elsewhere")
    time.sleep(0.05)  # the file system's clock ticks: the planted folder is older than any entry
    for day in range(1, 13):  # 11 earlier results to keep
        assert results.save(str(tmp_path), result(f"2026-01-{day:02}T00:00:00"), STEM) == 0
    assert entries(tmp_path) == sorted(
        [f"{STEM}.0001-01-01", f"{STEM}.0002-01-01", f"{STEM}.mine",
         *(f"{STEM}.2026-01-{day:02}T00-00-00" for day in range(2, 12))])
    assert snapshot(tmp_path / "elsewhere") == planted


# ---- 8. a date too long for a folder name

def test_a_long_date_in_the_saved_result_does_not_block_later_saves(tmp_path):
    assert predict(tmp_path / "r").returncode == 0
    box = tmp_path / "r" / "box"
    data = json.loads((box / f"{STEM}.json").read_text())
    data["machine"]["date"] = "2026-" + "9" * 295
    (box / f"{STEM}.json").write_text(json.dumps(data))
    for _ in range(2):
        assert predict(tmp_path / "r").returncode == 0
    assert len(entries(box)) == 2 and all(len(n) <= len(STEM) + 1 + 40 for n in entries(box))
    assert [history.stamp(d) for d in ("../../etc", "2026-01-01T00:00:00+01:00", "2026\u00e9/x",
                                       None)] == ["undated", "2026-01-01T00-00-00+01-00",
                                                  "2026--x", "undated"]


# ---- 9 and 10. leftovers in the folder: a probe's, a bad journal

@pytest.mark.parametrize("plant", [lambda p: p.write_text(""), lambda p: p.mkdir()],
                         ids=["file", "folder"])
def test_a_leftover_probe_does_not_block_saving(tmp_path, plant):
    (tmp_path / "r" / "box").mkdir(parents=True)
    plant(tmp_path / "r" / "box" / f"{results.TEMP}probe")
    r = predict(tmp_path / "r")
    assert r.returncode == 0 and (tmp_path / "r" / "box" / f"{STEM}.json").exists(), r.stderr


def test_a_bad_journal_is_refused_before_measuring(tmp_path):
    (tmp_path / "r" / "box").mkdir(parents=True)
    (tmp_path / "r" / "box" / results.JOURNAL).write_text(json.dumps({"x": "../../elsewhere"}))
    before = snapshot(tmp_path)
    r = predict(tmp_path / "r")
    one_line(r, 2, "--out", results.JOURNAL, "refused")
    assert r.stdout == "" and snapshot(tmp_path) == before


# ---- 11. a save that fails, or is stopped, leaves history as it was

@pytest.mark.parametrize("where", ["_write_temp", "copy_regular"])
def test_a_save_that_fails_on_a_full_disk_leaves_no_history_entry(tmp_path, monkeypatch, where):
    assert results.save(str(tmp_path), result("2026-01-01T00:00:00")) == 0
    before = snapshot(tmp_path)

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(results if where == "_write_temp" else history, where, full)
    assert results.save(str(tmp_path), result("2026-01-02T00:00:00"), STEM) == 1
    assert snapshot(tmp_path) == before


def test_a_full_disk_while_keeping_the_earlier_result_says_so(tmp_path, monkeypatch, capsys):
    """The copy into history/ on a full disk said that history was a link or not a folder, to
    be removed, where there was none: the error is the disk's, and it says so."""
    assert results.save(str(tmp_path), result("2026-01-01T00:00:00")) == 0
    capsys.readouterr()

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(history, "copy_regular", full)
    assert results.save(str(tmp_path), result("2026-01-02T00:00:00"), STEM) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "link or not a folder" not in err, err


@pytest.mark.parametrize("where", ["_write_temp", "trim"], ids=["before the renames",
                                                                 "during them"])
def test_a_signal_while_saving_never_leaves_more_than_kept_entries(tmp_path, monkeypatch,
                                                                  where):
    for day in range(1, history.KEPT + 2):
        assert results.save(str(tmp_path), result(f"2026-01-{day:02}T00:00:00"), STEM) == 0
    real = getattr(results, where)

    def signalled(*a):
        signal.raise_signal(signal.SIGTERM)
        return real(*a)
    monkeypatch.setattr(results, where, signalled)
    stopping.begin()
    try:
        with stopping.stoppable(), pytest.raises(stopping.Stopped):
            results.save(str(tmp_path), result("2026-02-01T00:00:00"), STEM)
    finally:
        stopping.begin()
    assert len(entries(tmp_path)) == history.KEPT
    replaced = where == "trim"  # signals wait for the renames, and the trimming with them
    assert (saved_date(tmp_path) == "2026-02-01T00:00:00") == replaced
    assert (f"{STEM}.2026-01-{history.KEPT + 1}T00-00-00" in entries(tmp_path)) == replaced


# ---- what a reader meets: each bad file one line, the rest compared

SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")


def planted(tmp_path, change, name="two_phases.json"):
    """A copy of a shipped machine with one of its files changed by change(data)."""
    box = tmp_path / "box"
    box.mkdir()
    for f in ("machine_speed.json", "cube_bug.json", "two_phases.json"):
        data = json.load(open(os.path.join(SHIPPED, f)))
        if f == name:
            change(data)
        (box / f).write_text(json.dumps(data))
    return box


@pytest.mark.parametrize("change,says", [
    (lambda d: d["records"][0].update(value=10 ** 400), "not a finite number"),
    (lambda d: d["records"][0].update(value=1e308), "not a finite number"),
    (lambda d: d["records"][0].update(samples=[10 ** 400]), "samples"),
    (lambda d: d["roofs"].update(start=5), "'roofs' at the start without speeds"),
    (lambda d: d["roofs"].update(end="fast"), "'roofs' at the end without speeds"),
    (lambda d: d["roofs"].update(start={"bytes_per_s": 1e300, "flops_per_s": 1e11}),
     "it must be from"),
    (lambda d: d.update({"roofs @x": d["roofs"], "schema_version": 7,  # an older sweep's
                         "sheets": {t.pop("name"): t for t in d["sheets"]}}),
     "thread count is not a whole number"),
    (lambda d: d.update(blocks=[{"threads": "x", "roofs": d["roofs"]}]), "whole number of threads"),
    (lambda d: d.update(settings=[1]), "settings that are not an object"),
    (lambda d: d["machine"].pop("cores"), None),  # optional: no KeyError, compared as ever
])
def test_a_hostile_value_leaves_one_file_out_and_the_rest_compares(tmp_path, change, says):
    from conftest import compared
    r = compared(str(planted(tmp_path, change)))
    assert "Traceback" not in r.stderr
    if says is None:
        assert r.returncode == 0 and r.stderr == "", r.stderr
    else:
        one_line(r, 1, "two_phases.json", says, "left out")
    assert "memory speed" in r.stdout and "h**3 ms" in r.stdout  # the other files compared


def test_a_results_file_that_is_a_link_is_never_followed(tmp_path):
    from conftest import compared
    secret = tmp_path / "elsewhere.json"
    secret.write_text(open(os.path.join(SHIPPED, "two_phases.json")).read())
    box = planted(tmp_path, lambda d: None)
    os.unlink(box / "two_phases.json")
    os.symlink(secret, box / "two_phases.json")
    r = compared(str(box))
    one_line(r, 1, "two_phases.json: is a link, not a results file")
    assert "memory speed" in r.stdout


def test_one_folder_named_three_ways_is_one_machine_and_an_empty_name_is_said(tmp_path):
    from conftest import compared
    box = planted(tmp_path, lambda d: None)
    r = compared(str(box), str(tmp_path / "." / "box"), str(box) + "/")
    assert r.returncode == 0 and r.stdout.count("machine: AMD EPYC") == 1
    one_line(compared(""), 1, "'': not a folder's name")


def test_escapes_in_a_results_file_never_reach_the_terminal(tmp_path):
    from conftest import compared

    def steer(d):
        d["machine"]["cpu"] = "AMD\x1b[2J\x1b]0;owned\x07\nEPYC"
        next(t for t in d["sheets"] if t["name"] == "machine_speed")["title"] = "Speeds\x1b[H"
        for r in d["records"]:
            if r["experiment"] != "claims":  # (a verdict is keyed by its claim's words)
                r["keys"] = {"row": "one\x1b[31m\r\nforged line"}
    r = compared(str(planted(tmp_path, steer, "machine_speed.json")))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\r" not in r.stdout
    assert "forged line" in r.stdout and "\nforged line" not in r.stdout
    assert "AMD?[2J?]0;owned??EPYC" in r.stdout


def test_your_machine_wins_over_a_shipped_one_of_the_same_name_and_says_so(tmp_path,
                                                                           monkeypatch):
    from harness.keeping import results
    from conftest import compared
    mine = tmp_path / "results"
    planted(mine.parent, lambda d: None).rename(mine.parent / "amd-epyc-2c-copy")
    (mine).mkdir()
    (mine.parent / "amd-epyc-2c-copy").rename(mine / "amd-epyc-2c")
    monkeypatch.setattr(results, "RESULTS", str(mine))
    r = compared("amd-epyc-2c")
    assert r.returncode == 0 and "both a machine of yours" in r.stderr
    assert str(mine / "amd-epyc-2c") in r.stderr and "comparing yours" in r.stderr


def test_a_reader_does_not_wait_for_ever_on_a_stopped_run(tmp_path, monkeypatch):
    import fcntl
    from conftest import compared
    box = planted(tmp_path, lambda d: None)
    monkeypatch.setattr(results, "READER_WAIT_S", 0.2)
    fd = os.open(box / results.LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a run stopped (Ctrl-Z) halfway through its save
    try:
        r = compared(str(box))
    finally:
        os.close(fd)
    assert r.returncode == 0 and "another run has held it for 0.2 s" in r.stderr
    assert "memory speed" in r.stdout


def test_a_file_with_no_figures_is_left_out_in_one_line(tmp_path):
    from conftest import compared
    r = compared(str(planted(tmp_path, lambda d: d.update(records=[]))))
    one_line(r, 1, "two_phases.json: holds no figures; left out")


def test_a_prediction_refuses_threads_and_odd_warnings_never_sink_the_report(tmp_path):
    r = script("two_phases.py", *PREDICT, "--threads", "1", "2", "--no-save")
    one_line(r, 2, "--threads", "a prediction runs nothing")
    from harness.showing import report
    said = report.condensed(["noisy machine: a spread 1.5x (fastest 1 ms)",
                             "noisy machine: no spread here", "noisy machine: spread xx"])
    assert said == ["noisy machine: the runs of 3 figures spread by more than 1.2x, up to "
                    "1.50x (a; no spread here; spread xx)"]


def test_a_sibling_result_without_settings_never_sinks_the_report(tmp_path):
    box = planted(tmp_path, lambda d: d.pop("settings"), "cube_bug.json")
    reported(str(box))
    text = (box / "report.md").read_text()
    assert "## The slow road" in text and "h\\*\\*3 is about 2x slower" in text


# ---- links, journals, system folders and long names


def test_a_temp_file_swapped_for_a_link_is_never_written_through_nor_saved(tmp_path,
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


def test_a_journal_naming_a_folder_is_refused_before_the_run(tmp_path):
    box = tmp_path / "box"
    (box / ".tmp-d").mkdir(parents=True)
    (box / results.JOURNAL).write_text(json.dumps({"cube_bug.txt": ".tmp-d"}))
    r = in_process(cube_bug.parse_args, "--quick", "--runs", "1", "--out", str(tmp_path),
                   "--label", "box")  # refused before anything runs
    one_line(r, 2, "--out", results.JOURNAL, "not a file")


def test_a_roofs_file_the_user_names_may_be_a_link(tmp_path):
    os.symlink(os.path.join(EPYC, "machine_speed.json"), tmp_path / "link.json")
    code, out, _ = silent(two_phases.main, ["--predict", "--roofs", str(tmp_path / "link.json"),
                                            "--experiments", "decode", "--no-save"])
    assert code == 0 and "given, float32 tables" in out


@pytest.mark.parametrize("out", ["/", "/dev", "/proc/self"])
def test_a_system_folder_is_no_results_folder(out):
    code, _, err = silent(two_phases.parse_args, ["--quick", "--out", out])
    assert code == 2 and "argument --out" in err and "folder of your own" in err


def test_an_unusable_history_is_refused_before_the_run(tmp_path, monkeypatch):
    (tmp_path / results.HISTORY).mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p).endswith(results.HISTORY)
                        else real(p, m))
    assert "cannot be used by this user" in results.refusal(str(tmp_path))


def test_no_lock_file_is_shipped():
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "references"], capture_output=True,
                             text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    assert not [t for t in tracked if os.path.basename(t) == results.LOCK]


def test_a_prediction_into_a_measured_folder_is_refused(tmp_path):
    import two_phases
    from conftest import one_line
    box = tmp_path / "box"
    box.mkdir()
    shutil.copy(os.path.join(SHIPPED, "two_phases.json"), box / "two_phases.json")
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--out", str(tmp_path),
                   "--label", "box")
    one_line(r, 2, "--label", "holds a measured two_phases.json", "a folder of its own")


def test_a_cpu_name_of_400_characters_makes_a_folder_name_a_file_system_takes(monkeypatch):
    import types
    from harness.measuring import host
    monkeypatch.setattr(host, "cpu_model", lambda: "Very Long CPU " * 30)
    name = os.path.basename(where.folder_of(types.SimpleNamespace(out="r", label=None,
                                                                 device="numpy")))
    assert len(name) <= 100 and name.startswith("very-long-") and "--" not in name


def test_a_measured_result_saved_while_a_prediction_ran_is_checked_again_at_the_save(
        tmp_path, monkeypatch):
    """The rule that keeps predictions and measurements apart was checked at the start alone:
    a measured result saved into the label while a prediction ran (here: just before its save)
    left a folder whose report mixed PREDICTED and measured. The save checks it again, under
    the folder's lock: one line, the prediction's files not saved, the measured one intact."""
    from harness.showing import report
    box = tmp_path / "box"
    box.mkdir()  # (empty at the start: no other kind there then)
    real = report.with_run

    def meanwhile(folder, *a):
        shutil.copy(os.path.join(SHIPPED, "cube_bug.json"), box / "cube_bug.json")
        return real(folder, *a)
    monkeypatch.setattr(report, "with_run", meanwhile)
    r = predict(tmp_path)
    assert r.returncode == 1 and "would stand beside a measured cube_bug.json" in r.stderr
    assert sorted(os.listdir(box)) == ["cube_bug.json"] or sorted(
        n for n in os.listdir(box) if not n.startswith(".")) == ["cube_bug.json"]


def test_the_out_folder_swapped_for_a_link_while_a_run_measures_leads_nowhere(tmp_path,
                                                                                monkeypatch):
    """--out is held open from the start, as the label folder is: moved away and replaced by a
    link to elsewhere while the run measured (here: just before its save), the results still
    land in the folder the run started with, and nothing reaches the link's target."""
    from harness.showing import report
    out, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    real = report.with_run

    def swapped(folder, *a):
        os.rename(out, tmp_path / "results.bak")
        os.symlink(elsewhere, out)
        return real(folder, *a)
    monkeypatch.setattr(report, "with_run", swapped)
    r = predict(out)
    assert r.returncode == 0, r.stderr
    assert os.listdir(elsewhere) == []  # nothing through the link
    assert "two_phases.json" in os.listdir(tmp_path / "results.bak" / "box")


def test_a_report_made_a_folder_is_refused_before_anything_is_replaced(tmp_path, capsys):
    """report.md removed and made a folder after a save: the rerun replaced the result, then
    failed at report.md's rename, said nothing was saved, and left a journal that every later
    save met again. Every target is checked before the first thing is replaced; a journal that
    cannot be finished says so once and holds up no later save."""
    files = {**result("2026-01-01T00:00:00"), results.REPORT: "# one\n"}
    assert results.save(str(tmp_path), files, STEM) == 0
    (tmp_path / results.REPORT).unlink()
    (tmp_path / results.REPORT / "x").mkdir(parents=True)
    before = snapshot(tmp_path)
    again = {**result("2026-01-02T00:00:00"), results.REPORT: "# two\n"}
    assert results.save(str(tmp_path), again, STEM) == 1
    assert "report.md is a folder, not a file: nothing is saved" in capsys.readouterr().err
    assert snapshot(tmp_path) == before  # the earlier result as it was, no history, no temps
    temp = results.TEMP + "0123456789abcdef.md"  # a journal no save can finish:
    (tmp_path / temp).write_text("# cut short\n")
    (tmp_path / results.JOURNAL).write_text(json.dumps({results.REPORT: temp}))
    with results.locked(str(tmp_path)), held_open(tmp_path) as d:
        results.finish_replacing(d)
    said = capsys.readouterr().err
    assert said.count("could not be finished") == 1 and not (tmp_path / results.JOURNAL).exists()
    (tmp_path / results.REPORT / "x").rmdir()
    (tmp_path / results.REPORT).rmdir()
    assert results.save(str(tmp_path), again, STEM) == 0  # no longer held up


def held_open(path):
    from harness.keeping import held
    return held.opened(str(path))
