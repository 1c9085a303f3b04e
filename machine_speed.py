"""The forklift and the workbench: this machine's memory speed, math speed, and their balance.

    python machine_speed.py                    # the post's sizes, in many fresh processes
    python machine_speed.py --quick --no-save  # a smoke run of a few seconds
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()

import math
import time

from harness import flags, runner
from harness.terminal import note, plural, warn
from harness.measuring import devices, host, processes, rounds, speeds
from harness.measuring.speeds import (CACHE_RULE, MATMUL, QUICK, SIZE, memory_bytes,
                                      tokens_a_trip_needs, workbench)
from harness.measuring.timing import taken
from harness.keeping import records
from harness.keeping.records import Layout, Measured, col, ms, timed
from harness.judging import intervals
from harness.experiments.registry import TOLD
from harness.showing import sheets
from harness.showing.printers import Saved, sheet
from accounting import BYTES

SMALLEST = {"size": 256, "matmul": 16}  # below these a product is a Python call's time, not
#                                        the forklift's nor the workbench's
RUNS = 5  # rounds of each speed at least (the post: every test 5 to 7 times)
BUDGET_S = 16  # seconds the measuring may take: fresh processes are added while they fit


# ---------------------------------------------------------------------------------------------
# the post's two measurements, forklift() and workbench() (harness/measuring/speeds.py, where
# two_phases.py takes them too): `big @ one` on a 400 MB table (and a plain read of it beside)
# and `a @ b` on two 2048 x 2048, the post's `sec = best_of(...)` each round's ceiling


SIXTEEN = "workbench bfloat16"  # on a device that computes bfloat16: the workbench at it too


def measure_here(args, job):
    """A worker's part of the rounds: both products and the read made (and, on a device that
    computes bfloat16, the workbench at it too), then visited in the job's rounds."""
    began, on = time.perf_counter(), args.on
    trials = speeds.trials(args.size, args.matmul, on, args.threads, quick=args.quick)
    #   (the tiles' workbench in the width's first shape: two_phases.py times the others)
    if sixteen(on):
        trials.append(speeds.trial(SIXTEEN, workbench(args.matmul, on, "bfloat16")[0], on))
    setup_s = time.perf_counter() - began
    return {**rounds.run(trials, job), "setup_s": setup_s}


def sixteen(on):
    """Whether the workbench is measured at bfloat16 too: on a GPU library's device that has it."""
    return not on.numpy and on.has_bf16()


# ---------------------------------------------------------------------------------------------
# the figures, and the post's four lines made from them


def figures(args, done):
    """The row of figures from the rounds: each speed the middle of the rounds' ceilings (the
    forklift the faster of its two reads in each round), the balance each round's."""
    ceiling = speeds.ceilings(done)
    row = speeds.figures(ceiling, args.size, args.matmul)
    f, w = ceiling["memory"], ceiling["workbench"]
    moved, flops = args.size ** 2 * BYTES, 2 * args.matmul ** 3
    made = [(SPEEDS, [{**row, "read": moved / 1e6, "read time": ms(f), "math": flops / 1e9,
                       "math time": ms(w), "tokens a trip needs": Measured(
                           tokens_a_trip_needs(row["balance"].value), row["balance"].parts)}])]
    if SIXTEEN in done.visits:  # the same product at bfloat16 (a GPU's tensor cores)
        h = taken([s[0] for s in done.runs(SIXTEEN).steps], "middle", SIXTEEN,
                  done.runs(SIXTEEN), said=True)
        made.append((SIXTEEN_TABLE, [{
            "precision": "bfloat16", "math speed": timed(flops / h.seconds / 1e9, h, -1),
            "math time": ms(h), "over float32": Measured(w.seconds / h.seconds, ((1, w), (-1, h))),
            "balance": Measured(flops / h.seconds / (moved / f.seconds), ((1, f), (-1, h)))}]))
    return made


def post_block(found):
    """The post's four lines, from the records."""
    v = {r["figure"]: r["value"] for r in records.of(found, SPEEDS.name)}
    return "\n".join([
        f"memory speed : {v['memory speed']:6.1f} GB/s   (read {v['read']:.0f} MB in "
        f"{v['read time']:.1f} ms)",
        f"math speed   : {v['math speed']:6.1f} GFLOP/s ({v['math']:.1f} GFLOPs in "
        f"{v['math time']:.1f} ms" + (f"; the BLAS {v['BLAS product']:.1f}, the suite's tiles "
                                      f"{v['tiles product']:.1f}" if 'tiles product' in v
                                      else "") + ")",
        f"balance      : {v['balance']:6.1f} FLOPs per byte",
        f"tokens a trip needs to keep the math busy: about {v['tokens a trip needs']:.0f}"])


SPEEDS = Layout("machine_speed", [
    col("memory speed", "memory speed", "GB/s", ".1f", compared=True),
    col("matrix-vector read", "matrix-vector GB/s", "GB/s", ".1f"),
    col("streaming read", "streaming GB/s", "GB/s", ".1f"),
    col("laid-out read", "laid-out GB/s", "GB/s", ".1f"),
    col("read", "read", "MB", ".0f"), col("read time", "read time", "ms", ".1f"),
    col("math speed", "math speed", "GFLOP/s", ".1f", compared=True),
    col("BLAS product", "BLAS GFLOP/s", "GFLOP/s", ".1f"),
    col("tiles product", "tiles GFLOP/s", "GFLOP/s", ".1f"),
    col("math", "math", "GFLOPs", ".1f"), col("math time", "math time", "ms", ".1f"),
    col("balance", "balance", "FLOPs/byte", ".1f", compared=True, centered=True),
    col("tokens a trip needs", "tokens a trip needs", "tokens", ".0f", compared=True,
        centered=True)],
    timed=("read time", "math time"), per="figure", title="The forklift and the workbench")
