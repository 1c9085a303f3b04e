"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), meets a long question, and types
with notebooks of several depths; every timing is then held to the machine's limits.

    python two_phases.py                    # the post's experiments and the depth, middle of 5
    python two_phases.py --quick --no-save  # a smoke run of a few seconds
    python two_phases.py --predict --model xl --forklift 3350 --workbench 989000  # runs nothing
"""
import common  # first, and the call below: Ctrl-C or a kill while the rest loads ends in one line

common.stop_quietly()

import argparse  # noqa: E402 (this and every import below come after the call above)
import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

import machine_speed  # noqa: E402
import model  # noqa: E402
import roofline  # noqa: E402
from common import plural  # noqa: E402

PROMPTS = (1, 16, 64, 256, 1024)  # Phase 1: question lengths, one user
USERS = (1, 4, 16, 64)  # Phase 2: users typing one token each in the same trip
NOTES = 512  # notes already in each typer's notebook
TYPERS = 8  # the collision: 8 users typing ...
QUESTION = 1024  # ... when a new user arrives with a 1,024-token question
CHUNK = 128  # chunked prefill: question tokens read per step, the post's third line
DIAL = (32, 64, 128, 256, 512, 1024)  # the chunk-size dial; the question's length reads it at once
DEPTHS = (0, 128, 512, 1023)  # beyond the post: typing with notebooks this deep ...
DEPTH_USERS = (1, 16)  # ... for this many users, unless --users says otherwise
QUICK = {"prompts": (1, 16, 64), "users": (1, 4), "notes": 64, "typers": 2, "question": 64,
         "chunk": (16, 32), "depths": (0, 32, 64)}
SEED = 0


def tokens(t, seed, width=model.WIDTH):
    """t tokens' hidden states as they enter the first floor: (width, t) float32, seeded."""
    return np.random.default_rng(seed).standard_normal((width, t), dtype=np.float32)


def dims(size):
    """What the accounting needs of a model size (model.SIZES): its floors and width."""
    return {"layers": size["layers"], "width": size["width"]}


def model_words(size):
    """'GPT-2 small (12 floors, width 768)'."""
    name = next(n for n, s in model.SIZES.items() if s == size)
    return f"GPT-2 {name} ({size['layers']} floors, width {size['width']})"


def restore(segments):
    """A setup that puts every notebook of the trip back to where it is now."""
    start = [(book, book["len"]) for book, _ in segments]

    def setup():
        for book, n in start:
            book["len"] = n
    return setup


def trip_of(bench, x, segments, watch=None):
    """The trip as a call, built before the timer starts. bench: the model's size and floors,
    the pool, --runs, and the table products timed alone so far."""
    return lambda: model.trip(bench["floors"], x, segments, heads=bench["size"]["heads"],
                              pool=bench["pool"], watch=watch)


def time_trip(bench, x, segments, what):
    """The middle of --runs trips, each starting with every notebook as it is now, and left so."""
    setup = restore(segments)
    timing = common.measure(trip_of(bench, x, segments), bench["runs"], setup=setup, what=what)
    setup()
    return timing


BREAKDOWN_RUNS = 3  # at most: enough to pick a typical recorded run, and it keeps a default
#                    run of the suite within three minutes; the timed figures keep --runs


