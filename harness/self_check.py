"""A device's self-check, run once before trusting it: what it is, whether its two limits read
as limits, whether its model gives GPT-2's answer in each precision it computes, whether a CUDA
graph replays the eager trip, and where a typing step and an empty trip sit against their
limits. Each check says PASS, FAIL or SKIP with the figure behind it and its rule; nothing is
saved. Paste its output into an issue: it is what a GPU run needs to be trusted.

    python two_phases.py --device torch:cuda --self-check
"""
import dataclasses

import numpy as np

from harness.experiments import SEED, launches
from harness.measuring import bench as b, devices, host, rounds, speeds
from harness.terminal import progress, show
import accounting
import model

SAMPLES = 3  # samples of each timing, the fastest kept: a self-check's limits are ceilings
FORKLIFT_OVER_READ = 2.0  # the matrix-vector product reads within this of a plain read or copy:
#                          a library's slower path (PyTorch's CPU product beside its own read,
#                          1.6x) passes, one at under half the memory's speed is a fault
WIDER_SLOWER = 0.75  # the wider product at least this share of the narrower's speed: a
#                     busy host's noise stays above it, a product too small to time falls under
EMPTY_OVER = 1.25  # the empty trip (the step's every launch, almost no bytes) within this of the
#                    step: it does less than the step, so slower beyond noise is a fault
TENSOR_CORES = 2  # a GPU's bfloat16 product at least this many times its float32 one
LAUNCHED = launches.LAUNCHED  # the empty trip under this share of one user's step


def seconds(on, call):
    """The fastest of SAMPLES per-call times of call on the device: a burst between its own
    timer's marks, sized once warm (rounds.calibrate)."""
    trial = rounds.calibrate(rounds.Trial("check", [call], timer=on, best=SAMPLES),
                             speeds.BURST_S)
    return rounds.visit(trial, watch=rounds.unwatched)[0][0]


def verdict(ok):
    return "PASS" if ok else "FAIL"


def forklift(on, quick):
    """The matrix-vector product against the plainest read and a copy of the same table."""
    n = speeds.sizes(quick, on)["size"]
    big = on.asarray(np.ones((n, n), dtype=np.float32))
    one = on.asarray(np.ones(n, dtype=np.float32))
    table = n * n * accounting.BYTES
    rates = {"matrix-vector": table / seconds(on, lambda: big @ one),
             "read": table / seconds(on, lambda: on.xp.max(big)),
             "copy": 2 * table / seconds(on, lambda: on.xp.asarray(big, copy=True))}
    best = max(rates["read"], rates["copy"])
    return [("forklift", verdict(rates["matrix-vector"] * FORKLIFT_OVER_READ >= best),
             ", ".join(f"{k} {v / 1e9:,.1f} GB/s" for k, v in rates.items()),
             f"the matrix-vector product within {FORKLIFT_OVER_READ}x of a plain read or copy "
             f"({n:,} x {n:,} float32)")], max(rates.values())


