"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), meets a long question, and types
with notebooks of several depths; every timing is then held to the machine's limits.

    python two_phases.py                    # the post's experiments, the depth, the pictures
    python two_phases.py --quick --no-save  # a smoke run: seconds, not minutes
    python two_phases.py --predict h100-sxm --dtype bfloat16  # runs nothing: limits only
"""
# The post's sections in its order, each experiment declared once: the rows it plans (what rides
# each trip), how it measures them, the figures its records hold, and the sheets they print;
# --predict and the memory check read the same plans.
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()

import argparse
import dataclasses
import time

from harness import flags, runner
from harness.post import CHUNK, NOTES, PROMPTS, QUESTION, TYPERS, USERS  # the post's sizes
from harness.terminal import note, plural, progress
from engine import pool
from harness.measuring import bench as b, devices, rounds, speeds, timing, tuning
from engine.blocks import Paths
from harness.keeping import records
from harness.keeping.records import Layout, Measured, col, ms, timed
from harness.judging import check, judge
from harness.judging.rules import FREEZE
from harness.predicting import plans, predict, presets, turning
from harness.predicting.plans import Experiment, Outcome, Row, timings, trial_name
from harness.showing import pictures, printers, sheets
from harness.showing.printers import Picture, Saved, sheet
import model
DIAL = (128, 256, 512, 1024)  # the chunk-size dial; the question's length reads it at once
DEPTHS = (0, 128, 512, 1023)  # beyond the post: typing with notebooks this deep ...
DEPTH_USERS = (1, 16)  # ... for this many users, unless --users says otherwise
QUICK = {"prompts": (1, 16, 64), "users": (1, 4), "notes": 64, "typers": 2, "question": 64,
         "chunk": (16, 32), "depths": (0, 32, 64), "compiled": "off"}  # (no seconds compiling)
SEED = 0
RUNS = 3  # rounds of each row at least: the server's rows, a round of seconds in each process,
#           in 3 processes or more; the cheaper rows in many more rounds, as the budget holds
BUDGET_S = 160  # seconds the measuring may take, fresh processes added while they fit: the
#                 README's first command stays within 3 minutes 30 seconds on a 2-core machine
MOST_USERS = 1_000_000  # users, typers or chunk tokens: a prediction may go far; memory stops a run
LONGEST = 1_000_000  # tokens of a question or a notebook: GPT-2 reads 1,024, a predicted model more


# ---------------------------------------------------------------------------------------------
# Phase 1: reading. One user, one trip holding the whole question.


def prefill_plan(args):
    return [Row({"prompt": p}, f"{p} {plural(p, 'token')}", [[(0, p)]]) for p in args.prompts]


def prefill_trials(bench, args, rows):
    longest = max(row.key[0] for row in rows)  # warms up for all: the rest warm as recorded
    for row in rows:
        (p,) = row.key
        x, book = b.tokens(bench.cfg, p, SEED + 2, bench.on), b.book(bench, 1, p)
        yield b.trial(bench, trial_name("prefill", row), x, [(book, p)], warm=p == longest)


def prefill_figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (p,), t = r.row.key, r.figures["time"]
        rows.append({"prompt": p, "time": ms(t), "time per token": timed(t.seconds * 1e3 / p, t),
                     "math speed": timed(model.table_flops(cfg, p) / t.seconds / 1e9, t, -1)})
    return [(PREFILL_TABLE, rows)]


def prefill_sheets(found, cfg, args):
    return [sheet(PREFILL_TABLE, found, note="; GFLOP/s: the tables' math only",
                  settings="one user's question read in one trip; "
                           + plans.words(cfg, args.threads))]


PREFILL_TABLE = Layout("prefill", [col("prompt", "prompt", "tokens", "d", key=True),
                             col("time", "time ms", "ms", ".1f"),
                             col("time per token", "ms/token", "ms", ".2f", compared=True),
                             col("math speed", "GFLOP/s", "GFLOP/s", ".1f", compared=True)],
                 timed=("time",), title="Phase 1, reading (prefill)")


# ---------------------------------------------------------------------------------------------
# Phase 2: typing. Each user already has --notes notes; all type one token in the same trip.


def decode_plan(args):
    return [Row({"users": u}, f"{u} {plural(u, 'user')}", [[(args.notes, 1)] * u])
            for u in args.users]


def decode_trials(bench, args, rows):
    first = b.read_question(bench, args.notes, SEED + 1)
    book = b.copies(bench, first, max(row.key[0] for row in rows), room=1)  # every row's users
    for row in rows:  #                                                       read part of it
        (u,) = row.key
        yield b.trial(bench, trial_name("decode", row), b.tokens(bench.cfg, u, SEED + 3, bench.on),
                      [(b.view(book, u, args.notes), 1)], warm=u == model.readers(book))


def decode_figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (u,), t = r.row.key, r.figures["time"]
        rows.append({"users": u, "step": ms(t), "tokens per second": timed(u / t.seconds, t, -1),
                     "math speed": timed(model.table_flops(cfg, u) / t.seconds / 1e9, t, -1),
                     "bytes read": model.bytes_read(cfg, r.row.steps[0]) / 1e6})
    return [(DECODE_TABLE, rows)]


def decode_sheets(found, cfg, args):
    return [sheet(DECODE_TABLE, found, note="; GFLOP/s: the tables' math only",
                  settings=f"one token for each user, each with {args.notes} notes; "
                           f"{plans.words(cfg, args.threads)}")]


DECODE_TABLE = Layout("decode", [col("users", "users", "users", "d", key=True),
                           col("step", "step ms", "ms", ".1f", compared=True),
                           col("tokens per second", "tokens/s", "tokens/s", ".1f", compared=True),
                           col("math speed", "GFLOP/s", "GFLOP/s", ".1f"),
                           col("bytes read", "MB read", "MB", ".0f")],
                timed=("step",), title="Phase 2, typing (decode)")


# ---- on a GPU library's device: what launching a typing step's work costs, with almost no work

LAUNCHES = "launches"  # the empty trip's trial, and its table


def launch_trials(bench, args):
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
    return [b.trial(empty, LAUNCHES, b.tokens(cfg, 1, SEED + 3, bench.on),
                    [(b.copies(empty, first, 1, room=1), 1)], recorded=False)]


def launch_figures(outcomes, done):
    """The empty trip against one user's typing step (the fewest users decode ran). -> [(Layout,
    rows)], none where it was not measured"""
    decode = sorted(outcomes.get("decode", []), key=lambda r: r.row.key)
    if LAUNCHES not in done.visits or not decode:
        return []
    empty = timing.taken([s[0] for s in done.runs(LAUNCHES).steps], "middle", LAUNCHES,
                         done.runs(LAUNCHES), said=True)
    step = decode[0].figures["time"]
    return [(LAUNCH_TABLE, [{"users": decode[0].row.key[0], "empty trip": ms(empty),
                             "step": ms(step),
                             "share": Measured(empty.seconds / step.seconds,
                                               ((1, empty), (-1, step)))}])]


LAUNCH_TABLE = Layout(LAUNCHES, [col("users", "users", "users", "d", key=True),
                                 col("empty trip", "empty trip ms", "ms", ".3f", compared=True),
                                 col("step", "step ms", "ms", ".3f"),
                                 col("share", "empty trip's share", "x", ".2f")],
                      timed=("empty trip", "step"),
                      title="Launching a typing step's work: the empty trip")


def launch_sheets(found, args):
    if not records.of(found, LAUNCHES):
        return []
    how = "replayed as one CUDA graph (--graphs)" if args.graphs else \
        "launched one after another (eager: --graphs replays them as one)"
    return [sheet(LAUNCH_TABLE, found, settings=f"the same floors and operations on tables one "
                                                f"number a head wide, almost no bytes: {how}",
                  note="; a share near 1: the step is its launches, not the forklift")]


# ---------------------------------------------------------------------------------------------
# When the two phases share a server


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


def collision_plan(args):
    """The typers' normal gap, then the newcomer's question read in each chunk size of the dial."""
    return [Row({}, "normal gap", [[(args.notes, 1)] * args.typers])] + [
        Row({"chunk": c}, f"chunks of {c}, worst" if c < args.question else "all at once",
            riders_of(schedule(args.question, c), args.notes, args.typers)) for c in args.chunk]


def collision_trials(bench, args, rows):
    """The typers alone (the row with no chunk), then each chunk size's schedule."""
    room = max(len(r.steps) for r in collision_plan(args))  # the longest schedule's steps
    server = b.Server(bench, args.notes, args.typers, args.question, room,
                      (SEED + 1, SEED + 3, SEED + 4, SEED + 5))
    for row in rows:  # the question read at once warms up for all
        if not row.keys:
            yield b.trial(bench, trial_name("collision", row), *server.alone, warm=False)
        else:
            yield server.trial(trial_name("collision", row), schedule(args.question, row.key[0]),
                               plans.recorded_step(bench.cfg, row),
                               warm=row.key[0] == args.question)


