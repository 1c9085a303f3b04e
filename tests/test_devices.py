"""The same scripts on another array library's device: --device picks it (NumPy stays the
default), refuses in one line what is not here, and every timed region waits for the device.
Here PyTorch on this CPU stands in for a GPU; a test that needs a GPU skips without one."""
import dataclasses
import importlib.util
import json
import types

import numpy as np
import pytest

import cube_bug
import machine_speed
import accounting
import model
import two_phases
from conftest import in_process, one_line
from harness import model_run
from harness.experiments.registry import TOLD
from harness.measuring import bench as b, devices, rounds

TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH, reason="PyTorch is not installed")
pytestmark = pytest.mark.xdist_group("torch")  # one process loads PyTorch (pyproject)


class Recorder:
    """A fake PyTorch whose CUDA events record what the device is given, in order: each event's
    record, each wait for one; an event's time is its place in that order, in milliseconds."""
    __name__ = "torch"
    __version__ = "0"

    def __init__(self):
        self.calls = []
        self.cuda = types.SimpleNamespace(Event=lambda enable_timing: Event(self.calls),
                                          synchronize=lambda device: self.calls.append("sync"))


class Event:
    def __init__(self, calls):
        self.calls, self.at = calls, None

    def record(self):
        self.at = len(self.calls)
        self.calls.append("record")

    def synchronize(self):
        self.calls.append("wait")

    def elapsed_time(self, end):
        return float(end.at - self.at)


class FakeGpu(devices.Device):
    def asarray(self, a, dtype="float32"):
        return a  # NumPy's arrays stand in for the device's


def fake_gpu():
    return FakeGpu("torch:cuda", Recorder(), np, types.SimpleNamespace(type="cuda"))


def test_a_sample_is_a_burst_between_two_events_with_one_wait():
    """On an NVIDIA GPU a sample's calls run between two of the device's events: no wait for
    the device between them (a GPU runs ahead of Python), one at the end, to read the time."""
    fake = fake_gpu()
    work = lambda: fake.library.calls.append("work")  # noqa: E731
    seconds, _ = rounds.visit(rounds.Trial("burst", [work], number=4, timer=fake),
                              watch=lambda: (lambda: None))
    assert fake.library.calls == ["record", "work", "work", "work", "work", "record", "wait"]
    assert seconds == [pytest.approx(5 / 1e3 / 4)]  # the events' 5 ms apart, per call
    assert devices.NUMPY.mark() <= devices.NUMPY.mark()  # NumPy's: this CPU's clock


def test_a_trip_on_a_gpu_marks_each_part_and_waits_only_once_done(monkeypatch):
    """The breakdown on a GPU: each part's two ends are events the device records as it gets
    there; the times are read once the trip is done, so no part waits for the device."""
    fake, cfg = fake_gpu(), model.TINY
    bench = b.Bench(cfg, model.floors(cfg), None, 1, on=fake)
    monkeypatch.setattr(b, "book", lambda bench, users, cap: model.notebook(cfg, users, cap))
    x, book = b.tokens(cfg, 3, 1, fake), b.book(bench, 1, 3)
    watch = {}
    b.trip_of(bench, x, [(book, 3)], watch)()
    pieces = cfg.layers * (4 + 2 + 1 + 1 + 2)  # a floor's tables, norms, attention, mlp, adds
    calls = fake.library.calls
    first_wait = calls.index("wait")
    assert calls[:first_wait] == ["record"] * (2 * pieces + 2)  # every mark, no wait among them
    assert set(calls[first_wait:]) == {"wait"} and "sync" not in calls
    assert watch["trip"] == (2 * pieces + 1) / 1e3  # the trip's first mark to its last
    assert watch["trip"] >= sum(watch[p] for p in b.PARTS[:-1])


@pytest.mark.parametrize("flag,says", [
    ("jax", "must be numpy, torch:cpu"), ("torch:tpu", "must be numpy, torch:cpu"),
    ("cupy:cuda", "cupy"), ("torch:cuda", "cuda")])
