"""On a GPU: typing on the largest GPT-2 too. GPT-2 small's typing step is some 500 kernels (42
a floor, views aside, as PyTorch's profiler counts them) for 340 MB of float32 tables: on a GPU
each kernel's microsecond or two outlasts its bytes (70 us at an H200's 4.8 TB/s), graphs or
not, so small cannot show the forklift there. GPT-2 xl fetches 5.9 GB of float32 tables a step
(2.95 in bfloat16) through about 2,000 kernels (48 floors): its step outlasts its launches
where each launch costs under a microsecond of the device (--graphs), and the claim that
typing waits on the forklift is judged on it; launched one by one from the host, they may not
be, and the claim then says so.
Its rows are decode's (--users, each with --notes notes), its table the same with each row
against its limit; on a CPU it plans nothing (its typing already waits on its bytes)."""
import dataclasses

from harness.experiments import decode, launches
from harness.keeping import records
from harness.keeping.records import Layout, col, ms, timed
from harness.measuring import devices
from harness.predicting.plans import EXTRA, FIRST, Experiment
from harness.showing.printers import sheet
import accounting
import model

NAME = "wide"  # the experiment, as --experiments names it
PLACE = 10  # its place in the post's order (experiments/registry.py)
MODEL = "xl"  # the largest GPT-2


def config(cfg):
    """The wide model at the run's precision."""
    return dataclasses.replace(model.SIZES[MODEL], dtype=cfg.dtype, note_dtype=cfg.note_dtype)


def plan(args):
    """decode's rows, on a GPU library's device (and when the run's model is not xl already)."""
    gpu = devices.on_a_gpu(getattr(args, "device", "numpy")) and not getattr(args, "predict",
                                                                             None)
    return decode.plan(args) if gpu and args.model != MODEL else []


def settle(p, args):
    """Named alone (not among all the experiments, the default), it must plan something."""
    if NAME in args.experiments and list(args.experiments) != list(p.get_default("experiments")) \
            and not plan(args):
        p.error("argument --experiments: wide types on GPT-2 xl on a GPU only (--device "
                "torch:cuda, torch:mps or cupy:cuda), beside a smaller --model")


def trials(bench, args, rows):
    """decode's trials on the wide model's own tables, and its empty trip (launches.WIDE)."""
    cfg = config(bench.cfg)
    wide = dataclasses.replace(bench, cfg=cfg, floors=bench.on.tables(model.floors(
        cfg, args.seed)), questions={})
    yield from decode.trials(wide, args, rows, NAME, recorded=False)
    yield from launches.trials(wide, args, launches.WIDE)


def figures(cfg, args, outcomes, roofs):
    """Each row's step, tokens per second and bytes, and the step against its limit at the
    speeds measured beside it (the wide model's own accounting)."""
    wide, rows = config(cfg), []
    for r in outcomes:
        (u,), t = r.row.key, r.figures["time"]
        limit = roofs.limit(wide, r.row.steps[0])[0]
        rows.append({"users": u, "step": ms(t), "tokens per second": timed(u / t.seconds, t, -1),
                     "bytes read": accounting.bytes_read(wide, r.row.steps[0]) / 1e9,
                     "limit": limit * 1e3, "x limit": timed(t.seconds / limit, t)})
    return [(TABLE, rows)] if rows else []


def sheets(found, cfg, args):
    if not records.of(found, TABLE.name):  # (off a GPU it plans nothing)
        return []
    return [sheet(TABLE, found, settings=f"one token for each user, each with {args.notes} "
                                         f"notes; {config(cfg)}", note="; x limit: the step "
                  "over its limit at the speeds measured beside it")]


TABLE = Layout("decode xl", [col("users", "users", "users", "d", key=True),
                             col("step", "step ms", "ms", ".2f", compared=True),
                             col("tokens per second", "tokens/s", "tokens/s", ".1f"),
                             col("bytes read", "GB read", "GB", ".2f"),
                             col("limit", "limit ms", "ms", ".2f"),
                             col("x limit", "x limit", "x", ".2f")],
               timed=("step",), title="Typing on GPT-2 xl (on a GPU, where its step outlasts "
                                      "its launches)")


EXPERIMENT = Experiment(plan, trials, figures, sheets, checked=False, name=NAME, settle=settle,
                        processes=(FIRST, EXTRA), empty=launches.WIDE, model=config)
