"""Phase 1: reading (prefill). One user, one trip holding the whole question. Its rows, their
trials, its table, and the post's claims about reading."""
from harness import flags
from harness.experiments import SEED
from harness.keeping.records import Layout, Missing, col, ms, timed
from harness.measuring import bench as b
from harness.predicting import plans
from harness.predicting.plans import EXTRA, FIRST, Experiment, Row, trial_name
from harness.showing.printers import sheet
from harness.terminal import plural
import accounting
from harness.judging.rules import (ABOUT, FAR, NOT_PRINTED, SMALL, WITH_NOTES, Claim, above, below,
                                   every, figure, further, more, plain, sizes, speeds, value,
                                   within)
from harness.post import PROMPTS
from accounting import BYTES, FLOPS_PER_NUMBER

NAME = "prefill"  # the experiment, as --experiments names it
PLACE = 2  # its place in the post's order (experiments/registry.py)


def add_flags(g):
    g.add_argument("--prompts", nargs="+", type=flags.whole(1, flags.LONGEST), default=PROMPTS,
                   metavar="T", help="prefill: question lengths in tokens")


def plan(args):
    return [Row({"prompt": p}, f"{p} {plural(p, 'token')}", [[(0, p)]]) for p in args.prompts]


def trials(bench, args, rows):
    longest = max(row.key[0] for row in rows)  # warms up for all: the rest warm as recorded
    for row in rows:
        (p,) = row.key
        x, book = b.tokens(bench.cfg, p, SEED + 2, bench.on), b.book(bench, 1, p)
        yield b.trial(bench, trial_name(NAME, row), x, [(book, p)], warm=p == longest)


def figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (p,), t = r.row.key, r.figures["time"]
        rows.append({"prompt": p, "time": ms(t), "time per token": timed(t.seconds * 1e3 / p, t),
                     "math speed": timed(accounting.table_flops(cfg, p) / t.seconds / 1e9, t, -1)})
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



# ---- its claims: each reads the figures it needs and gives the rule its Claim says

GROWS = 3  # a 1,024-token question waits over 3x as long as a 256-token one: the wait follows
#            the length (4x the tokens; the post's 5.9x), not a fixed cost
TURN = 2  # a read at a quarter of the turn or less costs this many times the best per token
#           (at the limits: turn / tokens, 4x or more), one at twice the turn or more, less


# ---- the judges: each reads the figures it needs and gives the rule written beside it below


def one_token(t, r):
    read, typed = figure(t, "prefill", "time", prompt=1), figure(t, "decode", "step", users=1)
    return (f"{read.value:.1f} against {typed.value:.1f} ms",
            within(read / typed, 1 / ABOUT, ABOUT, label="the ratio", fmt=".2f"))


def under_3_ms(t, r):
    ms = [figure(t, "prefill", "time per token", prompt=p) for p in (64, 256)]
    one = figure(t, "prefill", "time", prompt=1)
    return (f"{ms[0].value:.2f} and {ms[1].value:.2f} ms, a 1-token question {one.value:.1f} ms",
            every(*(below(m / one, 0.25, label=f"{p} tokens' share", fmt=".3f")
                    for p, m in zip((64, 256), ms))))


def ttft_grows(t, r):
    times = [figure(t, "prefill", "time", prompt=p) for p in PROMPTS]
    return (", ".join(f"{s.value:.1f}" for s in times) + " ms",
            above(figure(t, "prefill", "time", prompt=1024) / figure(t, "prefill", "time",
                                                                       prompt=256),
                  GROWS, label="1,024 over 256 tokens", fmt=".2f"))


def half_the_workbench(t, r):
    best = max((figure(t, "prefill", "math speed", prompt=p) for p in (64, 256)),
               key=lambda f: f.value)
    peak = speeds(t, r).flops_per_s
    share = best * 1e9 / peak
    return (f"{best.value:.1f} of {peak.value / 1e9:.1f} GFLOP/s ({share.value:.0%})",
            above(share, 0.25, label="the share", fmt=".0%"))


def turn_near_20(t, r):
    turn = (speeds(t, r).balance * (BYTES / FLOPS_PER_NUMBER)).value  # tokens a trip needs
    prompts = sizes(t, "prefill", "prompt")
    few = [p for p in prompts if p <= turn / (2 * TURN)]
    many = [p for p in prompts if p >= turn * TURN]
    if not few or not many:
        raise Missing(f"prefill: a question of at most {turn / (2 * TURN):.0f} and one of at "
                      f"least {turn * TURN:.0f} tokens (the turn here is near {turn:.0f})")
    ms = {p: figure(t, "prefill", "time per token", prompt=p) for p in prompts}
    best = min(ms.values(), key=lambda f: f.value)
    few, many = few[-1], many[0]
    return (f"{few} {plural(few, 'token')} {ms[few].value:.2f} ms a token, {many} tokens "
            f"{ms[many].value:.2f}, "
            f"the best {best.value:.2f} (the turn here: about {turn:.0f} tokens)",
            every(above(ms[few] / best, TURN, label=f"{few} {plural(few, 'token')} over the best",
                        fmt=".2f"),
                  below(ms[many] / best, TURN, label=f"{many} tokens over the best",
                        fmt=".2f")))


def long_costs_more(t, r):
    long = figure(t, "prefill", "time per token", prompt=1024)
    mid = figure(t, "prefill", "time per token", prompt=256)
    return f"{long.value:.2f} against {mid.value:.2f} ms", more(long, mid)


def long_costs_more_why(found, roofs):
    return further(found, "prefill", ("1,024 tokens", {"prompt": 1024}),
                   ("256 tokens", {"prompt": 256}), per=lambda keys: keys["prompt"])


