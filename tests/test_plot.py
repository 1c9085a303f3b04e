"""--plot: the roofline picture when matplotlib is there, one line and exit 2 when it is not."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT, in_process, python, script
from harness.showing import pictures

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run_quick(tmp_path, *flags):
    return script("two_phases.py", "--quick", "--runs", "1", "--out", str(tmp_path), "--label",
                  "box", *flags)


@pytest.fixture(scope="module")
def plotted(quick_run):
    """The shared quick run of every experiment with --plot, into a folder where a full run's
    roofline picture already is."""
    return quick_run[2]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_plot_draws_every_picture_with_the_results(plotted):
    for name in ("roofline", "dial", "decode", "depth"):  # a quick run's pictures
        png = plotted / f"{name}.quick.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert (plotted / "two_phases.quick.json").exists()


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_a_quick_picture_never_replaces_a_full_runs(plotted):
    assert (plotted / "roofline.png").read_bytes() == b"the full run's picture"
    assert (plotted / "roofline.quick.png").exists()
    assert not any((plotted / f"{name}.png").exists() for name in ("dial", "decode", "depth"))


def test_pictures_go_with_a_full_saved_run_only():
    import two_phases
    assert two_phases.parse_args([]).plot is HAS_MATPLOTLIB
    assert two_phases.parse_args(["--predict", "post"]).plot is HAS_MATPLOTLIB
    for flags in (["--quick"], ["--no-save"], ["--threads", "1", "2"], ["--no-plot"],
                  ["--predict", "--forklift", "1", "--workbench", "1", "--no-save"]):
        assert two_phases.parse_args(flags).plot is False, flags


def test_machine_speed_draws_no_picture(tmp_path):
    import machine_speed
    r = in_process(machine_speed.main, "--plot")
    assert r.returncode == 2 and "--plot" in r.stderr and len(r.stderr.splitlines()) == 1


def drawn(make, data, quick=False):
    """A picture as the suite draws it, and what a reader sees in it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from harness.showing import pictures
    fig = pictures.figure(plt, make, data, "GPT-2 small on a test CPU",
                          pictures.QUICK if quick is True else quick or "")
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text() and t.get_text() not in (
        pictures.QUICK, pictures.PREDICTED)
              and not t.get_text().startswith(("memory-bound", "compute-bound"))]
    boxes = [t.get_window_extent(renderer) for t in labels]
    seen = {"title": ax.get_title(), "x": ax.get_xlabel(), "y": ax.get_ylabel(),
            "legend": [t.get_text() for t in ax.get_legend().get_texts()]
            if ax.get_legend() else [],
            "labels": sorted(t.get_text() for t in labels),
            "overlaps": sum(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:]),
            "crossings": sum(pictures.crossed(box, line) for box in boxes  # a roof or a curve
                             for weight, line in pictures.traced(ax) if weight == 5),
            "misnamed": sum(misnamed(ax, t, box) for t, box in zip(labels, boxes)
                            if hasattr(t, "xy")),
            "texts": [t.get_text() for t in ax.texts], "axes": ax}
    plt.close(fig)
    return seen


def misnamed(ax, label, box):
    """Whether another marker sits nearer the label than the point it names."""
    def gap(p):
        return max(box.x0 - p[0], 0, p[0] - box.x1) ** 2 + max(box.y0 - p[1], 0, p[1] - box.y1) ** 2
    own = tuple(ax.transData.transform(label.xy))
    marks = [tuple(xy) for c in ax.collections
             for xy in c.get_offset_transform().transform(c.get_offsets())]
    return any(gap(p) < gap(own) for p in marks if max(abs(a - b) for a, b in zip(p, own)) > 1)


def found(experiment, keys, figures, rows):
    """The records of a sheet: each row's keys, then its figures, as a run saves them."""
    return [{"experiment": experiment, "keys": dict(zip(keys, row[:len(keys)])), "figure": f,
             "unit": "", "statistic": "median", "value": v, "samples": None, "runs": None,
             "predicted": False, "settings": {}}
            for row in rows for f, v in zip(figures, row[len(keys):])]


DIAL = found("dial", ["chunk"], ["first word", "worst gap"],
             [[32, 2000.0, 60.0], [128, 1700.0, 230.0], [1024, 1600.0, 1600.0]])
RECORDS = (DIAL + found("decode", ["users"], ["step", "tokens per second"],
                        [[1, 30.0, 33.0], [4, 40.0, 100.0], [16, 80.0, 200.0]])
           + found("depth", ["users", "notes"], ["step"],
                   [[1, 0, 28.0], [1, 512, 31.0], [16, 0, 28.0], [16, 512, 79.0]])
           + found("prefill", ["prompt"], ["time"], [[1, 20.0]]))


