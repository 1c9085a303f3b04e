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
WIDE = "launches xl"  # the wide model's (experiments/wide.py), beside its typing rows


def trials(bench, args, name=NAME):
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
    return [b.trial(empty, name, b.tokens(cfg, 1, SEED + 3, bench.on),
                    [(b.copies(empty, first, 1, room=1), 1)], recorded=False)]


def figures(outcomes, done):
    """The empty trip against one user's typing step (the fewest users typed), GPT-2's and, on
    a GPU, the wide model's. -> [(Layout, rows)], none where it was not measured"""
    out = []
    for name, typed, layout in ((NAME, "decode", TABLE), (WIDE, "wide", WIDE_TABLE)):
        rows = sorted(outcomes.get(typed, []), key=lambda r: r.row.key)
        if name not in done.visits or not rows:
            continue
        empty = timing.taken([s[0] for s in done.runs(name).steps], "middle", name,
                             done.runs(name), said=True)
        step = rows[0].figures["time"]
        out.append((layout, [{"users": rows[0].row.key[0], "empty trip": ms(empty),
                              "step": ms(step), "share": Measured(
                                  empty.seconds / step.seconds, ((1, empty), (-1, step)))}]))
    return out


TABLE = Layout(NAME, [col("users", "users", "users", "d", key=True),
                      col("empty trip", "empty trip ms", "ms", ".3f", compared=True),
                      col("step", "step ms", "ms", ".3f"),
                      col("share", "empty trip's share", "x", ".2f")],
               timed=("empty trip", "step"),
               title="Launching a typing step's work: the empty trip")
WIDE_TABLE = dataclasses.replace(TABLE, name=WIDE,
                                 title="Launching GPT-2 xl's typing step: its empty trip")


def sheets(found, args, name=NAME):
    if not records.of(found, name):
        return []
    how = ("replayed as one CUDA graph (--graphs: one launch; each kernel still runs)"
           if args.graphs else
           "launched one after another (eager: --graphs replays them as one launch)")
    return [sheet(TABLE if name == NAME else WIDE_TABLE, found,
                  settings=f"the same floors and operations on tables one number a head wide, "
                           f"almost no bytes: {how}",
                  note="; a share near 1: the step is its launches, not the forklift")]


# ---- its claims: each reads the figures it needs and gives the rule its Claim says

LAUNCHED = 0.5  # typing is the forklift's, not its launches', where an empty trip (every
#                launch, almost no bytes) takes under this share of one user's step


def not_launches(found, roofs):
    """Judged on GPT-2 xl where a GPU run typed on it (experiments/wide.py): small's step is
    its kernels on any GPU; else on the run's own model."""
    wide = bool(records.of(found, WIDE))
    empty, step = (figure(found, WIDE if wide else NAME, "empty trip", users=1),
                   figure(found, "decode xl" if wide else "decode", "step", users=1))
    return (("GPT-2 xl: " if wide else "") + f"an empty trip {empty.value:.3g} ms of a "
            f"{step.value:.3g} ms step",
            below(empty / step, LAUNCHED, label="the empty trip's share", fmt=".2f"))


LAUNCH_CLAIM = Claim(
    "two_phases", "On a GPU, typing waits on the forklift, not on launching its work",
    "the post's premise: typing is memory-bound", "An empty trip (the same floors and "
    f"operations on tables a head wide: every launch, almost no bytes) takes under "
    f"{LAUNCHED:.0%} of one user's typing step", not_launches, (("decode", {"users": 1}),),
    why="a typing step launches about 500 kernels one after another: --graphs replays them as "
        "one CUDA graph, which cuts the host's launching, not the kernels (each still takes a "
        "microsecond or two on the device, so a model as small as GPT-2 small's 340 MB of "
        "tables stays above its bytes' limit); on a GPU the claim is judged on GPT-2 xl, "
        "typed beside it", needs=(("notes", NOTES),), gpu=True,
    fails_on="a GPU run in eager mode, whose ~500 launches a step take longer than its bytes, "
             "and a small model even under --graphs, whose ~500 kernels outlast its bytes")


PLACE = 4  # its claims' place in the post's order (experiments/registry.py)

CLAIMS = [LAUNCH_CLAIM]
