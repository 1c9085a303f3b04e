"""What a GPU run needs to be trusted, run here on PyTorch's CPU device (and on fakes where a
behaviour needs a GPU): the causal mask copied to the device once, TF32 off unless asked and
said, the model in 16 bits, the flags a device cannot take refused in one line."""
import dataclasses
import importlib.util
import os

import numpy as np
import pytest

import machine_speed
import accounting
import model
import two_phases
from conftest import in_process, one_line
from harness.keeping import where
from harness.experiments.registry import TOLD
from harness.measuring import bench as b, devices, host, processes, speeds, worker

TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH, reason="PyTorch is not installed")
pytestmark = pytest.mark.xdist_group("torch")  # one process loads PyTorch (pyproject)
SIXTEEN = dataclasses.replace(model.TINY, dtype="bfloat16", note_dtype="bfloat16")


@needs_torch
def test_the_causal_mask_is_copied_to_the_device_once(monkeypatch):
    """A copy from the host waits for the device: made once per length, precision and device,
    not once per block of every floor of every trip."""
    on, cfg = devices.device("torch:cpu"), model.TINY
    monkeypatch.setattr(model, "MASKS", {})
    copies = []
    xp = on.xp
    real = xp.asarray
    monkeypatch.setattr(xp, "asarray", lambda *a, **k: copies.append(1) or real(*a, **k))
    floors = on.tables(model.floors(cfg))
    bench = b.Bench(cfg, floors, None, 1, on=on)
    x = b.tokens(cfg, 3, 1, on)
    copies.clear()
    for _ in range(3):  # three trips of 3 tokens: 2 floors each, one block a floor
        model.trip(cfg, floors, x, [(b.book(bench, 1, 3), 3)])
    assert len(copies) == 1 and list(model.MASKS) == [(3, "cpu", "torch.float32")]
    mask = model.MASKS[3, "cpu", "torch.float32"]
    np.testing.assert_array_equal(on.to_numpy(mask), model.causal(3))