def workbench(on, quick):
    """The product at two sizes, and at bfloat16 beside float32 where the device computes it."""
    n = speeds.sizes(quick, on)["matmul"]
    rate = {}
    for dtype in ("float32", "bfloat16") if on.gpu and on.has_bf16() else ("float32",):
        for side in (n // 2, n):
            product, flops = speeds.workbench(side, on, dtype)
            rate[dtype, side] = flops / seconds(on, product)
    said = ", ".join(f"{d} {s:,}: {v / 1e12:,.3g} TFLOP/s" for (d, s), v in rate.items())
    out = [("workbench sizes", verdict(rate["float32", n] >= WIDER_SLOWER
                                       * rate["float32", n // 2]), said,
            f"the {n:,}-wide float32 product at least {WIDER_SLOWER} of the {n // 2:,}-wide's "
            f"speed (else the wide one is too small to time)")]
    rule = f"on a GPU, bfloat16 at least {TENSOR_CORES}x float32 (its tensor cores)"
    if ("bfloat16", n) in rate:
        ratio = rate["bfloat16", n] / rate["float32", n]
        out.append(("workbench at 16 bits", verdict(ratio >= TENSOR_CORES),
                    f"bfloat16 {ratio:.2f}x float32", rule))
    else:
        out.append(("workbench at 16 bits", "SKIP", "", rule + ("; not a GPU" if not on.gpu
                                                              else "; it has no bfloat16")))
    return out, rate["float32", n]


def answers(on, cfg, seed):
    """The model's answer against NumPy's float32, in each precision the library computes."""
    from harness import model_run
    out = []
    for dtype in devices.DTYPES[on.library.__name__]:
        if dtype == "bfloat16" and not on.has_bf16():
            out.append((f"answer in {dtype}", "SKIP", "", "this device has no bfloat16"))
            continue
        there = dataclasses.replace(on, dtype=dtype)
        mine = dataclasses.replace(cfg, dtype=dtype, note_dtype=dtype)
        progress(f"the model's answer in {dtype}")
        bench = b.Bench(mine, there.tables(model.floors(mine, seed)), None, 1, on=there)
        try:
            off = model_run.answered(bench, seed)
            out.append((f"answer in {dtype}", "PASS", f"{off:.2g} of its largest number",
                        f"within {model_run.tolerance(there):g} of NumPy's float32"))
        except devices.WrongAnswer as e:
            out.append((f"answer in {dtype}", "FAIL", str(e).split(":")[0],
                        f"within {model_run.tolerance(there):g} of NumPy's float32"))
    return out


def typing(on, cfg, notes, forklift_per_s, flops_per_s):
    """One user's typing step, and the empty trip (every launch, almost no bytes), against the
    step's limit at the speeds just measured; and a CUDA graph's replay against the eager
    trip, on torch:cuda."""
    bench = b.Bench(cfg, on.tables(model.floors(cfg, SEED)), None, 1, on=on)
    first = b.read_question(bench, notes, SEED + 1)
    x, segments = b.typing(bench, first, 1, SEED + 2)
    back = [(book, book["len"]) for book, _ in segments]

    def step():
        b.trip_of(bench, x, segments)()
        for book, n in back:
            book["len"] = n
    took = seconds(on, step)
    limit = accounting.limit(cfg, [(notes, 1)], forklift_per_s, flops_per_s)[0]
    empty_trial, = launches.trials(bench, dataclasses.make_dataclass("Asked", [
        ("notes", int)])(notes))
    empty = seconds(on, lambda: (empty_trial.setup(), empty_trial.steps[0]()))
    bound = ("the step waits on launching, not on its bytes: on this device typing GPT-2 "
             f"{cfg.name} is launch-bound (--graphs, or --model xl, where its bytes outlast "
             "its launches)") if empty >= LAUNCHED * took else \
        f"under {LAUNCHED} of the step: the step waits on its bytes, not on launching"
    out = [("typing step", "INFO", f"{took * 1e3:.3g} ms, {took / limit:.2f}x its limit "
            f"({limit * 1e3:.3g} ms)", f"one user at {notes} notes, against its bytes at the "
            f"forklift just measured"),
           ("empty trip", verdict(empty <= EMPTY_OVER * took),
            f"{empty * 1e3:.3g} ms, {empty / took:.2f} of the step; {bound}",
            f"within {EMPTY_OVER}x of the step, whose launches it makes with almost none of "
            f"its bytes (slower is a fault of the timing)")]
    out.append(graph_check(bench, first) if on.kind == "cuda" and on.torch else
               ("graph replay", "SKIP", "", "a CUDA graph needs --device torch:cuda"))
    return out


def graph_check(bench, first):
    """A typing trip replayed as a CUDA graph writes the notes the eager trip writes. Capturing
    runs the trip (to warm up, and under capture) and so writes them itself: they are wiped
    before the replay, so that a replay that does nothing fails."""
    on, cfg = bench.on, bench.cfg
    eager, x = b.copies(bench, first, 1, room=1), b.tokens(cfg, 1, SEED + 2, on)
    b.trip_of(bench, x, [(eager, 1)])()
    graphed = b.copies(bench, first, 1, room=1)
    replay = b.trip_of(dataclasses.replace(bench, graphs=True), x, [(graphed, 1)])  # captured
    n = first["len"]
    graphed["k"][..., n:] = float("nan")  # what capture wrote, wiped in place: the graph's own
    graphed["v"][..., n:, :] = float("nan")  # buffers
    replay()
    on.sync()
    off = max(float(np.nanmax(np.where(np.isnan(on.to_numpy(graphed[k])), np.inf, abs(
        on.to_numpy(graphed[k]) - on.to_numpy(eager[k]))))) for k in ("k", "v"))
    return ("graph replay", verdict(off <= 1e-3 and graphed["len"] == eager["len"]),
            f"notes differ by {off:.2g}", "a replayed trip writes the eager trip's notes (those "
            "its capture wrote wiped first)")


def run(args):
    """The self-check on args' device, its lines printed as one table. -> exit code: 0 where
    nothing failed, 1 where something did."""
    on = args.on
    show(f"self-check of {on.name}:" + host.device_line(on.facts()))
    found, fork = forklift(on, args.quick)
    bench_rows, flops = workbench(on, args.quick)
    found += bench_rows
    cfg = model.SIZES[args.model] if isinstance(args.model, str) else args.model
    found += answers(on, cfg, args.seed)
    found += typing(on, dataclasses.replace(cfg, dtype=on.dtype, note_dtype=on.dtype),
                    args.notes, fork, flops)
    from tabulate import tabulate
    show(tabulate(found, ["check", "result", "figure", "rule"], tablefmt=args.tablefmt))
    failed = [r[0] for r in found if r[1] == "FAIL"]
    counts = ", ".join(f"{sum(r[1] == k for r in found)} {k.lower()}"
                       for k in ("PASS", "FAIL", "SKIP", "INFO"))
    show(f"({len(found)} checks: {counts}" + (f"; failed: {', '.join(failed)}" if failed else "")
         + "; send this whole output with an issue about this device)")
    return 1 if failed else 0
