"""The forklift and the workbench: this machine's memory speed, math speed, and their balance.

    python machine_speed.py                    # the post's sizes, best of 5
    python machine_speed.py --quick --no-save  # a smoke run of a few seconds
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    import stopping
    stopping.stop_quietly()

import math

import numpy as np

import claims
import cli
import timing
from model import BYTES, FLOPS_PER_NUMBER
from printers import Saved, Sheet, entry
from terminal import plural, warn

SIZE = 10_000  # forklift: a 10,000 x 10,000 float32 table, 400 MB, far bigger than any cache
MATMUL = 2048  # workbench: 2048 x 2048 tables fit close to the workbench (caches)
QUICK = {"size": 4000, "matmul": 1024}
CACHE_RULE = 4  # STREAM's rule: the array must be at least 4x the last-level cache


def forklift(size, runs):
    """Memory speed: ONE token through a size x size table; every number fetched for 2 FLOPs."""
    big = np.ones((size, size), dtype=np.float32)  # (size, size)
    one = np.ones(size, dtype=np.float32)  # (size,)
    t = timing.measure(lambda: big @ one, runs, stat="best", what="forklift")
    return {"bytes": big.nbytes, "bytes_per_s": big.nbytes / t.seconds, "timing": t}


def workbench(n, runs):
    """Math speed: n x n times n x n; both tables stay near the workbench, so this is pure math."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    b = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    flops = 2 * n ** 3  # n*n outputs, each n multiplies and n adds
    t = timing.measure(lambda: a @ b, runs, stat="best", what="workbench")
    return {"flops": flops, "flops_per_s": flops / t.seconds, "timing": t}


def measure_roofs(size, matmul, runs):
    """Both limits of this machine, best of `runs`: {"forklift": {...}, "workbench": {...},
    "bytes_per_s", "flops_per_s", "balance"}."""
    fork, bench = forklift(size, runs), workbench(matmul, runs)
    return {"forklift": fork, "workbench": bench, "bytes_per_s": fork["bytes_per_s"],
            "flops_per_s": bench["flops_per_s"],
            "balance": bench["flops_per_s"] / fork["bytes_per_s"]}


def memory_bytes(size, matmul):
    """What measuring both needs, at most: the forklift's table and the workbench's three."""
    return (size * size + 3 * matmul * matmul) * BYTES


def sizes(quick):
    return QUICK if quick else {"size": SIZE, "matmul": MATMUL}


# For another script (two_phases.py holds its timings against these): the two speeds with this
# script's own sizes, and the memory measuring them needs.
def roofs(runs, quick=False):
    return measure_roofs(**sizes(quick), runs=runs)


def roofs_memory_bytes(quick=False):
    return memory_bytes(**sizes(quick))


def tokens_a_trip_needs(balance):
    """Tokens that share one fetch of the tables before the math, not the fetching, is slower."""
    return balance * BYTES / FLOPS_PER_NUMBER


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


COLUMNS = [("memory speed", "GB/s", ".1f"), ("read", "MB", ".0f"), ("read time", "ms", ".1f"),
           ("math speed", "GFLOP/s", ".1f"), ("math", "GFLOPs", ".1f"), ("math time", "ms", ".1f"),
           ("balance", "FLOPs/byte", ".1f"), ("tokens a trip needs", "tokens", ".0f")]


def sheets(roofs, args, settings):
    """The post's four lines (a table in any other format), and the speeds two_phases reads."""
    fork, bench = roofs["forklift"], roofs["workbench"]
    f, w = fork["timing"], bench["timing"]
    row = [fork["bytes_per_s"] / 1e9, fork["bytes"] / 1e6, f.seconds * 1e3,
           bench["flops_per_s"] / 1e9, bench["flops"] / 1e9, w.seconds * 1e3,
           roofs["balance"], tokens_a_trip_needs(roofs["balance"])]
    both = [(1, f), (-1, w)]  # the balance: the forklift's time over the workbench's
    sheet = Sheet("machine_speed", COLUMNS, [row], [{0: [(-1, f)], 2: [(1, f)], 3: [(-1, w)],
                                                    5: [(1, w)], 6: both, 7: both}],
                  timed=(2, 5), per="figure",
                  text=post_block(roofs) if args.tablefmt == "plain" else None,
                  title="The forklift and the workbench", settings=settings)
    speeds = {"bytes_per_s": roofs["bytes_per_s"], "flops_per_s": roofs["flops_per_s"]}
    yield Saved("roofs", speeds)
    yield sheet
    yield ""
    yield claims.sheet({sheet.name: entry(sheet)}, speeds, ("machine_speed",), args)


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
    yield from sheets(measure_roofs(args.size, args.matmul, args.runs), args, settings)


def main(argv=None):
    return cli.run("machine_speed", parse_args(argv), experiment)


if __name__ == "__main__":
    stopping.leave(main())
