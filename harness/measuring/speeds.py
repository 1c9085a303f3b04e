"""The machine's two limits, the forklift (memory speed) and the workbench (math speed), as a
run holds its timings to them or predicts with them; machine_speed.py measures them."""
import dataclasses
import math

import numpy as np

from harness import datasheets
from harness.post import MATMUL, SIZE  # the forklift's 400 MB table, far bigger than any
#   cache; the workbench's 2048 x 2048 tables, which fit close to the workbench (caches)
from engine import pool
from harness.measuring import devices, host, timing
from harness.measuring.rounds import Trial, calibrate
from harness.measuring.timing import Measured, timed
import accounting
from accounting import BYTES, FLOPS_PER_NUMBER

QUICK = {"size": 4000, "matmul": 1024}
CACHE_RULE = 4  # STREAM's rule: the forklift's table at least 4x the last-level cache, or part
#                 of what it reads comes from the cache, not memory
DEVICE_CACHE_RULE = 8  # on a GPU the forklift's table is at least this many times the device's
#                        last-level cache (an H100's 50 MiB L2: a 10,240-wide table, 420 MB)
BURST_S = 0.01  # on another library's device a sample is a burst of calls lasting this long,
#                 timed by the device's own events (one call of an H100's forklift: 0.13 ms)


@dataclasses.dataclass(frozen=True)
class Speeds:
    """The two speeds a run holds its rows to (or predicts with), in bytes and FLOPs per second,
    where they come from, and, through a run, the speeds measured at its start and its end."""
    bytes_per_s: float
    flops_per_s: float
    source: str = ""
    start: "Speeds" = None
    end: "Speeds" = None
    link_per_s: float = math.inf  # between devices, each way, for a model split over them
    link_latency_s: float = 0.0  # what one all-reduce over that link takes however small it is
    reached: float = 1.0  # the share of the published speeds these are (a prediction's
    #                       --efficiency): 1, the limits themselves
    origin: tuple = None  # a file's (--roofs): (its path, its machine's CPU, cores, threads)
    timings: dict = dataclasses.field(default=None, compare=False, repr=False)  # measured in
    #   rounds: {"forklift" or "workbench": (its rounds' Timing, the work it timed)}

    def limit(self, cfg, riders):
        """The fastest a trip can be at these speeds: (seconds, what bounds it)."""
        return accounting.limit(cfg, riders, self.bytes_per_s, self.flops_per_s, self.link_per_s,
                           self.link_latency_s)

    def serial(self, cfg, riders):
        """The trip's limit with the link's sends after its work (accounting.serial_limit)."""
        return accounting.serial_limit(cfg, riders, self.bytes_per_s, self.flops_per_s,
                                  self.link_per_s, self.link_latency_s)

    def times(self, share):
        """These speeds at `share` of themselves, the link's among them, as a real engine
        reaches them; the latency stays."""
        if share >= 1:
            return self
        return dataclasses.replace(self, bytes_per_s=self.bytes_per_s * share,
                                   flops_per_s=self.flops_per_s * share,
                                   link_per_s=self.link_per_s * share, reached=share)

    @property
    def balance(self):
        """FLOPs the workbench does in the time the forklift brings one byte."""
        return self.flops_per_s / self.bytes_per_s

    def saved(self):
        """As a result keeps it: {"bytes_per_s", "flops_per_s", "source", "start", "end"}."""
        out = {"bytes_per_s": self.bytes_per_s, "flops_per_s": self.flops_per_s,
               "source": self.source}
        if math.isfinite(self.link_per_s):
            out["link_per_s"] = self.link_per_s
        if self.link_latency_s:
            out["link_latency_s"] = self.link_latency_s
        for when in ("start", "end"):
            if getattr(self, when) is not None:
                s = getattr(self, when)
                out[when] = {"bytes_per_s": s.bytes_per_s, "flops_per_s": s.flops_per_s}
        return out


def read(saved):
    """Speeds from what a result keeps (see Speeds.saved), or None where it keeps none."""
    if not saved:
        return None
    at = {when: Speeds(saved[when]["bytes_per_s"], saved[when]["flops_per_s"])
          for when in ("start", "end") if isinstance(saved.get(when), dict)}
    link, wait = saved.get("link_per_s"), saved.get("link_latency_s")
    return Speeds(saved["bytes_per_s"], saved["flops_per_s"], saved.get("source", ""), **at,
                  link_per_s=link if type(link) in (int, float) and link > 0 else math.inf,
                  link_latency_s=wait if type(wait) in (int, float) and 0 < wait < 1 else 0.0)


