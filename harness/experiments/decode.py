"""Phase 2: typing (decode). Each user already has --notes notes; all type one token in the same
trip. Its rows, their trials, its table, and the post's claims about typing (the forklift's
share, batching; the depth rows' figures say whether a faster forklift would help)."""
from harness import flags
from harness.experiments import SEED, launches
from harness.keeping.records import Layout, Missing, col, ms, sig, timed
from harness.measuring import bench as b
from harness.predicting import plans
from harness.predicting.plans import EXTRA, FIRST, Experiment, Row, trial_name
from harness.showing.pictures import Drawing, rows_of, trade
from harness.showing.printers import sheet
from harness.terminal import plural
import accounting
import model
from harness.judging.rules import (ABOUT, NOT_PRINTED, SMALL, WITH_NOTES, Claim, above, below,
                                   every, figure, more, speeds, value, within)
from harness.post import MODEL, NOTES, USERS

NAME = "decode"  # the experiment, as --experiments names it
PLACE = 3  # its place in the post's order (experiments/registry.py)


def add_flags(g):
    g.add_argument("--users", nargs="+", type=flags.whole(1, flags.MOST_USERS), default=USERS,
                   metavar="U", help="decode: users typing one token each in the same trip")
    g.add_argument("--notes", type=flags.whole(0, flags.LONGEST - 1), default=NOTES,
                   metavar="N", help="decode and collision: notes already in each typer's notebook")


def settle(p, args):
    if args.notes == 0 and args.predict is None:
        p.error("argument --notes: a measured run's typers have read a question, at least 1 "
                "note each; an empty notebook is for --predict")


def plan(args):
    return [Row({"users": u}, f"{u} {plural(u, 'user')}", [[(args.notes, 1)] * u])
            for u in args.users]


def trials(bench, args, rows, name=NAME, recorded=True):
    """Each row's users typing one token (named as `name`'s rows: experiments/wide.py types the
    same rows on another model's bench, unrecorded)."""
    first = b.read_question(bench, args.notes, SEED + 1)
    book = b.copies(bench, first, max(row.key[0] for row in rows), room=1)  # every row's users
    for row in rows:  #                                                       read part of it
        (u,) = row.key
        yield b.trial(bench, trial_name(name, row), b.tokens(bench.cfg, u, SEED + 3, bench.on),
                      [(b.view(book, u, args.notes), 1)], warm=u == model.readers(book),
                      recorded=recorded)


def measured(bench, args, rows):
    """Each row's trial, and on a GPU library's device the empty trip (launches.py) beside."""
    yield from trials(bench, args, rows)
    if not bench.on.numpy:
        yield from launches.trials(bench, args)


def figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (u,), t = r.row.key, r.figures["time"]
        rows.append({"users": u, "step": ms(t), "tokens per second": timed(u / t.seconds, t, -1),
                     "math speed": timed(accounting.table_flops(cfg, u) / t.seconds / 1e9, t, -1),
                     "bytes read": accounting.bytes_read(cfg, r.row.steps[0]) / 1e6})
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



# ---- its picture, and what to look at in it, written from the figures it shows

def draw(ax, rows):
    """Users growing: the machine's tokens per second against the gap each user feels, both
    axes from zero (neither can be less)."""
    ax.set_xlim(0, max(r["step"] for r in rows) * 1.15)
    ax.set_ylim(0, max(r["tokens per second"] for r in rows) * 1.15)
    return ("Batching: more tokens per second for the machine, a slower typist for each user",
            trade(ax, rows, "step", "tokens per second", "s-", "users typing in the same trip",
                  "the gap each user feels between words (ms)",
                  "the machine's tokens per second, all users",
                  [f"{r['users']} {plural(r['users'], 'user')}" for r in rows]))


def look(found):
    rows = rows_of(found, "decode", ("users", "tokens per second", "step"))
    if len(rows) < 2:
        return "the machine's tokens per second against the gap each user waits"
    a, b = rows[0], rows[-1]
    return (f"from {a['users']} to {b['users']} users on a trip: up, the machine's tokens per "
            f"second ({sig(a['tokens per second'])} to {sig(b['tokens per second'])}); right, "
            f"the gap each user waits between words ({sig(a['step'])} to {sig(b['step'])} ms)")


PICTURE = Drawing("decode.png", "decode", "Batching's trade",
                  "more users on a trip: up, the machine's tokens per second; right, the gap "
                  "each user waits between words", draw, look, experiment="decode")


# ---- its claims: each reads the figures it needs and gives the rule its Claim says

