"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), and meets a long question.

    python two_phases.py                    # the post's three experiments, middle of 5
    python two_phases.py --quick --no-save  # a smoke run of a few seconds
"""
import argparse
import statistics
import sys

import numpy as np

import common
import machine_speed
import model

PROMPTS = (1, 16, 64, 256, 1024)  # Phase 1: question lengths, one user
USERS = (1, 4, 16, 64)  # Phase 2: users typing one token each in the same trip
NOTES = 512  # notes already in each typer's notebook
TYPERS = 8  # the collision: 8 users typing ...
QUESTION = 1024  # ... when a new user arrives with a 1,024-token question
CHUNK = 128  # chunked prefill: question tokens read per step, the post's third line
DIAL = (32, 64, 128, 256, 512, 1024)  # the chunk-size dial; the question's length reads it at once
EXPERIMENTS = ("prefill", "decode", "collision")
QUICK = {"prompts": (1, 16, 64), "users": (1, 4), "notes": 64, "typers": 2, "question": 64,
         "chunk": (16, 32)}
SEED = 0


def tokens(t, seed):
    """t tokens' hidden states as they enter the first floor: (width, t) float32, seeded."""
    return np.random.default_rng(seed).standard_normal((model.WIDTH, t), dtype=np.float32)


def count(n, thing):
    """'1 user', '4 users'."""
    return f"{n} {thing}" + "s" * (n != 1)


def reset(books, n):
    """Every timed trip starts from the same state: each notebook back to n notes."""
    for book in books:
        book["len"] = n


def time_trip(layers, x, segments, pool, runs, what):
    """The middle of `runs` trips, each starting with every notebook as it is now."""
    start = [(book, book["len"]) for book, _ in segments]

    def setup():
        for book, n in start:
            book["len"] = n
    return common.measure(lambda: model.trip(layers, x, segments, pool=pool), runs, setup=setup,
                          what=what)


def read_question(layers, notes, pool):
    """One user's notebook after the model read a `notes`-token question: the typers' start."""
    book = model.notebook(notes)
    model.trip(layers, tokens(notes, SEED + 1), [(book, notes)], pool=pool)
    return book


def typists(first, users, room):
    """`users` notebooks side by side on one shelf, each holding the notes in `first`, with room
    for `room` more."""
    n = first["len"]
    books = model.notebooks(users, n + room)
    for book in books:
        book["k"][..., :n] = first["k"][..., :n]
        book["v"][..., :n] = first["v"][..., :n]
        book["len"] = n
    return books


# ---------------------------------------------------------------------------------------------
# Phase 1: reading


def reading(layers, prompts, runs, pool):
    """One user, one trip holding the whole question. -> rows, timings, each row's trips."""
    rows, timings = [], []
    for p in prompts:
        segments = [(model.notebook(p), p)]
        t = time_trip(layers, tokens(p, SEED + 2), segments, pool, runs,
                      f"reading {count(p, 'token')}")
        sec = t["seconds"]
        rows.append([p, sec * 1e3, sec * 1e3 / p, model.table_flops(p) / sec / 1e9])
        timings.append(t)
    return rows, timings, [[[(0, p)]] for p in prompts]


PREFILL_COLUMNS = [("prompt", "tokens", "d"), ("time ms", "ms", ".1f"),
                   ("ms/token", "ms", ".2f"), ("GFLOP/s", "GFLOP/s", ".1f")]


# ---------------------------------------------------------------------------------------------
# Phase 2: typing


def typing(layers, users, notes, runs, pool):
    """Each user already has `notes` notes; all type one token in the same trip."""
    first = read_question(layers, notes, pool)
    rows, timings = [], []
    for u in users:
        segments = [(b, 1) for b in typists(first, u, room=1)]
        t = time_trip(layers, tokens(u, SEED + 3), segments, pool, runs,
                      f"typing for {count(u, 'user')}")
        sec = t["seconds"]
        rows.append([u, sec * 1e3, u / sec, model.table_flops(u) / sec / 1e9,
                     model.bytes_read([(notes, 1)] * u) / 1e6])
        timings.append(t)
        del segments  # this shelf goes before the next, bigger one comes
    return rows, timings, [[[(notes, 1)] * u] for u in users]


DECODE_COLUMNS = [("users", "users", "d"), ("step ms", "ms", ".1f"),
                  ("tokens/s", "tokens/s", ".1f"), ("GFLOP/s", "GFLOP/s", ".1f"),
                  ("MB read", "MB", ".0f")]


