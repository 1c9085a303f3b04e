"""When the two phases share a server: typers at their normal gap, then a newcomer's long question
read all at once (the freeze) or in chunks between their steps (vLLM's chunked prefill), each
chunk size of the dial a row; and the post's claims of the freeze, the bumps and the dial."""
from harness import flags
from harness.experiments import SEED
from harness.judging.rules import (FREEZE, SERVER, TIE, Claim, above, every, figure, further,
                                   more, no_less, plain, sizes, value)
from harness.keeping import records
from harness.keeping.records import Layout, Measured, Missing, col, ms, sig
from harness.measuring import bench as b, timing
from harness.post import CHUNK, QUESTION, TYPERS
from harness.predicting import plans, predict
from harness.predicting.plans import FIRST, Experiment, Processes, Row, trial_name
from harness.showing.pictures import Drawing, rows_of, trade
from harness.showing.printers import sheet


NAME = "collision"  # the experiment, as --experiments names it
PLACE = 5  # its place in the post's order (experiments/registry.py)
DIAL = (128, 256, 512, 1024)  # the chunk-size dial; the question's length reads it at once


def add_flags(g):
    g.add_argument("--typers", type=flags.whole(1, flags.MOST_USERS), default=TYPERS,
                   metavar="U", help="collision: users typing when the new user arrives")
    g.add_argument("--question", type=flags.whole(1, flags.LONGEST), default=QUESTION,
                   metavar="T", help="collision: the new user's question length in tokens")
    dial = g.add_mutually_exclusive_group()
    dial.add_argument("--chunk", nargs="+", type=flags.whole(1, flags.MOST_USERS), default=DIAL,
                      metavar="C",
                      help="collision: the dial, question tokens read per step; a row reading "
                           "the whole question at once is always added")
    dial.add_argument("--budget", nargs="+", type=flags.whole(2, 2 * flags.MOST_USERS),
                      default=None, metavar="B",
                      help="collision: the same dial as vLLM's per-step token budget "
                           "(max_num_batched_tokens): chunk = B - typers")


def settle(p, args):
    """The dial once, as chunks: each at most the question, the question read all at once
    added; --budget's each less the typers. A dial whose steps outgrow a notebook is refused."""
    dial = "--budget" if args.budget else "--chunk"
    if args.budget:
        if min(args.budget) <= args.typers:
            p.error(f"argument --budget: each budget must be larger than --typers "
                    f"({args.typers}), to leave room for the question, got {min(args.budget)}")
        args.chunk = [budget - args.typers for budget in args.budget]
    args.chunk = sorted({min(c, args.question) for c in args.chunk} | {args.question})
    steps, context = len(schedule(args.question, args.chunk[0])), predict.context(args)
    if NAME in args.experiments and args.notes + steps > context:
        smallest = f"a budget of {args.chunk[0] + args.typers}" if args.budget else \
            f"a chunk of {args.chunk[0]}"
        p.error(f"argument {dial}: the typers' {args.notes} notes plus one per step "
                f"({steps} steps for {smallest}) must fit in a notebook of {context:,} "
                f"tokens; use a larger {dial} or fewer --notes")