def test_a_device_that_is_not_here_is_one_line(flag, says):
    if flag == "cupy:cuda" and importlib.util.find_spec("cupy"):
        pytest.skip("CuPy is installed here")
    if flag == "torch:cuda" and (not TORCH or __import__("torch").cuda.is_available()):
        pytest.skip("needs PyTorch without a CUDA device")
    one_line(in_process(two_phases.parse_args, "--quick", "--device", flag, "--no-save"), 2,
             "--device", says)


@pytest.mark.parametrize("flag,kind,gpu", [
    ("numpy", "cpu", False), ("torch", "cpu", False), ("torch:mps", "mps", True),
    ("cupy", "cuda", True), ("cupy:cuda", "cuda", True), ("jax", None, False)])
def test_whether_a_device_is_a_gpu_is_read_from_its_name_alone(flag, kind, gpu):
    """The same answer the Device gives, for the judges and every reader of saved records,
    without importing a GPU library or touching a device ('cupy' alone is its CUDA device)."""
    assert devices.on_a_gpu(flag) is gpu
    if kind is None:
        with pytest.raises(ValueError, match="must be numpy"):
            devices.named(flag)
    else:
        assert devices.named(flag)[1] == kind


def test_reading_the_flags_imports_no_gpu_library_and_sets_nothing():
    """--device is a name while the flags are read: its library is loaded, in the precision and
    TF32 asked, only once every flag is read and checked."""
    from conftest import python
    r = python("import os, sys\n"
               "from harness import flags\n"
               "p = flags.parser('demo', runs=1, prog='demo.py')\n"
               "before = dict(os.environ)\n"
               "args = p.parse_args(['--device', 'torch:cpu', '--no-save'])\n"
               "print(args.device, 'torch' in sys.modules, dict(os.environ) == before)")
    assert r.returncode == 0 and r.stdout.split() == ["torch:cpu", "False", "True"], r.stderr


def test_a_prediction_runs_on_no_device():
    one_line(in_process(two_phases.parse_args, "--predict", "h100-sxm", "--device", "torch:cpu",
                        "--no-save"), 2, "--device", "runs nothing")


@needs_torch
def test_two_phases_prints_every_table_from_the_torch_path(tmp_path, monkeypatch):
    """Reading, and the collision (whose typers are a question read, then copied to each user,
    as decode's and depth's are), their check and breakdown, as NumPy's run prints them."""
    from test_beyond import blank_floors
    monkeypatch.setattr(model, "floors", blank_floors([]))  # no figure here rests on the numbers
    monkeypatch.setitem(model.SIZES, "small", dataclasses.replace(model.SIZES["small"],
                                                                  layers=2))  # nor its floors
    done = {}
    for where in ("numpy", "torch:cpu"):
        r = in_process(two_phases.main, "--quick", "--runs", "1", "--prompts", "1", "--users",
                       "1", "--notes", "2", "--question", "4", "--chunk", "2", "--typers", "1",
                       "--depths", "0", "--forklift", "10", "--workbench", "100", "--no-plot",
                       "--attention", "einsum", "--blocks", "off", "--device", where,
                       "--threads", "1", "--experiments", "prefill", "collision",
                       "--out", str(tmp_path), "--label", where[:5])
        assert r.returncode == 0, r.stderr
        done[where] = json.loads((tmp_path / where[:5] / "two_phases.quick.json").read_text())
    device = done["torch:cpu"]["machine"]["device"]
    assert device["device"] == "torch:cpu" and device["library"].startswith("torch ")
    assert done["numpy"]["machine"]["device"] is None  # NumPy's run: the line as ever
    figures = [{(r["experiment"], json.dumps(r["keys"]), r["figure"]) for r in run["records"]
                if r["figure"] != "attention x limit"}  # kept where attention is more than a
               for run in done.values()]  # sliver of its trip: a timing decides
    assert figures[0] == figures[1]  # every table, every row, every figure, as NumPy's
    assert r.stdout.startswith("machine: ") and "| device torch:cpu: this CPU, through PyTorch" \
        in r.stdout.splitlines()[0]
    assert "paths: torch:cpu's own products, one call each" in r.stdout


