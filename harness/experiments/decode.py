"""Phase 2: typing (decode). Each user already has --notes notes; all type one token in the same
trip."""
from harness.experiments import SEED
from harness.keeping.records import Layout, col, ms, timed
from harness.measuring import bench as b
from harness.predicting import plans
from harness.predicting.plans import Experiment, Row, trial_name
from harness.showing.printers import sheet
from harness.terminal import plural
import model


def plan(args):
    return [Row({"users": u}, f"{u} {plural(u, 'user')}", [[(args.notes, 1)] * u])
            for u in args.users]


def trials(bench, args, rows):
    first = b.read_question(bench, args.notes, SEED + 1)
    book = b.copies(bench, first, max(row.key[0] for row in rows), room=1)  # every row's users
    for row in rows:  #                                                       read part of it
        (u,) = row.key
        yield b.trial(bench, trial_name("decode", row), b.tokens(bench.cfg, u, SEED + 3, bench.on),
                      [(b.view(book, u, args.notes), 1)], warm=u == model.readers(book))


def figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (u,), t = r.row.key, r.figures["time"]
        rows.append({"users": u, "step": ms(t), "tokens per second": timed(u / t.seconds, t, -1),
                     "math speed": timed(model.table_flops(cfg, u) / t.seconds / 1e9, t, -1),
                     "bytes read": model.bytes_read(cfg, r.row.steps[0]) / 1e6})
    return [(TABLE, rows)]


def sheets(found, cfg, args):
    return [sheet(TABLE, found, note="; GFLOP/s: the tables' math only",
                  settings=f"one token for each user, each with {args.notes} notes; "
                           f"{plans.words(cfg, args.threads)}")]


TABLE = Layout("decode", [col("users", "users", "users", "d", key=True),
                          col("step", "step ms", "ms", ".1f", compared=True),
                          col("tokens per second", "tokens/s", "tokens/s", ".1f", compared=True),
                          col("math speed", "GFLOP/s", "GFLOP/s", ".1f"),
                          col("bytes read", "MB read", "MB", ".0f")],
               timed=("step",), title="Phase 2, typing (decode)")

EXPERIMENT = Experiment(plan, trials, figures, sheets)