def test_the_pictures_are_made_from_the_records_alone():
    from harness.showing import pictures
    from harness.experiments.registry import DRAWINGS
    assert set(pictures.files(RECORDS, None, "GPT-2 small", True, DRAWINGS)) == {
        "dial.png", "decode.png", "depth.png"}  # no roofline without its points
    points = {"bytes_per_s": 20e9, "flops_per_s": 140e9, "points": [["decode", "1 user", 1, 1]]}
    assert set(pictures.files(DIAL, points, "GPT-2 small", True, DRAWINGS)) == {"roofline.png",
                                                                               "dial.png"}
    assert pictures.files([], {**points, "points": []}, "GPT-2 small", False, DRAWINGS) == {}
    assert pictures.rows_of(RECORDS, "depth")[1] == {"users": 1, "notes": 512, "step": 31.0,
                                                    "flagged": False}
    assert pictures.rows_of(RECORDS, "dial")[0] == {"chunk": 32, "first word": 2000.0,
                                                   "worst gap": 60.0, "flagged": False}


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_roofline_names_its_sides_and_labels_each_row_clear_of_the_others():
    from harness.showing import pictures
    points = [["prefill", "1 token", 0.5, 6e9], ["prefill", "16 tokens", 8.0, 50e9],
              ["decode", "1 user", 0.5, 5.5e9], ["decode", "4 users", 2.0, 20e9],
              ["decode", "16 users", 7.5, 48e9], ["decode", "64 users", 8.2, 52e9]]
    seen = drawn(pictures.roofline_figure, {"bytes_per_s": 20e9, "flops_per_s": 140e9,
                                            "points": points}, quick=True)
    assert seen["labels"] == sorted(p[1] for p in points) and seen["overlaps"] == 0
    assert "GPT-2 small" in seen["title"] and "FLOPs per byte" in seen["x"]
    assert "GFLOP/s" in seen["y"]
    assert {"reading (prefill)", "typing (decode)"} <= set(seen["legend"])
    assert any("forklift" in t and "workbench" in t for t in seen["legend"])
    assert "memory-bound: stuck on the forklift" in seen["texts"]
    assert "compute-bound: stuck on the workbench" in seen["texts"]
    assert pictures.QUICK in seen["texts"]  # a quick run says so in the picture itself


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_roofline_rings_a_row_other_work_disturbed_as_the_dial_does():
    from harness.showing import pictures
    points = [["prefill", "1 token", 0.5, 6e9, False], ["prefill", "16 tokens", 8.0, 50e9, True],
              ["decode", "1 user", 0.5, 5.5e9, False]]
    seen = drawn(pictures.roofline_figure, {"bytes_per_s": 20e9, "flops_per_s": 140e9,
                                            "points": points})
    assert "disturbed by other work: no verdict rests on it" in seen["legend"]
    rings = [c for c in seen["axes"].collections if c.get_sizes().tolist() == [160]]
    assert len(rings) == 1 and rings[0].get_offsets().tolist() == [[8.0, 50.0]]
    quiet = drawn(pictures.roofline_figure, {"bytes_per_s": 20e9, "flops_per_s": 140e9,
                                             "points": [p[:4] for p in points]})  # (older files)
    assert "disturbed by other work: no verdict rests on it" not in quiet["legend"]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_no_label_sits_on_the_roof():
    """A run where 64 users sit just under the forklift's slope: their label, placed up and to
    the right as the others are, would lie across the roof."""
    from harness.showing import pictures
    points = [["prefill", "1 token", 0.5, 13.3e9], ["prefill", "16 tokens", 8.04, 70.1e9],
              ["prefill", "64 tokens", 32.3, 122e9], ["prefill", "256 tokens", 132, 154e9],
              ["prefill", "1024 tokens", 570, 184e9], ["decode", "1 user", 0.5, 11.1e9],
              ["decode", "4 users", 1.54, 23.3e9], ["decode", "16 users", 3.21, 40.5e9],
              ["decode", "64 users", 4.39, 69.3e9]]
    seen = drawn(pictures.roofline_figure, {"bytes_per_s": 37.9e9, "flops_per_s": 311e9,
                                            "points": points})
    assert seen["crossings"] == 0 and seen["overlaps"] == 0 and seen["misnamed"] == 0


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
@pytest.mark.parametrize("name", ["dial", "decode", "depth"])
def test_each_picture_explains_itself(name):
    from harness.experiments.registry import DRAWINGS
    from harness.showing import pictures
    drawing = next(d for d in DRAWINGS if d.experiment == name)  # each drawn by its experiment
    seen = drawn(drawing.draw, pictures.rows_of(RECORDS, name))
    assert seen["overlaps"] == 0 and "GPT-2 small" in seen["title"]
    assert "(ms)" in seen["x"] + seen["y"]
    assert bool(seen["legend"]) == (name == "depth")  # one line needs no legend: its axes say
    #                                                    what it is
    if name == "dial":
        assert seen["labels"] == ["chunks of 1024", "chunks of 128", "chunks of 32"]
    if name == "depth":
        assert seen["legend"] == ["1 user", "16 users"]


