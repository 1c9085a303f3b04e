"""The post's claims about a GPU, judged by prediction on the first machine a prediction is for
(two_phases.py --predict NAME), from its turning points: a modern GPU's balance, long reads on
the workbench, one typer's idle workbench, batching that pays, and how extreme the collision is
against the post's own machine. Their verdicts read "predicted: holds"."""
from harness.keeping.records import Missing, rows, sig
from harness.judging.rules import FREEZE, Claim


LONG = 4096  # a long question: the post's "hundreds or thousands of tokens on the trip", up
#              to a few thousand (a mixture of experts reads more tables a token, so turns later)
GAIN = 5  # batching pays: a batch uses the workbench this many times as much as one typer (the
#           post's CPU measured 5.2x the tokens per second at 64 users)


def first_row(found):
    """The turning points of the machine the prediction is for (the first), as {figure: value}."""
    rows_found = rows(found, "turning points")
    if not rows_found:
        raise Missing("turning points: not predicted")
    return next(iter(rows_found.values()))


def steps_per_byte(found, roofs):
    b = first_row(found)["balance"]
    return f"{sig(b)} FLOPs per byte", b >= 100


def long_reads(found, roofs):
    p = first_row(found).get("reads turn")
    if p is None:
        return "never workbench-bound", False
    return f"workbench-bound from {sig(p)} tokens", p <= LONG


def one_typer_idle(found, roofs):
    share = first_row(found)["one typer"]
    return f"busy {sig(share)}%, idle {sig(100 - share)}%", share < 1


def batching_pays(found, roofs):
    row = first_row(found)
    gain = row["typing ceiling"] / row["one typer"]
    return (f"{sig(gain)}x: one typer keeps it {sig(row['one typer'])}% busy, the most any batch "
            f"can {sig(row['typing ceiling'])}%", gain >= GAIN)


def huge_freeze(found, roofs):
    post = [v for k, v in rows(found, "turning points").items() if dict(k).get("name") == "post"]
    if not post:
        raise Missing("turning points: the post's machine")
    here, there = first_row(found)["freeze"], post[0]["freeze"]
    return (f"{sig(there)}x at the post's machine's limits; on this machine {sig(here)}x, as "
            f"follows from its balance", there >= FREEZE)


PLACE = 8  # its claims' place in the post's order (experiments/registry.py)

CLAIMS = [
    Claim("two_phases", "On a GPU the problem is the same, only more extreme: a few hundred math "
          "steps per byte, not 10", "a few hundred", "a balance of 100 FLOPs per byte or more",
          steps_per_byte,
          basis="accounting", predicted=True),
    Claim("two_phases", "On a GPU, reading a long question still keeps the workbench busy",
          "hundreds or thousands of tokens", f"reading turns workbench-bound at {LONG:,} tokens "
          "or fewer", long_reads, basis="accounting", predicted=True),
    Claim("two_phases", "Typing for one user leaves a GPU's workbench idle more than 99% of the "
          "time", "idle > 99%", "one typer keeps the workbench busy under 1% of the time",
          one_typer_idle, basis="accounting", predicted=True),
    Claim("two_phases", "Batching is the only way the chip pays for itself", "batching pays",
          f"a full batch of typers (each with its notes) keeps the workbench {GAIN}x or more as "
          "busy as one typer, as batching gave the post's CPU 5.2x", batching_pays,
          why="each typer's notes are bytes no batch shares: with fewer notes (--notes), or "
              "fewer key/value heads (a Llama-style --model), batching pays more",
          basis="accounting", predicted=True),
    Claim("two_phases", "Reading a long question at once is one huge freeze for the typers",
          "about 40x", f"on the post's machine (the post's claim is of its CPU), at least "
                       f"{FREEZE}x the typers' normal gap at its limits; this machine's follows",
          huge_freeze, basis="accounting", predicted=True,
          why="the freeze is the question's math against the typers' fetch, over the balance: "
              "the faster the workbench against the forklift, the shorter the freeze, and the "
              "less chunking matters"),
]
