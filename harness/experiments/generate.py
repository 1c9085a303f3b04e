"""Beyond the post: a whole decode, as llama-bench's -n measures it. 1 and 16 users, each with
--notes notes, type --generate tokens in a row, each step one token each, every notebook a note
longer after it: tokens per second over the whole run of steps, not one step's. Off unless
--generate asks for it (two_phases.py --generate 128)."""
from harness import flags
from harness.experiments import SEED
from harness.keeping.records import Layout, col, ms, timed
from harness.measuring import bench as b
from harness.measuring.rounds import Trial
from harness.predicting import plans
from harness.predicting.plans import Experiment, Processes, Row, trial_name
from harness.showing.printers import sheet
from harness.terminal import plural

NAME = "generate"  # the experiment, as --experiments names it
PLACE = 11  # its place in the post's order (experiments/registry.py): after the depth's
USERS = (1, 16)  # users typing together, as llama-bench's batch of 1 and a server's of 16


def add_flags(g):
    g.add_argument("--generate", type=flags.whole(0, flags.LONGEST), default=0, metavar="N",
                   help="generate: a whole decode of N tokens in a row for 1 and 16 users, "
                        "tokens per second (llama-bench's -n); 0: none")


def plan(args):
    n = args.generate
    return [Row({"users": u, "tokens": n}, f"{u} {plural(u, 'user')}, {n} tokens",
                [[(args.notes + i, 1)] * u for i in range(n)]) for u in USERS] if n else []


def trials(bench, args, rows):
    """Each row's N trips in a row, each made before the timer from where its notebook stands
    then (a GPU's graph is captured there), the notebook set back before every visit."""
    first = b.read_question(bench, args.notes, SEED + 1)
    book = b.copies(bench, first, max(row.key[0] for row in rows), room=args.generate)
    for row in rows:
        (u, n), typed = row.key, b.view(book, row.key[0], args.notes)
        x, calls = b.tokens(bench.cfg, u, SEED + 3, bench.on), []
        for i in range(n):
            typed["len"] = args.notes + i
            calls.append(b.trip_of(bench, x, [(typed, 1)]))
        typed["len"] = args.notes

        def back(typed=typed):
            typed["len"] = args.notes
        yield Trial(trial_name(NAME, row), calls, back, group=b.group(bench, [u]),
                    timer=bench.on)


def figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (u, n), t = r.row.key, r.figures["total"]
        rows.append({"users": u, "tokens": n, "total": ms(t),
                     "tokens per second": timed(u * n / t.seconds, t, -1),
                     "per token": timed(t.seconds / n * 1e3, t)})
    return [(TABLE, rows)] if rows else []


def sheets(found, cfg, args):
    if not args.generate:
        return []
    return [sheet(TABLE, found, settings=f"each user with {args.notes} notes at the start; "
                                         f"{plans.words(cfg, args.threads)}",
                  note="; tokens/s: every user's tokens over the whole run of steps")]


TABLE = Layout(NAME, [col("users", "users", "users", "d", key=True),
                      col("tokens", "tokens", "tokens", "d", key=True),
                      col("total", "total ms", "ms", ".1f"),
                      col("tokens per second", "tokens/s", "tokens/s", ".1f", compared=True),
                      col("per token", "ms/step", "ms", ".2f")],
               timed=("total",), title="Beyond the post: a whole decode, tokens in a row")
EXPERIMENT = Experiment(plan, trials, figures, sheets, checked=False, name=NAME,
                        flags=add_flags, quick={"generate": 0},
                        lengths=lambda args: [("--generate", args.notes + args.generate)],
                        riders=lambda args: {"--generate": sum(USERS) * args.generate},
                        processes=(Processes(NAME, least=1),))