def where_time_goes(bench, x, segments, what):
    """The same trip again, recorded apart from the timed runs, and its table products alone.
    -> {"riders", "parts": the seconds of each part in the middle recorded run, "alone": the
    timing of the same table products, outside the model: the best of the runs, since like the
    forklift and the workbench it is what this machine can do}"""
    setup, riders, watch, recorded = restore(segments), model.riders(segments), {}, []
    runs = min(bench["runs"], BREAKDOWN_RUNS)

    def recorded_trip():
        trip_of(bench, x, segments, watch)()
        recorded.append(dict(watch))
    common.time_runs(recorded_trip, runs, setup=setup, what=f"{what}, recorded")
    setup()
    middle = sorted(recorded[1:], key=lambda w: w["trip"])[(runs - 1) // 2]  # [0] warmed up
    n = x.shape[1]
    if n not in bench["alone"]:
        bench["alone"][n] = common.measure(
            model.tables_alone(bench["floors"], n, bench["pool"]), runs, stat="best",
            what=f"the table products of {n} {plural(n, 'token')}, alone")
    return {"riders": riders, "parts": middle, "alone": bench["alone"][n]}


def read_question(bench, notes):
    """One user's notebook after the model read a `notes`-token question: the typers' start."""
    book = model.notebook(1, notes, **bench["size"])
    if notes:
        trip_of(bench, tokens(notes, SEED + 1, bench["size"]["width"]), [(book, notes)])()
    return book


def typers(bench, first, users, room):
    """The notebook of `users` users who each hold the notes in `first`, with room for `room`
    more each."""
    n = first["len"]
    book = model.notebook(users, n + room, **bench["size"])
    book["k"][..., :n] = first["k"][..., :n]  # one user's notes, copied to every user
    book["v"][..., :n] = first["v"][..., :n]
    book["len"] = n
    return book


# ---------------------------------------------------------------------------------------------
# Phase 1: reading. Each experiment returns its tables (what common.table takes) and its checks:
# [(row label, measured seconds, the riders of each trip behind the figure, where_time_goes())]


def reading(bench, args):
    """One user, one trip holding the whole question."""
    rows, timings, checks, width = [], [], [], bench["size"]["width"]
    for p in args.prompts:
        x, segments = tokens(p, SEED + 2, width), [(model.notebook(1, p, **bench["size"]), p)]
        label = f"{p} {plural(p, 'token')}"
        t = time_trip(bench, x, segments, f"reading {label}")
        sec = t["seconds"]
        rows.append(prefill_row(p, sec, dims(bench["size"])))
        timings.append(t)
        checks.append((label, sec, [[(0, p)]], where_time_goes(bench, x, segments,
                                                                f"reading {label}")))
    return [{"name": "prefill", "columns": PREFILL_COLUMNS, "rows": rows,
             "timings": timings, "timed": (1,)}], checks


def prefill_row(p, seconds, d):
    return [p, seconds * 1e3, seconds * 1e3 / p, model.table_flops(p, **d) / seconds / 1e9]


PREFILL_COLUMNS = [("prompt", "tokens", "d"), ("time ms", "ms", ".1f"),
                   ("ms/token", "ms", ".2f"), ("GFLOP/s", "GFLOP/s", ".1f")]


# ---------------------------------------------------------------------------------------------
# Phase 2: typing


def typing(bench, args):
    """Each user already has `notes` notes; all type one token in the same trip."""
    first = read_question(bench, args.notes)
    rows, timings, checks, width = [], [], [], bench["size"]["width"]
    for u in args.users:
        x, segments = tokens(u, SEED + 3, width), [(typers(bench, first, u, room=1), 1)]
        label = f"{u} {plural(u, 'user')}"
        t = time_trip(bench, x, segments, f"typing for {label}")
        sec = t["seconds"]
        rows.append(decode_row(u, args.notes, sec, dims(bench["size"])))
        timings.append(t)
        checks.append((label, sec, [[(args.notes, 1)] * u],
                       where_time_goes(bench, x, segments, f"typing for {label}")))
        del segments  # this notebook goes before the next, bigger one comes
    return [{"name": "decode", "columns": DECODE_COLUMNS, "rows": rows,
             "timings": timings, "timed": (1,)}], checks


def decode_row(u, notes, seconds, d):
    return [u, seconds * 1e3, u / seconds, model.table_flops(u, **d) / seconds / 1e9,
            model.bytes_read([(notes, 1)] * u, **d) / 1e6]


DECODE_COLUMNS = [("users", "users", "d"), ("step ms", "ms", ".1f"),
                  ("tokens/s", "tokens/s", ".1f"), ("GFLOP/s", "GFLOP/s", ".1f"),
                  ("MB read", "MB", ".0f")]


# ---------------------------------------------------------------------------------------------
# Beyond the post: how deep the notebooks are. A typing trip fetches the tables once and every
# user's notes: with few notes the tables dominate and batching is nearly free, with many the notes
# dominate and batching stops helping.


def deep(bench, args):
    """Each of --users types one token with notebooks of each depth in --depths."""
    rows, timings, d, width = [], [], dims(bench["size"]), bench["size"]["width"]
    firsts = {depth: read_question(bench, depth) for depth in args.depths}
    for u in args.depth_users:
        for depth, first in firsts.items():
            x, segments = tokens(u, SEED + 3, width), [(typers(bench, first, u, room=1), 1)]
            t = time_trip(bench, x, segments, f"typing for {u} {plural(u, 'user')} at {depth} "
                                              f"{plural(depth, 'note')}")
            rows.append(depth_row(u, depth, t["seconds"], bench["roofs"], d))
            timings.append(t)
            del segments  # this notebook goes before the next, bigger one comes
    return [{"name": "depth", "columns": DEPTH_COLUMNS, "rows": rows, "timings": timings,
             "timed": (2,), "note": "; x limit against the speeds measured at the start; "
                                    + outweigh(rows, d)}], []


def depth_row(u, depth, seconds, roofs, d):
    riders = [(depth, 1)] * u
    fetched = model.bytes_read(riders, **d)
    limit_s, _ = model.limit(riders, roofs["bytes_per_s"], roofs["flops_per_s"], **d)
    return [u, depth, seconds * 1e3, u / seconds, fetched / 1e6,
            100 * model.costs(riders, **d)["attention"][0] / fetched, seconds / limit_s]


DEPTH_COLUMNS = [("users", "users", "d"), ("notes", "notes", "d"), ("step ms", "ms", ".1f"),
                 ("tokens/s", "tokens/s", ".1f"), ("MB read", "MB", ".0f"),
                 ("notes % of bytes", "%", ".0f"), ("x limit", "x", ".2f")]


def outweigh(rows, d):
    """Where the notes outweigh the tables, for each user count: predicted, where the notes
    weigh as much as the tables; measured, where a step takes twice its time with no notes."""
    words, table, note = [], model.table_numbers(**d) * model.BYTES, model.note_bytes(**d)
    for u in sorted({row[0] for row in rows}):
        steps = sorted((row[1], row[2]) for row in rows if row[0] == u)
        predicted = table / (u * note)
        said = (f"{predicted:,.0f}" if predicted < model.CONTEXT
                else f"none of GPT-2's {model.CONTEXT:,}")
        measured = next((a + (b - a) * (2 * steps[0][1] - ta) / (tb - ta)
                         for (a, ta), (b, tb) in zip(steps, steps[1:])
                         if ta < 2 * steps[0][1] <= tb), None) if steps[0][0] == 0 else None
        found = f"about {measured:,.0f}" if measured is not None else \
            f"not up to {steps[-1][0]:,}" if steps[0][0] == 0 else "unknown without depth 0"
        words.append(f"{u} {plural(u, 'user')}: from {said} notes each predicted, {found} "
                     f"measured")
    return "the notes outweigh the tables for " + "; for ".join(words)


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


def colliding(bench, args):
    """`typers` users with `notes` notes each are typing when a newcomer arrives with a
    `question`-token question; it is read in each chunk size of the dial."""
    first = read_question(bench, args.notes)
    steps = {chunk: schedule(args.question, chunk) for chunk in args.chunk}
    typing_book = typers(bench, first, args.typers, room=max(len(s) for s in steps.values()))
    newcomer = model.notebook(1, args.question + 1, **bench["size"])
    width = bench["size"]["width"]
    xt = tokens(args.typers, SEED + 3, width)  # (width, typers)
    xn = np.concatenate([tokens(args.question, SEED + 4, width),  # its question, then its word
                         tokens(1, SEED + 5, width)], 1)

    def before(i, s):  # the notebooks as they stand before step i, which reads s
        typing_book["len"], newcomer["len"] = args.notes + i, s.start

    def step(s):  # a step's trip, built before the timer starts
        x = np.concatenate([xt, xn[:, s]], 1)  # (width, typers + newcomer's tokens)
        return x, [(typing_book, 1), (newcomer, s.stop - s.start)]

    before(0, slice(0, 0))
    normal = time_trip(bench, xt, [(typing_book, 1)], "typers alone")
    checks = [("normal gap", normal["seconds"], [[(args.notes, 1)] * args.typers],
               where_time_goes(bench, xt, [(typing_book, 1)], "typers alone"))]
    dial = {}
    for chunk, chunk_steps in steps.items():
        trips = [step(s) for s in chunk_steps]
        per_run = common.time_steps([trip_of(bench, *t) for t in trips], bench["runs"],
                                    setup=lambda: before(0, slice(0, 0)),
                                    what=f"question in chunks of {chunk}")
        dial[chunk] = dial_figures(per_run, chunk)
        # the step that was slowest in the middle of the runs is the one to look into
        worst = max(range(len(trips)), key=lambda i: statistics.median(r[i] for r in per_run))
        before(worst, chunk_steps[worst])
        label = f"chunks of {chunk}, worst" if chunk < args.question else "all at once"
        checks.append((label, dial[chunk]["gap worst"]["seconds"],
                       riders_of(chunk_steps, args.notes, args.typers),
                       where_time_goes(bench, *trips[worst], f"the worst step of {label}")))
    return collision_tables(args, normal, dial), checks


def dial_figures(per_run, chunk):
    """The figures of one chunk size, each the middle of the runs. per_run: step seconds."""
    def middle(figure, what):
        return common.summarize([figure(steps) for steps in per_run], "middle",
                                f"chunks of {chunk}: {what}")
    return {"steps to read": len(per_run[0]) - 1,
            "ttft": middle(lambda s: sum(s[:-1]), "time to first word"),
            "gap median": middle(statistics.median, "typers' median gap"),
            "gap worst": middle(max, "typers' worst gap"),
            "total": middle(sum, "total time"),
            "steps_s": per_run}


def collision_tables(args, normal, dial):
    """The post's three lines, then the dial."""
    chunk = post_chunk(args.chunk, args.question)
    at_once, chunked = dial[args.question], dial[chunk]
    timings = [normal, at_once["gap worst"], chunked["gap worst"]]
    row = [args.typers, args.question, chunk, chunked["steps to read"],
           *(t["seconds"] * 1e3 for t in timings)]
    text = collision_lines(args.typers, args.question, chunk, *timings,
                           chunked["steps to read"]) if args.tablefmt == "plain" else None
    normal_s = normal["seconds"]
    rows = [[c, f["steps to read"], f["ttft"]["seconds"] * 1e3, f["gap median"]["seconds"] * 1e3,
             f["gap worst"]["seconds"] * 1e3, f["gap worst"]["seconds"] / normal_s,
             f["total"]["seconds"] * 1e3] for c, f in dial.items()]
    return [{"name": "collision", "columns": COLLISION_COLUMNS, "rows": [row],
             "timings": timings, "text": text, "per": "figure", "timed": (4, 5, 6)},
            {"name": "dial", "columns": DIAL_COLUMNS, "rows": rows, "timed": (4,),
             "timings": [f["gap worst"] for f in dial.values()],
             "steps_s": [f["steps_s"] for f in dial.values()]}]


COLLISION_COLUMNS = [("typers", "users", "d"), ("question", "tokens", "d"),
                     ("chunk", "tokens", "d"), ("steps", "steps", "d"),
                     ("normal gap ms", "ms", ".1f"), ("all at once gap ms", "ms", ".1f"),
                     ("chunked worst gap ms", "ms", ".1f")]
DIAL_COLUMNS = [("chunk", "tokens", "d"), ("steps to read", "steps", "d"),
                ("TTFT ms", "ms", ".1f"), ("gap median ms", "ms", ".1f"),
                ("worst gap ms", "ms", ".1f"), ("worst x normal", "x", ".1f"),
                ("total ms", "ms", ".1f")]


def post_chunk(dial, question):
    """The chunk of the post's third line: 128, or the dial's smallest below the question."""
    below = [c for c in dial if c < question]
    return CHUNK if CHUNK in below else min(below or dial)


def collision_lines(typers, question, chunk, normal, at_once, chunked, steps):
    """The post's three lines."""
    bumps = f"{steps} small bumps, worst one" if steps > 1 else "one step: all at once"
    lines = [(f"normal gap between words for the {typers} typers", normal, ""),
             (f"gap if the engine reads all {question:,} at once", at_once, " (one huge freeze)"),
             (f"gap if it reads {chunk} tokens between steps", chunked, f" ({bumps})")]
    width = max(len(label) for label, _, _ in lines)
    return "\n".join(f"{label:<{width}} : {t['seconds'] * 1e3:8.1f} ms{note}"
                     for label, t, note in lines)


# ---------------------------------------------------------------------------------------------
# the run


EXPERIMENTS = {"prefill": reading, "decode": typing, "collision": colliding, "depth": deep}


def experiment(args, report):
    start = machine_roofs(args)
    common.progress("making the tables (random weights)")
    size = model.SIZES[args.model]
    bench = {"size": size, "floors": model.floors(args.seed, **dims(size)),
             "pool": model.workers(threads(args, report)), "runs": args.runs, "alone": {},
             "roofs": start}
    checks = []  # (experiment, row label, measured seconds, riders of its trips, breakdown)
    for name in args.experiments:
        tables, found = EXPERIMENTS[name](bench, args)
        for t in tables:
            common.table(report, **t)
            common.show(report, "")
        checks += [(name, *c) for c in found]
    summary(report)
    given = args.roofs or args.forklift
    roofs = start if given else through_the_run(start, machine_roofs(args))
    check(report, checks, roofs, size)
    breakdown(report, checks, roofs, size)
    if args.plot:
        report["files"].update(roofline.files(report["roofline"],
                                              common.machine_line(report["machine"])))


def threads(args, report):
    """The model's threads: --threads, else as many as the BLAS library chose for itself."""
    chosen = args.threads or max([b["threads"] or 1 for b in report["machine"]["blas"]] or [1])
    report["settings"]["model_threads"] = chosen
    return chosen


def summary(report):
    """The post's closing comparison, from this run: the best reading cost per token against
    one user's typing step."""
    prefill, decode = (report["tables"].get(name + report["suffix"], {}).get("rows")
                       for name in ("prefill", "decode"))
    one = [row for row in decode or [] if row[0] == 1]
    if not prefill or not one:
        return
    best = min(prefill, key=lambda row: row[2])
    reading_ms, typing_ms = best[2], one[0][1]
    common.table(report, "summary",
                 [("reading ms/token", "ms", ".2f"), ("at prompt", "tokens", "d"),
                  ("typing ms/token", "ms", ".1f"), ("times cheaper", "x", ".1f")],
                 [[reading_ms, best[0], typing_ms, typing_ms / reading_ms]],
                 text=f"reading costs {reading_ms:.2f} ms per token (at {best[0]} tokens) and "
                      f"typing {typing_ms:.1f} ms (one user), so reading is about "
                      f"{typing_ms / reading_ms:.0f} times cheaper per token")


# ---------------------------------------------------------------------------------------------
# every timing against what the machine's two limits allow

SUSPICIOUS = 2.0  # a row slower than this many times its limit: look for a bug, as the post did


DRIFT = 0.10  # the speeds at the end of a run differ from the start by more: say so


def machine_roofs(args):
    """The forklift and workbench speeds: measured now (same run, same noise), from --roofs, or
    given as --forklift and --workbench."""
    if args.roofs:
        return dict(args.roofs)
    if args.forklift:
        return {"bytes_per_s": args.forklift * 1e9, "flops_per_s": args.workbench * 1e9,
                "source": "given on the command line"}
    r = machine_speed.roofs(args.runs, args.quick)
    return {"bytes_per_s": r["bytes_per_s"], "flops_per_s": r["flops_per_s"],
            "source": f"measured in this run by machine_speed ({r['forklift']['timing']['stat']})"}


def through_the_run(start, end):
    """The speeds measured at the start and at the end of a run, and the limit's: the faster of
    each, since the machine showed in this very run that it can go that fast. A warning says
    when they moved by more than DRIFT: rows measured in between may be held to a speed the
    machine did not have just then."""
    for key, name, unit in (("bytes_per_s", "forklift", "GB/s"),
                            ("flops_per_s", "workbench", "GFLOP/s")):
        moved = end[key] / start[key] - 1
        if abs(moved) > DRIFT:
            common.warn(f"the {name} moved by {moved:+.0%} during the run ({start[key] / 1e9:.1f} "
                        f"to {end[key] / 1e9:.1f} {unit}): the machine's speed changed under the "
                        f"measurements; every row is held to the faster speed")
    speeds = {key: max(start[key], end[key]) for key in ("bytes_per_s", "flops_per_s")}
    return {**speeds, "start": {k: start[k] for k in speeds}, "end": {k: end[k] for k in speeds},
            "source": f"{start['source']} at the start ({start['bytes_per_s'] / 1e9:.1f} GB/s, "
                      f"{start['flops_per_s'] / 1e9:.1f} GFLOP/s) and at the end "
                      f"({end['bytes_per_s'] / 1e9:.1f} GB/s, {end['flops_per_s'] / 1e9:.1f} "
                      f"GFLOP/s): the faster of each"}


def check(report, checks, roofs, size=model.SIZES["small"]):
    """One table: each row's measured time against its limit, and which limit binds."""
    if not checks:
        return
    rows, d = [], dims(size)
    for experiment, label, seconds, trips, parts in checks:
        limits = [model.limit(t, roofs["bytes_per_s"], roofs["flops_per_s"], **d) for t in trips]
        limit_s, bound = max(limits)  # a row of several trips (the chunks) is its slowest one
        rows.append([experiment, label, seconds * 1e3, limit_s * 1e3, bound, seconds / limit_s])
        if seconds / limit_s > SUSPICIOUS:
            common.warn(f"{experiment} {label} took {seconds / limit_s:.1f}x its limit "
                        f"({bound}-bound); {suspect(parts, roofs, size)}")
    common.table(report, "check", CHECK_COLUMNS, rows)
    report["roofline" + report["suffix"]] = {**roofs, "points": [  # prefill and decode rows
        [experiment, label, model.trip_flops(trips[0], **d) / model.bytes_read(trips[0], **d),
         model.trip_flops(trips[0], **d) / seconds]
        for experiment, label, seconds, trips, _ in checks if experiment in ("prefill", "decode")]}
    threads = report["settings"]["model_threads"]
    common.show(report, f"(limit = max(bytes / {roofs['bytes_per_s'] / 1e9:.1f} GB/s, "
                        f"FLOPs / {roofs['flops_per_s'] / 1e9:.1f} GFLOP/s); "
                        f"speeds {roofs['source']}; {model_words(size)} on {threads} "
                        f"{plural(threads, 'thread')})")
    report["roofs" + report["suffix"]] = roofs


CHECK_COLUMNS = [("experiment", "", "s"), ("row", "", "s"), ("measured ms", "ms", ".1f"),
                 ("limit ms", "ms", ".1f"), ("bound by", "", "s"), ("x limit", "x", ".2f")]


# ---------------------------------------------------------------------------------------------
# where the time goes: each row's trip, recorded apart from the timed runs, part by part


def excess(parts, roofs, size):
    """Seconds above the limit, by whose they are: {who: seconds}. The tables' excess is split
    into the BLAS's (the same products alone, against their limit) and ours (the rest)."""
    limits = model.part_limits(parts["riders"], roofs["bytes_per_s"], roofs["flops_per_s"],
                               **dims(size))
    seconds, alone = parts["parts"], parts["alone"]["seconds"]
    return {"the BLAS": alone - limits["tables"], "our tables": seconds["tables"] - alone,
            "attention": seconds["attention"] - limits["attention"],
            "elementwise": seconds["elementwise"] - limits["elementwise"],
            "other": seconds["other"]}


def suspect(parts, roofs, size):
    """The part that holds the most excess, in a few words for a warning."""
    seconds, alone = parts["parts"], parts["alone"]["seconds"] * 1e3
    limits = model.part_limits(parts["riders"], roofs["bytes_per_s"], roofs["flops_per_s"],
                               **dims(size))
    ms = {p: s * 1e3 for p, s in seconds.items()}
    say = {
        "the BLAS": f"tables: {ms['tables']:.1f} ms, the same products alone take {alone:.1f} ms "
                    f"({alone / 1e3 / limits['tables']:.1f}x their limit): the BLAS's own path "
                    f"for {sum(t for _, t in parts['riders'])} columns",
        "our tables": f"tables: {ms['tables']:.1f} ms, the same products alone take only "
                      f"{alone:.1f} ms: time lost around the products",
        "attention": f"attention: {ms['attention']:.1f} ms, "
                     f"{seconds['attention'] / limits['attention']:.1f}x its limit: look at how "
                     f"the notebooks are read",
        "elementwise": f"elementwise: {ms['elementwise']:.1f} ms against a limit of "
                       f"{limits['elementwise'] * 1e3:.1f} ms: look for a slow elementwise road "
                       f"(like h**3)",
        "other": f"other: {ms['other']:.1f} ms outside every part (splits, Python)"}
    who = excess(parts, roofs, size)
    return say[max(who, key=who.get)]


def breakdown(report, checks, roofs, size=model.SIZES["small"]):
    """One row per check row: each part's milliseconds, the tables against the same products
    alone, the tables and attention against their own limits, and whose excess is largest."""
    if not checks:
        return
    rows = []
    for experiment, label, _, _, parts in checks:
        limits = model.part_limits(parts["riders"], roofs["bytes_per_s"], roofs["flops_per_s"],
                                   **dims(size))
        s, alone = parts["parts"], parts["alone"]["seconds"]
        who = excess(parts, roofs, size)
        most = max(who, key=who.get)
        rows.append([experiment, label, s["trip"] * 1e3, s["tables"] * 1e3, alone * 1e3,
                     s["tables"] / alone, s["attention"] * 1e3,
                     s["attention"] / limits["attention"], s["elementwise"] * 1e3,
                     s["other"] * 1e3, f"{most} {who[most] * 1e3:+.1f} ms"])
    common.table(report, "breakdown", BREAKDOWN_COLUMNS, rows,
                 parts=[{**c[4]["parts"], "alone": c[4]["alone"]["samples"]} for c in checks])
    runs = min(report["settings"]["runs"], BREAKDOWN_RUNS)
    common.show(report, f"(one recorded trip per row, the middle of {runs} {plural(runs, 'run')} "
                        f"apart from the timed ones; alone: the trip's table products timed "
                        f"alone, outside the model, best of {runs}; x alone: the tables' time "
                        f"against it; x limit: attention's time against its own limit)")


BREAKDOWN_COLUMNS = [("experiment", "", "s"), ("row", "", "s"), ("trip ms", "ms", ".1f"),
                     ("tables ms", "ms", ".1f"), ("alone ms", "ms", ".1f"),
                     ("x alone", "x", ".2f"), ("attention ms", "ms", ".1f"),
                     ("x limit", "x", ".2f"), ("elementwise ms", "ms", ".1f"),
                     ("other ms", "ms", ".1f"), ("most excess", "", "s")]


ROOFS_FILE_MAX = 1 << 24  # bytes: a results file is a few hundred KB; anything larger is not one


def roofs_file(path):
    """An argparse type: a saved machine_speed.json -> its two speeds, which must be finite and
    positive (they divide every limit)."""
    def refuse(why):
        raise argparse.ArgumentTypeError(f"must be a machine_speed.py results file (.json); "
                                         f"{path!r} {why}")
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > ROOFS_FILE_MAX:
            refuse("is not a results file" if os.path.exists(path) else "does not exist")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        refuse(f"cannot be read as JSON ({e})")
    speeds = data.get("roofs") if isinstance(data, dict) else None
    if not isinstance(speeds, dict):
        refuse("has no saved speeds ('roofs'): rerun machine_speed.py to save them")
    roofs = {}
    for name, what, unit in (("bytes_per_s", "memory speed", "GB/s"),
                             ("flops_per_s", "math speed", "GFLOP/s")):
        value = speeds.get(name)
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            shown = f"{value / 1e9:g} {unit}" if isinstance(value, (int, float)) else repr(value)
            refuse(f"holds a {what} of {shown}: it must be a finite number above 0")
        roofs[name] = float(value)
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    date = str(machine.get("date") or "on an unknown date")[:10]
    return {**roofs, "source": f"from {path} (measured {date})"}


# ---------------------------------------------------------------------------------------------
# predict before running: every table as the two speeds predict it, for any model, with no model
# built (the post's promised next step: see which limit you will hit before you run anything)


def predict(args, report):
    """The experiments' tables with every trip at its limit on the given speeds."""
    roofs, size = machine_roofs(args), model.SIZES[args.model]
    d = dims(size)
    report["predicted"] = prediction(args)

    def at_limit(riders):  # a trip's time, predicted: its limit
        return model.limit(riders, roofs["bytes_per_s"], roofs["flops_per_s"], **d)[0]

    tables = []
    if "prefill" in args.experiments:
        tables.append({"name": "prefill", "columns": PREFILL_COLUMNS,
                       "rows": [prefill_row(p, at_limit([(0, p)]), d) for p in args.prompts]})
    if "decode" in args.experiments:
        tables.append({"name": "decode", "columns": DECODE_COLUMNS, "rows": [
            decode_row(u, args.notes, at_limit([(args.notes, 1)] * u), d) for u in args.users]})
    if "collision" in args.experiments:  # each figure of one "run": the schedule at its limits
        normal = common.summarize([at_limit([(args.notes, 1)] * args.typers)])
        dial = {c: dial_figures([[at_limit(r) for r in riders_of(schedule(args.question, c),
                                                                  args.notes, args.typers)]], c)
                for c in args.chunk}
        tables += collision_tables(args, normal, dial)
    if "depth" in args.experiments:
        tables.append({"name": "depth", "columns": DEPTH_COLUMNS, "rows": [
            depth_row(u, depth, at_limit([(depth, 1)] * u), roofs, d)
            for u in args.depth_users for depth in args.depths]})
    for t in tables:
        common.table(report, t["name"], t["columns"], t["rows"], text=t.get("text"))
        common.show(report, f"(predicted: every figure is its trip's limit, max(bytes / "
                            f"{roofs['bytes_per_s'] / 1e9:g} GB/s, FLOPs / "
                            f"{roofs['flops_per_s'] / 1e9:g} GFLOP/s); nothing was run)")
        common.show(report, "")
    report["roofs" + report["suffix"]] = roofs


def prediction(args):
    """The line a prediction shows instead of a machine line: which speeds it assumed."""
    roofs = machine_roofs(args)
    bw, fl = roofs["bytes_per_s"] / 1e9, roofs["flops_per_s"] / 1e9
    return (f"machine: none, predicted for a forklift of {bw:,.1f} GB/s and a workbench of "
            f"{fl:,.1f} GFLOP/s (balance {fl / bw:.1f} FLOPs per byte), {roofs['source']} | "
            f"{model_words(model.SIZES[args.model])} | {datetime.date.today().isoformat()}")


def speed(unit):
    """An argparse type: a speed in `unit`, a finite number above 0."""
    return common.finite(f"a speed in {unit} above 0", lambda v: v > 0)


# ---------------------------------------------------------------------------------------------
# flags


def build_parser():
    p = common.parser(__doc__, runs=5)
    g = p.add_argument_group("two_phases: the experiments (defaults are the post's)")
    g.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=tuple(EXPERIMENTS),
                   metavar="NAME", help=f"which to run, of {', '.join(EXPERIMENTS)}")
    g.add_argument("--prompts", nargs="+", type=common.whole(1, model.CONTEXT), default=PROMPTS,
                   metavar="T", help="prefill: question lengths in tokens")
    g.add_argument("--users", nargs="+", type=common.whole(1), default=USERS, metavar="U",
                   help="decode: users typing one token each in the same trip")
    g.add_argument("--notes", type=common.whole(1, model.CONTEXT - 1), default=NOTES,
                   metavar="N", help="decode and collision: notes already in each typer's notebook")
    g.add_argument("--typers", type=common.whole(1), default=TYPERS, metavar="U",
                   help="collision: users typing when the new user arrives")
    g.add_argument("--question", type=common.whole(1, model.CONTEXT), default=QUESTION,
                   metavar="T", help="collision: the new user's question length in tokens")
    dial = g.add_mutually_exclusive_group()
    dial.add_argument("--chunk", nargs="+", type=common.whole(1), default=DIAL, metavar="C",
                      help="collision: the dial, question tokens read per step; a row reading "
                           "the whole question at once is always added")
    dial.add_argument("--budget", nargs="+", type=common.whole(2), default=None, metavar="B",
                      help="collision: the same dial as vLLM's per-step token budget "
                           "(max_num_batched_tokens): chunk = B - typers")
    g.add_argument("--depths", nargs="+", type=common.whole(0, model.CONTEXT - 1), default=DEPTHS,
                   metavar="N", help="depth: notes already in each typer's notebook; its users "
                                     f"are --users, else {' '.join(map(str, DEPTH_USERS))}")
    g.add_argument("--model", choices=model.SIZES, default="small", metavar="SIZE",
                   help=f"which GPT-2: {', '.join(model.SIZES)} (the post's is small)")
    g.add_argument("--seed", type=common.whole(0), default=SEED, metavar="S",
                   help="seed of the random tables")
    g.add_argument("--plot", action="store_true",
                   help="also draw the roofline: results/<machine>/roofline.png and .svg "
                        "(needs matplotlib)")
    speeds = g.add_mutually_exclusive_group()
    speeds.add_argument("--roofs", type=roofs_file, default=None, metavar="FILE",
                        help="take the forklift and workbench speeds from a saved "
                             "machine_speed.json instead of measuring them in this run")
    speeds.add_argument("--forklift", type=speed("GB/s"), default=None, metavar="GB/S",
                        help="the memory speed to hold the rows to (or to predict with), "
                             "with --workbench, instead of measuring it")
    g.add_argument("--workbench", type=speed("GFLOP/s"), default=None, metavar="GFLOP/S",
                   help="the math speed, with --forklift")
    g.add_argument("--predict", action="store_true",
                   help="run nothing: print every table as the speeds predict it (--forklift "
                        "and --workbench, or --roofs), for any --model; saved under "
                        "predicted-<model>-<speeds> unless --label says otherwise")
    return p


