"""The machine's two limits, the forklift (memory speed) and the workbench (math speed), as a
run holds its timings to them or predicts with them; machine_speed.py measures them."""
import dataclasses
import math

import numpy as np

from harness.post import MATMUL, SIZE  # the forklift's 400 MB table, far bigger than any
#   cache; the workbench's 2048 x 2048 tables, which fit close to the workbench (caches)
from harness.measuring import devices, host
from harness.measuring.rounds import Trial, calibrate
import model
from model import BYTES, FLOPS_PER_NUMBER

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
    origin: tuple = None  # a file's (--roofs): (its path, its machine's CPU, cores, threads)

    def limit(self, cfg, riders):
        """The fastest a trip can be at these speeds: (seconds, what bounds it)."""
        return model.limit(cfg, riders, self.bytes_per_s, self.flops_per_s, self.link_per_s)

    def serial(self, cfg, riders):
        """The trip's limit with the link's sends after its work (model.serial_limit)."""
        return model.serial_limit(cfg, riders, self.bytes_per_s, self.flops_per_s,
                                  self.link_per_s)

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
    link = saved.get("link_per_s")
    return Speeds(saved["bytes_per_s"], saved["flops_per_s"], saved.get("source", ""), **at,
                  link_per_s=link if type(link) in (int, float) and link > 0 else math.inf)


def memory_bytes(size, matmul):
    """What measuring both needs, at most: the forklift's table and the workbench's three."""
    return (size * size + 3 * matmul * matmul) * BYTES


def sizes(quick, on=devices.NUMPY):
    """The forklift's and the workbench's sides (--quick's, or the post's), the forklift's
    table wider where the cache would hold too much of it (side())."""
    made = QUICK if quick else {"size": SIZE, "matmul": MATMUL}
    return {**made, "size": side(made["size"], on, quick)}


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


# ---- the post's two measurements (machine_speed.py's, and two_phases.py's in every round); the
# post's `sec = best_of(...)` is the best of every round that visits them


def forklift(size=SIZE, on=devices.NUMPY):
    """Forklift: push ONE token through a size x size table (400 MB at the post's 10,000).
    Every number is used once, for just 2 FLOPs, so this is almost pure fetching.
    -> (the product to time, the bytes it reads)"""
    big = on.asarray(np.ones((size, size), dtype=np.float32))  # (size, size)
    one = on.asarray(np.ones(size, dtype=np.float32))  # (size,)
    return lambda: big @ one, size * size * BYTES


def workbench(n=MATMUL, on=devices.NUMPY, dtype="float32"):
    """Workbench: multiply two n x n tables. They fit close to the workbench (the caches), so
    this is almost pure math: n*n outputs, each n multiplies and n adds. dtype: the numbers'
    precision (float32, the post's; a GPU's bfloat16 on its tensor cores).
    -> (the product to time, its FLOPs)"""
    rng = np.random.default_rng(0)
    a = on.asarray(rng.standard_normal((n, n), dtype=np.float32), dtype)  # (n, n)
    b = on.asarray(rng.standard_normal((n, n), dtype=np.float32), dtype)  # (n, n)
    return lambda: a @ b, 2 * n ** 3


def trial(name, product, on=devices.NUMPY, group=1):
    """One of the two as a round visits it: on NumPy one call a sample, as the post times it;
    on another library's device a burst of calls lasting BURST_S, timed by its own timer."""
    made = Trial(name, [product], group=group, timer=on)
    return made if on.numpy else calibrate(made, BURST_S)
