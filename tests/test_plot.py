"""--plot: the roofline picture when matplotlib is there, one line and exit 2 when it is not."""
import importlib.util

import pytest

from conftest import python, script

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
FAST = ("--experiments", "prefill", "decode", "--prompts", "1", "16", "--users", "1", "2")


def run_quick(tmp_path, *flags):
    return script("two_phases.py", "--quick", "--runs", "1", "--out", str(tmp_path), "--label",
                  "box", *flags)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_plot_writes_the_roofline_with_the_results(tmp_path):
    r = run_quick(tmp_path, "--plot", *FAST)
    assert r.returncode == 0, r.stderr
    box = tmp_path / "box"
    png, svg = box / "roofline.quick.png", box / "roofline.quick.svg"  # a quick run's picture
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert b"<svg" in svg.read_bytes()[:1000]
    assert (box / "two_phases.quick.json").exists()


def test_a_quick_picture_never_replaces_a_full_runs(tmp_path):
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "roofline.png").write_bytes(b"the full run's picture")
    r = run_quick(tmp_path, "--plot", *FAST)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "box" / "roofline.png").read_bytes() == b"the full run's picture"
    assert (tmp_path / "box" / "roofline.quick.png").exists()


def test_machine_speed_draws_no_picture(tmp_path):
    r = script("machine_speed.py", "--plot")
    assert r.returncode == 2 and "--plot" in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_picture_puts_each_row_at_its_intensity():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import roofline
    points = [["prefill", "16 tokens", 8.0, 50e9], ["decode", "1 user", 0.5, 8e9],
              ["decode", "4 users", 2.0, 20e9]]
    fig = roofline.figure(plt, {"bytes_per_s": 20e9, "flops_per_s": 140e9, "points": points}, "t")
    ax = fig.axes[0]
    drawn = {tuple(map(tuple, c.get_offsets().tolist())) for c in ax.collections}
    assert {((8.0, 50.0),), ((0.5, 8.0), (2.0, 20.0))} <= drawn  # GFLOP/s on the y axis
    assert sorted(t.get_text() for t in ax.texts) == ["1 user", "16 tokens", "4 users"]
    plt.close(fig)


def test_without_matplotlib_plot_is_refused_before_anything_runs(tmp_path):
    hide = ("import sys, runpy; sys.modules['matplotlib'] = None; "
            f"sys.argv = ['two_phases.py', '--quick', '--out', {str(tmp_path)!r}, '--plot']; "
            "runpy.run_path('two_phases.py', run_name='__main__')")
    r = python(hide)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "--plot" in r.stderr and "matplotlib" in r.stderr
    assert not any(tmp_path.iterdir())


def test_plot_with_no_save_is_a_bad_flag(tmp_path):
    r = run_quick(tmp_path, "--plot", "--no-save")
    assert r.returncode == 2 and "--plot" in r.stderr and len(r.stderr.splitlines()) == 1