@needs_torch
def test_tf32_is_off_unless_asked_whatever_the_environment_says(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")  # as NVIDIA's containers set it
    devices.tf32_setting("torch", False)
    assert "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" not in os.environ  # read at cuBLAS's first product
    off = devices.device("torch:cpu")
    assert torch.get_float32_matmul_precision() == "highest"
    assert not torch.backends.cuda.matmul.allow_tf32 and off.facts()["tf32"] == "off"
    on = devices.device("torch:cpu", "float32", True)
    assert torch.get_float32_matmul_precision() == "high"
    assert on.facts()["tf32"] == "on (no effect off an NVIDIA GPU)"
    devices.device.cache_clear()  # the next to ask for torch:cpu sets it off again
    devices.device("torch:cpu")
    assert torch.get_float32_matmul_precision() == "highest"


def test_the_machine_line_says_the_precision_tf32_and_what_the_environment_set():
    card = {"device": "torch:cuda", "name": "NVIDIA H100 80GB HBM3", "library": "torch 2.13.0",
            "memory_bytes": 85e9, "cuda": "CUDA runtime 12.4", "dtype": "bfloat16",
            "tf32": "off", "env": {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}}
    line = host.device_line(card)
    assert line == (" | device torch:cuda: NVIDIA H100 80GB HBM3, 85.0 GB, CUDA runtime 12.4, "
                    "torch 2.13.0 | bfloat16, TF32 off | device env "
                    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1")
    older = {**card, "driver": "CUDA 12.4"}  # an older run's name for the runtime's version
    del older["cuda"]
    assert ", CUDA 12.4, torch" in host.device_line(older)


def test_a_gpus_uuid_is_written_as_nvidia_smi_lists_it_whole_gpu_or_mig_slice():
    bare = "1f2e3d4c-5b6a-7988-a1b2-c3d4e5f60718"
    assert devices.uuid_of("NVIDIA H100 80GB HBM3", bare) == "GPU-" + bare
    assert devices.uuid_of("NVIDIA A100-SXM4-40GB MIG 1g.5gb", bare) == "MIG-" + bare
    assert devices.uuid_of("x", "MIG-" + bare) == "MIG-" + bare and devices.uuid_of("x", "") \
        is None
    assert devices.dashed(bare.replace("-", "")) == bare  # CuPy's bytes, as nvidia-smi's


@needs_torch
def test_float16s_norm_sums_its_squares_where_they_fit():
    import torch
    x = torch.full((768, 2), 20.0, dtype=torch.float16)
    x[::2] = -20  # 768 squares of 20: 307,200, past float16's 65,504
    np.testing.assert_allclose(model.norm(x.clone()).float().numpy(),
                               model.norm(x.float()).numpy(), atol=1e-3)
    assert devices.tf32_words(dataclasses.replace(devices.NUMPY, tf32=True)) == \
        "on (no effect off an NVIDIA GPU)"


@pytest.mark.parametrize("argv,flag,says", [
    (["--device", "numpy", "--dtype", "bfloat16"], "--dtype", "16 bits need --device torch"),
    (["--device", "torch:cpu", "--dtype", "fp8"], "--dtype", "computes float32 or bfloat16"),
    (["--tf32"], "--tf32", "needs --device torch:cuda or cupy:cuda"),
    (["--device", "torch:cpu", "--graphs"], "--graphs", "need --device torch:cuda, got torch:cpu"),
])
def test_what_a_device_cannot_do_is_one_line(argv, flag, says):
    if "torch" in " ".join(argv) and not TORCH:
        pytest.skip("PyTorch is not installed")
    one_line(in_process(two_phases.parse_args, "--quick", "--no-save", *argv), 2, flag, says)


def test_tf32_is_refused_on_numpy_by_every_script():
    one_line(in_process(machine_speed.parse_args, "--quick", "--no-save", "--tf32"), 2, "--tf32",
             "NVIDIA GPU")


@needs_torch
def test_the_model_in_bfloat16_keeps_its_contracts():
    """In 16 bits, as in float32: cached decode equals a full pass, batched equals alone; and
    its answers are float32's to bfloat16's rounding."""
    on = devices.device("torch:cpu", "bfloat16")
    floors = on.tables(model.floors(SIXTEEN))
    assert str(floors[0]["qkv"].dtype) == "torch.bfloat16"
    bench = b.Bench(SIXTEEN, floors, None, 1, on=on)
    x = b.tokens(SIXTEEN, 5, 1, on)
    whole = model.trip(SIXTEEN, floors, x, [(b.book(bench, 1, 5), 5)])
    book = b.book(bench, 1, 5)
    assert str(book["k"].dtype) == "torch.bfloat16"
    model.trip(SIXTEEN, floors, x[:, :4], [(book, 4)])
    last = model.trip(SIXTEEN, floors, x[:, 4:], [(book, 1)])
    np.testing.assert_allclose(on.to_numpy(last), on.to_numpy(whole)[:, 4:], rtol=2e-2,
                               atol=2e-2)  # bfloat16 keeps 8 bits of mantissa: 2^-8 = 0.4%
    f32 = model.trip(model.TINY, model.floors(model.TINY), b.tokens(model.TINY, 5, 1),
                     [(model.notebook(model.TINY, 1, 5), 5)])
    np.testing.assert_allclose(on.to_numpy(whole), f32, rtol=0.05, atol=0.05)
    with pytest.raises(TypeError, match="notebooks' precision"):  # float32 tokens, 16-bit notes
        model.trip(SIXTEEN, floors, devices.device("torch:cpu").asarray(
            np.ones((SIXTEEN.width, 1), np.float32)), [(b.book(bench, 1, 1), 1)])


def test_a_16_bit_model_is_runnable_and_counted_at_2_bytes():
    assert SIXTEEN.runnable and not dataclasses.replace(SIXTEEN, note_dtype="float32").runnable
    assert not dataclasses.replace(model.TINY, dtype="fp8", note_dtype="fp8").runnable
    assert accounting.table_bytes(SIXTEEN) * 2 == accounting.table_bytes(model.TINY)


class Cached(devices.Device):
    def cache_bytes(self):
        return 50 * 2 ** 20  # an H100's L2

    def facts(self):
        return {"device": self.name, "name": "NVIDIA H100 80GB HBM3", "library": "torch 0"}


def test_a_gpus_forklift_table_is_8x_its_own_cache(monkeypatch):
    fake = Cached("torch:cuda", np, np, device="cuda")
    assert speeds.side(10_000, fake) == 11_000  # 8 x 50 MiB = 419 MB: 10,240 wide at least
    assert speeds.sizes(True, fake)["size"] == 11_000 and speeds.sizes(True)["size"] == 4_000
    assert speeds.side(20_000, fake) == 20_000


@pytest.mark.parametrize("mib,wide", [(32, 10_000), (480, 23_000), (None, 10_000)])
def test_a_cpus_forklift_table_is_4x_its_last_level_cache(monkeypatch, mib, wide):
    monkeypatch.setattr(host, "last_level_cache_bytes", lambda: mib and mib * 2 ** 20)
    assert speeds.side(10_000) == wide  # STREAM's rule: 4 x 480 MiB is 2.0 GB, 23,000 wide
    assert speeds.side(4_000, quick=True) == 4_000  # a smoke run keeps its small table


def test_typing_on_a_gpu_is_judged_against_its_launches():
    """An empty trip (every launch of a typing step, almost no bytes) under half the step: the
    step is the forklift's; near the step: it is its launches. Judged on a GPU's run only."""
    from conftest import made
    from harness.judging import judge, rules
    from harness.keeping.records import col
    from test_claims import ROOFS, the_posts_figures
    says = "On a GPU, typing waits on the forklift, not on launching its work"

    def judged(empty_ms, device):
        found = the_posts_figures() + made("launches", [
            col("users", "users", "users", "d", key=True),
            col("empty trip", "empty trip ms", "ms", ".3f")], [{"users": 1,
                                                                "empty trip": empty_ms}])
        return [v for v in judge.verdicts(found, ROOFS, ("two_phases",), {
            "device": device, "model": "small", "notes": 512}, claims=TOLD.claims)
            if v[0].says == says]
    (_, here, verdict, why, _), = judged(3.0, "torch:cuda")  # the post's step: 37.5 ms
    assert verdict == rules.HOLDS and here == "an empty trip 3 ms of a 37.5 ms step"
    (_, _, verdict, why, _), = judged(30.0, "torch:cuda")
    assert verdict == rules.FAILS and "--graphs" in why
    assert judged(30.0, "torch:cpu") == [] and judged(30.0, "numpy") == []  # no GPU: not judged
    for gpu in ("cupy", "cupy:cuda", "torch:mps"):  # a library alone is its first device
        assert [v[2] for v in judged(3.0, gpu)] == [rules.HOLDS], gpu


# ---- a GPU's name, its folder, its datasheet row


class Named(devices.Device):
    """A fake GPU, named as its driver names it."""
    def facts(self):
        return {"device": self.name, "name": self.library, "library": "torch 0"}

    @property
    def gpu(self):
        return True


@pytest.mark.parametrize("said,preset,why", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm", None),
    ("nvidia  h100 80GB hbm3", "h100-sxm", None),  # case and spacing aside
    ("NVIDIA H100 NVL", "h100-nvl", None),  # each with a datasheet row of its own
    ("NVIDIA H800", "h800", None),
    ("NVIDIA H200 NVL", "h200-nvl", None),
    ("NVIDIA GH200 480GB", "gh200", None),
    ("NVIDIA GH200 144G HBM3e", "gh200-144gb", None),
    ("AMD Instinct MI325X", "mi325x", None),
    ("NVIDIA H800 PCIe", None, "is not h100-pcie: it is the H800 PCIe"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", None, "a MIG slice of NVIDIA H100 80GB HBM3"),
    ("NVIDIA A100 80GB PCIe", None, "is not a100-sxm"),
    ("Apple M3 Max, 40-core GPU", "m3-max", None),
    ("Apple M3 Max, 30-core GPU", None, "300 GB/s, not 400"),
    ("Apple M3 Max", None, "its GPU cores were not reported"),
    ("NVIDIA Tesla T4", None, "no preset names it"),
])
def test_a_gpu_meets_its_datasheet_by_its_exact_name(said, preset, why):
    from harness.predicting import presets
    card = {"device": "torch:cuda", "name": said}
    found = presets.preset_of(card)
    assert (found.name if found else None) == preset
    assert presets.identified(card) is None if why is None else why in presets.identified(card)
    assert presets.preset_of(card, "bfloat16") is None or \
        presets.preset_of(card, "bfloat16").dtype == "bfloat16"  # at the run's precision
    assert presets.identified({"device": "torch:cpu", "name": said}) is None  # no GPU: no row


def test_a_gpus_results_go_to_a_folder_of_its_own():
    import types
    gpu = Named("torch:cuda", "NVIDIA H100 80GB HBM3", np, device="cuda")
    args = types.SimpleNamespace(out="results", label=None, device="torch:cuda", on=gpu)
    assert where.folder_of(args) == os.path.join("results", "nvidia-h100-80gb-hbm3-torch-cuda")
    cpu = where.folder_of(types.SimpleNamespace(out="results", label=None, device="numpy"))
    assert where.folder_of(types.SimpleNamespace(out="results", label="mine", device="torch:cuda",
                                                 on=gpu)) == os.path.join("results", "mine")
    assert cpu != where.folder_of(args) and not cpu.endswith("torch-cuda")
    if TORCH:  # PyTorch on this CPU is another library's run, beside NumPy's, never over it
        assert where.folder_of(types.SimpleNamespace(
            out="results", label=None, device="torch:cpu")) == cpu + "-torch-cpu"
    sixteen = types.SimpleNamespace(out="results", label=None, device="torch:cuda", on=gpu,
                                    dtype="bfloat16", graphs=True, tf32=False)
    assert where.folder_of(sixteen) == os.path.join(  # each setting beside the others
        "results", "nvidia-h100-80gb-hbm3-torch-cuda-bfloat16-graphs")
    assert where.folder_of(types.SimpleNamespace(**{**vars(sixteen), "dtype": "float32",
                                                    "graphs": False, "tf32": True})) \
        == os.path.join("results", "nvidia-h100-80gb-hbm3-torch-cuda-tf32")



def test_two_gpus_of_one_name_keep_their_results_apart():
    import types
    folders = set()
    for uuid in ("GPU-5a1c0d2e-0000-0000-0000-00000000ab12",
                 "GPU-9e8f7a6b-0000-0000-0000-0000000cd34"):
        class Card(Named):
            def facts(self, uuid=uuid):
                return {**super().facts(), "uuid": uuid}
        gpu = Card("torch:cuda", "NVIDIA H100 80GB HBM3", np, device="cuda")
        folders.add(where.folder_of(types.SimpleNamespace(out="r", label=None,
                                                          device="torch:cuda", on=gpu)))
    assert folders == {os.path.join("r", "nvidia-h100-80gb-hbm3-ab12-torch-cuda"),
                       os.path.join("r", "nvidia-h100-80gb-hbm3-cd34-torch-cuda")}


# ---- CUDA graphs: a trip captured once, replayed each visit


class Graphs(devices.Device):
    """A fake device whose capture runs the trip once, as capturing does (its Python runs, the
    notebooks move), and whose replay counts: the device's work only, no Python."""
    def asarray(self, a, dtype="float32"):
        return a

    def mark(self):
        return devices.NUMPY.mark()

    def between(self, start, end):
        return end - start

    def capture(self, run, back):
        self.library.captured += 1
        run()
        back()
        return lambda: setattr(self.library, "replays", self.library.replays + 1)


def test_a_graphed_trip_is_captured_once_and_replays_move_the_notebooks():
    import types
    from harness.measuring import rounds
    fake = Graphs("torch:cuda", types.SimpleNamespace(captured=0, replays=0, __name__="fake"),
                  np, device="cuda")
    cfg = model.TINY
    bench = b.Bench(cfg, model.floors(cfg), None, 1, on=fake, graphs=True)
    first = b.read_question(dataclasses.replace(bench, graphs=False), 4, 1)
    x, segments = b.typing(bench, first, 2, 3)
    trial = b.trial(bench, "typing", x, segments, recorded=True)
    assert fake.library.captured == 1 and segments[0][0]["len"] == 4  # captured from the start
    for _ in range(3):
        rounds.visit(dataclasses.replace(trial, timer=None), watch=lambda: (lambda: None))
        assert segments[0][0]["len"] == 5  # each visit: put back, replayed, moved on by one
    assert fake.library.replays == 3
    parts = {}
    trial.recorded(parts)  # the breakdown's trip runs as itself: a graph has no parts to time
    assert fake.library.replays == 3 and parts["trip"] > 0


@pytest.mark.parametrize("replays, said", [(False, "FAIL"), (True, "PASS")])
def test_the_graph_check_fails_a_replay_that_does_nothing(replays, said):
    """Capturing runs the trip, which writes the notes: a replay that did nothing passed the
    check (difference 0). The notes capture wrote are wiped before the replay now."""
    import types
    from harness import self_check

    class Replaying(Graphs):
        def capture(self, run, back):
            run()  # (capture's own runs: the notes written)
            back()
            return (lambda: (run(), back())) if replays else (lambda: None)

        def sync(self):
            pass
    fake = Replaying("torch:cuda", types.SimpleNamespace(captured=0, replays=0, __name__="fake"),
                     np, device="cuda")
    cfg = model.TINY
    bench = b.Bench(cfg, model.floors(cfg), None, 1, on=fake)
    first = b.read_question(bench, 4, 1)
    name, verdict, figure, _ = self_check.graph_check(bench, first)
    assert (name, verdict) == ("graph replay", said), figure


def test_graphs_on_a_real_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: a CUDA graph's capture and replay are not run (the "
                    "fake device above checks their bookkeeping)")
    on, cfg = devices.device("torch:cuda"), model.TINY
    bench = b.Bench(cfg, on.tables(model.floors(cfg)), None, 1, on=on, graphs=True)
    first = b.read_question(dataclasses.replace(bench, graphs=False), 4, 1)
    x, segments = b.typing(bench, first, 2, 3)
    eager = b.copies(bench, first, 2, room=1)
    model.trip(cfg, bench.floors, x, [(eager, 1)])  # the same trip, eager
    replay = b.trip_of(bench, x, segments)  # (captured here: its runs write the notes)
    graphed = segments[0][0]
    graphed["k"][..., 4:] = float("nan")  # wiped, so that only the replay can write them
    graphed["v"][..., 4:, :] = float("nan")
    replay()
    on.sync()
    assert graphed["len"] == eager["len"] == 5
    for kind in ("k", "v"):  # the replay wrote the notes the eager trip wrote
        np.testing.assert_allclose(on.to_numpy(graphed[kind]), on.to_numpy(eager[kind]),
                                   rtol=1e-5, atol=1e-6)


# ---- what nvidia-smi says: the machine line's facts, and other work on the GPU


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """A fake nvidia-smi on PATH: one GPU at full clocks, and two processes computing on it,
    this test's own and another."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) echo "550.54.15, 1980, 1980, 2619, 700.00, 34, Disabled, Enabled, 0" ;;
  --query-compute-apps=*) echo "{os.getpid()}, GPU-abc, 1024"; echo "4242, GPU-abc, 20480" ;;
esac
""")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_the_machine_line_says_what_nvidia_smi_says(smi):
    from harness.measuring import nvidia
    facts = nvidia.facts("abc")
    assert facts == {"driver": "550.54.15", "sm_mhz": 1980, "max_sm_mhz": 1980,
                     "memory_mhz": 2619, "power_limit_w": 700, "celsius": 34, "mig": "Disabled",
                     "persistence": "Enabled", "busy_pct": 0}
    assert nvidia.words(facts) == ("driver 550.54.15, SM 1980 of 1980 MHz, power limit 700 W, "
                                   "34 C, persistence Enabled, MIG Disabled")
    assert "| driver 550.54.15, SM 1980 of 1980 MHz" in host.device_line(
        {"device": "torch:cuda", "name": "NVIDIA H100 80GB HBM3", "library": "torch 0",
         "smi": facts})