def peak_bytes(args):
    """Tables, plus the largest experiment's notebooks and the scratch of its biggest trip."""
    size = model.SIZES[args.model]
    nb, d = model.note_bytes(**dims(size)), dims(size)

    def scratch(riders):
        return model.trip_scratch_bytes(riders, **size)
    need = [0]
    if "prefill" in args.experiments:
        need += [p * nb + scratch([(0, p)]) for p in args.prompts]
    if "decode" in args.experiments:
        need += [(args.notes + u * (args.notes + 1)) * nb + scratch([(args.notes, 1)] * u)
                 for u in args.users]
    if "collision" in args.experiments:
        steps = len(schedule(args.question, args.chunk[0]))
        need.append((args.notes + args.typers * (args.notes + steps) + args.question + 1) * nb
                    + scratch([(args.notes, 1)] * args.typers + [(0, args.question)]))
    if "depth" in args.experiments:  # every depth's first notebook, and the biggest typers'
        deepest, most = max(args.depths), max(args.depth_users)
        need.append((sum(args.depths) + most * (deepest + 1)) * nb
                    + scratch([(deepest, 1)] * most))
    roofs = 0 if args.roofs else machine_speed.roofs_memory_bytes(args.quick)
    tables = model.table_numbers(**d) * model.BYTES
    return tables + max(roofs, *need)  # the speeds: measured at the start and at the end


