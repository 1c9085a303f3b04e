"""The kernels are as wide as the CPU's vector registers: 16 floats with AVX-512, 8 with AVX2, 4
with SSE or ARM's NEON. Every width compiles here, each for a CPU of its kind named to Numba
(tests/widths.py in a fresh process), the 4-lane tiles for an ARM core too; those this CPU can
run give NumPy's answers on the check's tiny shapes (its own width: every kernel, at start and
in test_compiled_soft.py)."""
import json
import os
import platform
import subprocess
import sys

import pytest

from conftest import NUMBA, ROOT

WIDTHS = {  # a CPU of each width, as Numba names it: (its name, its features, the lanes)
    "AVX-512": ("skylake-avx512", "+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512dq,+avx512vl", 16),
    "AVX2": ("haswell", "+avx,+avx2,+fma,-avx512f", 8),
    "SSE": ("x86-64", "+sse2,-avx,-avx2,-avx512f", 4)}
ARM = ("aarch64-unknown-linux-gnu", "neoverse-n1")  # the 4 lanes' tiles compiled for it too
REGISTERS = {16: "zmm", 8: "ymm", 4: "xmm"}  # x86's vector registers of each width


def runs_here(features):
    """Whether this CPU can run code compiled with these features (each + one is its own)."""
    from llvmlite import binding
    here = {f[1:] for f in binding.get_host_cpu_features().flatten().split(",")
            if f.startswith("+")}
    return {f[1:] for f in features.split(",") if f.startswith("+")} <= here


@pytest.mark.skipif(not NUMBA or platform.machine() not in ("x86_64", "AMD64"),
                    reason="needs Numba on an x86-64 CPU (its JIT compiles for the host's kind)")
def test_every_width_compiles_and_those_this_cpu_runs_give_numpys_answers(tmp_path):
    from engine import kernels
    asked = {kind: (name, features, lanes) for kind, (name, features, lanes) in WIDTHS.items()
             if lanes != kernels.LANES}  # (this CPU's own width: checked in every process)
    started = {}
    for kind, (name, features, lanes) in asked.items():
        run = runs_here(features)
        env = {**os.environ, "NUMBA_CPU_NAME": name, "NUMBA_CPU_FEATURES": features,
               "NUMBA_CACHE_DIR": str(tmp_path / kind)}  # (compiled afresh, kept apart)
        started[kind] = run, subprocess.Popen(
            [sys.executable, os.path.join("tests", "widths.py"), "run" if run else "compile",
             *(ARM if lanes == 4 else ())], cwd=ROOT, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for kind, (run, process) in started.items():
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
        said = json.loads(out.strip().splitlines()[-1])
        lanes = asked[kind][2]
        assert said["lanes"] == lanes, (kind, said)
        assert said["registers"] == [REGISTERS[lanes]] * 2, (kind, said)  # tiles and question
        assert said["wrong"] == ([] if run else None), (kind, said)
        if lanes == 4:
            assert said["other"] == ["4s"], said  # NEON's multiply-adds on 4 floats