def test_other_work_on_the_gpu_is_named_and_ours_is_not(smi, monkeypatch):
    from harness.measuring import nvidia
    seen = {"4242"}  # a process of this PID namespace: another's work, seen
    real = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: p.startswith("/proc/") and p.split("/")[2]
                        in seen or real(p))
    assert nvidia.others("abc") == [(4242, 20480)]  # this process left out
    assert nvidia.others("xyz") == []  # another GPU's
    assert nvidia.busy_words(nvidia.others()) == \
        "other work on the GPU: 1 process (pid 4242, 20,480 MiB)"


def test_a_process_the_run_cannot_see_is_unknown_never_busy(smi, monkeypatch):
    """In a container the driver gives the host's PIDs: one this run cannot find among its own
    namespace's may be its own, or another container's; it is said, never counted as busy."""
    from harness import runner
    from harness.measuring import nvidia
    monkeypatch.setattr(os.path, "exists", lambda p: False if p == "/proc/4242" else True)
    found = nvidia.census("abc")
    assert found == {"others": [], "unseen": [(4242, 20480)]}
    fake = dataclasses.replace(devices.NUMPY, name="torch:cuda")
    monkeypatch.setattr(type(fake), "others", lambda self: nvidia.census("abc"))
    device = {}
    assert runner.gpu_busy(fake, device) == []  # not BUSY
    assert device["unseen"] == ("1 process on the GPU that this run cannot see (pid 4242, "
                                "20,480 MiB)")
    assert "other work unknown: 1 process" in host.device_line({"device": "torch:cuda",
                                                                **device})