@needs_torch
def test_machine_speed_and_cube_bug_run_on_the_torch_path():
    r = in_process(machine_speed.main, "--quick", "--runs", "1", "--size", "500", "--matmul",
                   "128", "--device", "torch:cpu", "--no-save")
    assert r.returncode == 0 and "device torch:cpu" in r.stdout and "memory speed" in r.stdout
    r = in_process(cube_bug.main, "--quick", "--runs", "1", "--tokens", "4", "--no-in-model",
                   "--device", "torch:cpu", "--no-save")
    assert r.returncode == 0 and "torch:cpu, torch" in r.stdout and "all negative" in r.stdout


def test_a_gpu_device_when_there_is_one():
    if not TORCH:
        pytest.skip("PyTorch is not installed")
    torch = __import__("torch")
    kind = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() \
        else None
    if kind is None:
        pytest.skip("no GPU here")
    on, cfg = devices.device(f"torch:{kind}"), model.TINY
    assert on.facts()["device"] == f"torch:{kind}"
    floors, x = model.floors(cfg), b.tokens(cfg, 3, 1)
    there = [{k: on.asarray(t) for k, t in p.items()} for p in floors]
    theirs = model.trip(cfg, there, on.asarray(x), [(model.notebook(cfg, 1, 3, there[0]["qkv"]),
                                                     3)])
    np.testing.assert_allclose(on.to_numpy(theirs), model.trip(
        cfg, floors, x, [(model.notebook(cfg, 1, 3), 3)]), rtol=1e-5, atol=1e-5)


def test_a_gpu_run_is_held_against_its_presets_datasheet():
    """A run on a GPU the presets know sets its rows beside the limits of that GPU's datasheet,
    as --predict gives them: here rows timed at 2 ms and 30 ms on a device said to be an RTX
    4090."""
    from harness.judging import check
    from harness.keeping import records
    from harness.measuring import timing
    from harness.predicting import plans, presets
    from harness.showing import sheets
    card = {"device": "torch:cuda", "name": "NVIDIA GeForce RTX 4090", "library": "torch 0"}
    preset = presets.preset_of(card)
    assert preset.name == "rtx-4090" and preset.dtype == "float32"
    assert presets.preset_of({"name": "this CPU, through PyTorch"}) is None
    cfg = model.SIZES["small"]
    rows = [plans.Row({"prompt": 1}, "1 token", [[(0, 1)]]),
            plans.Row({"users": 4}, "4 users", [[(512, 1)] * 4])]
    checked = [(name, plans.Outcome(row, {"time": timing.taken([s], "middle", name)}))
               for name, row, s in (("prefill", rows[0], 2e-3), ("decode", rows[1], 30e-3))]
    found = records.from_rows(check.datasheet_figures(cfg, checked, preset), {})
    limit = {r["keys"]["experiment"]: r["value"] for r in found if r["figure"] == "datasheet"}
    assert limit["prefill"] == pytest.approx(accounting.bytes_read(cfg, [(0, 1)]) / 1008e9 * 1e3)
    #   one token's read: the tables at the card's 1,008 GB/s
    ratio = {r["keys"]["experiment"]: r["value"] for r in found if r["figure"] == "x datasheet"}
    assert ratio["decode"] == pytest.approx(30 / (accounting.bytes_read(cfg, [(512, 1)] * 4)
                                                  / 1008e9 * 1e3))
    text = sheets.datasheet(found, checked, preset)[0]
    assert "what --predict rtx-4090:float32 says" in text.settings


def test_a_gpu_runs_claims_include_the_posts_gpu_claims_at_its_measured_speeds():
    import argparse
    from harness.judging import judge
    from harness.predicting import presets
    cfg, card = model.SIZES["small"], presets.target("h100-sxm", "float32", None, "results")
    for device, judged in (("torch:cuda", True), ("torch:mps", True), ("torch:cpu", False),
                           ("numpy", False)):
        args = argparse.Namespace(device=device, notes=512, typers=8, question=1024,
                                  out="results")
        settings = {"device": device}
        found = model_run.turning_here(cfg, args, card.roofs, settings)
        assert [r["keys"]["name"] for r in found if r["figure"] == "balance"] == [device, "post"]
        said = judge.verdicts(found, card.roofs, ("two_phases",), settings, claims=TOLD.claims)
        gpu = [(c, v) for c, _, v, *_ in said if c.predicted]
        assert bool(gpu) == judged, device
        assert all(not v.startswith("predicted") for _, v in gpu)  # measured, not predicted