def riders(args):
    steps = sum(-(-args.question // c) + 1 for c in args.chunk)
    return {"--typers, --question and --chunk": (args.typers + 1) * (steps + 1)}


def schedule(question, chunk):
    """vLLM's chunked prefill: what the newcomer puts on each step's trip, as a slice of its
    tokens (its question, then its first typed word). Every step, each typer gets its one token
    first; the newcomer's next `chunk` tokens of question ride in the same trip (with a per-step
    token budget B, chunk = B - typers). The step that reads the question's last piece also gives
    the newcomer its first word (the output at its last question token, sampled as vLLM does in
    that same step); in the next step it types that word with the others, and the collision is
    over. chunk >= question reads it all in one step."""
    return ([slice(a, min(a + chunk, question)) for a in range(0, question, chunk)]
            + [slice(question, question + 1)])


def riders_of(steps, notes, typers):
    """Each step's riders for the accounting: the typers one note further every step."""
    return [[(notes + i, 1)] * typers + [(s.start, s.stop - s.start)]
            for i, s in enumerate(steps)]


def plan(args):
    """The typers' normal gap, then the newcomer's question read in each chunk size of the dial."""
    return [Row({}, "normal gap", [[(args.notes, 1)] * args.typers])] + [
        Row({"chunk": c}, f"chunks of {c}, worst" if c < args.question else "all at once",
            riders_of(schedule(args.question, c), args.notes, args.typers)) for c in args.chunk]


def trials(bench, args, rows):
    """The typers alone (the row with no chunk), then each chunk size's schedule."""
    room = max(len(r.steps) for r in plan(args))  # the longest schedule's steps
    server = b.Server(bench, args.notes, args.typers, args.question, room,
                      (SEED + 1, SEED + 3, SEED + 4, SEED + 5))
    for row in rows:  # the question read at once warms up for all
        if not row.keys:
            yield b.trial(bench, trial_name(NAME, row), *server.alone, warm=False)
        else:
            yield server.trial(trial_name(NAME, row), schedule(args.question, row.key[0]),
                               plans.recorded_step(bench.cfg, row),
                               warm=row.key[0] == args.question)


def figures(cfg, args, outcomes, roofs):
    """The post's three lines, then the dial."""
    normal, dial = outcomes[0].figures["time"], {r.row.key[0]: r for r in outcomes[1:]}
    chunk = post_chunk(args.chunk, args.question)
    gaps = [normal, dial[args.question].figures["time"], dial[chunk].figures["time"]]
    row = {"typers": args.typers, "question": args.question, "chunk": chunk,
           "steps": len(dial[chunk].row.steps) - 1, **{gap: ms(t) for gap, t in zip(GAPS, gaps)}}
    rows = []
    for c, r in dial.items():
        f = r.figures
        rows.append({"chunk": c, "steps to read": len(r.row.steps) - 1,
                     "first word": ms(f["ttft"]), "median gap": ms(f["gap median"]),
                     "worst gap": ms(f["time"]), "total": ms(f["total"]),
                     "worst x normal": over(f["time"], normal)})
    return [(TABLE, [row]), (DIAL_TABLE, rows)]


def sheets(found, cfg, args):
    said = (f"{args.typers} typers with {args.notes} notes each, a newcomer's "
            f"{args.question:,}-token question; {plans.words(cfg, args.threads)}")
    three = lines(records.of(found, TABLE.name))
    return [sheet(TABLE, found, settings=said,
                  text=three if args.tablefmt == "plain" else None),
            sheet(DIAL_TABLE, found, settings=said + (
                "; budgets " + ", ".join(map(str, args.budget)) + f" (chunk = budget - "
                f"{args.typers} typers)" if args.budget else ""))]


def over(worst, normal):
    """The worst gap over the normal gap, over the runs other work disturbed in neither."""
    worst, normal = timing.jointly(worst, normal)
    return Measured(worst.seconds / normal.seconds, ((1, worst), (-1, normal)))


GAPS = ("normal gap", "all at once gap", "chunked worst gap")
TABLE = Layout("collision", [
    col("typers", "typers", "users", "d"), col("question", "question", "tokens", "d"),
    col("chunk", "chunk", "tokens", "d"), col("steps", "steps", "steps", "d"),
    *(col(gap, f"{gap} ms", "ms", ".1f", compared=True) for gap in GAPS)],
    timed=GAPS, per="figure", title="When the two phases share a server")


DIAL_TABLE = Layout("dial", [col("chunk", "chunk", "tokens", "d", key=True),
                             col("steps to read", "steps to read", "steps", "d"),
                             col("first word", "first word ms", "ms", ".1f", compared=True),
                             col("median gap", "gap median ms", "ms", ".1f"),
                             col("worst gap", "worst gap ms", "ms", ".1f", compared=True),
                             col("worst x normal", "worst x normal", "x", ".1f"),
                             col("total", "total ms", "ms", ".1f")],
                    timed=("worst gap",), title="The chunk-size dial")


def post_chunk(dial, question):
    """The chunk of the post's third line: 128, or the dial's smallest below the question."""
    below = [c for c in dial if c < question]
    return CHUNK if CHUNK in below else min(below or dial)


def lines(found):
    """The post's three lines, their words as the figures say: a freeze is huge at FREEZE times
    the normal gap, bumps small under half the freeze. found: the collision's records."""
    said = {r["figure"]: r["value"] for r in found}
    normal, at_once, chunked = (said[gap] for gap in GAPS)
    x, small, steps = at_once / normal, chunked < at_once / 2, said["steps"]
    bumps = f"{steps}{' small' * small} bumps, worst one" if steps > 1 else "one step: all at once"
    said_lines = [(f"normal gap between words for the {said['typers']} typers", normal, ""),
                  (f"gap if the engine reads all {said['question']:,} at once", at_once,
                   " (one huge freeze)" if x >= FREEZE
                   else f" (a freeze of {x:.1f}x the normal gap)"),
                  (f"gap if it reads {said['chunk']} tokens between steps", chunked,
                   f" ({bumps})")]
    width = max(len(label) for label, _, _ in said_lines)
    return "\n".join(f"{label:<{width}} : {gap_ms:8.1f} ms{note}"
                     for label, gap_ms, note in said_lines)



# ---- its picture, and what to look at in it, written from the figures it shows

def draw(ax, rows):
    """Each chunk size a point: the newcomer's wait against the typers' worst gap."""
    return ("The chunk-size dial: small chunks keep the typers smooth, big ones answer the "
            "newcomer sooner", trade(
                ax, rows, "first word", "worst gap", "o-",
                "one chunk size (tokens of the question read per step)",
                "the newcomer's wait for its first word, TTFT (ms)",
                "the typers' worst gap between words (ms)",
                [f"chunks of {r['chunk']}" for r in rows]))


def look(found):
    rows = sorted(rows_of(found, "dial", ("chunk", "first word", "worst gap")),
                  key=lambda r: r["chunk"])
    if len(rows) < 2:
        return "the newcomer's first word against the typers' worst gap"
    first = [r["first word"] for r in rows]
    soonest = min(rows, key=lambda r: r["first word"])
    words = (f"bigger chunks, the newcomer's first word sooner ({sig(first[0])} to "
             f"{sig(first[-1])} ms)" if first == sorted(first, reverse=True) else
             f"the newcomer's first word soonest at chunks of {soonest['chunk']} "
             f"({sig(soonest['first word'])} ms), not at the biggest")
    gaps = [r["worst gap"] for r in rows]
    words += ("; smaller chunks, the typers' worst gap smaller" if gaps == sorted(gaps) else
              "; the typers' worst gap does not grow with every chunk (" +
              ", ".join(sig(g) for g in gaps) + " ms)")
    flagged = [r["chunk"] for r in rows if r["flagged"]]
    return words + (f"; ringed in red, chunks of {', '.join(map(str, flagged))}: disturbed by "
                    f"other work" if flagged else "")


PICTURE = Drawing("dial.png", "dial", "The chunk-size dial",
                  "each chunk size a point: left, the newcomer's first word sooner; down, the "
                  "typers' worst gap smaller", draw, look, experiment="dial")


# ---- its claims: each reads the figures it needs and gives the rule its Claim says


def freeze(t, r):
    normal = figure(t, "collision", "normal gap")
    at_once = figure(t, "collision", "all at once gap")
    times = at_once / normal
    return (f"{at_once.value:.1f} against {normal.value:.1f} ms ({times.value:.0f}x)",
            above(times, FREEZE, label="the freeze", fmt=".1f"))


def freeze_why(found, roofs):
    return further(found, "collision", ("the freeze", {"chunk": 1024}),
                   ("the normal gap", {"chunk": None}))


def small_bumps(t, r):
    steps, chunk = value(t, "collision", "steps"), value(t, "collision", "chunk")
    if chunk != 128:
        raise Missing(f"collision: chunks of 128 (the dial's chunk here is {chunk})")
    worst = figure(t, "collision", "chunked worst gap")
    return (f"chunks of {chunk}: {steps} bumps, worst {worst.value:.1f} ms",
            every(plain(steps == 8, f"{steps} steps"),
                  more(figure(t, "collision", "all at once gap") / 2, worst,
                       "half the freeze over the worst bump")))


def dial(t, r):
    chunks = sizes(t, "dial", "chunk")
    if len(chunks) < 2:
        raise Missing("dial: fewer than two chunk sizes")
    first = {c: figure(t, "dial", "first word", chunk=c) for c in chunks}
    worst = {c: figure(t, "dial", "worst gap", chunk=c) for c in chunks}
    pairs = list(zip(chunks, chunks[1:]))
    return (f"chunks of {chunks[0]} to {chunks[-1]}: first word "
            + ", ".join(f"{first[c].value:.0f}" for c in chunks) + " ms, worst gap "
            + ", ".join(f"{worst[c].value:.0f}" for c in chunks) + " ms",
            every(*(no_less(first[a] / first[b], f"chunks of {b} give the first word later "
                            f"than {a}", f"first word, {a} over {b}") for a, b in pairs),
                  *(above(worst[b] / worst[a], 1, label=f"worst gap, {b} over {a}", fmt=".2f",
                          way=f"chunks of {b} not rougher than {a}") for a, b in pairs)))


CLAIMS = [
    Claim("two_phases", "Reading a long question at once freezes the typers for about 40x "
          "their normal gap", "4723.0 against 118.0 ms", f"A 1,024-token question read at "
          f"once makes the typers' gap {FREEZE}x or more their normal one: many gaps, not a "
          f"few", freeze, (("collision", {"chunk": None}), ("collision", {"chunk": 1024})),
          needs=SERVER, explain=freeze_why, fails_on="a machine whose balance is over about 25 "
          "FLOPs per byte (a GPU), whose workbench reads the question in a few of the typers' "
          "fetches"),
    Claim("two_phases", "Chunks of 128 give 8 small bumps instead", "8 bumps, worst 671.2 ms",
          "Chunks of 128 read the question in 8 steps, the worst gap under half the one-shot "
          "freeze", small_bumps, (("collision", {"chunk": 128}),), needs=SERVER,
          construction=True,
          fails_on="a machine whose steps cost the same whatever they carry (launch-bound)"),
    Claim("two_phases", "The chunk size is a dial: bigger chunks give the newcomer its first "
          "word sooner, smaller ones keep the typers smoother", "a dial",
          f"From each chunk size to the next larger, the first word comes no later (within "
          f"{TIE:.0%}: two large chunks' nearly equal reads tie) and the worst gap grows", dial,
          needs=SERVER, construction=True,
          fails_on="a machine whose steps cost the same whatever they carry "
          "(launch-bound: the worst gap flat), or one whose workbench slows on large trips, so "
          "that a larger chunk gives the first word later"),
]


EXPERIMENT = Experiment(plan, trials, figures, sheets, name=NAME, flags=add_flags,
                        quick={"typers": 2, "question": 64, "chunk": (16, 32)}, settle=settle,
                        lengths=lambda args: [("--question", args.question)], riders=riders,
                        processes=(FIRST, Processes("the collision", extra=True, most=1)),
                        picture=PICTURE)