def fake_smi(tmp_path, monkeypatch, busy_pct=0):
    """A fake nvidia-smi of an A100 with a MIG slice, a process of another PID namespace on it
    (listed, as nvidia-smi lists a slice's, under the whole GPU's UUID), utilization busy_pct."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"""#!/bin/sh
case "$1" in
  -L) echo "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-whole)"
      echo "  MIG 3g.40gb     Device  0: (UUID: MIG-slice)" ;;
  --query-gpu=*) echo "550.54.15, 1410, 1410, 1593, 400.00, 40, Enabled, Enabled, {busy_pct}" ;;
  --query-compute-apps=*) echo "4242, GPU-whole, 20480" ;;
esac
""")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_a_mig_slices_processes_are_read_under_the_whole_gpus_uuid(tmp_path, monkeypatch):
    """nvidia-smi names a slice's processes by the whole GPU's UUID: filtered by the slice's
    MIG- UUID, every one was dropped and other work on the slice went unseen."""
    from harness.measuring import nvidia
    fake_smi(tmp_path, monkeypatch)
    monkeypatch.setattr(os.path, "exists", lambda p: True)  # a process of this namespace
    assert nvidia.whole_gpu("MIG-slice") == "GPU-whole"
    assert nvidia.others("MIG-slice") == [(4242, 20480)]
    assert nvidia.others("GPU-other") == []


@pytest.mark.parametrize("busy_pct, busy", [(0, False), (87, True)])
def test_in_a_container_the_gpus_utilization_tells_other_work(tmp_path, monkeypatch, busy_pct,
                                                               busy):
    """In a container every host PID is unknown: BUSY was never raised. The GPU's utilization
    as the run starts, before its own work, says whether something else is at work."""
    from harness import runner
    from harness.measuring import nvidia
    fake_smi(tmp_path, monkeypatch, busy_pct)
    monkeypatch.setattr(os.path, "exists", lambda p: False if p == "/proc/4242" else True)
    fake = dataclasses.replace(devices.NUMPY, name="torch:cuda")
    monkeypatch.setattr(type(fake), "others", lambda self: nvidia.census("GPU-whole"))
    device = {}
    said = runner.gpu_busy(fake, device)
    assert bool(said) == busy and ("unseen" in device) == (not busy)
    if busy:
        assert said[0].startswith("the GPU 87% busy as the run starts, with 1 process")


def test_without_nvidia_smi_nothing_is_said(monkeypatch, tmp_path):
    from harness.measuring import nvidia
    monkeypatch.setenv("PATH", str(tmp_path))
    assert nvidia.facts() is None and nvidia.others() is None and nvidia.words(None) == ""
    assert devices.NUMPY.others() is None and devices.NUMPY.memory_used() is None


# ---- the scripts on PyTorch's CPU device: what a GPU run adds, printed and saved


@needs_torch
def test_a_device_run_prints_the_empty_trip_under_the_typing_table(tmp_path, small_is_tiny):
    import json
    from harness.keeping import records
    r = in_process(two_phases.main, "--quick", "--runs", "2", "--experiments", "decode",
                   "--users", "1", "2", "--notes", "2", "--forklift", "10", "--workbench", "100",
                   "--device", "torch:cpu", "--out", str(tmp_path), "--label", "dev")
    assert r.returncode == 0, r.stderr
    typing, launches = (r.stdout.index(t) for t in ("Phase 2, typing", "Launching a typing"))
    assert typing < launches and "launched one after another (eager" in r.stdout
    data = json.loads((tmp_path / "dev" / "two_phases.quick.json").read_text())
    (keys, row), = records.rows(data["records"], "launches").items()
    step = records.find(data["records"], "decode", "step", users=1)["value"]
    assert dict(keys) == {"users": 1} and row["step"] == pytest.approx(step)
    assert row["share"] == pytest.approx(row["empty trip"] / step, rel=0.5)  # middles: near
    assert data["settings"]["tf32"] is False and data["machine"]["device"]["tf32"] == "off"


@needs_torch
def test_machine_speed_on_a_device_adds_the_workbench_at_16_bits():
    r = in_process(machine_speed.main, "--quick", "--runs", "2", "--size", "500", "--matmul",
                   "128", "--device", "torch:cpu", "--no-save")
    assert r.returncode == 0, r.stderr
    assert "The workbench at 16 bits" in r.stdout and "bfloat16" in r.stdout
    r = in_process(machine_speed.main, "--quick", "--runs", "2", "--size", "500", "--matmul",
                   "128", "--no-save")
    assert "16 bits" not in r.stdout  # NumPy's: float32 only, as the post measured


@needs_torch
def test_a_sample_on_a_device_is_a_burst_sized_once_warm():
    from harness.measuring import rounds
    on, calls = devices.device("torch:cpu"), []
    x = on.asarray(np.ones(1000, np.float32))
    trial = rounds.calibrate(rounds.Trial("t", [lambda: calls.append(1) or x * x], timer=on),
                             0.005)
    assert trial.number > 1 and trial.timer is on  # a short call: many a sample
    assert len(calls) == 2  # one warm call, then the one that sizes the burst


# ---- a GPU touched by the workers alone, and its library's failures in one line


@needs_torch
def test_checking_the_flags_and_describing_the_device_allocate_nothing(monkeypatch):
    """Making an array would open a context on the GPU in the process that checks the flags,
    held for the run: a GPU in exclusive-process mode would then refuse every worker."""
    import torch

    def refused(*a, **k):
        raise AssertionError("an array was made while the flags were checked")
    for make in ("zeros", "ones", "empty", "tensor", "asarray", "full"):
        monkeypatch.setattr(torch, make, refused)
    devices.device.cache_clear()
    try:
        on = devices.device("torch:cpu", "bfloat16")
        assert on.xp.__name__ == "array_api_compat.torch" and on.facts()["dtype"] == "bfloat16"
    finally:
        devices.device.cache_clear()  # (the next test's device makes arrays as ever)


@pytest.mark.parametrize("error,says", [
    ("CUDA error: out of memory", "out of memory: torch:cpu cannot hold the model"),
    ("CUDA error: no kernel image is available for execution on the device",
     "no kernel image for this GPU"),
    ("The NVIDIA driver on your system is too old (found version 11040). CUDA driver version is "
     "insufficient for CUDA runtime version", "the NVIDIA driver is too old"),
    ("CUDA error: all CUDA-capable devices are busy or unavailable", "busy or unavailable"),
    ("CUDA error: an illegal memory access was encountered", "torch:cpu failed: CUDA error")])
@needs_torch
def test_a_gpu_librarys_error_is_its_cause_in_one_line_and_exit_2(monkeypatch, error, says):
    from harness import model_run
    on = devices.device("torch:cpu")
    assert says in devices.failure(RuntimeError(error), on)
    assert devices.failure(RuntimeError("shapes cannot be multiplied"), on) is None  # a bug
    assert devices.failure(RuntimeError(error), devices.NUMPY) is None

    def fails(*a, **k):
        raise RuntimeError(error)
    monkeypatch.setattr(model_run, "measure_here", fails)
    r = in_process(two_phases.main, "--device", "torch:cpu", "--quick", "--no-save",
                   "--experiments", "prefill")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: --device torch:cpu: ")
    assert says in r.stderr.strip().splitlines()[-1]


def test_a_worker_whose_device_failed_stops_the_run_with_its_cause(monkeypatch):
    import json
    import subprocess
    said = worker.MARK + json.dumps({worker.FAILED: "out of memory: torch:cuda cannot"})
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, worker.DEVICE_EXIT, stdout=said))
    with pytest.raises(processes.DeviceFailed, match="out of memory"):
        processes.spawn("two_phases.py", worker.Job((0,), threads=1))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, worker.DEVICE_EXIT, stdout="no result"))
    with pytest.raises(processes.WorkerFailed, match="exit 3"):  # no cause given: as any failure
        processes.spawn("two_phases.py", worker.Job((0,), threads=1))


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_the_devices_answer_is_checked_against_numpys_before_anything_is_timed(dtype,
                                                                                monkeypatch):
    from harness import model_run
    on = devices.device("torch:cpu", dtype)
    cfg = model.gpt2("check", 4, 384, 6)  # wide enough that its floors move the answer
    cfg = dataclasses.replace(cfg, dtype=dtype, note_dtype=dtype)
    floors = on.tables(model.floors(cfg, 7))
    bench = b.Bench(cfg, floors, None, 1, on=on)
    model_run.answered(bench, 7)  # its own answer: passes
    table = b.device_table  # a library whose products are wrong on its device, on the path
    monkeypatch.setattr(b, "device_table", lambda w, x: table(w, x) * 1.5)  # the run times
    with pytest.raises(devices.WrongAnswer, match=f"more than {dtype}'s") as caught:
        model_run.answered(bench, 7)
    said = devices.failure(caught.value, on)
    assert said.startswith("its model's answer differs from NumPy's float32 by ")
    assert "\n" not in said


@needs_torch
@pytest.mark.parametrize("wrong_at, said", [(1, "a token typed after it"),
                                            (128, "a 128-token question")])
def test_a_device_wrong_only_in_typing_or_a_long_question_is_caught(monkeypatch, wrong_at, said):
    """The answer was checked on a 4-token question alone: a device wrong when it types, or on
    a long question, was timed unseen."""
    from harness import model_run
    on, cfg = devices.device("torch:cpu", "float32"), model.gpt2("check", 2, 128, 2)
    bench = b.Bench(cfg, on.tables(model.floors(cfg, 7)), None, 1, on=on)
    table = b.device_table
    monkeypatch.setattr(b, "device_table", lambda w, x: table(w, x) * (
        1.5 if x.shape[1] == wrong_at else 1))
    with pytest.raises(devices.WrongAnswer, match=said):
        model_run.answered(bench, 7)


@pytest.mark.parametrize("name,side", [("NVIDIA H100 80GB HBM3", 8192),  # 1.1 ms in bfloat16
                                       ("NVIDIA B200", 11264), ("NVIDIA A100-SXM4-80GB", 6144),
                                       ("A GPU no preset names", speeds.GPU_MATMUL)])
def test_a_gpus_workbench_call_lasts_a_millisecond_at_its_published_peak(name, side):
    class Sized(Named):
        def cache_bytes(self):
            return 50 * 2 ** 20
    gpu = Sized("torch:cuda", name, np, device="cuda")
    for quick in (True, False):  # a smoke run's too: a shorter call times the host
        assert speeds.sizes(quick, gpu)["matmul"] == side
    assert speeds.bench_side(20_000, gpu) == 20_000  # a wider one asked for stays
    assert speeds.sizes(True)["matmul"] == speeds.QUICK["matmul"]  # a CPU's as it was
    peak = {"NVIDIA H100 80GB HBM3": 989.5e12, "NVIDIA B200": 2250e12,
            "NVIDIA A100-SXM4-80GB": 312e12}.get(name)
    if peak:
        assert 2 * side ** 3 / peak >= speeds.CALL_S > 2 * (side - 1024) ** 3 / peak


# ---- the self-check a user runs once on a device


@needs_torch
def test_the_self_check_says_pass_fail_or_skip_for_each_check_and_fails_a_wrong_library(
        monkeypatch, tmp_path, small_is_tiny):
    argv = ("--device", "torch:cpu", "--self-check", "--quick", "--notes", "4", "--out",
            str(tmp_path / "out"))
    r = in_process(two_phases.main, *argv)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("self-check of torch:cpu: | device torch:cpu: this CPU")
    results = {line[:22].strip(): line[22:].split()[0] for line in lines[2:-1]}
    assert set(results.values()) <= {"PASS", "FAIL", "SKIP", "INFO"} and len(results) == 9
    assert r.returncode == (1 if "FAIL" in results.values() else 0)  # (timings: this machine's)
    assert [results[f"answer in {d}"] for d in ("float32", "bfloat16", "float16")] == [
        "PASS"] * 3
    assert results["graph replay"] == "SKIP" and results["workbench at 16 bits"] == "SKIP"
    assert lines[-1].startswith("(9 checks: ") and not (tmp_path / "out").exists()  # no save
    table = b.device_table  # a library whose products are wrong on its device alone
    monkeypatch.setattr(b, "device_table", lambda w, x: table(w, x) * 1.5)
    bad = in_process(two_phases.main, *argv)
    assert bad.returncode == 1 and "answer in float32     FAIL" in bad.stdout
    assert "answer in float32" in bad.stdout.splitlines()[-1]  # named among the failures
    one_line(in_process(two_phases.main, "--self-check"), 2, "--self-check",
             "another library's device")


@pytest.mark.parametrize("step_ms, empty_ms, said", [
    (1.05, 0.95, "PASS"),  # an H100's GPT-2 small step: 0.11 ms of bytes under 500 launches
    (40.0, 3.0, "PASS"),  # a CPU's: its bytes
    (1.0, 2.0, "FAIL")])  # an empty trip slower than the step it is part of: a timing fault
def test_the_self_checks_launch_check_passes_a_healthy_gpu_and_fails_a_fault(
        monkeypatch, step_ms, empty_ms, said):
    """On every real GPU the empty trip was over half of GPT-2 small's step: FAIL, exit 1, a
    healthy device's self-check failing. Launch-bound is said, not failed; a fault still is."""
    from harness import self_check
    timed = iter([step_ms / 1e3, empty_ms / 1e3])
    monkeypatch.setattr(self_check, "seconds", lambda on, call: next(timed))
    rows = {r[0]: r for r in self_check.typing(devices.NUMPY, model.TINY, 4, 3.35e12, 989e12)}
    assert rows["empty trip"][1] == said, rows["empty trip"]
    assert ("launch-bound" in rows["empty trip"][2]) == (empty_ms >= 0.5 * step_ms)


