"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), and meets a long question.

    python two_phases.py                    # the post's three experiments, middle of 5
    python two_phases.py --quick --no-save  # a smoke run of a few seconds
"""
import math
import sys

import numpy as np

import common
import model

PROMPTS = (1, 16, 64, 256, 1024)  # Phase 1: question lengths, one user
USERS = (1, 4, 16, 64)  # Phase 2: users typing one token each in the same trip
NOTES = 512  # notes already in each typer's notebook
TYPERS = 8  # the collision: 8 users typing ...
QUESTION = 1024  # ... when a new user arrives with a 1,024-token question
CHUNK = 128  # chunked prefill: question tokens read per step
EXPERIMENTS = ("prefill", "decode", "collision")
QUICK = {"prompts": (1, 16, 64), "users": (1, 4), "notes": 64, "typers": 2, "question": 64,
         "chunk": 16}
SEED = 0


def tokens(t, seed):
    """t tokens' hidden states as they enter the first floor: (width, t) float32, seeded."""
    return np.random.default_rng(seed).standard_normal((model.WIDTH, t), dtype=np.float32)


def reset(books, n):
    """Every timed trip starts from the same state: each notebook back to n notes."""
    for book in books:
        book["len"] = n


def read_question(layers, notes):
    """One user's notebook after the model read a `notes`-token question: the typers' start."""
    book = model.notebook(notes)
    model.trip(layers, tokens(notes, SEED + 1), [(book, notes)])
    return book


def copy_with_room(book, room):
    """A new notebook holding the same notes, with room for `room` more."""
    n = book["len"]
    new = model.notebook(n + room)
    new["k"][:, :, :n, :] = book["k"][:, :, :n, :]
    new["v"][:, :, :, :n] = book["v"][:, :, :, :n]
    new["len"] = n
    return new


# ---------------------------------------------------------------------------------------------
# Phase 1: reading


def reading(layers, prompts, runs):
    """One user, one trip holding the whole question. -> rows, timings."""
    rows, timings = [], []
    for p in prompts:
        book, x = model.notebook(p), tokens(p, SEED + 2)
        t = common.measure(lambda: model.trip(layers, x, [(book, p)]), runs,
                           setup=lambda: reset([book], 0), what=f"reading a {p}-token question")
        sec = t["seconds"]
        rows.append([p, sec * 1e3, sec * 1e3 / p, model.table_flops(p) / sec / 1e9])
        timings.append(t)
    return rows, timings


PREFILL_COLUMNS = [("prompt", "tokens", "d"), ("time ms", "ms", ".1f"),
                   ("ms/token", "ms", ".2f"), ("GFLOP/s", "GFLOP/s", ".1f")]


# ---------------------------------------------------------------------------------------------
# Phase 2: typing


def typing(layers, users, notes, runs):
    """Each user already has `notes` notes; all type one token in the same trip."""
    first = read_question(layers, notes)
    rows, timings = [], []
    for u in users:
        books = [copy_with_room(first, 1) for _ in range(u)]
        x, segments = tokens(u, SEED + 3), [(b, 1) for b in books]
        t = common.measure(lambda: model.trip(layers, x, segments), runs,
                           setup=lambda: reset(books, notes),
                           what=f"typing for {u} user" + "s" * (u != 1))
        sec = t["seconds"]
        rows.append([u, sec * 1e3, u / sec, model.table_flops(u) / sec / 1e9,
                     model.bytes_read([(notes, 1)] * u) / 1e6])
        timings.append(t)
        del books, segments
    return rows, timings


DECODE_COLUMNS = [("users", "users", "d"), ("step ms", "ms", ".1f"), ("tokens/s", "tokens/s", ".1f"),
                  ("GFLOP/s", "GFLOP/s", ".1f"), ("MB read", "MB", ".0f")]


# ---------------------------------------------------------------------------------------------
# When the two phases share a server


def chunks(question, chunk):
    """The question read `chunk` tokens per step: [(start, size)]; chunk >= question is one step."""
    return [(a, min(chunk, question - a)) for a in range(0, question, chunk)]


