"""The forklift and the workbench: this machine's memory speed, math speed, and their balance.

    python machine_speed.py                    # the post's sizes, best of 5
    python machine_speed.py --quick --no-save  # a smoke run of a few seconds
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()

import math

from harness import claims, cli
from harness.printers import Saved, Sheet, Then, col
from harness.records import Measured, ms, timed
from harness.speeds import (MATMUL, QUICK, SIZE, Speeds, measure_roofs, memory_bytes,
                            tokens_a_trip_needs)
from harness.terminal import plural, warn
from model import BYTES

CACHE_RULE = 4  # STREAM's rule: the array must be at least 4x the last-level cache


def post_block(roofs):
    """The post's four lines."""
    fork, bench = roofs["forklift"], roofs["workbench"]
    return "\n".join([
        f"memory speed : {fork['bytes_per_s'] / 1e9:6.1f} GB/s   (read {fork['bytes'] / 1e6:.0f} "
        f"MB in {fork['timing'].seconds * 1e3:.1f} ms)",
        f"math speed   : {bench['flops_per_s'] / 1e9:6.1f} GFLOP/s ({bench['flops'] / 1e9:.1f} "
        f"GFLOPs in {bench['timing'].seconds * 1e3:.1f} ms)",
        f"balance      : {roofs['balance']:6.1f} FLOPs per byte",
        f"tokens a trip needs to keep the math busy: about "
        f"{tokens_a_trip_needs(roofs['balance']):.0f}",
    ])


COLUMNS = [col("memory speed", "memory speed", "GB/s", ".1f", compared=True),
           col("read", "read", "MB", ".0f"), col("read time", "read time", "ms", ".1f"),
           col("math speed", "math speed", "GFLOP/s", ".1f", compared=True),
           col("math", "math", "GFLOPs", ".1f"), col("math time", "math time", "ms", ".1f"),
           col("balance", "balance", "FLOPs/byte", ".1f", compared=True),
           col("tokens a trip needs", "tokens a trip needs", "tokens", ".0f", compared=True)]


def sheets(roofs, args, settings, busy=()):
    """The post's four lines (a table in any other format), and the speeds two_phases reads."""
    fork, bench = roofs["forklift"], roofs["workbench"]
    f, w = fork["timing"], bench["timing"]
    both = ((1, f), (-1, w))  # the balance: the forklift's time over the workbench's
    row = {"memory speed": timed(fork["bytes_per_s"] / 1e9, f, -1), "read": fork["bytes"] / 1e6,
           "read time": ms(f),
           "math speed": timed(bench["flops_per_s"] / 1e9, w, -1), "math": bench["flops"] / 1e9,
           "math time": ms(w), "balance": Measured(roofs["balance"], both),
           "tokens a trip needs": Measured(tokens_a_trip_needs(roofs["balance"]), both)}
    sheet = Sheet("machine_speed", COLUMNS, [row], timed=("read time", "math time"),
                  per="figure", text=post_block(roofs) if args.tablefmt == "plain" else None,
                  title="The forklift and the workbench", settings=settings)
    speeds = Speeds(roofs["bytes_per_s"], roofs["flops_per_s"], "measured by machine_speed")
    yield Saved("roofs", {"bytes_per_s": speeds.bytes_per_s, "flops_per_s": speeds.flops_per_s})
    yield sheet
    yield ""
    yield Then(lambda found: [claims.sheet(found, speeds, ("machine_speed",), args, busy)])


def warn_if_cached(size, llc_bytes):
    """STREAM's rule: warn if the forklift's table is small enough to come partly from cache."""
    if llc_bytes and size * size * BYTES < CACHE_RULE * llc_bytes:
        ok = math.ceil(math.sqrt(CACHE_RULE * llc_bytes / BYTES) / 1000) * 1000
        warn(f"the forklift's table ({size * size * BYTES / 1e6:.0f} MB) is less than "
                    f"{CACHE_RULE}x the last-level cache ({llc_bytes / 2 ** 20:.0f} MiB), so part "
                    f"of it may come from cache; use --size {ok} or more")


def build_parser():
    p = cli.parser(__doc__, runs=5)
    g = p.add_argument_group("machine_speed")
    g.add_argument("--size", type=cli.whole(1, 10 ** 6), default=SIZE, metavar="N",
                   help="forklift: side of the N x N float32 table read once per product")
    g.add_argument("--matmul", type=cli.whole(1, 10 ** 5), default=MATMUL, metavar="N",
                   help="workbench: side of the two N x N float32 tables multiplied")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = cli.parse(p, argv, QUICK)
    biggest = "--size" if args.size ** 2 >= 3 * args.matmul ** 2 else "--matmul"
    cli.need_memory(p, memory_bytes(args.size, args.matmul),
                       f"--size {args.size} with --matmul {args.matmul}", biggest)
    return args


def experiment(args, facts):
    if not args.quick:
        warn_if_cached(args.size, facts["llc_bytes"])
    settings = (f"a {args.size:,} x {args.size:,} float32 table read by one token, two "
                f"{args.matmul:,} x {args.matmul:,} tables multiplied; {args.threads} "
                f"{plural(args.threads, 'thread')}")
    yield from sheets(measure_roofs(args.size, args.matmul, args.runs), args, settings,
                      facts["busy"])


def main(argv=None):
    return cli.run("machine_speed", parse_args(argv), experiment)


if __name__ == "__main__":
    stopping.leave(main())