def test_the_gpus_clock_is_read_under_the_work_and_a_throttled_one_is_said(smi):
    done = processes.Measurements()
    for clock in ([1980, 1980], [1410, 1980], [1755, 1980], None):  # each process's, at its end
        done.take({"visits": {}, "gpu_clock": clock})
    assert done.gpu_clock == [1410, 1980]  # the lowest any process ended at
    assert processes.throttled(done.gpu_clock).startswith("the GPU's SM clock was 1410 of its 1980")
    assert processes.throttled([1900, 1980]) == "" and processes.throttled(None) == ""
    class Held(Named):
        def memory_used(self):
            return 2 ** 30
    said = worker.on_the_device(Held("torch:cuda", "NVIDIA H100 80GB HBM3", np, device="cuda"))
    #      nvidia-smi read as the rounds end: the fake's 1980 of 1980
    assert said["gpu_clock"] == [1980, 1980]


def test_the_clock_is_read_while_the_work_runs_not_once_it_is_idle(monkeypatch):
    """Read as the rounds ended, an idle GPU had already let its clock drop: a throttle warned
    of where there was none. Read while the process measures, the clock is the work's."""
    import time
    from harness.measuring import nvidia
    working = []
    monkeypatch.setattr(nvidia, "facts", lambda uuid=None: {
        "sm_mhz": 1980 if working else 1410, "max_sm_mhz": 1980})  # idle: dropped
    monkeypatch.setattr(worker, "CLOCK_EVERY_S", 0.02)

    class Held(Named):
        def memory_used(self):
            return 2 ** 30

    def work():
        working.append(True)
        time.sleep(0.3)
        working.clear()
        return {"visits": {}}
    on = Held("torch:cuda", "NVIDIA H100 80GB HBM3", np, device="cuda")
    result, clocks = worker.under_work(on, work)
    assert result == {"visits": {}} and clocks and set(clocks) == {1980}
    said = worker.on_the_device(on, clocks)
    assert said["gpu_clock"] == [1980, 1980] and not processes.throttled(said["gpu_clock"])
    assert worker.on_the_device(on)["gpu_clock"] == [1410, 1980]  # (as it was read before)


