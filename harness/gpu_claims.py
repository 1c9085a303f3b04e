"""The post's claims about a GPU, judged by prediction on the first machine a prediction is for
(two_phases.py --predict NAME), from its turning points: a modern GPU's balance, long reads on
the workbench, one typer's idle workbench, batching that pays, and how extreme the collision is
against the post's own machine. Their verdicts read "predicted: holds"."""
from harness.printers import sig
from harness.records import Missing, rows
from harness.rules import Claim

LONG = 1024  # a long question: the post's "hundreds or thousands of tokens on the trip"


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
    half = row.get("half bench")
    if half is None:
        return (f"never: the notes cap typing at {sig(row['typing ceiling'])}% of the "
                f"workbench", False)
    return f"half the workbench from {sig(half)} users", True


def more_extreme(found, roofs):
    rows_found = list(rows(found, "turning points").items())
    post = [v for k, v in rows_found if dict(k).get("name") == "post"]
    if not post:
        raise Missing("the post's machine's turning points")
    here, there = first_row(found)["freeze"], post[0]["freeze"]
    return f"{sig(here)}x the normal gap, {sig(there)}x at the post's machine's limits", (
        here >= there)


GPU_CLAIMS = [
    Claim("two_phases", "A modern GPU's workbench does a few hundred math steps per byte, not 10",
          "a few hundred", "a balance of 100 FLOPs per byte or more", steps_per_byte,
          measured=False, predicted=True),
    Claim("two_phases", "On a GPU, reading a long question still keeps the workbench busy",
          "hundreds or thousands of tokens", f"reading turns workbench-bound at {LONG:,} tokens "
          "or fewer", long_reads, measured=False, predicted=True),
    Claim("two_phases", "Typing for one user leaves a GPU's workbench idle more than 99% of the "
          "time", "idle > 99%", "one typer keeps the workbench busy under 1% of the time",
          one_typer_idle, measured=False, predicted=True),
    Claim("two_phases", "Batching is the only way the chip pays for itself", "batching pays",
          "some batch of typers (with their notes) reaches half the workbench", batching_pays,
          why="each typer's notes are bytes no batch shares: with fewer notes (--notes), or "
              "fewer key/value heads (a Llama-style --model), batching pays sooner",
          measured=False, predicted=True),
    Claim("two_phases", "The shape is the same on a GPU, only more extreme", "more extreme",
          "a long question read at once freezes the typers for at least as many normal gaps as "
          "at the post's machine's limits", more_extreme, measured=False, predicted=True,
          why="the freeze is the question's math against the typers' fetch, over the balance: "
              "the faster the workbench against the forklift, the shorter the freeze"),
]
