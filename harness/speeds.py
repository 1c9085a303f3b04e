"""The machine's two limits: the forklift (memory speed) and the workbench (math speed),
measured as machine_speed.py prints them, and the record two_phases.py holds its timings to."""
import dataclasses

import numpy as np

from harness import timing
from model import BYTES, FLOPS_PER_NUMBER

SIZE = 10_000  # forklift: a 10,000 x 10,000 float32 table, 400 MB, far bigger than any cache
MATMUL = 2048  # workbench: 2048 x 2048 tables fit close to the workbench (caches)
QUICK = {"size": 4000, "matmul": 1024}


@dataclasses.dataclass(frozen=True)
class Speeds:
    """The two speeds a run holds its rows to (or predicts with), in bytes and FLOPs per second,
    where they come from, and, through a run, the speeds measured at its start and its end."""
    bytes_per_s: float
    flops_per_s: float
    source: str = ""
    start: "Speeds" = None
    end: "Speeds" = None

    @property
    def balance(self):
        """FLOPs the workbench does in the time the forklift brings one byte."""
        return self.flops_per_s / self.bytes_per_s

    def saved(self):
        """As a result keeps it: {"bytes_per_s", "flops_per_s", "source", "start", "end"}."""
        out = {"bytes_per_s": self.bytes_per_s, "flops_per_s": self.flops_per_s,
               "source": self.source}
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
    return Speeds(saved["bytes_per_s"], saved["flops_per_s"], saved.get("source", ""), **at)


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