#   (the balance, and the tokens it gives, as its claim is told: the mean of each process's
#   rounds' balances, not the ratio of the two speeds' middles, which the rounds' two states of
#   a machine can pull apart)


SIXTEEN_TABLE = Layout("workbench at 16 bits", [
    col("precision", "precision", "", "s", key=True),
    col("math speed", "math speed", "GFLOP/s", ".1f", compared=True),
    col("math time", "math time", "ms", ".2f"),
    col("over float32", "x float32", "x", ".1f"),
    col("balance", "balance", "FLOPs/byte", ".1f", compared=True)],
    timed=("math time",), per="figure",
    title="The workbench at 16 bits (the same product, on the device's bfloat16 path)")


def warn_if_cached(size, llc_bytes):
    """STREAM's rule: warn if the forklift's table is small enough to come partly from cache."""
    if llc_bytes and size * size * BYTES < CACHE_RULE * llc_bytes:
        ok = math.ceil(math.sqrt(CACHE_RULE * llc_bytes / BYTES) / 1000) * 1000
        warn(f"the forklift's table ({size * size * BYTES / 1e6:.0f} MB) is less than "
             f"{CACHE_RULE}x the last-level cache ({llc_bytes / 2 ** 20:.0f} MiB), so part "
             f"of it may come from cache; use --size {ok} or more")


# ---------------------------------------------------------------------------------------------
# the run


def experiment(args, facts):
    """Measure both limits in rounds into records (in as many fresh processes as --time-budget
    holds); the post's lines, the speeds two_phases reads, and the claims, each from them."""
    cache = args.on.cache_bytes() if args.on.gpu else facts["llc_bytes"]  # what the table
    if not args.quick and args.on.kind == "cpu":  # must outgrow; a GPU's is sized to its own
        warn_if_cached(args.size, facts["llc_bytes"])
    settings = records.settings_of(args, cache_bytes=cache)  # the claims hold a reading of a
    #                                                          table that fits in it to nothing
    speeds.tiled(args.on, args.quick, True)  # the tiles' kernels loaded here first (compiled,
    #   on a first run: 5 s, outside the 16 s budget, which would then hold 3 processes, not 6):
    #   the first worker's start, which plans the rest, is then every one's
    done = processes.measured(args, __file__, measure_here)
    found = records.from_rows(figures(args, done), settings, center=intervals.centered)
    speed = {r["figure"]: r["value"] for r in records.of(found, SPEEDS.name)}
    yield Saved("roofs", {"bytes_per_s": speed["memory speed"] * 1e9,
                          "flops_per_s": speed["math speed"] * 1e9})
    yield sheet(SPEEDS, found, text=post_block(found) if args.tablefmt == "plain" else None,
                note=speeds.states_note(found, SPEEDS.name),
                settings=f"a {args.size:,} x {args.size:,} float32 table read by one token, two "
                         f"{args.matmul:,} x {args.matmul:,} tables multiplied; {args.threads} "
                         f"{plural(args.threads, 'thread')}")
    yield ""
    if records.of(found, SIXTEEN_TABLE.name):
        yield sheet(SIXTEEN_TABLE, found, settings=f"two {args.matmul:,} x {args.matmul:,} "
                                                    f"bfloat16 tables multiplied, on {args.device}")
        yield ""
    if done.device_bytes is not None:  # a GPU's: the most its processes held there
        yield Saved("device_memory_bytes", done.device_bytes)
    if done.stopped:
        yield Saved("stopped", done.stopped)
    yield sheets.claims(found, None, ("machine_speed",), args, facts["busy"],
                        stopped=done.stopped, told=TOLD)


def build_parser():
    p = flags.parser(__doc__, runs=RUNS, prog="machine_speed.py", budget=BUDGET_S)
    g = p.add_argument_group("machine_speed")
    g.add_argument("--size", type=flags.whole(SMALLEST["size"], 10 ** 6), default=SIZE,
                   metavar="N",
                   help="forklift: side of the N x N float32 table read once per product")
    g.add_argument("--matmul", type=flags.whole(SMALLEST["matmul"], 10 ** 5), default=MATMUL,
                   metavar="N",
                   help="workbench: side of the two N x N float32 tables multiplied")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = flags.parse(p, argv, QUICK)
    on = devices.device(args.device)
    wide = args.size if "size" in args.given else speeds.side(args.size, on, args.quick)  # the
    #   post's table, or wider where the cache would hold too much of it
    asked, args.size = args.size, wide
    if "matmul" not in args.given:  # a GPU's product long enough to time on the device
        args.matmul = speeds.bench_side(args.matmul, on)
    biggest = "--size" if args.size ** 2 >= 3 * args.matmul ** 2 else "--matmul"
    flags.need_memory(p, memory_bytes(args.size, args.matmul),
                      f"--size {args.size} with --matmul {args.matmul}", biggest, args.device)
    if wide != asked and not args.worker:
        cache = on.cache_bytes() if on.gpu else host.quietly(host.last_level_cache_bytes)
        note(f"the forklift's table: {wide:,} x {wide:,} ({wide ** 2 * BYTES / 1e6:,.0f} MB, "
             f"{speeds.DEVICE_CACHE_RULE if on.gpu else CACHE_RULE}x the {cache / 2 ** 20:,.0f} "
             f"MiB last-level cache at least), not {asked:,}")
    return flags.settled(args)


def main(argv=None):
    return runner.run("machine_speed", parse_args(argv), experiment, worker=measure_here)


if __name__ == "__main__":
    stopping.leave(main())
