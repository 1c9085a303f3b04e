"""On a GPU library's device: what launching a typing step's work costs, with almost no work.
The empty trip rides beside decode's rows, and its table prints under the typing table;
the claim that typing waits on the forklift, not on launching, is judged from it."""
import dataclasses
from harness.experiments import SEED
from harness.keeping import records
from harness.keeping.records import Layout, Measured, col, ms
from harness.measuring import bench as b, timing
from harness.showing.printers import sheet
import model
from harness.judging.rules import Claim, below, figure
from harness.post import NOTES


NAME = "launches"  # the empty trip's trial, and its table


def trials(bench, args):
    """The empty trip: one user typing through the same floors and operations as the model's,
    on tables one number a head wide (width = heads): every kernel a typing step launches, with
    almost no bytes or math, so its time is what launching costs (and, with --graphs, what is
    left of it)."""
    cfg = dataclasses.replace(model.gpt2("empty", bench.cfg.layers, bench.cfg.heads,
                                         bench.cfg.heads), dtype=bench.cfg.dtype,
                              note_dtype=bench.cfg.dtype)
    empty = dataclasses.replace(bench, cfg=cfg, floors=bench.on.tables(model.floors(cfg)),
                                questions={})
    first = b.read_question(empty, args.notes, SEED + 1)
    return [b.trial(empty, NAME, b.tokens(cfg, 1, SEED + 3, bench.on),
                    [(b.copies(empty, first, 1, room=1), 1)], recorded=False)]


def figures(outcomes, done):
    """The empty trip against one user's typing step (the fewest users decode ran). -> [(Layout,
    rows)], none where it was not measured"""
    decode = sorted(outcomes.get("decode", []), key=lambda r: r.row.key)
    if NAME not in done.visits or not decode:
        return []
    empty = timing.taken([s[0] for s in done.runs(NAME).steps], "middle", NAME,
                         done.runs(NAME), said=True)
    step = decode[0].figures["time"]
    return [(TABLE, [{"users": decode[0].row.key[0], "empty trip": ms(empty),
                      "step": ms(step),
                      "share": Measured(empty.seconds / step.seconds,
                                        ((1, empty), (-1, step)))}])]


TABLE = Layout(NAME, [col("users", "users", "users", "d", key=True),
                      col("empty trip", "empty trip ms", "ms", ".3f", compared=True),
                      col("step", "step ms", "ms", ".3f"),
                      col("share", "empty trip's share", "x", ".2f")],
               timed=("empty trip", "step"),
               title="Launching a typing step's work: the empty trip")


def sheets(found, args):
    if not records.of(found, NAME):
        return []
    how = ("replayed as one CUDA graph (--graphs: one launch; each kernel still runs)"
           if args.graphs else
           "launched one after another (eager: --graphs replays them as one launch)")
    return [sheet(TABLE, found, settings=f"the same floors and operations on tables one "
                                         f"number a head wide, almost no bytes: {how}",
                  note="; a share near 1: the step is its launches, not the forklift")]


# ---- its claims: each reads the figures it needs and gives the rule its Claim says

LAUNCHED = 0.5  # typing is the forklift's, not its launches', where an empty trip (every
#                launch, almost no bytes) takes under this share of one user's step


def not_launches(found, roofs):
    empty, step = (figure(found, "launches", "empty trip", users=1),
                   figure(found, "decode", "step", users=1))
    return (f"an empty trip {empty.value:.3g} ms of a {step.value:.3g} ms step",
            below(empty / step, LAUNCHED, label="the empty trip's share", fmt=".2f"))


LAUNCH_CLAIM = Claim(
    "two_phases", "On a GPU, typing waits on the forklift, not on launching its work",
    "the post's premise: typing is memory-bound", "An empty trip (the same floors and "
    f"operations on tables a head wide: every launch, almost no bytes) takes under "
    f"{LAUNCHED:.0%} of one user's typing step", not_launches, (("decode", {"users": 1}),),
    why="a typing step launches about 500 kernels one after another: --graphs replays them as "
        "one CUDA graph, which cuts the host's launching, not the kernels (each still takes a "
        "microsecond or two on the device, so a model as small as GPT-2 small's 170 MB of "
        "tables stays above its bytes' limit)", needs=(("notes", NOTES),), gpu=True,
    fails_on="a GPU run in eager mode, whose ~500 launches a step take longer than its bytes, "
             "and a small model even under --graphs, whose ~500 kernels outlast its bytes")


CLAIMS = [LAUNCH_CLAIM]
