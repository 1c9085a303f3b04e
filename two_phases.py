"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), and meets a long question.

    python two_phases.py                    # the post's three experiments, middle of 5
    python two_phases.py --quick --no-save  # a smoke run of a few seconds
"""
import argparse
import json
import statistics
import sys

import numpy as np

import common
import machine_speed
import model
import roofline
from common import plural

PROMPTS = (1, 16, 64, 256, 1024)  # Phase 1: question lengths, one user
USERS = (1, 4, 16, 64)  # Phase 2: users typing one token each in the same trip
NOTES = 512  # notes already in each typer's notebook
TYPERS = 8  # the collision: 8 users typing ...
QUESTION = 1024  # ... when a new user arrives with a 1,024-token question
CHUNK = 128  # chunked prefill: question tokens read per step, the post's third line
DIAL = (32, 64, 128, 256, 512, 1024)  # the chunk-size dial; the question's length reads it at once
QUICK = {"prompts": (1, 16, 64), "users": (1, 4), "notes": 64, "typers": 2, "question": 64,
         "chunk": (16, 32)}
SEED = 0


def tokens(t, seed):
    """t tokens' hidden states as they enter the first floor: (width, t) float32, seeded."""
    return np.random.default_rng(seed).standard_normal((model.WIDTH, t), dtype=np.float32)


def time_trip(floors, x, segments, pool, runs, what):
    """The middle of `runs` trips, each starting with every notebook as it is now."""
    start = [(book, book["len"]) for book, _ in segments]

    def setup():
        for book, n in start:
            book["len"] = n
    return common.measure(lambda: model.trip(floors, x, segments, pool=pool), runs, setup=setup,
                          what=what)


def read_question(floors, notes, pool):
    """One user's notebook after the model read a `notes`-token question: the typers' start."""
    book = model.notebook(1, notes)
    model.trip(floors, tokens(notes, SEED + 1), [(book, notes)], pool=pool)
    return book


def typers(first, users, room):
    """The notebook of `users` users who each hold the notes in `first`, with room for `room`
    more each."""
    n = first["len"]
    book = model.notebook(users, n + room)
    book["k"][..., :n] = first["k"][..., :n]  # one user's notes, copied to every user
    book["v"][..., :n] = first["v"][..., :n]
    book["len"] = n
    return book


# ---------------------------------------------------------------------------------------------
# Phase 1: reading. Each experiment returns its tables (what common.table takes) and its checks:
# [(row label, measured seconds, the riders of each trip behind the figure)]


def reading(floors, args, pool):
    """One user, one trip holding the whole question."""
    rows, timings = [], []
    for p in args.prompts:
        t = time_trip(floors, tokens(p, SEED + 2), [(model.notebook(1, p), p)], pool, args.runs,
                      f"reading {p} {plural(p, 'token')}")
        sec = t["seconds"]
        rows.append([p, sec * 1e3, sec * 1e3 / p, model.table_flops(p) / sec / 1e9])
        timings.append(t)
    checks = [(f"{p} {plural(p, 'token')}", t["seconds"], [[(0, p)]])
              for p, t in zip(args.prompts, timings)]
    return [{"name": "prefill", "columns": PREFILL_COLUMNS, "rows": rows,
             "timings": timings}], checks


PREFILL_COLUMNS = [("prompt", "tokens", "d"), ("time ms", "ms", ".1f"),
                   ("ms/token", "ms", ".2f"), ("GFLOP/s", "GFLOP/s", ".1f")]


# ---------------------------------------------------------------------------------------------
# Phase 2: typing


def typing(floors, args, pool):
    """Each user already has `notes` notes; all type one token in the same trip."""
    first = read_question(floors, args.notes, pool)
    rows, timings = [], []
    for u in args.users:
        book = typers(first, u, room=1)
        t = time_trip(floors, tokens(u, SEED + 3), [(book, 1)], pool, args.runs,
                      f"typing for {u} {plural(u, 'user')}")
        sec = t["seconds"]
        rows.append([u, sec * 1e3, u / sec, model.table_flops(u) / sec / 1e9,
                     model.bytes_read([(args.notes, 1)] * u) / 1e6])
        timings.append(t)
        del book  # this notebook goes before the next, bigger one comes
    checks = [(f"{u} {plural(u, 'user')}", t["seconds"], [[(args.notes, 1)] * u])
              for u, t in zip(args.users, timings)]
    return [{"name": "decode", "columns": DECODE_COLUMNS, "rows": rows,
             "timings": timings}], checks


