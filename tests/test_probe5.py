"""A fifth hostile probe's findings, each under its number: fresh clones, --quick and --predict
runs, crafted folders, files and environments."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import cube_bug
from conftest import ROOT, compared, in_process, script
from harness.keeping import results

SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")


# ---- 1. a report.md the user edited is theirs: kept before the suite makes it anew


def test_1_an_edited_report_is_kept_when_the_first_run_of_a_script_replaces_it(tmp_path):
    box = tmp_path / "edit2"
    box.mkdir()
    for name in ("machine_speed.json", "machine_speed.txt", "report.md"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    with open(box / "report.md", "a") as f:
        f.write("my own line\n")
    argv = ("--tokens", "4", "--runs", "3", "--processes", "1", "--no-in-model", "--out",
            str(tmp_path), "--label", "edit2")
    r = in_process(cube_bug.main, *argv)
    assert r.returncode == 0, r.stderr
    (kept,) = (box / "history").glob("report.*")
    assert (kept / "report.md").read_text().endswith("my own line\n")
    assert "my own line" not in (box / "report.md").read_text() and str(kept) in r.stderr
    assert not results.edited(str(box / "report.md"))  # the suite's own, signed
    r = in_process(cube_bug.main, *argv)  # the report as the suite wrote it: nothing to keep
    assert r.returncode == 0 and len(list((box / "history").glob("report.*"))) == 1


def test_1_a_signed_report_is_the_suites_and_any_edit_unsigns_it(tmp_path):
    path = tmp_path / "report.md"
    path.write_text(results.signed("# a report\n\nits table\n"))
    assert not results.edited(str(path))
    path.write_text(path.read_text().replace("its table", "its table, edited"))
    assert results.edited(str(path))
    assert not results.edited(str(tmp_path / "none.md"))  # nothing there: nothing to keep


# ---- 2. an export that did not arrive whole fails the run


@pytest.mark.parametrize("argv", [
    ["compare.py", "post", "amd-epyc-2c", "--export", "csv"],
    ["machine_speed.py", "--quick", "--runs", "1", "--size", "300", "--matmul", "32",
     "--no-save", "--export", "csv"],
    ["two_phases.py", "--predict", "h100-sxm", "--no-save", "--export", "json"],
])
def test_2_an_export_cut_short_by_a_full_disk_exits_non_zero(argv):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, os.path.join(ROOT, argv[0]), *argv[1:]],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert r.returncode == 1 and "did not arrive whole" in r.stderr
    assert "Traceback" not in r.stderr


def test_2_tables_into_head_still_exit_zero(tmp_path):
    r = subprocess.run(f"{sys.executable} compare.py post amd-epyc-2c | head -1", shell=True,
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr


# ---- 3. a script started with stderr closed runs, says nothing, and saves


@pytest.mark.parametrize("argv", [
    ["machine_speed.py", "--quick", "--runs", "1", "--size", "300", "--matmul", "32"],
    ["two_phases.py", "--predict", "h100-sxm", "--no-save"],
    ["compare.py", "post", "amd-epyc-2c"],
])
def test_3_a_closed_stderr_is_no_crash(argv, tmp_path):
    out = ["--out", str(tmp_path)] if argv[0] == "machine_speed.py" else []
    r = subprocess.run(f"{sys.executable} {' '.join(argv + out)} 2>&-", shell=True, cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout
    assert not any(word in r.stdout for word in ("wall time", "saved ", "Traceback"))  # notes
    #   go nowhere, never into the tables
    if out:
        assert list(tmp_path.glob("*/machine_speed.quick.json"))  # saved, as ever


# ---- 6. stderr into a pipe that closes: the run saved, and says so by its exit


def test_6_stderr_into_a_closed_pipe_is_no_failure(tmp_path):
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
