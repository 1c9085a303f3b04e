"""Reading against typing, per token: the post's closing comparison, from Phase 1's and Phase 2's
outcomes, and the post's claim that reading is the cheaper per token."""
from harness.keeping import records
from harness.keeping.records import Layout, Measured, Missing, col, timed
from harness.showing.printers import sheet
from harness.judging.rules import WITH_NOTES, Claim, above, figure, sizes


def figures(outcomes):
    """The post's closing comparison, from this run: the best reading cost per token against
    one user's typing step. -> [(Layout, rows)], none without both."""
    reads = [(r.row.key[0], r.figures["time"]) for r in outcomes.get("prefill", [])]
    one = [r.figures["time"] for r in outcomes.get("decode", []) if r.row.key == (1,)]
    if not reads or not one:
        return []
    p, read = min(reads, key=lambda pt: pt[1].seconds / pt[0])
    reading_ms, typing_ms = read.seconds * 1e3 / p, one[0].seconds * 1e3
    return [(TABLE, [{"reading per token": timed(reading_ms, read), "at prompt": p,
                      "typing per token": timed(typing_ms, one[0]),
                      "times cheaper": Measured(typing_ms / reading_ms,
                                                ((1, one[0]), (-1, read)))}])]


def sheets(found):
    """The closing comparison in the post's words, from its records; none where not run."""
    said = {r["figure"]: r["value"] for r in records.of(found, TABLE.name)}
    if not said:
        return []
    return [sheet(TABLE, found, settings="the cheapest reading per token of Phase 1 against "
                  "one user's typing step of Phase 2", note="(each figure is its table's "
                  "above, with its runs' spread there)", text=(
        f"reading costs {said['reading per token']:.2f} ms per token (at {said['at prompt']} "
        f"tokens) and typing {said['typing per token']:.1f} ms (one user), so reading is about "
        f"{said['typing per token'] / said['reading per token']:.0f} times cheaper per token"))]


TABLE = Layout("summary", [col("reading per token", "reading ms/token", "ms", ".2f"),
                           col("at prompt", "at prompt", "tokens", "d"),
                           col("typing per token", "typing ms/token", "ms", ".1f"),
                           col("times cheaper", "times cheaper", "x", ".1f", compared=True)],
               title="Reading against typing, per token")


# ---- its claims: each reads the figures it needs and gives the rule its Claim says


def cheaper(t, r):
    typed = figure(t, "decode", "step", users=1)
    if not sizes(t, "prefill", "prompt"):
        raise Missing("prefill: not run")
    read = min((figure(t, "prefill", "time per token", prompt=p)
                for p in sizes(t, "prefill", "prompt")), key=lambda f: f.value)
    times = typed / read
    return f"{times.value:.0f}x", above(times, 5, label="typing over reading", fmt=".1f")


PLACE = 6  # its claims' place in the post's order (experiments/registry.py)

CLAIMS = [
    Claim("two_phases", "Reading is about 14 times cheaper per token than typing", "14x",
          "The cheapest read costs a token under a fifth of one user's typing step (about an "
          "order of magnitude: the post's 14x)", cheaper, needs=WITH_NOTES,
          fails_on="a machine whose balance is under about 2 FLOPs per byte (at its limits "
          "the read is about 2 x the balance times cheaper)"),
]