# ---------------------------------------------------------------------------------------------
# When the two phases share a server


def chunks(question, chunk):
    """The question read `chunk` tokens per step: [(start, size)]; chunk >= question is one step."""
    return [(a, min(chunk, question - a)) for a in range(0, question, chunk)]


def schedule(typers, question, chunk):
    """vLLM's chunked prefill as a list of trips. Every step, each typer gets its one token
    first; the newcomer's next `chunk` tokens of question ride in the same trip (with a per-step
    token budget B, chunk = B - typers). The step that reads the question's last piece also gives
    the newcomer its first word (the output at its last question token, sampled as vLLM does in
    that same step); in the next step it types with the others, and the collision is over.

    -> steps, each [(user, first token, tokens)]: users 0..typers-1 type one token each; user
    `typers` is the newcomer, whose first tokens are pieces of its question, then one word.
    """
    typing = [(u, 0, 1) for u in range(typers)]
    return ([typing + [(typers, a, size)] for a, size in chunks(question, chunk)]
            + [typing + [(typers, question, 1)]])


def step_shapes(steps, notes, typers):
    """Each step's trip for the accounting: [(notes before, new tokens)] per user."""
    return [[(notes + i if u < typers else a, t) for u, a, t in step]
            for i, step in enumerate(steps)]


def collision(layers, typers, notes, question, dial, runs, pool):
    """`typers` users with `notes` notes each are typing when a newcomer arrives with a
    `question`-token question; it is read in each chunk size of the dial.

    -> {"normal": the typers' gap with no newcomer, "dial": {chunk: figures of its schedule}}.
    """
    first = read_question(layers, notes, pool)
    most = max(len(schedule(typers, question, c)) for c in dial)
    books = typists(first, typers, room=most)
    newcomer = model.notebook(question + 1)  # its question, then its first typed word
    users = books + [newcomer]
    xt, xq, xw = tokens(typers, SEED + 3), tokens(question, SEED + 4), tokens(1, SEED + 5)

    def setup():
        reset(books, notes)
        reset([newcomer], 0)

    def trip_of(step):  # one step's trip, built before the timer starts
        x = np.concatenate([xt[:, u:u + 1] if u < typers else
                            (xq[:, a:a + n] if a < question else xw) for u, a, n in step], 1)
        segments = [(users[u], n) for u, _, n in step]
        return lambda: model.trip(layers, x, segments, pool=pool)

    normal = time_trip(layers, xt, [(b, 1) for b in books], pool, runs, "typers alone")
    result = {"normal": normal, "dial": {}}
    for chunk in dial:
        steps = schedule(typers, question, chunk)
        per_run = common.time_steps([trip_of(s) for s in steps], runs, setup=setup,
                                    what=f"question in chunks of {chunk}")
        result["dial"][chunk] = dial_figures(per_run, normal["seconds"], chunk)
        result["dial"][chunk]["trips"] = step_shapes(steps, notes, typers)
    return result


def dial_figures(per_run, normal_s, chunk):
    """The figures of one chunk size, each the middle of the runs. per_run: step seconds."""
    def middle(figure, what):
        return common.summarize([figure(steps) for steps in per_run], "middle",
                                f"chunks of {chunk}: {what}")
    return {"steps to read": len(per_run[0]) - 1,
            "ttft": middle(lambda s: sum(s[:-1]), "time to first word"),
            "gap median": middle(statistics.median, "typers' median gap"),
            "gap worst": middle(max, "typers' worst gap"),
            "total": middle(sum, "total time"),
            "normal_s": normal_s, "steps_s": per_run}


DIAL_COLUMNS = [("chunk", "tokens", "d"), ("steps to read", "steps", "d"),
                ("TTFT ms", "ms", ".1f"), ("gap median ms", "ms", ".1f"),
                ("worst gap ms", "ms", ".1f"), ("worst x normal", "x", ".1f"),
                ("total ms", "ms", ".1f")]


def dial_rows(dial):
    return [[chunk, f["steps to read"], f["ttft"]["seconds"] * 1e3,
             f["gap median"]["seconds"] * 1e3, f["gap worst"]["seconds"] * 1e3,
             f["gap worst"]["seconds"] / f["normal_s"], f["total"]["seconds"] * 1e3]
            for chunk, f in sorted(dial.items())]