# ---- on a GPU, typing on GPT-2 xl too: the model whose step outlasts its launches


@needs_torch
def test_on_a_gpu_typing_runs_on_gpt2_xl_too_and_the_launch_claim_is_judged_on_it(
        monkeypatch, tmp_path, small_is_tiny):
    import json
    from harness.experiments import launches, wide
    from harness.keeping import records
    monkeypatch.setattr(wide.devices, "on_a_gpu", lambda name: str(name).startswith("torch"))
    monkeypatch.setitem(model.SIZES, "xl", model.gpt2("xl", 2, 128, 4))  # xl's shape, smaller
    r = in_process(two_phases.main, "--device", "torch:cpu", "--quick", "--runs", "2",
                   "--experiments", "decode", "wide", "--users", "1", "2", "--notes", "4",
                   "--forklift", "10", "--workbench", "100", "--out", str(tmp_path),
                   "--label", "w")
    assert r.returncode == 0, r.stderr
    assert r.stdout.index("Phase 2, typing") < r.stdout.index("Typing on GPT-2 xl") \
        < r.stdout.index("Launching GPT-2 xl's typing step")
    found = json.loads((tmp_path / "w" / "two_phases.quick.json").read_text())["records"]
    xl = {r["keys"]["users"]: r["value"] for r in found if r["experiment"] == "decode xl"
          and r["figure"] == "x limit"}
    assert sorted(xl) == [1, 2] and all(v > 0 for v in xl.values())
    step = records.find(found, "decode xl", "step", users=1)["value"]
    limit = accounting.limit(wide.config(model.TINY), [(4, 1)], 10e9, 100e9)[0] * 1e3
    assert records.find(found, "decode xl", "limit", users=1)["value"] == pytest.approx(limit)
    assert records.find(found, "decode xl", "x limit", users=1)["value"] == pytest.approx(
        step / limit, rel=1e-6)  # each row against its own model's limit
    here, _ = launches.not_launches(found, None)
    assert here.startswith("GPT-2 xl: an empty trip ")  # judged on the wide model
    small = [r for r in found if r["experiment"] not in ("decode xl", launches.WIDE)]
    assert not launches.not_launches(small, None)[0].startswith("GPT-2 xl")  # else the run's
    one_line(in_process(two_phases.parse_args, "--experiments", "wide", "--quick"), 2,
             "--experiments", "on a GPU only")  # (the real test: NumPy is no GPU)


