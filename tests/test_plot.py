"""--plot: the roofline picture when matplotlib is there, one line and exit 1 when it is not."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run_quick(script, tmp_path, *flags, code=None):
    argv = [script, "--quick", "--runs", "1", "--out", str(tmp_path), "--label", "box", *flags]
    if code is None:
        cmd = [sys.executable, os.path.join(ROOT, script), *argv[1:]]
    else:
        cmd = [sys.executable, "-c", code, *argv]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
@pytest.mark.parametrize("script,flags", [
    ("machine_speed.py", ()), ("two_phases.py", ("--experiments", "prefill", "decode"))])
def test_plot_writes_the_roofline(script, flags, tmp_path):
    r = run_quick(script, tmp_path, "--plot", *flags)
    assert r.returncode == 0, r.stderr
    png, svg = tmp_path / "box" / "roofline.png", tmp_path / "box" / "roofline.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert b"<svg" in svg.read_bytes()[:1000]


def test_without_matplotlib_one_line_exit_1_and_the_tables_saved(tmp_path):
    hide = ("import sys, runpy; sys.modules['matplotlib'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    r = run_quick("machine_speed.py", tmp_path, "--plot", code=hide)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "--plot needs matplotlib" in errors[0]
    assert "memory speed" in r.stdout
    assert (tmp_path / "box" / "machine_speed.quick.json").exists()
    assert not (tmp_path / "box" / "roofline.png").exists()


def test_plot_with_no_save_is_a_bad_flag(tmp_path):
    r = run_quick("machine_speed.py", tmp_path, "--plot", "--no-save")
    assert r.returncode == 2 and "--plot" in r.stderr and len(r.stderr.splitlines()) == 1