def collision(layers, typers, notes, question, chunk, runs):
    """`typers` users are typing when a new user arrives with a `question`-token question.

    -> the typers' gap between words with no newcomer, when the whole question rides one trip,
    and the worst gap when it is read in chunks, each riding with the typers' next words.
    """
    first, steps = read_question(layers, notes), chunks(question, chunk)
    books = [copy_with_room(first, len(steps)) for _ in range(typers)]
    newcomer = model.notebook(question)
    xt, xq = tokens(typers, SEED + 3), tokens(question, SEED + 4)
    typing_only = [(b, 1) for b in books]

    def setup():
        reset(books, notes)
        reset([newcomer], 0)

    def riding(start, size):  # one trip: the typers' words plus a piece of the question
        x, segments = np.concatenate([xt, xq[:, start:start + size]], 1), typing_only + [(newcomer, size)]
        return lambda: model.trip(layers, x, segments)

    normal = common.measure(lambda: model.trip(layers, xt, typing_only), runs, setup=setup,
                            what="typers alone")
    at_once = common.measure(riding(0, question), runs, setup=setup, what="question all at once")
    per_run = common.time_steps([riding(a, c) for a, c in steps], runs, setup=setup,
                                what=f"question in chunks of {chunk}")
    worst = common.summarize([max(s) for s in per_run], "middle", "worst chunked gap")
    worst["steps_s"] = per_run
    return {"steps": len(steps), "normal": normal, "at_once": at_once, "chunked": worst}


COLLISION_COLUMNS = [("typers", "users", "d"), ("question", "tokens", "d"),
                     ("chunk", "tokens", "d"), ("steps", "steps", "d"),
                     ("normal gap ms", "ms", ".1f"), ("all at once gap ms", "ms", ".1f"),
                     ("chunked worst gap ms", "ms", ".1f")]


def collision_block(typers, question, chunk, c):
    """The post's three lines."""
    bumps = f"{c['steps']} small bumps, worst one" if c["steps"] > 1 else "one step: all at once"
    lines = [(f"normal gap between words for the {typers} typers", c["normal"], ""),
             (f"gap if the engine reads all {question:,} at once", c["at_once"], " (one huge freeze)"),
             (f"gap if it reads {chunk} tokens between steps", c["chunked"], f" ({bumps})")]
    width = max(len(label) for label, _, _ in lines)
    return "\n".join(f"{label:<{width}} : {t['seconds'] * 1e3:8.1f} ms{note}"
                     for label, t, note in lines)


# ---------------------------------------------------------------------------------------------
# the run


def experiment(args, report):
    fmt = args.tablefmt
    common.progress("making the tables (random weights)")
    layers = model.tables(args.seed)
    prefill = decode = None
    if "prefill" in args.experiments:
        prefill, timings = reading(layers, args.prompts, args.runs)
        common.table(report, fmt, "prefill", PREFILL_COLUMNS, prefill, timings)
        common.show(report, "")
    if "decode" in args.experiments:
        decode, timings = typing(layers, args.users, args.notes, args.runs)
        common.table(report, fmt, "decode", DECODE_COLUMNS, decode, timings)
        common.show(report, "")
    if "collision" in args.experiments:
        c = collision(layers, args.typers, args.notes, args.question, args.chunk, args.runs)
        timings = [c["normal"], c["at_once"], c["chunked"]]
        row = [args.typers, args.question, args.chunk, c["steps"],
               *(t["seconds"] * 1e3 for t in timings)]
        text = collision_block(args.typers, args.question, args.chunk, c) if fmt == "plain" else None
        common.table(report, fmt, "collision", COLLISION_COLUMNS, [row], timings, text=text,
                     per="figure")
        report["tables"]["collision"]["chunked_steps_s"] = c["chunked"]["steps_s"]
        common.show(report, "")
    summary(report, prefill, decode)


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
    g.add_argument("--chunk", type=common.whole(1), default=CHUNK, metavar="T",
                   help="collision: question tokens read per step (>= --question: all at once)")
    g.add_argument("--seed", type=common.whole(0), default=SEED, metavar="S",
                   help="seed of the random tables")
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
        steps = len(chunks(args.question, args.chunk))
        need.append((args.notes + args.typers * (args.notes + steps) + args.question) * nb
                    + model.trip_scratch_bytes([(args.notes, 1)] * args.typers
                                               + [(0, args.question)]))
    return model.TABLE_BYTES + max(need)


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    common.apply_quick(p, args, QUICK)
    steps = len(chunks(args.question, args.chunk))
    if "collision" in args.experiments and args.notes + steps > model.CONTEXT:
        p.error(f"argument --chunk: the typers' {args.notes} notes plus one per step "
                f"({steps} steps) must fit in a notebook of {model.CONTEXT} tokens; "
                f"use a larger --chunk or fewer --notes")
    common.need_memory(p, peak_bytes(args), "these settings", "--users, --prompts or --notes")
    return args


def main(argv=None):
    args = parse_args(argv)
    common.note(f"estimated peak memory: {peak_bytes(args) / 1e9:.1f} GB")
    return common.run("two_phases", args, experiment)


if __name__ == "__main__":
    sys.exit(main())