def test_the_host_is_asked_for_what_the_host_holds_on_a_gpu_run(monkeypatch):
    """A GPU run asked the host for the GPU's need (about 36 GB of a container that needs
    about 8): the host holds each model's float32 tables, made before they go to the GPU."""
    from harness import flags, model_run
    args = two_phases.parse_args([])
    gpu = Named("torch:cuda", "NVIDIA H100 80GB HBM3", np, device="cuda")
    monkeypatch.setattr(devices, "device", lambda name, *a, **k: gpu if name != "numpy"
                        else devices.NUMPY)
    args = args.replace(device="torch:cuda")
    small, xl = (accounting.held_bytes(model.SIZES[n]) for n in ("small", "xl"))
    assert model_run.host_bytes(two_phases.EXPERIMENTS, args) == small + xl  # wide's xl too
    assert model_run.host_bytes(two_phases.EXPERIMENTS, args.replace(device="numpy")) is None
    monkeypatch.setattr(host, "memory_room", lambda: (8e9, "available"))
    p = two_phases.build_parser()
    flags.need_memory(p, 36e9, "this", "--x", "numpy", host_bytes=small + xl)  # fits the host
    with pytest.raises(SystemExit):
        flags.need_memory(p, 36e9, "this", "--x", "numpy")  # the GPU's need, asked of the host