COLLISION_COLUMNS = [("typers", "users", "d"), ("question", "tokens", "d"),
                     ("chunk", "tokens", "d"), ("steps", "steps", "d"),
                     ("normal gap ms", "ms", ".1f"), ("all at once gap ms", "ms", ".1f"),
                     ("chunked worst gap ms", "ms", ".1f")]


def post_chunk(dial, question):
    """The chunk of the post's third line: 128, or the dial's smallest below the question."""
    below = [c for c in dial if c < question]
    return CHUNK if CHUNK in below else min(below or dial)


def collision_block(typers, question, chunk, normal, at_once, chunked, steps):
    """The post's three lines."""
    bumps = f"{steps} small bumps, worst one" if steps > 1 else "one step: all at once"
    lines = [(f"normal gap between words for the {typers} typers", normal, ""),
             (f"gap if the engine reads all {question:,} at once", at_once, " (one huge freeze)"),
             (f"gap if it reads {chunk} tokens between steps", chunked, f" ({bumps})")]
    width = max(len(label) for label, _, _ in lines)
    return "\n".join(f"{label:<{width}} : {t['seconds'] * 1e3:8.1f} ms{note}"
                     for label, t, note in lines)


def collide(args, report, layers, pool):
    """The collision experiment: the post's three lines, then the dial. -> check rows."""
    fmt = args.tablefmt
    dial = sorted(set(args.chunk) | {args.question})  # the last row reads it all at once
    c = collision(layers, args.typers, args.notes, args.question, dial, args.runs, pool)
    chunk = post_chunk(dial, args.question)
    at_once, chunked = c["dial"][args.question], c["dial"][chunk]
    timings = [c["normal"], at_once["gap worst"], chunked["gap worst"]]
    row = [args.typers, args.question, chunk, chunked["steps to read"],
           *(t["seconds"] * 1e3 for t in timings)]
    text = collision_block(args.typers, args.question, chunk, *timings,
                           chunked["steps to read"]) if fmt == "plain" else None
    common.table(report, fmt, "collision", COLLISION_COLUMNS, [row], timings, text=text,
                 per="figure")
    common.show(report, "")
    worst = [f["gap worst"] for _, f in sorted(c["dial"].items())]
    common.table(report, fmt, "dial", DIAL_COLUMNS, dial_rows(c["dial"]), worst)
    report["tables"]["dial"]["steps_s"] = [f["steps_s"] for _, f in sorted(c["dial"].items())]
    common.show(report, "")
    return ([("collision", "normal gap", c["normal"]["seconds"], [[(args.notes, 1)] * args.typers])]
            + [("collision", f"chunks of {ch}, worst" if ch < args.question else "all at once",
                f["gap worst"]["seconds"], f["trips"]) for ch, f in sorted(c["dial"].items())])


# ---------------------------------------------------------------------------------------------
# the run


def experiment(args, report):
    fmt = args.tablefmt
    roofs = machine_roofs(args)
    common.progress("making the tables (random weights)")
    layers = model.tables(args.seed)
    pool = model.workers(threads(args, report))
    prefill = decode = None
    checks = []  # (experiment, row, measured seconds, that row's trips)
    if "prefill" in args.experiments:
        prefill, timings, trips = reading(layers, args.prompts, args.runs, pool)
        common.table(report, fmt, "prefill", PREFILL_COLUMNS, prefill, timings)
        common.show(report, "")
        checks += [("prefill", count(row[0], "token"), t["seconds"], trip)
                   for row, t, trip in zip(prefill, timings, trips)]
    if "decode" in args.experiments:
        decode, timings, trips = typing(layers, args.users, args.notes, args.runs, pool)
        common.table(report, fmt, "decode", DECODE_COLUMNS, decode, timings)
        common.show(report, "")
        checks += [("decode", count(row[0], "user"), t["seconds"], trip)
                   for row, t, trip in zip(decode, timings, trips)]
    if "collision" in args.experiments:
        checks += collide(args, report, layers, pool)
    summary(report, prefill, decode)
    check(report, fmt, checks, roofs)


def threads(args, report):
    """The model's threads: --threads, else as many as the BLAS library chose for itself."""
    chosen = args.threads or max([b["threads"] or 1 for b in report["machine"]["blas"]] or [1])
    report["settings"]["model_threads"] = chosen
    return chosen