def test_without_matplotlib_plot_is_refused_before_anything_runs(tmp_path):
    hide = ("import sys, runpy; sys.modules['matplotlib'] = None; "
            f"sys.argv = ['two_phases.py', '--quick', '--out', {str(tmp_path)!r}, '--plot']; "
            "runpy.run_path('two_phases.py', run_name='__main__')")
    r = python(hide)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "--plot" in r.stderr and "matplotlib" in r.stderr
    assert not any(tmp_path.iterdir())


def test_plot_with_no_save_is_a_bad_flag(tmp_path):
    import two_phases
    r = in_process(two_phases.main, "--quick", "--plot", "--no-save")
    assert r.returncode == 2 and "--plot" in r.stderr and len(r.stderr.splitlines()) == 1


# ---- a home matplotlib cannot write in


def test_an_unwritable_home_gives_matplotlib_a_folder_of_the_runs_removed_after(
        tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", os.path.join(os.devnull, "home"))  # nothing can be made there
    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(pictures, "_config", {"made": None, "why": None})
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    pictures.own_config()  # before matplotlib is imported: it takes MPLCONFIGDIR, says nothing
    made = os.environ["MPLCONFIGDIR"]
    assert os.path.isdir(made) and made.startswith(str(tmp_path))
    pictures.tidy()
    assert not os.path.exists(made) and "MPLCONFIGDIR" not in os.environ
    monkeypatch.setenv("HOME", str(tmp_path))  # a writable home: matplotlib's own folder
    pictures.own_config()
    assert "MPLCONFIGDIR" not in os.environ


# ---- a picture that cannot be drawn never costs the result


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_a_user_matplotlibrc_changes_no_picture():
    import matplotlib
    matplotlib.use("Agg")
    from harness.experiments.registry import DRAWINGS
    make = pictures.files(RECORDS, None, "GPT-2 small", True, DRAWINGS)
    with matplotlib.rc_context({"text.usetex": True, "figure.dpi": 5000, "font.size": 40}):
        theirs = pictures.drawn(make)  # LaTeX is not needed, nor a picture of 5000 dpi
        assert matplotlib.rcParams["text.usetex"]  # the user's settings, left as they were
    ours = pictures.drawn(make)
    assert set(theirs) == set(ours) == set(make)
    assert all(theirs[n][:8] == b"\x89PNG\r\n\x1a\n" and len(theirs[n]) < 500_000 for n in theirs)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_pictures_that_fail_are_said_once_and_the_result_saved_without_them(
        tmp_path, monkeypatch):
    import two_phases

    def failing(plt, make, data, who, mark=""):
        raise RuntimeError("latex was not found\nand more of the same")
    monkeypatch.setattr(pictures, "figure", failing)
    r = in_process(two_phases.main, "--predict", "post", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "not drawn" in line]
    assert len(said) == 1 and "roofline.png" in said[0] and "latex was not found" in said[0]
    assert "Traceback" not in r.stderr and "and more" not in r.stderr
    saved = {p.name for p in next(tmp_path.iterdir()).iterdir()}
    assert {"two_phases.json", "two_phases.txt", "report.md"} <= saved
    assert not any(name.endswith(".png") for name in saved)
    import json
    data = json.loads((next(tmp_path.iterdir()) / "two_phases.json").read_text())
    assert data["pictures"] == [] and said[0].removeprefix("warning: ") in data["made"]["warnings"]


def test_a_matplotlib_that_does_not_load_is_said_in_one_line(tmp_path):
    broken = tmp_path / "lib" / "matplotlib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ValueError('Key backend: not valid\\nmore')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "lib"), "MPLBACKEND": "nonsense"}
    code = ("import sys, two_phases; sys.argv = ['two_phases.py', *sys.argv[1:]]; "
            "sys.exit(two_phases.main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "--quick", "--plot", "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and "--plot" in r.stderr
    assert "Key backend: not valid" in r.stderr and "more" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_suite_draws_with_agg_whatever_mplbackend_says(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "nonsense")  # matplotlib refuses it as it loads
    assert pictures.available() and os.environ["MPLBACKEND"] == "agg"