DECODE_COLUMNS = [("users", "users", "d"), ("step ms", "ms", ".1f"),
                  ("tokens/s", "tokens/s", ".1f"), ("GFLOP/s", "GFLOP/s", ".1f"),
                  ("MB read", "MB", ".0f")]


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


def colliding(floors, args, pool):
    """`typers` users with `notes` notes each are typing when a newcomer arrives with a
    `question`-token question; it is read in each chunk size of the dial."""
    first = read_question(floors, args.notes, pool)
    steps = {chunk: schedule(args.question, chunk) for chunk in args.chunk}
    typing_book = typers(first, args.typers, room=max(len(s) for s in steps.values()))
    newcomer = model.notebook(1, args.question + 1)
    xt = tokens(args.typers, SEED + 3)  # (width, typers)
    xn = np.concatenate([tokens(args.question, SEED + 4), tokens(1, SEED + 5)], 1)  # question, word

    def setup():
        typing_book["len"], newcomer["len"] = args.notes, 0

    def step(s):  # one step's trip, built before the timer starts
        x = np.concatenate([xt, xn[:, s]], 1)  # (width, typers + newcomer's tokens)
        segments = [(typing_book, 1), (newcomer, s.stop - s.start)]
        return lambda: model.trip(floors, x, segments, pool=pool)

    normal = time_trip(floors, xt, [(typing_book, 1)], pool, args.runs, "typers alone")
    dial = {}
    for chunk, chunk_steps in steps.items():
        per_run = common.time_steps([step(s) for s in chunk_steps], args.runs, setup=setup,
                                    what=f"question in chunks of {chunk}")
        dial[chunk] = dial_figures(per_run, chunk)
    return collision_tables(args, normal, dial, steps)


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


def collision_tables(args, normal, dial, steps):
    """The post's three lines, then the dial; every dial row is checked by its worst step."""
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
    checks = [("normal gap", normal_s, [[(args.notes, 1)] * args.typers])] + [
        (f"chunks of {c}, worst" if c < args.question else "all at once",
         f["gap worst"]["seconds"], riders_of(steps[c], args.notes, args.typers))
        for c, f in dial.items()]
    return [{"name": "collision", "columns": COLLISION_COLUMNS, "rows": [row],
             "timings": timings, "text": text, "per": "figure"},
            {"name": "dial", "columns": DIAL_COLUMNS, "rows": rows,
             "timings": [f["gap worst"] for f in dial.values()],
             "steps_s": [f["steps_s"] for f in dial.values()]}], checks


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


EXPERIMENTS = {"prefill": reading, "decode": typing, "collision": colliding}


def experiment(args, report):
    roofs = machine_roofs(args)
    common.progress("making the tables (random weights)")
    floors = model.floors(args.seed)
    pool = model.workers(threads(args, report))
    checks = []  # (experiment, row label, measured seconds, the riders of each of its trips)
    for name in args.experiments:
        tables, found = EXPERIMENTS[name](floors, args, pool)
        for t in tables:
            common.table(report, **t)
            common.show(report, "")
        checks += [(name, *c) for c in found]
    summary(report)
    check(report, checks, roofs)
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
    prefill, decode = (report["tables"].get(name, {}).get("rows") for name in ("prefill", "decode"))
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


def machine_roofs(args):
    """The forklift and workbench speeds: measured now (same run, same noise) or from --roofs."""
    if args.roofs:
        return dict(args.roofs)
    r = machine_speed.roofs(args.runs, args.quick)
    return {"bytes_per_s": r["bytes_per_s"], "flops_per_s": r["flops_per_s"],
            "source": f"measured in this run by machine_speed ({r['forklift']['timing']['stat']})"}


def check(report, checks, roofs):
    """One table: each row's measured time against its limit, and which limit binds."""
    if not checks:
        return
    rows = []
    for experiment, label, seconds, trips in checks:
        limits = [model.limit(t, roofs["bytes_per_s"], roofs["flops_per_s"]) for t in trips]
        limit_s, bound = max(limits)  # a row of several trips (the chunks) is its slowest one
        rows.append([experiment, label, seconds * 1e3, limit_s * 1e3, bound, seconds / limit_s])
        if seconds / limit_s > SUSPICIOUS:
            common.warn(f"{experiment} {label} took {seconds / limit_s:.1f}x its limit "
                        f"({bound}-bound): check for a slow elementwise road (like h**3) or a "
                        f"matrix product that misses the fast BLAS path")
    common.table(report, "check", CHECK_COLUMNS, rows)
    report["roofline"] = {**roofs, "points": [  # one trip per row: prefill and decode
        [experiment, label, model.trip_flops(trips[0]) / model.bytes_read(trips[0]),
         model.trip_flops(trips[0]) / seconds]
        for experiment, label, seconds, trips in checks if experiment in ("prefill", "decode")]}
    threads = report["settings"]["model_threads"]
    common.show(report, f"(limit = max(bytes / {roofs['bytes_per_s'] / 1e9:.1f} GB/s, "
                        f"FLOPs / {roofs['flops_per_s'] / 1e9:.1f} GFLOP/s); "
                        f"speeds {roofs['source']}; model on {threads} "
                        f"{plural(threads, 'thread')})")
    report["roofs"] = roofs


