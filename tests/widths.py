"""The kernels compiled for the CPU that NUMBA_CPU_NAME and NUMBA_CPU_FEATURES name (a test runs
this in a fresh process for each width): run, where this CPU can run that one's code, their
answers against NumPy's on the check's tiny shapes; else only compiled, never run. With a triple
and a CPU after it, the table products' tiles are also compiled, from the same IR, for that
other architecture (an object file, never run).

    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=+avx,+avx2,+fma,-avx512f python tests/widths.py run

Prints one JSON line: {"lanes", "wrong" (the kernels whose answers differ; null where not
run), "registers" (the widest vector registers in the tiles' and the question's code),
"other" (the other architecture's vector multiply-adds, where asked)}."""
import contextlib
import io
import json
import os
import re
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numba  # noqa: E402
from numba.core import config  # noqa: E402

from engine import compiled  # noqa: E402

TILED = "(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], int64, int64, " \
        "UniTuple(int64, 4))"  # rows_tiled's arguments: w, panels, last, out, a, b, shape


def compile_only(kernel):
    """kernel, compiled for the arguments it is called with and never run."""
    def call(*args):
        kernel.compile(tuple(numba.typeof(a) for a in args))
    return call


def checked(run):
    """The kernels that depend on the vectors' width, each on one thread (their drivers on
    several threads are the same at every width): the tiles of every shape, the 2 to 4 tokens'
    products of every kind, a head's scores and weighted sum (asking ahead or not) and a
    question's attention in every panel, on the check's tiny shapes: -> the names of those whose
    answers differ from NumPy's, or None where they are only compiled."""
    import numpy as np
    import model
    from engine import kernels
    made = compiled.kernels()
    dotted = kernels.rows_dotted if run else compile_only(kernels.rows_dotted)
    if not run:
        fake = {**made, **{n: compile_only(k) for n, k in made.items() if hasattr(k, "compile")}}
        compiled.kernels = lambda: fake
    rng, pairs = np.random.default_rng(0), {}
    w = rng.standard_normal((13, 9), dtype=np.float32)  # (rows, inputs)
    for shape in kernels.SHAPES:
        lanes, _, vectors, _ = shape
        for n in sorted({5, lanes + 1, lanes * vectors, lanes * (vectors + 1) + 1}):
            x = rng.standard_normal((9, n), dtype=np.float32)
            pairs[f"the tiles {shape} at {n} tokens"] = (
                compiled.table_shared(w, x, model.PLAIN.share, shape), w @ x)
    xt = rng.standard_normal((4, 9), dtype=np.float32)  # (4 tokens, inputs)
    side = kernels.side_by_side if run else compile_only(kernels.side_by_side)
    groups = -(-13 // kernels.LANES)  # the laid-out table's panels
    laid = np.zeros((groups, 9 * kernels.LANES), np.float32)
    side(w, laid, 0, groups)
    for dotting in kernels.DOTTED:
        if dotting[1] >= kernels.LAID:  # the table laid out, the tokens as x has them
            out = np.zeros((13, 4), np.float32)
            dotted(laid, np.ascontiguousarray(xt.T), out, 0, groups, dotting)
        else:
            out = np.zeros((13, 4), np.float32)
            dotted(w, xt, out, 0, 13, dotting)
        pairs[f"the 4 tokens' products {dotting}"] = out, w @ xt.T
    one = np.zeros((13, 1), np.float32)  # one token's product of the table laid out
    dotted(laid, np.ascontiguousarray(xt[:1].T), one, 0, groups, (kernels.LANES, kernels.LAID))
    pairs["one token's product, laid out"] = one, w @ xt[:1].T
    scores = kernels.head_scores if run else compile_only(kernels.head_scores)
    q, keys = rng.standard_normal((2, 16), dtype=np.float32), rng.standard_normal(
        (16, 300), dtype=np.float32)  # a head's scores: blocks, vectors and notes one by one
    for n in (5, kernels.LANES * kernels.SCORE_VECTORS + kernels.LANES + 3):
        for ahead in kernels.ASKING:
            s = np.zeros((2, 300), np.float32)
            scores(q, 1, keys, n, s, ahead)
            pairs[f"a head's scores of {n} notes, asking {ahead} rows ahead"] = (
                s[1, :n], q[1] @ keys[:, :n])
    weighted = kernels.head_weighted if run else compile_only(kernels.head_weighted)
    values = rng.standard_normal((300, 64), dtype=np.float32)  # a head's values, GPT-2's width
    s = rng.uniform(0, 1, (2, 300)).astype(np.float32)  # its weights
    for ahead in kernels.ASKING:
        out = np.zeros((2, 64), np.float32)
        weighted(s, 1, values, 300, out, ahead)
        pairs[f"a head's weighted sum, asking {ahead} ahead"] = (
            out[1], s[1] @ values / s[1].sum(dtype=np.float32))
    for panel in kernels.PANELS:
        pairs[f"a question's attention in panels of {panel}"] = compiled.asked_here(
            types.SimpleNamespace(share=model.PLAIN.share, panel=panel))
    return compiled.wrong(pairs) if run else None


def registers(kernel):
    """The widest vector registers in a kernel's x86 code: zmm (16 floats), ymm (8), xmm (4)."""
    code = "".join(kernel.inspect_asm().values())
    return next((r for r in ("zmm", "ymm", "xmm") if re.search(rf"%{r}\d", code)), None)


def elsewhere(triple, cpu):
    """rows_tiled's IR, as Numba makes it before optimizing for this CPU, compiled for another
    architecture: -> its vector multiply-adds (AArch64's fmla on 4 floats)."""
    import llvmlite.binding as ll
    ll.initialize_all_targets()
    ll.initialize_all_asmprinters()
    dump, config.DUMP_LLVM = io.StringIO(), True
    try:
        with contextlib.redirect_stdout(dump):
            from engine import kernels
            kernels.rows_tiled.compile(TILED)  # (before anything compiles it without a dump)
    finally:
        config.DUMP_LLVM = False
    ir = re.split(r"-{10,}[^\n]*LLVM DUMP[^\n]*-{10,}\n", dump.getvalue())[-1].split("=" * 40)[0]
    ir = re.sub(r"^target (triple|datalayout) = .*$", "", ir, flags=re.M)
    ir = re.sub(r'"target-(cpu|features)"="[^"]*"', "", ir)
    machine = ll.Target.from_triple(triple).create_target_machine(cpu=cpu, opt=2)
    module = ll.parse_assembly(ir)
    module.triple, module.data_layout = triple, str(machine.target_data)
    module.verify()
    machine.emit_object(module)
    return sorted(set(re.findall(r"\bfmla\s+v\d+\.(4s)", machine.emit_assembly(module))))


def main(argv):
    from engine import kernels
    other = elsewhere(*argv[1:3]) if len(argv) > 2 else None
    wrong = checked(argv[0] == "run")
    print(json.dumps({"lanes": kernels.LANES, "wrong": wrong,
                      "registers": [registers(kernels.rows_tiled), registers(kernels.question)],
                      "other": other}))


if __name__ == "__main__":
    main(sys.argv[1:])