def memory_bytes(size, matmul):
    """What measuring both needs, at most: the forklift's table and the workbench's three."""
    return (size * size + 3 * matmul * matmul) * BYTES


def sizes(quick, on=devices.NUMPY):
    """The forklift's and the workbench's sides (--quick's, or the post's), the forklift's
    table wider where the cache would hold too much of it (side()), a GPU's workbench wider
    where one call would be over too soon (bench_side())."""
    made = QUICK if quick else {"size": SIZE, "matmul": MATMUL}
    return {"size": side(made["size"], on, quick), "matmul": bench_side(made["matmul"], on)}


CALL_S = 1e-3  # a GPU's workbench call lasts at least this long at the device's published
#                peak: a shorter one (an H200's 2,048-wide product, 25 us in bfloat16) times
#                the host's launch and wait as much as the math, in --quick as in a full run
GPU_MATMUL = 8192  # a GPU's workbench side where its peak is not published: an H100's 1.1 ms


def bench_side(n, on=devices.NUMPY):
    """The workbench's side: n on a CPU; on a GPU at least what lasts CALL_S at the fastest
    rate its preset publishes of those the suite measures (bfloat16's on a Hopper: 8,192), else
    GPU_MATMUL, rounded up to 1,024."""
    if not on.gpu:
        return n
    name = datasheets.preset_name(on.facts())
    rates = datasheets.known()[name]["workbench"] if name else {}
    peak = max((rates[p][0] * 1e9 for p in devices.DTYPES["torch"] if p in rates), default=0)
    need = math.ceil((peak * CALL_S / 2) ** (1 / 3) / 1024) * 1024 if peak else GPU_MATMUL
    return max(n, need)


def side(size, on=devices.NUMPY, quick=False):
    """The forklift's table side: size, or wide enough to be CACHE_RULE x this machine's
    last-level cache (STREAM's rule: a 480 MiB L3 takes a 23,000-wide table, 2.1 GB), or, on a
    GPU whose library reports its L2, DEVICE_CACHE_RULE x that (a --quick run's too: a GPU's
    L2 of 50 MiB holds its whole 64 MB table, and a GPU reads 2 GB in a blink), rounded up to a
    thousand. --quick on a CPU keeps its small table: a smoke run, judged on nothing."""
    if on.gpu:
        cache, rule = on.cache_bytes(), DEVICE_CACHE_RULE
    elif quick:
        return size
    else:
        cache, rule = host.quietly(host.last_level_cache_bytes), CACHE_RULE
    if not cache:
        return size
    return max(size, math.ceil(math.sqrt(rule * cache / BYTES) / 1000) * 1000)


def roofs_memory_bytes(quick=False, on=devices.NUMPY):
    """What measuring both at machine_speed's own sizes needs, for another script."""
    return memory_bytes(**sizes(quick, on))


def tokens_a_trip_needs(balance):
    """Tokens that share one fetch of the tables before the math, not the fetching, is slower."""
    return balance * BYTES / FLOPS_PER_NUMBER


# ---- the post's two measurements (machine_speed.py's, and two_phases.py's in every round), each
# round's ceiling the fastest of CEILING samples of it: the post's `sec = best_of(...)`, taken in
# every round, and the figure the middle of the rounds' (never the best of a whole run: one
# process's fast moment)

CEILING = 3  # samples of each speed in a round, the fastest kept: that round's ceiling
READS = ("forklift", "streaming read")  # the forklift's two reads of the same table: the
#                                         post's matrix-vector product, and a plain read
WORKBENCH = "workbench"
TILES = "tiles' workbench"  # the same product on the suite's compiled tiles (tiles())
LAID_READ = "laid-out read"  # the same table laid out, read by the suite's own one-token product
#                              (laid_read())
CHUNK = 256  # the tiles' workbench meets b's columns this many at a time: a 256-token
#              question's trip (the whole of b's 2,048 at once left each tile's panels to come
#              from the last cache: 0.65x the speed of 256 at a time on a Zen 5 EPYC)