CHECK_COLUMNS = [("experiment", "", "s"), ("row", "", "s"), ("measured ms", "ms", ".1f"),
                 ("limit ms", "ms", ".1f"), ("bound by", "", "s"), ("x limit", "x", ".2f")]


def roofs_file(path):
    """An argparse type: a saved machine_speed.json -> its two speeds."""
    try:
        with open(path) as f:
            data = json.load(f)
        speeds = data["roofs"]
        return {"bytes_per_s": float(speeds["bytes_per_s"]),
                "flops_per_s": float(speeds["flops_per_s"]),
                "source": f"from {path} (measured {data['machine']['date'][:10]})"}
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"must be a machine_speed.py results file (.json), "
                                         f"could not read {path!r}: {e}") from None


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
    g.add_argument("--seed", type=common.whole(0), default=SEED, metavar="S",
                   help="seed of the random tables")
    g.add_argument("--plot", action="store_true",
                   help="also draw the roofline: results/<machine>/roofline.png and .svg "
                        "(needs matplotlib)")
    g.add_argument("--roofs", type=roofs_file, default=None, metavar="FILE",
                   help="take the forklift and workbench speeds from a saved machine_speed.json "
                        "instead of measuring them in this run")
    return p


def peak_bytes(args):
    """Tables, plus the largest experiment's notebooks and the scratch of its biggest trip."""
    nb = model.NOTE_BYTES
    need = [0]
    if "prefill" in args.experiments:
        need += [p * nb + model.trip_scratch_bytes([(0, p)]) for p in args.prompts]
    if "decode" in args.experiments:
        need += [(args.notes + u * (args.notes + 1)) * nb
                 + model.trip_scratch_bytes([(args.notes, 1)] * u) for u in args.users]
    if "collision" in args.experiments:
        steps = len(schedule(args.question, args.chunk[0]))
        need.append((args.notes + args.typers * (args.notes + steps) + args.question + 1) * nb
                    + model.trip_scratch_bytes([(args.notes, 1)] * args.typers
                                               + [(0, args.question)]))
    roofs = 0 if args.roofs else machine_speed.roofs_memory_bytes(args.quick)
    return max(roofs, model.TABLE_BYTES + max(need))  # the speeds are measured, then freed


def parse_args(argv=None):
    p = build_parser()
    args = common.parse(p, argv, QUICK)
    if args.budget:
        if min(args.budget) <= args.typers:
            p.error(f"argument --budget: each budget must be larger than --typers "
                    f"({args.typers}), to leave room for the question, got {min(args.budget)}")
        args.chunk = [b - args.typers for b in args.budget]
    # the dial, once: each chunk at most the question, and the question read all at once
    args.chunk = sorted({min(c, args.question) for c in args.chunk} | {args.question})
    steps = len(schedule(args.question, args.chunk[0]))
    if "collision" in args.experiments and args.notes + steps > model.CONTEXT:
        p.error(f"argument --chunk: the typers' {args.notes} notes plus one per step "
                f"({steps} steps for a chunk of {args.chunk[0]}) must fit in a notebook of "
                f"{model.CONTEXT} tokens; use larger chunks or fewer --notes")
    if args.plot and args.no_save:
        p.error("argument --plot: draws into the results folder, so not with --no-save")
    if args.plot and not roofline.available():
        p.error("argument --plot: needs matplotlib (python -m pip install matplotlib)")
    common.need_memory(p, peak_bytes(args), "these settings", "--users, --prompts or --notes")
    return args


def main(argv=None):
    args = parse_args(argv)
    common.note(f"estimated peak memory: {peak_bytes(args) / 1e9:.1f} GB")
    return common.run("two_phases", args, experiment)


if __name__ == "__main__":
    sys.exit(main())