def attention_share(t, p):
    return (figure(t, "breakdown", "attention", experiment="prefill", prompt=p)
            / figure(t, "breakdown", "trip", experiment="prefill", prompt=p))


def attention_grows(t, r):
    share = {p: attention_share(t, p) for p in (256, 1024)}
    return (f"attention {share[256].value:.0%} of the trip at 256 tokens, "
            f"{share[1024].value:.0%} at 1,024",
            above(share[1024] / share[256], 1.25, label="the growth", fmt=".2f"))


def compute_bound(t, r):
    bound = [value(t, "check", "bound by", experiment="prefill", prompt=p) for p in (256, 1024)]
    busier = (figure(t, "prefill", "math speed", prompt=256)
              / figure(t, "prefill", "math speed", prompt=1))
    said = (f"both {bound[0]}-bound" if bound[0] == bound[1] else
            f"{bound[0]}-bound at 256 tokens, {bound[1]}-bound at 1,024")
    return (f"{said}, {busier.value:.0f}x the math of 1 token",
            every(plain(all(b == "workbench" for b in bound),
                        f"{bound[0]}-bound at 256 tokens, {bound[1]}-bound at 1,024"),
                  above(busier, FAR, label="256 over 1 token", fmt=".1f")))


LONG = "At 1,024 tokens each token costs more than at 256"
CLAIMS = [
    Claim("two_phases", "A 1-token question costs about the same as typing one word",
          "32.7 against 37.5 ms", f"A 1-token read takes within {ABOUT:g}x of one user's typing "
          f"step either way: the same trip with one passenger", one_token,
          (("prefill", {"prompt": 1}), ("decode", {"users": 1})), needs=WITH_NOTES,
          construction=True, fails_on="a machine whose notes are read far slower than its "
          "tables (attention many times its limit)"),
    Claim("two_phases", "At 64 to 256 tokens each token costs under 3 ms", "2.88 and 2.84 ms",
          "At 64 and 256 tokens a token costs under a quarter of a 1-token read (the post's "
          "3 ms, 9% of its 32.7, is that machine's speed: the share is the claim)", under_3_ms,
          (("prefill", {"prompt": 64}), ("prefill", {"prompt": 256})), needs=SMALL,
          fails_on="a machine whose workbench is barely faster than its forklift (a balance "
          "under 1), or a BLAS slow at these shapes"),
    Claim("two_phases", "The wait for the first word depends mostly on the question's length",
          "32.7, 86.6, 184.6, 726.4, 4278.3 ms", f"A 1,024-token question waits over {GROWS}x "
          f"as long as a 256-token one (4x the tokens; the post's 5.9x): the wait follows the "
          f"length", ttft_grows, (("prefill", {"prompt": 1024}),), needs=SMALL,
          construction=True,
          fails_on="a GPU whose balance of hundreds keeps every read up to 1,024 tokens on the "
          "forklift, or one run as one launch after another, whose reads all cost alike"),
    Claim("two_phases", "... running at about half the workbench's top speed",
          "59.9 of 120.9 GFLOP/s", "The better of 64 and 256 tokens reads at more than a quarter "
          "of the workbench (the post's h**3 bug held it to a quarter, and the post went "
          "looking for a bug)", half_the_workbench, (("prefill", {"prompt": 256}),),
          needs=SMALL, construction=True,
          fails_on="a machine with a bug like the post's h**3, or whose BLAS is slow at the "
          "model's shapes"),
    Claim("two_phases", "Reading needs about 20 tokens on a trip to keep the math busy",
          "5.41, 2.88, 2.84 ms a token at 16, 64, 256", f"Around the turn the machine's balance "
          f"puts reading at (2 x the balance tokens): a read of at most a quarter of the turn "
          f"costs {TURN}x or more a token than the best read, one of at least twice the turn "
          f"under {TURN}x", turn_near_20, (("prefill", {"prompt": 16}),
                                           ("prefill", {"prompt": 64})),
          needs=SMALL, construction=True, fails_on="a machine whose short reads are slow for "
          "other reasons than the forklift, so that cost a token still falls far past the turn; "
          "or one whose tables sit in a cache as large as them (768 MB of 3D V-Cache), so that a "
          "short read costs little more a token than a long one"),
    Claim("two_phases", LONG, "4.18 against 2.84 ms", "A token costs more at 1,024 tokens than "
          "at 256 (their ratio above 1)", long_costs_more, needs=SMALL, construction=True,
          explain=long_costs_more_why, fails_on="a machine whose BLAS runs the 1,024-token "
          "products much better than the 256-token ones, so that attention's growth is hidden"),
    Claim("two_phases", "... because the notebook's part grows faster than the question",
          NOT_PRINTED, "Attention's share of the recorded trip is 1.25x or more at 1,024 tokens "
          "what it is at 256 (judged on its own, whether or not the cost a token rises)",
          attention_grows, needs=SMALL, fails_on="a machine whose attention runs far below its "
          "limit at short questions"),
    Claim("two_phases", "Reading is stuck on the workbench", "compute-bound",
          f"The 256- and 1,024-token reads are workbench-bound by the accounting, and 256 tokens "
          f"do {FAR}x or more the math per second of 1 token", compute_bound, needs=SMALL,
          fails_on="a GPU in 16-bit math, whose balance of hundreds keeps a 256-token read on "
          "the forklift"),
]


EXPERIMENT = Experiment(plan, trials, figures, sheets, name=NAME, flags=add_flags,
                        quick={"prompts": (1, 16, 64)},
                        lengths=lambda args: [("--prompts", max(args.prompts))],
                        riders=lambda args: {"--prompts": len(args.prompts)},
                        processes=(FIRST, EXTRA), phase="reading")
