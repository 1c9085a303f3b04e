"""The forklift against the workbench (machine_speed.py's figures): the post's claim of their
balance, judged on the speeds the run measured, and only where the forklift read memory, not
a cache."""
from harness.keeping.records import Missing, find
from harness.measuring.speeds import CACHE_RULE
from harness.judging.rules import FAR, Claim, figure, within
from accounting import BYTES, FLOPS_PER_NUMBER


ONE_TOKEN = FLOPS_PER_NUMBER / BYTES  # FLOPs per byte of a table number one token meets: 0.5
MOST_TOKENS = 256  # a trip needs fewer tokens than this: "a question of a few hundred" passes them


def from_memory(t):
    """Raise Missing where the forklift's table fitted in the cache the run recorded (STREAM's
    rule): its reading is the cache's speed, not memory's, and backs no claim."""
    read = find(t, "machine_speed", "read")
    cache = (read.get("settings") or {}).get("cache_bytes")
    if cache and read["value"] * 1e6 < CACHE_RULE * cache:
        raise Missing(f"the forklift's table, {read['value']:,.0f} MB, is under {CACHE_RULE}x "
                      f"the {cache / 2 ** 20:,.0f} MiB cache: it read the cache, not memory; "
                      f"rerun with a larger --size")


def balance(t, r):
    from_memory(t)
    b = figure(t, "machine_speed", "balance")  # (its table's figure: one estimate, told alike)
    n = b * (BYTES / FLOPS_PER_NUMBER)  # the tokens a trip needs
    return (f"{b.value:.1f} FLOPs per byte, a trip needs about {n.value:.0f} tokens",
            within(b, FAR * ONE_TOKEN, MOST_TOKENS * ONE_TOKEN, label="the balance", fmt=".1f"))


REFERENCE_BLAS = "a NumPy on the reference BLAS (no OpenBLAS or MKL), whose math is slow"
PLACE = 1  # its claims' place in the post's order (experiments/registry.py)

CLAIMS = [
    Claim("machine_speed", "The workbench outpaces the forklift: about 10 FLOPs per byte, so "
          "a trip needs about 20 tokens to keep the math busy", "10.1, about 20",
          f"The balance is over {FAR * ONE_TOKEN:g} FLOPs per byte, {FAR}x the {ONE_TOKEN:g} a "
          f"table number gives one token (typing leaves most of the workbench idle), and under "
          f"{MOST_TOKENS * ONE_TOKEN:g}, so that a trip needs (2 x the balance) fewer than "
          f"{MOST_TOKENS} tokens (a question of a few hundred passes them)", balance,
          fails_on=REFERENCE_BLAS + " (under 2); a data-centre GPU in 16-bit math, whose "
          "balance of a few hundred needs about a thousand tokens (over 128)"),
]