def summary(report, prefill, decode):
    """The post's closing comparison, from this run: the best reading cost per token against
    one user's typing step."""
    one = [row for row in decode or [] if row[0] == 1]
    if not prefill or not one:
        return
    best = min(prefill, key=lambda row: row[2])
    reading_ms, typing_ms = best[2], one[0][1]
    common.table(report, "plain", "summary",
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
    size = machine_speed.QUICK["size"] if args.quick else machine_speed.SIZE
    matmul = machine_speed.QUICK["matmul"] if args.quick else machine_speed.MATMUL
    r = machine_speed.measure_roofs(size, matmul, args.runs)
    return {"bytes_per_s": r["bytes_per_s"], "flops_per_s": r["flops_per_s"],
            "source": f"measured in this run by machine_speed ({r['forklift']['timing']['stat']})"}


def check(report, fmt, checks, roofs):
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
    common.table(report, fmt, "check", CHECK_COLUMNS, rows)
    report["roofline"] = {**roofs, "points": [  # one trip per row: prefill and decode
        (f"{experiment} {label}", model.trip_flops(trips[0]) / model.bytes_read(trips[0]),
         model.trip_flops(trips[0]) / seconds)
        for experiment, label, seconds, trips in checks if experiment in ("prefill", "decode")]}
    common.show(report, f"(limit = max(bytes / {roofs['bytes_per_s'] / 1e9:.1f} GB/s, "
                        f"FLOPs / {roofs['flops_per_s'] / 1e9:.1f} GFLOP/s); "
                        f"speeds {roofs['source']}; model on "
                        f"{count(report['settings']['model_threads'], 'thread')})")
    report["roofs"] = roofs


CHECK_COLUMNS = [("experiment", "", "s"), ("row", "", "s"), ("measured ms", "ms", ".1f"),
                 ("limit ms", "ms", ".1f"), ("bound by", "", "s"), ("x limit", "x", ".2f")]


def roofs_file(path):
    """An argparse type: a saved machine_speed.json -> its two speeds."""
    import json
    try:
        with open(path) as f:
            data = json.load(f)
        table = data["tables"]["machine_speed"]
        row = dict(zip([c["header"] for c in table["columns"]], table["rows"][0]))
        return {"bytes_per_s": row["memory speed"] * 1e9, "flops_per_s": row["math speed"] * 1e9,
                "source": f"from {path} (measured {data['machine']['date'][:10]})"}
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"must be a machine_speed.py results file (.json), "
                                         f"could not read {path!r}: {e}") from None


# ---------------------------------------------------------------------------------------------
# flags


def build_parser():
    p = common.parser(__doc__, runs=5)
    g = p.add_argument_group("two_phases: the experiments (defaults are the post's)")
    g.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=EXPERIMENTS,
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
    common.add_plot_flag(g)
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
        steps = len(schedule(args.typers, args.question, min(args.chunk)))
        need.append((args.notes + args.typers * (args.notes + steps) + args.question + 1) * nb
                    + model.trip_scratch_bytes([(args.notes, 1)] * args.typers
                                               + [(0, args.question)]))
    roofs = 0 if args.roofs else 4 * machine_speed.SIZE ** 2  # freed before the tables come
    return max(roofs, model.TABLE_BYTES + max(need))


def parse_args(argv=None):
    p = build_parser()
    args = common.parse(p, argv, QUICK)
    if args.budget:
        if min(args.budget) <= args.typers:
            p.error(f"argument --budget: each budget must be larger than --typers "
                    f"({args.typers}), to leave room for the question, got {min(args.budget)}")
        args.chunk = [b - args.typers for b in args.budget]
    args.chunk = sorted({min(c, args.question) for c in args.chunk})
    steps = len(schedule(args.typers, args.question, args.chunk[0]))
    if "collision" in args.experiments and args.notes + steps > model.CONTEXT:
        p.error(f"argument --chunk: the typers' {args.notes} notes plus one per step "
                f"({steps} steps for a chunk of {args.chunk[0]}) must fit in a notebook of "
                f"{model.CONTEXT} tokens; use larger chunks or fewer --notes")
    common.need_memory(p, peak_bytes(args), "these settings", "--users, --prompts or --notes")
    return args


def main(argv=None):
    args = parse_args(argv)
    common.note(f"estimated peak memory: {peak_bytes(args) / 1e9:.1f} GB")
    return common.run("two_phases", args, experiment)


if __name__ == "__main__":
    sys.exit(main())