def collision_figures(cfg, args, outcomes, roofs):
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
                     "worst x normal": Measured(f["time"].seconds / normal.seconds,
                                                ((1, f["time"]), (-1, normal)))})
    return [(COLLISION_TABLE, [row]), (DIAL_TABLE, rows)]


def collision_sheets(found, cfg, args):
    said = (f"{args.typers} typers with {args.notes} notes each, a newcomer's "
            f"{args.question:,}-token question; {plans.words(cfg, args.threads)}")
    lines = collision_lines(records.of(found, COLLISION_TABLE.name))
    return [sheet(COLLISION_TABLE, found, settings=said,
                  text=lines if args.tablefmt == "plain" else None),
            sheet(DIAL_TABLE, found, settings=said + (
                "; budgets " + ", ".join(map(str, args.budget)) + f" (chunk = budget - "
                f"{args.typers} typers)" if args.budget else ""))]


GAPS = ("normal gap", "all at once gap", "chunked worst gap")
COLLISION_TABLE = Layout("collision", [
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


def collision_lines(found):
    """The post's three lines, their words as the figures say: a freeze is huge at FREEZE times
    the normal gap, bumps small under half the freeze. found: the collision's records."""
    said = {r["figure"]: r["value"] for r in found}
    normal, at_once, chunked = (said[gap] for gap in GAPS)
    x, small, steps = at_once / normal, chunked < at_once / 2, said["steps"]
    bumps = f"{steps}{' small' * small} bumps, worst one" if steps > 1 else "one step: all at once"
    lines = [(f"normal gap between words for the {said['typers']} typers", normal, ""),
             (f"gap if the engine reads all {said['question']:,} at once", at_once,
              " (one huge freeze)" if x >= FREEZE else f" (a freeze of {x:.1f}x the normal gap)"),
             (f"gap if it reads {said['chunk']} tokens between steps", chunked, f" ({bumps})")]
    width = max(len(label) for label, _, _ in lines)
    return "\n".join(f"{label:<{width}} : {gap_ms:8.1f} ms{note}" for label, gap_ms, note in lines)


# ---------------------------------------------------------------------------------------------
# Reading against typing, per token: the post's closing comparison


def summary(outcomes):
    """The post's closing comparison, from this run: the best reading cost per token against
    one user's typing step. -> [(Layout, rows)], none without both."""
    reads = [(r.row.key[0], r.figures["time"]) for r in outcomes.get("prefill", [])]
    one = [r.figures["time"] for r in outcomes.get("decode", []) if r.row.key == (1,)]
    if not reads or not one:
        return []
    p, read = min(reads, key=lambda pt: pt[1].seconds / pt[0])
    reading_ms, typing_ms = read.seconds * 1e3 / p, one[0].seconds * 1e3
    return [(SUMMARY, [{"reading per token": timed(reading_ms, read), "at prompt": p,
                        "typing per token": timed(typing_ms, one[0]),
                        "times cheaper": Measured(typing_ms / reading_ms,
                                                  ((1, one[0]), (-1, read)))}])]


def summary_sheets(found):
    """The closing comparison in the post's words, from its records; none where not run."""
    said = {r["figure"]: r["value"] for r in records.of(found, SUMMARY.name)}
    if not said:
        return []
    return [sheet(SUMMARY, found, settings="the cheapest reading per token of Phase 1 against "
                  "one user's typing step of Phase 2", note="(each figure is its table's "
                  "above, with its runs' spread there)", text=(
        f"reading costs {said['reading per token']:.2f} ms per token (at {said['at prompt']} "
        f"tokens) and typing {said['typing per token']:.1f} ms (one user), so reading is about "
        f"{said['typing per token'] / said['reading per token']:.0f} times cheaper per token"))]


SUMMARY = Layout("summary", [col("reading per token", "reading ms/token", "ms", ".2f"),
                             col("at prompt", "at prompt", "tokens", "d"),
                             col("typing per token", "typing ms/token", "ms", ".1f"),
                             col("times cheaper", "times cheaper", "x", ".1f", compared=True)],
                 title="Reading against typing, per token")


# ---------------------------------------------------------------------------------------------
# Beyond the post: how deep the notebooks are. A typing trip fetches the tables once and every
# user's notes: with few notes the tables dominate and batching is nearly free, with many the notes
# dominate and batching stops helping.


def depth_plan(args):
    return [Row({"users": u, "notes": n}, f"{u} {plural(u, 'user')} at {n} {plural(n, 'note')}",
                [[(n, 1)] * u]) for u in args.depth_users for n in args.depths]


def depth_trials(bench, args, rows):
    first = b.read_question(bench, max(row.key[1] for row in rows), SEED + 1)
    book = b.copies(bench, first, max(row.key[0] for row in rows), room=1)  # each row reads its
    for row in rows:  #                                                        users and notes
        u, n = row.key
        yield b.trial(bench, trial_name("depth", row), b.tokens(bench.cfg, u, SEED + 3, bench.on),
                      [(b.view(book, u, n), 1)], recorded=False)  # no breakdown: none is held


def depth_figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (u, n), t, riders = r.row.key, r.figures["time"], r.row.steps[0]
        fetched = model.bytes_read(cfg, riders)
        rows.append({"users": u, "notes": n, "step": ms(t),
                     "tokens per second": timed(u / t.seconds, t, -1), "bytes read": fetched / 1e6,
                     "notes share": 100 * model.costs(cfg, riders)["attention"][0] / fetched,
                     "x limit": speeds.x_limit(cfg, r.row.steps, t, roofs)[0]})
    return [(DEPTH_TABLE, rows)]


def depth_sheets(found, cfg, args):
    steps = [(r["keys"]["users"], r["keys"]["notes"], r["value"] / 1e3)
             for r in records.of(found, DEPTH_TABLE.name) if r["figure"] == "step"]
    return [sheet(DEPTH_TABLE, found,
                  settings=f"one token for each user; {plans.words(cfg, args.threads)}",
                  note="; x limit as in the check; " + outweigh(steps, cfg))]


DEPTH_TABLE = Layout("depth", [col("users", "users", "users", "d", key=True),
                         col("notes", "notes", "notes", "d", key=True),
                         col("step", "step ms", "ms", ".1f", compared=True),
                         col("tokens per second", "tokens/s", "tokens/s", ".1f"),
                         col("bytes read", "MB read", "MB", ".0f"),
                         col("notes share", "notes % of bytes", "%", ".0f"),
                         col("x limit", "x limit", "x", ".2f")],
               timed=("step",), title="Beyond the post: how deep the notebooks are")


def outweigh(rows, cfg):
    """Where the notes outweigh the tables, for each user count: predicted, where the notes
    weigh as much as the tables; measured, where a step takes twice its time with no notes.
    rows: [(users, notes, step seconds)]."""
    words, tables, note_bytes = [], model.table_bytes(cfg), model.note_bytes(cfg)
    for u in sorted({row[0] for row in rows}):
        steps = sorted((row[1], row[2]) for row in rows if row[0] == u)
        predicted = tables / (u * note_bytes)
        said = (f"from {predicted:,.0f} notes each" if predicted < cfg.context
                else f"never within {cfg.family or 'the model'}'s {cfg.context:,} notes")
        measured = next((a + (b - a) * (2 * steps[0][1] - ta) / (tb - ta)
                         for (a, ta), (b, tb) in zip(steps, steps[1:])
                         if ta < 2 * steps[0][1] <= tb), None) if steps[0][0] == 0 else None
        found = f"about {measured:,.0f}" if measured is not None else \
            f"not up to {steps[-1][0]:,}" if steps[0][0] == 0 else "unknown without depth 0"
        words.append(f"{u} {plural(u, 'user')}: {said}, measured {found}")
    return ("the notes outweigh the tables (by the accounting; measured: where a step takes "
            "twice its time with none): " + "; ".join(words))


# ---------------------------------------------------------------------------------------------
# the experiments, declared once: the plan, how it is measured, the sheets

EXPERIMENTS = {
    "prefill": Experiment(prefill_plan, prefill_trials, prefill_figures, prefill_sheets),
    "decode": Experiment(decode_plan, decode_trials, decode_figures, decode_sheets),
    "collision": Experiment(collision_plan, collision_trials, collision_figures,
                            collision_sheets),
    "depth": Experiment(depth_plan, depth_trials, depth_figures, depth_sheets, checked=False)}


# ---------------------------------------------------------------------------------------------
# the run: every planned row and the machine's two speeds measured in rounds, spread over
# worker processes (each builds the model and visits the rows); then the records, from which
# the sheets, the check, the claims and the pictures


def experiment(args, facts):
    """Measure the rows in rounds (in as many fresh processes of each kind as --time-budget
    holds), then print every sheet from the records: each experiment's, the
    speeds, the check and breakdown against them, the claims; then draw the pictures."""
    cfg = measured(args)
    planned = {n: e for n, e in EXPERIMENTS.items() if n in args.experiments}  # the post's order
    rows = {n: e.plan(args) for n, e in planned.items()}
    done = rounds.measured(args, __file__, measure_here, kinds(args, rows), record=True,
                           alone=True)
    made = assessed(cfg, args, planned, rows, done)
    yield from printed(cfg, args, facts, planned, made, done)


def measured(args):
    """The model a run measures: GPT-2 of --model, in --dtype's precision (float32 but on a GPU
    library's device), tables and notes alike."""
    return dataclasses.replace(model.SIZES[args.model], dtype=args.dtype, note_dtype=args.dtype)


EXTRA = "reading and typing"  # the kind measured in the time the others leave
KINDS = (("", ("prefill", "decode", "depth", "collision"), lambda users: users == 1, False),
         ("depth", ("depth",), lambda users: users > 1, False),
         (EXTRA, ("prefill", "decode", "depth"), lambda users: users == 1, True))
#   (name, experiments, which depth rows by their users, extra): every row a claim uses shares
#   its processes (its claims pair rows round by round, and the rows' start is shared: the
#   tables, the typers' first question, the speeds' tables). The depth's rows of many users (16
#   users' 1,023 notes each, a notebook of 1.2 GB to make) back no claim and measure in one
#   process of their own. The time left then goes to processes of reading and typing alone:
#   the collision's schedules are 9 of a round's 15 s, and its claims stand on its first
#   processes, where the claims on reading and typing (most of them) gain with every process


def kinds(args, rows):
    """The kinds of worker process a run's rows are measured in: each with the speed trials
    (and, on a GPU library's device, the empty trip beside typing); the extra kind only where
    it leaves out some of the first kind's rows."""
    out = []
    for name, experiments, which, extra in KINDS:
        names = [trial_name(e, r) for e in experiments if e in rows for r in rows[e]
                 if e != "depth" or which(r.key[0])]
        launches = (LAUNCHES,) if "decode" in experiments and "decode" in rows \
            and not args.on.numpy else ()
        trials = (*speed_names(args), *names, *launches)
        if names and not (extra and out and set(trials) == set(out[0].trials)):
            out.append(rounds.Kind(name, trials, 1 if name == "depth" else None, extra))
    return out


def speed_trials(args, on):
    """The forklift's two reads and the workbench as a round visits them, at machine_speed's
    own sizes; none where the flags give the speeds."""
    if flags.given_speeds(args):
        return []
    size = speeds.sizes(args.quick, on)
    return speeds.trials(size["size"], size["matmul"], on, args.threads or 1, SPEEDS_PREFIX,
                         on.dtype, args.quick)


SPEEDS_PREFIX = "speeds "  # the speed trials' names in a run of the model's rows


def speed_names(args):
    """The speed trials' names, none where the flags give the speeds."""
    return () if flags.given_speeds(args) else tuple(
        SPEEDS_PREFIX + n for n in (*speeds.READS, speeds.WORKBENCH))


def measure_here(args, job):
    """A worker's part of the rounds, in this process: the model's tables (random weights), the
    paths chosen (or taken from the job), every wanted row's trial made, the job's rounds, and
    (where asked) the table products alone; the trips' freed memory kept in the process (see
    bench.keep_freed_memory). -> the result rounds.run() and the job describe"""
    began, cfg, on = time.perf_counter(), measured(args), args.on
    b.keep_freed_memory()
    progress("making the tables (random weights)")
    bench = b.Bench(cfg, on.tables(model.floors(cfg, args.seed)),
                    pool.workers(args.threads) if on.numpy else None, args.runs,
                    again=job.get("again", timing.AGAIN), on=on, graphs=args.graphs)
    try:
        chosen = None
        if on.numpy and job.get("paths"):
            bench = dataclasses.replace(bench, paths=Paths(**job["paths"]))
        elif on.numpy:
            bench, chosen = tuning.with_paths(bench, args.attention, args.blocks,
                                              args.compiled)
        wanted = job.get("trials")
        trials = [t for t in speed_trials(args, on) if wanted is None or t.name in wanted]
        if not on.numpy and "decode" in args.experiments and (wanted is None
                                                              or LAUNCHES in wanted):
            trials += launch_trials(bench, args)
        checked = []
        for name, e in EXPERIMENTS.items():
            rows = [r for r in e.plan(args) if name in args.experiments
                    and (wanted is None or trial_name(name, r) in wanted)]
            if rows:
                trials += list(e.trials(bench, args, rows))
                checked += [r for r in rows if e.checked]
        setup_s = time.perf_counter() - began
        result = rounds.run(trials, job)
        if job.get("alone"):  # the table products alone: a share of the token counts each
            counts = sorted({sum(t for _, t in r.steps[plans.recorded_step(cfg, r)])
                             for r in checked})
            began = time.perf_counter()
            result["alone"] = {n: b.tables_alone(bench, n, job.get("again", timing.AGAIN))
                               for n in counts[job.get("process", 0)::job.get("processes", 1)]}
            result["alone_s"] = time.perf_counter() - began
        paths = {"attention": bench.paths.attention, "cube": bench.paths.cube,
                 "blocks": [list(k) for k in bench.paths.blocks],
                 "compiled": list(bench.paths.compiled), "tiled": list(bench.paths.tiled),
                 "pieces": list(bench.paths.pieces)}
        return {**result, "paths": paths, "chosen": chosen, "setup_s": setup_s}
    finally:
        if bench.pool:
            bench.pool["helpers"].shutdown()


@dataclasses.dataclass(frozen=True)
class Made:
    """What a run's measurements make: its records (found), the speeds every row is held to,
    the rows held against them, their outcomes, and the rows at this machine's limits."""
    found: list
    held_to: object
    held: list
    outcomes: dict
    ideal: list
    points: dict


def outcomes_of(cfg, planned, rows, done):
    """{experiment: [Outcome]}: each row's figures from its rounds, and, where it is checked,
    its recorded trip: the riders of the step recorded, the middle recording's parts, and each
    part's seconds in every recording (a Timing, for the breakdown's records)."""
    out = {}
    for name, e in planned.items():
        out[name] = []
        for row in rows[name]:
            trial = trial_name(name, row)
            runs = done.runs(trial)
            out[name].append(Outcome(row, timings(row, runs, what=trial), recorded(
                cfg, row, trial, done.recorded.get(trial), done.process_of) if e.checked
                else None))
    return out


def recorded(cfg, row, trial, found, process_of=None):
    """A row's recorded trips as the check and breakdown read them, each with the process it
    was recorded in (process_of: {round: process}); None where none was."""
    if not found:
        return None
    found = sorted(found, key=lambda rp: rp[0])
    middle = sorted((parts for _, parts in found), key=lambda p: p["trip"])[(len(found) - 1) // 2]
    where = tuple((process_of or {}).get(r, 0) for r, _ in found)
    return {"riders": row.steps[plans.recorded_step(cfg, row)], "parts": middle,
            "runs": {part: timing.Timing(tuple(p[part] for _, p in found),
                                         rounds=tuple(r for r, _ in found), trial=trial,
                                         processes=where)
                     for part in middle}}


def roofs_of(args, done):
    """The speeds every row is held to: each the middle of the rounds' ceilings (the forklift
    the faster of its two reads in each round), each row held round by round to its own round's
    (or the speeds the flags give); and their records."""
    if flags.given_speeds(args):
        return flags.given_speeds(args), []
    size = speeds.sizes(args.quick, args.on)
    ceiling = speeds.ceilings(done, SPEEDS_PREFIX)
    held_to = speeds.held_to(ceiling, size["size"], size["matmul"], "measured beside the rows "
                             "in every round: the middle of the rounds' ceilings, each row held "
                             "to its own round's")
    return held_to, records.from_rows([(ROOFS_TABLE, [
        speeds.figures(ceiling, size["size"], size["matmul"])])], {})


ROOFS_TABLE = Layout("speeds", [col("memory speed", "memory speed", "GB/s", ".1f"),
                                col("matrix-vector read", "matrix-vector GB/s", "GB/s", ".1f"),
                                col("streaming read", "streaming GB/s", "GB/s", ".1f"),
                                col("math speed", "math speed", "GFLOP/s", ".1f"),
                                col("balance", "balance", "FLOPs/byte", ".1f")],
                     timed=("memory speed", "math speed"), per="figure",
                     title="The forklift and the workbench")


def assessed(cfg, args, planned, rows, done):
    """Everything the measurements make, from them alone (so that more rounds would make it
    again): -> Made"""
    settings = records.settings_of(args, paths=str(Paths(**done.paths)) if done.paths else None)
    held_to, found = roofs_of(args, done)
    found = [{**r, "settings": settings} for r in found]
    outcomes = outcomes_of(cfg, planned, rows, done)
    for name, e in planned.items():
        found += records.from_rows(e.figures(cfg, args, outcomes[name], held_to), settings)
    found += records.from_rows(summary(outcomes), settings)
    found += records.from_rows(launch_figures(outcomes, done), settings)
    checked = [(n, o) for n, e in planned.items() if e.checked for o in outcomes[n]]
    held, ideal, points = [], [], None
    if checked:
        alone = {n: timing.Timing(tuple(s), "best") for n, s in done.alone.items()}
        held = check.held(cfg, checked, held_to, alone.get)
        found += records.from_rows(check.held_figures(held), settings)
        points = plans.roofline(cfg, checked, held_to)
        ideal = plans.at_the_limits(cfg, args, planned, held_to, (summary,))
    return Made(found, held_to, held, outcomes, ideal, points)


def printed(cfg, args, facts, planned, made, done):
    """What the run prints and keeps, from what it made."""
    found, held_to = made.found, made.held_to
    if done.paths and args.on.numpy:
        chosen = {**(done.chosen or {}), **done.paths}
        yield from (tuning.paths_line(chosen, args), Saved("paths", chosen))
    elif not args.on.numpy:  # the library's own products on its device
        yield f"paths: {args.on.name}'s own products, one call each"
    yield Saved("rounds", {"rounds": done.rounds, "processes": done.processes,
                           "visit_s": {n: done.visit_s(n) for n in done.visits}})
    if done.device_bytes is not None:  # a GPU's: the most its processes held there
        yield Saved("device_memory_bytes", done.device_bytes)
    if done.stopped:
        yield Saved("stopped", done.stopped)
    for name, e in planned.items():
        yield from printers.spaced(e.sheets(found, cfg, args))
        if name == "decode":  # under the typing table, on a GPU library's device
            yield from printers.spaced(launch_sheets(found, args))
    yield from printers.spaced(summary_sheets(found))
    if records.of(found, ROOFS_TABLE.name):
        yield from printers.spaced([sheet(ROOFS_TABLE, found, settings=held_to.source)])
    settings = found[0]["settings"] if found else records.settings_of(args)
    if made.held:
        counts = [len(v) for v in done.recorded.values()] or [1]
        yield from printers.spaced(sheets.held(found, made.held, held_to, plans.words(
            cfg, args.threads), (min(counts), max(counts))))
        if judge.on_a_gpu(vars(args)):  # the post's GPU claims, at this GPU's measured speeds
            turned = turning_here(cfg, args, held_to, settings)
            found += turned
            yield from printers.spaced([printers.Sheet(
                turning.TURNING, tuple(turned), settings=f"{cfg}, at the speeds measured here; "
                                                         f"the post's machine to compare")])
        preset = presets.preset_of(facts.get("device"), cfg.dtype)  # a GPU with a preset: its
        if preset:  # datasheet; else why it has none
            checked = [(n, o) for n, e in planned.items() if e.checked for o in made.outcomes[n]]
            found += records.from_rows(check.datasheet_figures(cfg, checked, preset), settings)
            yield from printers.spaced(sheets.datasheet(found, checked, preset))
        elif presets.identified(facts.get("device")):
            note(f"no datasheet row: {presets.identified(facts.get('device'))}")
        yield from (Saved("roofline", made.points), Saved("roofs", held_to.saved()),
                    Saved("at_limits", made.ideal))
    who = f"{cfg} on {facts['cpu']}, {args.threads} {plural(args.threads, 'thread')}"
    yield sheets.claims(found, held_to, ("two_phases",), args, facts["busy"], made.ideal,
                       stopped=done.stopped)
    if args.plot:
        yield from (Picture(name, draw) for name, draw in
                    pictures.files(found, made.points, who, args.quick).items())


def turning_here(cfg, args, speeds, settings):
    """The turning points at the speeds this run measured (a GPU's), and the post's machine's to
    compare: the records the post's GPU claims are judged on, as a prediction's are."""
    post = presets.target("post", "float32", None, args.out).roofs
    return records.make(turning.TURNING, [
        {"name": name, "precision": cfg.dtype,
         **turning.turning(cfg, at, args.notes, args.typers, args.question)}
        for name, at in ((args.device, speeds), ("post", post))], settings)


def peak_bytes(args):
    """The tables, plus the most that measuring the speeds or any experiment holds at once."""
    measuring = 0 if args.roofs or args.forklift else speeds.roofs_memory_bytes(
        args.quick, devices.device(args.device))
    return plans.peak_bytes(measured(args), [EXPERIMENTS[n].plan(args)
                                                     for n in args.experiments], measuring)


# ---------------------------------------------------------------------------------------------
# flags


def build_parser():
    p = flags.parser(__doc__, runs=RUNS, prog="two_phases.py", budget=BUDGET_S)
    g = p.add_argument_group("two_phases: the experiments (defaults are the post's)")
    g.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=tuple(EXPERIMENTS),
                   metavar="NAME", help=f"which to run, of {', '.join(EXPERIMENTS)}")
    g.add_argument("--prompts", nargs="+", type=flags.whole(1, LONGEST), default=PROMPTS,
                   metavar="T", help="prefill: question lengths in tokens")
    g.add_argument("--users", nargs="+", type=flags.whole(1, MOST_USERS), default=USERS,
                   metavar="U", help="decode: users typing one token each in the same trip")
    g.add_argument("--notes", type=flags.whole(0, LONGEST - 1), default=NOTES,
                   metavar="N", help="decode and collision: notes already in each typer's notebook")
    g.add_argument("--typers", type=flags.whole(1, MOST_USERS), default=TYPERS,
                   metavar="U", help="collision: users typing when the new user arrives")
    g.add_argument("--question", type=flags.whole(1, LONGEST), default=QUESTION,
                   metavar="T", help="collision: the new user's question length in tokens")
    dial = g.add_mutually_exclusive_group()
    dial.add_argument("--chunk", nargs="+", type=flags.whole(1, MOST_USERS), default=DIAL,
                      metavar="C",
                      help="collision: the dial, question tokens read per step; a row reading "
                           "the whole question at once is always added")
    dial.add_argument("--budget", nargs="+", type=flags.whole(2, 2 * MOST_USERS), default=None,
                      metavar="B",
                      help="collision: the same dial as vLLM's per-step token budget "
                           "(max_num_batched_tokens): chunk = B - typers")
    g.add_argument("--depths", nargs="+", type=flags.whole(0, LONGEST - 1), default=DEPTHS,
                   metavar="N", help="depth: notes already in each typer's notebook; its users "
                                     f"are --users, else {' '.join(map(str, DEPTH_USERS))}")
    g.add_argument("--model", type=flags.checked(predict.config), default="small", metavar="SIZE",
                   help=f"which GPT-2: {', '.join(model.SIZES)} (the post's is small); with "
                        f"--predict, any model: a file of models/ by name, or a JSON file")
    g.add_argument("--seed", type=flags.whole(0, 2 ** 63 - 1), default=SEED, metavar="S",
                   help="seed of the random tables")
    g.add_argument("--plot", action=argparse.BooleanOptionalAction, default=None,
                   help="draw the pictures (roofline, dial, decode, depth) into the results "
                        "folder; default: for a full run that saves, not for --quick")
    flags.add_speed_flags(g)
    flags.add_device_flags(g)
    predict.add_flags(g)
    flags.add_path_flags(g)
    return p


def parse_args(argv=None):
    p = build_parser()
    args = flags.parse(p, argv, QUICK)
    given = args.users is not USERS and args.users is not QUICK["users"]  # argparse makes a list
    args.depth_users = args.users if given else (1, 2) if args.quick else DEPTH_USERS
    dial = "--budget" if args.budget else "--chunk"
    if args.budget:
        if min(args.budget) <= args.typers:
            p.error(f"argument --budget: each budget must be larger than --typers "
                    f"({args.typers}), to leave room for the question, got {min(args.budget)}")
        args.chunk = [budget - args.typers for budget in args.budget]
    # the dial, once: each chunk at most the question, and the question read all at once
    args.chunk = sorted({min(c, args.question) for c in args.chunk} | {args.question})
    steps, context = len(schedule(args.question, args.chunk[0])), predict.check_range(p, args)
    if "collision" in args.experiments and args.notes + steps > context:
        smallest = f"a budget of {args.chunk[0] + args.typers}" if args.budget else \
            f"a chunk of {args.chunk[0]}"
        p.error(f"argument {dial}: the typers' {args.notes} notes plus one per step "
                f"({steps} steps for {smallest}) must fit in a notebook of {context:,} "
                f"tokens; use a larger {dial} or fewer --notes")
    predict.check_riders(p, args)  # before any plan is made: a plan can be too big to make
    flags.check_speed_flags(p, args)
    args.plot = pictures.wanted(p, args)
    if args.notes == 0 and args.predict is None:
        p.error("argument --notes: a measured run's typers have read a question, at least 1 "
                "note each; an empty notebook is for --predict")
    if predict.check_flags(p, args, {n: EXPERIMENTS[n] for n in args.experiments}):
        return flags.settled(args)  # a prediction: nothing is built, nothing to fit in memory
    flags.need_memory(p, peak_bytes(args), f"GPT-2 {args.model} with these settings",
                      "--model, --users, --prompts, --notes, --depths, --typers or --chunk",
                      args.device)
    return flags.settled(args)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:  # one of the run's worker processes: its rounds, nothing printed or saved
        return rounds.serve(args, measure_here)
    if args.predict:
        return runner.run("two_phases", args, lambda block, facts: predict.items(  # Part 4
            block, {n: EXPERIMENTS[n] for n in args.experiments}), predict.words(args))
    note(f"estimated peak memory: {peak_bytes(args) / 1e9:.1f} GB")
    return runner.run("two_phases", args, experiment)


if __name__ == "__main__":
    stopping.leave(main())