OFF = 2  # batching within 2x of what the accounting gives at this machine's limits, either way
DIMINISHING = 2  # 64 users give under 2x the tokens per second of 16 (the post's 1.4x): a 4th
#                  of the users more for less than twice the tokens, the notebooks' price


def idle_workbench(t, r):
    share = figure(t, "decode", "math speed", users=1) * 1e9 / speeds(t, r).flops_per_s
    return f"{share.value:.1%}", below(share, 0.1, label="the share", fmt=".1%")


def forklift_share(t, r):
    step = figure(t, "decode", "step", users=1) / 1e3
    share = value(t, "decode", "bytes read", users=1) * 1e6 / speeds(t, r).bytes_per_s / step
    return f"{share.value:.0%}", above(share, 0.8, label="the share", fmt=".0%")


def workbench_barely_helps(t, r):
    s = speeds(t, r)
    flops = value(t, "decode", "math speed", users=1) * value(t, "decode", "step", users=1) * 1e6
    math = flops / s.flops_per_s * 1e3  # ms of one user's step at the workbench's speed
    fetch = value(t, "decode", "bytes read", users=1) * 1e6 / s.bytes_per_s * 1e3
    return (f"math {math.value:.1f} ms against fetching {fetch.value:.1f} ms",
            below(math / fetch, 0.1, label="math over fetching", fmt=".3f"))


def forklift_helps(t, r):
    steps = {n: figure(t, "depth", "step", users=1, notes=n) for n in (0, 1023)}
    mb = {n: value(t, "depth", "bytes read", users=1, notes=n) for n in (0, 1023)}
    fetch = (mb[1023] - mb[0]) * 1e6 / speeds(t, r).bytes_per_s * 1e3  # ms at the forklift's
    extra = steps[1023].value - steps[0].value
    return (f"1,023 notes {extra:+.1f} ms over none, their {mb[1023] - mb[0]:.0f} MB "
            f"{fetch.value:.1f} ms at the forklift's speed",
            more(steps[1023], steps[0] + fetch / 2))


def gain(t, users):
    return (figure(t, "decode", "tokens per second", users=users)
            / figure(t, "decode", "tokens per second", users=1))


def typed_at_limits(r, users):
    """The tokens per second `users` users would type at this machine's limits, by the
    accounting (GPT-2 small, the post's notes each)."""
    if r is None:
        raise Missing("the machine's speeds")
    return users / r.limit(model.SIZES[MODEL], [(NOTES, 1)] * users)[0]


def batching_16(t, r):
    g = gain(t, 16)
    limits = typed_at_limits(r, 16) / typed_at_limits(r, 1)
    return (f"{g.value:.1f}x of the accounting's {limits:.1f}x",
            within(g / limits, 1 / OFF, OFF, label="the gain over the limits'", fmt=".2f"))


def batching_64(t, r):
    more = (figure(t, "decode", "tokens per second", users=64)
            / figure(t, "decode", "tokens per second", users=16))
    return (f"{gain(t, 64).value:.1f}x, 16 users {gain(t, 16).value:.1f}x",
            below(more, DIMINISHING, label="64 over 16 users", fmt=".2f",
                  way=f"not below {DIMINISHING}: no diminishing return"))


def gaps_grow(t, r):
    steps = [figure(t, "decode", "step", users=u) for u in USERS]
    mb = [value(t, "decode", "bytes read", users=u) for u in USERS]
    return (", ".join(f"{s.value:.1f}" for s in steps) + " ms",
            every(*(above(b / a, 1 + (mb_b / mb_a - 1) / 2, label=f"{v} over {u} users",
                          fmt=".2f")
                    for u, v, a, b, mb_a, mb_b in zip(USERS, USERS[1:], steps, steps[1:], mb,
                                                      mb[1:]))))


def notebooks_outweigh(t, r):
    one = value(t, "decode", "bytes read", users=1)
    many = value(t, "decode", "bytes read", users=64)
    notebook = (many - one) / 63  # MB read = tables + users x one notebook
    ratio = 64 * notebook / (one - notebook)
    return (f"{64 * notebook:,.0f} against {one - notebook:,.0f} MB ({ratio:.1f}x); "
            f"accounting: the same on every machine",
            within(ratio, 7 / ABOUT, 7 * ABOUT, label="the ratio", fmt=".1f"))


def notebooks_carried(t, r):
    ms = {p: figure(t, "breakdown", p, experiment="decode", users=64)
          for p in ("attention", "tables")}
    return (f"attention {ms['attention'].value:.1f} ms, tables {ms['tables'].value:.1f} ms",
            more(ms["attention"], ms["tables"], "attention over the tables",
                 "the tables take as long or longer"))