def forklift(size=SIZE, on=devices.NUMPY, threads=1):
    """Forklift: push ONE token through a size x size table (400 MB at the post's 10,000).
    Every number is used once, for just 2 FLOPs, so this is almost pure fetching. Beside it, the
    plainest read of the same table: every thread reads its share of the rows through, keeping
    only their largest number (NumPy's vector loop: nothing to compute, nothing written). The
    faster of the two is the forklift's speed: the ceiling a trip's fetching is held to.
    -> ({"forklift": the product, "streaming read": the read}, the bytes each reads)"""
    big = on.asarray(np.ones((size, size), dtype=np.float32))  # (size, size)
    one = on.asarray(np.ones(size, dtype=np.float32))  # (size,)
    return {READS[0]: lambda: big @ one, READS[1]: streaming(big, on, threads)}, \
        size * size * BYTES


def streaming(big, on, threads):
    """Read every number of big once on `threads` threads: -> the read. (On another library's
    device, its own reduction over the whole table.)"""
    if not on.numpy:
        return lambda: on.xp.max(big)
    helpers, rows = pool.workers(threads), big.shape[0]
    return lambda: pool.share(helpers, lambda part: big[part].max(), rows, big.size)


def workbench(n=MATMUL, on=devices.NUMPY, dtype="float32"):
    """Workbench: multiply two n x n tables. They fit close to the workbench (the caches), so
    this is almost pure math: n*n outputs, each n multiplies and n adds. dtype: the numbers'
    precision (float32, the post's; a GPU's bfloat16 on its tensor cores).
    -> (the product to time, its FLOPs)"""
    rng = np.random.default_rng(0)
    a = on.asarray(rng.standard_normal((n, n), dtype=np.float32), dtype)  # (n, n)
    b = on.asarray(rng.standard_normal((n, n), dtype=np.float32), dtype)  # (n, n)
    return lambda: a @ b, 2 * n ** 3


