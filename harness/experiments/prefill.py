"""Phase 1: reading (prefill). One user, one trip holding the whole question."""
from harness.experiments import SEED
from harness.keeping.records import Layout, col, ms, timed
from harness.measuring import bench as b
from harness.predicting import plans
from harness.predicting.plans import Experiment, Row, trial_name
from harness.showing.printers import sheet
from harness.terminal import plural
import model


def plan(args):
    return [Row({"prompt": p}, f"{p} {plural(p, 'token')}", [[(0, p)]]) for p in args.prompts]


def trials(bench, args, rows):
    longest = max(row.key[0] for row in rows)  # warms up for all: the rest warm as recorded
    for row in rows:
        (p,) = row.key
        x, book = b.tokens(bench.cfg, p, SEED + 2, bench.on), b.book(bench, 1, p)
        yield b.trial(bench, trial_name("prefill", row), x, [(book, p)], warm=p == longest)


def figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (p,), t = r.row.key, r.figures["time"]
        rows.append({"prompt": p, "time": ms(t), "time per token": timed(t.seconds * 1e3 / p, t),
                     "math speed": timed(model.table_flops(cfg, p) / t.seconds / 1e9, t, -1)})
    return [(TABLE, rows)]


def sheets(found, cfg, args):
    return [sheet(TABLE, found, note="; GFLOP/s: the tables' math only",
                  settings="one user's question read in one trip; "
                           + plans.words(cfg, args.threads))]


TABLE = Layout("prefill", [col("prompt", "prompt", "tokens", "d", key=True),
                           col("time", "time ms", "ms", ".1f"),
                           col("time per token", "ms/token", "ms", ".2f", compared=True),
                           col("math speed", "GFLOP/s", "GFLOP/s", ".1f", compared=True)],
               timed=("time",), title="Phase 1, reading (prefill)")

EXPERIMENT = Experiment(plan, trials, figures, sheets)