CLAIMS = [
    Claim("two_phases", "One typing user uses under 4% of the workbench", "3.7%",
          "One user's typing uses under 10% of the workbench (at any machine's limits one "
          "token does 0.5 FLOPs a byte against a balance of about 10: the post's 4% is its "
          "suite's distance from them)", idle_workbench, (("decode", {"users": 1}),),
          needs=WITH_NOTES, fails_on="a machine whose balance is under 5 FLOPs per byte"),
    Claim("two_phases", "More than 80% of the typing time is the forklift", "31 of 37.5 ms",
          "One user's bytes at the forklift's speed take more than 80% of the typing step (the "
          "post's own threshold: the rest is math and overhead)", forklift_share,
          (("decode", {"users": 1}),), needs=WITH_NOTES, construction=True,
          fails_on="a machine where one typing step is far from its memory limit (a slow "
          "matrix-vector product, or attention many times its limit)"),
    Claim("two_phases", "A faster workbench would barely help typing", "4.5 of 121 GFLOP/s",
          "One user's step does its math at the workbench's speed in under a tenth of the "
          "time its fetching takes at the forklift's", workbench_barely_helps, needs=WITH_NOTES,
          basis="speeds", fails_on="a machine whose balance is under 5 FLOPs per byte"),
    Claim("two_phases", "A faster forklift, or fewer bytes to fetch, would help typing",
          NOT_PRINTED, "Typing for 1 user at 1,023 notes is slower than at none by at least half "
          "the time its extra notes take at the forklift's speed", forklift_helps,
          why="typing's step should grow with the bytes it fetches: where it does not, the "
              "depth rows' time goes elsewhere (their x limit says how far each is from its "
              "limit)", needs=SMALL, construction=True, fails_on="a machine where the notes "
          "sit in a cache as large as them (hundreds of MB)"),
    Claim("two_phases", "Batching 16 users gives about 3.7x the tokens per second", "3.7x",
          f"16 users typing together give within {OFF}x either way of the tokens per second "
          f"over one user's that the accounting gives at this machine's limits (the post's 3.7x "
          f"against its limits' 6.4x): the tables are shared, the notebooks are not",
          batching_16, (("decode", {"users": 16}),), needs=WITH_NOTES, construction=True,
          fails_on="a GPU run one launch after another, whose step stays flat (16x, over 2x "
          "its limits' 6x), or a machine whose attention is far slower than its limit (under "
          "half its limits' gain)"),
    Claim("two_phases", "... and 64 users about 5.2x", "5.2x", f"64 users give under "
          f"{DIMINISHING}x the tokens per second of 16 (the post's 1.4x): the return "
          f"diminishes as the notebooks outweigh the tables", batching_64,
          (("decode", {"users": 64}),), needs=WITH_NOTES, construction=True,
          fails_on="a GPU whose step is its "
          "launches, flat from 16 users to 64 (4x the tokens per second)"),
    Claim("two_phases", "Each user's gap between words grows with the batch",
          "37.5, 85.3, 162.5, 461.8 ms", "Each 4x more users make the step grow at least half "
          "as much as the bytes it fetches do (the post's 2.3x, 1.9x and 2.8x against "
          "bytes 1.3x, 1.9x and 2.9x)", gaps_grow, (("decode", {"users": 4}),),
          needs=WITH_NOTES, construction=True, fails_on="a GPU whose steps are set by "
          "launches, not bytes, or a BLAS whose one-token product is far slower than its "
          "four-token one (1 user's step far above its limit)"),
    Claim("two_phases", "At 64 users the notebooks outweigh the tables, 7x over",
          "2,416 against 340 MB", f"64 users' notes weigh within {ABOUT:g}x of 7x the tables, "
          f"by the model's accounting", notebooks_outweigh, needs=WITH_NOTES, basis="accounting",
          fails_on="none: it is the accounting's"),
    Claim("two_phases", "... so at 64 users the forklift mostly carries notebooks", NOT_PRINTED,
          "In the recorded trip of 64 users, reading the notes takes longer than the tables",
          notebooks_carried, needs=WITH_NOTES, fails_on="a machine whose table products are far "
          "slower than its attention"),
]


EXPERIMENT = Experiment(plan, measured, figures, sheets, name=NAME, flags=add_flags,
                        quick={"users": (1, 4), "notes": 64}, settle=settle,
                        lengths=lambda args: [("--notes", args.notes + 1)],
                        riders=lambda args: {"--users": sum(args.users)},
                        processes=(FIRST, EXTRA), empty=launches.NAME, phase="typing",
                        picture=PICTURE)