def parse_args(argv=None):
    p = build_parser()
    args = common.parse(p, argv, QUICK)
    given = args.users is not USERS and args.users is not QUICK["users"]  # argparse makes a list
    args.depth_users = args.users if given else (1, 2) if args.quick else DEPTH_USERS
    dial = "--budget" if args.budget else "--chunk"
    if args.budget:
        if min(args.budget) <= args.typers:
            p.error(f"argument --budget: each budget must be larger than --typers "
                    f"({args.typers}), to leave room for the question, got {min(args.budget)}")
        args.chunk = [b - args.typers for b in args.budget]
    # the dial, once: each chunk at most the question, and the question read all at once
    args.chunk = sorted({min(c, args.question) for c in args.chunk} | {args.question})
    steps = len(schedule(args.question, args.chunk[0]))
    if "collision" in args.experiments and args.notes + steps > model.CONTEXT:
        smallest = f"a budget of {args.chunk[0] + args.typers}" if args.budget else \
            f"a chunk of {args.chunk[0]}"
        p.error(f"argument {dial}: the typers' {args.notes} notes plus one per step "
                f"({steps} steps for {smallest}) must fit in a notebook of {model.CONTEXT} "
                f"tokens; use a larger {dial} or fewer --notes")
    if (args.forklift is None) != (args.workbench is None):
        p.error(f"argument {'--workbench' if args.forklift else '--forklift'}: --forklift and "
                f"--workbench go together")
    if args.predict and not (args.roofs or args.forklift):
        p.error("argument --predict: needs the speeds to predict with: --forklift and "
                "--workbench, or --roofs FILE")
    if args.predict:
        if args.plot:
            p.error("argument --plot: draws measured rows, so not with --predict")
        if args.label is None:
            r = machine_roofs(args)
            args.label = (f"predicted-{args.model}-{r['bytes_per_s'] / 1e9:.0f}gbs-"
                          f"{r['flops_per_s'] / 1e9:.0f}gflops")
            problem = None if args.no_save else common.unwritable(common.folder_of(args))
            if problem:
                p.error(f"argument --out: results cannot be saved to "
                        f"{common.folder_of(args)}: {problem}")
        return args  # nothing is built: nothing to fit in memory
    if args.plot and args.no_save:
        p.error("argument --plot: draws into the results folder, so not with --no-save")
    if args.plot and args.threads and len(args.threads) > 1:
        p.error("argument --plot: draws one run's roofline, not a sweep's; give one --threads")
    if args.plot and not roofline.available():
        p.error("argument --plot: needs matplotlib (python -m pip install matplotlib)")
    common.need_memory(p, peak_bytes(args), f"GPT-2 {args.model} with these settings",
                       "--model, --users, --prompts, --notes or --depths")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.predict:
        return common.run("two_phases", args, predict, headline=prediction(args))
    common.note(f"estimated peak memory: {peak_bytes(args) / 1e9:.1f} GB")
    return common.run("two_phases", args, experiment)


if __name__ == "__main__":
    sys.exit(main())