def tiles(n=MATMUL, threads=1, shape=None):
    """Workbench, on the suite's own tiles: the same product as the compiled tiles do a trip's
    tables (compiled.table, as wide as this CPU's vector registers, on `threads` of Numba's
    threads, the BLAS held to one), b's columns CHUNK at a time. The faster of it and the
    BLAS's product is the workbench's speed: a BLAS built for a narrower CPU than this, or held
    to one (OPENBLAS_CORETYPE), does less math a second than the machine can, and a trip on
    the tiles would then beat its limit. -> (the product to time, its FLOPs)"""
    import engine.compiled  # (only where the tiles are measured: Numba loads with them)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    bs = [np.ascontiguousarray(b) for b in np.array_split(
        rng.standard_normal((n, n), dtype=np.float32), -(-n // CHUNK), axis=1)]  # (n, CHUNK)s

    def product():
        with engine.compiled.running(threads):
            for b in bs:
                engine.compiled.table(a, b, shape=shape)
    return product, 2 * n ** 3


def laid_read(size=SIZE, threads=1):
    """Forklift, on the suite's own one-token product: the same table laid out a vector's rows
    side by side and read by the compiled product that reads a trip's tables so (engine.laid:
    one stream a thread, on `threads` of Numba's threads, the BLAS held to one). The fastest of
    the three reads is the forklift's speed: one stream a core read 86 GB/s on a Zen 5 EPYC
    where the other two read 72 (in its faster state of the memory), and a trip reading so
    would beat a ceiling of 72. -> the read"""
    import engine.compiled  # (only where the tiles are measured: Numba loads with them)
    import engine.laid
    laid = engine.laid.laid_out(np.ones((size, size), dtype=np.float32))  # (size, size) laid out
    one = np.ones((size, 1), dtype=np.float32)  # (size, 1)

    def read():
        with engine.compiled.running(threads):
            engine.laid.one_laid(laid, one, size)
    return read


def tiled(on, quick, compiled):
    """Whether the tiles' workbench is measured: on this CPU (NumPy's arrays), in a full run
    that may run the compiled kernels (compiled: not --compiled off), where they load."""
    if quick or not on.numpy or not compiled:
        return False
    import engine.compiled
    return engine.compiled.available("tables")


def names(on, quick, compiled=True):
    """The speed trials a run's rounds may visit: the forklift's two reads, the workbench, and
    the tiles' where they may be measured (a process where the kernels cannot load leaves it
    out, and the BLAS's product is the workbench)."""
    return (*READS, WORKBENCH, *([TILES, LAID_READ] if on.numpy and not quick and compiled
                                 else []))


def trial(name, product, on=devices.NUMPY, group=1, best=CEILING):
    """One of them as a round visits it: its ceiling in the round, the fastest of `best`
    samples; on NumPy one call a sample, as the post times it; on another library's device a
    burst of calls lasting BURST_S, timed by its own timer."""
    made = Trial(name, [product], group=group, timer=on, best=best)
    return made if on.numpy else calibrate(made, BURST_S)


def trials(size, matmul, on=devices.NUMPY, threads=1, prefix="", dtype="float32", quick=False,
           compiled=True, shape=None):
    """The forklift's two reads and the workbench as a round visits them: the two products on
    the BLAS's own threads (group 0: visited first in a round), the read on the suite's; and,
    where tiled(), the tiles' workbench in tiles of shape (the width's first where None), on
    Numba's; a smoke run's (quick) one sample each."""
    reads, _ = forklift(size, on, threads)
    best = 1 if quick else CEILING
    return [trial(prefix + READS[0], reads[READS[0]], on, 0, best),
            trial(prefix + READS[1], reads[READS[1]], on, 1, best),
            trial(prefix + WORKBENCH, workbench(matmul, on, dtype)[0], on, 0, best),
            *([trial(prefix + TILES, tiles(matmul, threads, shape)[0], on, 1, best),
               trial(prefix + LAID_READ, laid_read(size, threads), on, 1, best)]
              if tiled(on, quick, compiled) else [])]


def ceilings(done, prefix=""):
    """Each round's ceilings as Timings (seconds; the figure the middle of the rounds'):
    {"memory": the fastest of the reads in each round, "matrix-vector", "streaming" and
    "laid-out" its reads each (the laid-out read where measured), "workbench": the faster of
    the BLAS's product and the tiles' in each round (the BLAS's alone where the tiles' was
    not measured), "BLAS" and "tiles" each (the tiles' where measured)}."""
    runs = {n: done.runs(prefix + n) for n in (*READS, WORKBENCH, TILES, LAID_READ)
            if n not in (TILES, LAID_READ) or done.visits.get(prefix + n)}
    made = {n: timing.taken([s[0] for s in r.steps], "middle", n, r, said=True)
            for n, r in runs.items()}
    work = (timing.taken(*faster(runs[WORKBENCH], runs[TILES], what="the workbench"),
                         said=True) if TILES in runs else made[WORKBENCH])
    reads = [runs[n] for n in (*READS, LAID_READ) if n in runs]
    return {"memory": timing.taken(*faster(*reads), said=True),
            "matrix-vector": made[READS[0]], "streaming": made[READS[1]],
            **({"laid-out": made[LAID_READ]} if LAID_READ in made else {}),
            "workbench": work, "BLAS": made[WORKBENCH],
            **({"tiles": made[TILES]} if TILES in made else {})}


def faster(*ways, what="the forklift"):
    """Several ways' runs of one ceiling as one (the forklift's reads, the workbench's two
    products): in each round all were measured in, the fastest, with the share of the cores
    other work took during that one; disturbed where too few of those rounds are clean.
    -> (seconds, "middle", what, Runs)"""
    first, at = ways[0], [{r: i for i, r in enumerate(w.rounds)} for w in ways[1:]]
    kept = [(i, *(a[r] for a in at)) for i, r in enumerate(first.rounds)
            if all(r in a for a in at)]  # each round's place in each way's runs
    won = [min(zip(ways, places), key=lambda way: way[0].steps[way[1]][0]) for places in kept]
    others = [runs.others[k] for runs, k in won]
    clean = sum(not timing.disturbed(o) for o in others)
    runs = dataclasses.replace(
        first, steps=[runs.steps[k] for runs, k in won], others=others,
        again=sum(w.again for w in ways), disturbed=clean < min(timing.MIN_RUNS, len(won)),
        kept=tuple(range(len(kept))), rounds=tuple(first.rounds[p[0]] for p in kept),
        processes=tuple(first.processes[p[0]] for p in kept) if first.processes else ())
    return [s[0] for s in runs.steps], "middle", what, runs


def figures(ceiling, size, matmul):
    """The speeds' figures of one run, from its rounds' ceilings (ceilings()): each a rate of
    the middle round, its samples each round's own; the balance each round's math speed over
    its forklift's. -> {figure: a Measured}"""
    moved, flops = size * size * BYTES, 2 * matmul ** 3
    f, w = ceiling["memory"], ceiling["workbench"]
    return {"memory speed": timed(moved / f.seconds / 1e9, f, -1),
            "matrix-vector read": timed(moved / ceiling["matrix-vector"].seconds / 1e9,
                                        ceiling["matrix-vector"], -1),
            "streaming read": timed(moved / ceiling["streaming"].seconds / 1e9,
                                    ceiling["streaming"], -1),
            **({"laid-out read": timed(moved / ceiling["laid-out"].seconds / 1e9,
                                       ceiling["laid-out"], -1)} if "laid-out" in ceiling else {}),
            "math speed": timed(flops / w.seconds / 1e9, w, -1),
            **{f"{way} product": timed(flops / ceiling[way].seconds / 1e9, ceiling[way], -1)
               for way in ("BLAS", "tiles") if "tiles" in ceiling},
            "balance": Measured((flops / w.seconds) / (moved / f.seconds), ((1, f), (-1, w)))}


APART = 1.15  # two states of a machine: their readings this many times apart at least ...
SPLIT = 4  # ... and the gap between them wider than this many times their own spread (the
#            workbench read 187-197 or 295-351 GFLOP/s in one run on a 2-core Xeon)


def two_states(values, apart=APART):
    """The rounds' readings of one speed as two states of the machine, where they fall in two
    groups far apart: sorted on the log scale and split at the widest gap, each group of two
    readings or more, their middles at least `apart` times apart and the gap wider than
    SPLIT times the groups' own spread. -> ((low, high, count) of the lower group, of the
    upper) or None (one state, as far as the rounds show)."""
    y = np.sort(np.log(np.asarray([v for v in values if v > 0], dtype=float)))
    if y.size < 4:
        return None
    cut = int(np.argmax(np.diff(y))) + 1
    low, high = y[:cut], y[cut:]
    if low.size < 2 or high.size < 2:
        return None
    spread = math.sqrt((np.sum((low - low.mean()) ** 2) + np.sum((high - high.mean()) ** 2))
                       / (y.size - 2))
    if np.median(high) - np.median(low) < math.log(apart) or \
            high[0] - low[-1] <= SPLIT * max(spread, 1e-12):
        return None
    return tuple((math.exp(g[0]), math.exp(g[-1]), g.size) for g in (low, high))


def states_note(found, experiment):
    """What the run's speeds say of two states of the machine, for the line under their table:
    '; two states: the workbench read 187 to 197 GFLOP/s in 5 rounds, 295 to 351 in 7 (each
    row held to its own round's)', or '' where each speed kept to one."""
    said = []
    for figure, word, unit in (("memory speed", "forklift", "GB/s"),
                               ("math speed", "workbench", "GFLOP/s")):
        record = next((r for r in found if r["experiment"] == experiment
                       and r["figure"] == figure and r.get("samples")), None)
        states = record and two_states(record["samples"])
        if states:
            (a, b, m), (c, d, n) = states
            said.append(f"the {word} read {a:.1f} to {b:.1f} {unit} in {m} rounds, {c:.1f} to "
                        f"{d:.1f} in {n}")
    return (f"; two states: {', and '.join(said)} (each row held to its own round's)"
            if said else "")


def held_to(ceiling, size, matmul, source):
    """The speeds a run's rows are held to: each the middle of its rounds' ceilings, with the
    Timings behind them, so that each row's distance from its limit is taken round by round."""
    moved, flops = size * size * BYTES, 2 * matmul ** 3
    return Speeds(moved / ceiling["memory"].seconds, flops / ceiling["workbench"].seconds,
                  source, timings={"forklift": (ceiling["memory"], moved),
                                   "workbench": (ceiling["workbench"], flops)})


def x_limit(cfg, steps, t, roofs):
    """A row's time t (a Timing) over its limit at these speeds (its slowest step's), as a
    figure: where the speeds were measured in rounds, each round's time over that round's own
    limit, the slower of its reads at that round's forklift and its math at that round's
    workbench, so that the speeds' drift cancels, and a row near the balance is held to
    whichever bound it in that round. -> (a Measured, the limit's seconds, what bounds it)"""
    limit_s, bound = max(roofs.limit(cfg, riders) for riders in steps)
    if not roofs.timings:
        return timed(t.seconds / limit_s, t), limit_s, bound
    (read, moved), (bench, flops) = roofs.timings["forklift"], roofs.timings["workbench"]
    reads = max(accounting.bytes_read(cfg, riders) for riders in steps) / moved  # s per s read
    maths = max(accounting.trip_flops(cfg, riders) for riders in steps) / flops
    return (Measured(t.seconds / limit_s, ((1, t),), over=((reads, read), (maths, bench))),
            limit_s, bound)
