"""What a GPU run needs to be trusted, run here on PyTorch's CPU device (and on fakes where a
behaviour needs a GPU): the causal mask copied to the device once, TF32 off unless asked and
said, the model in 16 bits, the flags a device cannot take refused in one line."""
import dataclasses
import importlib.util
import os

import numpy as np
import pytest

import machine_speed
import model
import two_phases
from conftest import in_process, one_line
from harness.measuring import bench as b, devices, host, speeds

TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH, reason="PyTorch is not installed")
pytestmark = pytest.mark.xdist_group("torch")  # one process loads PyTorch (pytest.ini)
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
            "memory_bytes": 85e9, "driver": "CUDA 12.4", "dtype": "bfloat16", "tf32": "off",
            "env": {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}}
    line = host.device_line(card)
    assert line == (" | device torch:cuda: NVIDIA H100 80GB HBM3, 85.0 GB, CUDA 12.4, torch 2.13.0"
                     " | bfloat16, TF32 off | device env TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1")
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
    assert model.table_bytes(SIXTEEN) * 2 == model.table_bytes(model.TINY)


class Cached(devices.Device):
    def cache_bytes(self):
        return 50 * 2 ** 20  # an H100's L2


def test_a_gpus_forklift_table_is_8x_its_own_cache():
    fake = Cached("torch:cuda", np, np, device="cuda")
    assert speeds.side(10_000, fake) == 11_000  # 8 x 50 MiB = 419 MB: 10,240 wide at least
    assert speeds.sizes(True, fake)["size"] == 11_000 and speeds.sizes(True)["size"] == 4_000
    assert speeds.side(20_000, fake) == 20_000 and speeds.side(10_000) == 10_000
