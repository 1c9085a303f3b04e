"""Measuring the model: a trip timed, a trip recorded part by part, the notebooks the typers
start with, and the same table products timed alone, outside the model."""
import dataclasses
import itertools
import math
import statistics
import time

import numpy as np

import model
from harness import cli, timing
from harness.kernels import ATTENTION, Block, Paths, shown, table, ways
from harness.plan import Outcome, figures
from harness.pool import blas_threads, sharing
from harness.terminal import plural

BREAKDOWN_RUNS = 3  # at most: enough to pick a typical recorded run, and it keeps a default
#                    run of the suite within three minutes; the timed figures keep --runs


@dataclasses.dataclass(frozen=True)
class Bench:
    """What every measurement of the model needs: its shape, its tables, the threads, --runs."""
    cfg: model.Config
    floors: list
    pool: object  # pool.workers(threads), or None for one thread
    runs: int
    paths: Paths = Paths()  # how the work is done, chosen on this machine


def tokens(cfg, t, seed):
    """t tokens' hidden states as they enter the first floor: (width, t) float32, seeded."""
    return np.random.default_rng(seed).standard_normal((cfg.width, t), dtype=np.float32)


def restore(segments):
    """A setup that puts every notebook of the trip back to where it is now."""
    start = [(book, book["len"]) for book, _ in segments]

    def setup():
        for book, n in start:
            book["len"] = n
    return setup


def trip_of(bench, x, segments, watch=None):
    """The trip as a call, built before the timer starts."""
    how = ways(bench.paths, bench.pool)
    return lambda: model.trip(bench.cfg, bench.floors, x, segments, how, watch)


def time_trip(bench, x, segments, what):
    """--runs trips, each starting with every notebook as it is now, and left so: -> the seconds
    of each counted run, as [[seconds]] (a schedule of one step)."""
    setup = restore(segments)
    per_run = timing.time_steps([trip_of(bench, x, segments)], bench.runs, setup, what=what)
    setup()
    return per_run


def one_trip(bench, row, x, segments, what, record=True):
    """A one-trip row: its trip timed --runs times, then (for the breakdown) recorded."""
    return Outcome(row, figures(row, time_trip(bench, x, segments, what), what=what),
                   record_trip(bench, x, segments, what) if record else None)


def record_trip(bench, x, segments, what):
    """The same trip again, recorded part by part apart from the timed runs: -> {"riders",
    "parts": the seconds of each part in the middle recorded run}."""
    setup, riders, watch, recorded = restore(segments), model.riders(segments), {}, []
    runs = min(bench.runs, BREAKDOWN_RUNS)

    def recorded_trip():
        trip_of(bench, x, segments, watch)()
        recorded.append(dict(watch))
    timing.time_runs(recorded_trip, runs, setup=setup, what=f"{what}, recorded")
    setup()
    middle = sorted(recorded[1:], key=lambda w: w["trip"])[(runs - 1) // 2]  # [0] warmed up
    return {"riders": riders, "parts": middle}


def products_alone(floors, tokens, seed=0):
    """The table products of a trip of `tokens` tokens, alone, outside the model: every floor's
    four tables times random activations, with the same shapes and layout as the trip, each one
    BLAS call on the BLAS's own threads: what the library does with exactly these products.
    -> a function to time"""
    rng = np.random.default_rng(seed)
    width = floors[0]["qkv"].shape[1]
    x, h = (rng.standard_normal((n, tokens), dtype=np.float32) for n in (width, 4 * width))

    def products():
        for p in floors:
            for name, into in (("qkv", x), ("out", x), ("up", x), ("down", h)):
                table(p[name], into)
    return products


def tables_alone(bench, n):
    """The table products of a trip of n tokens, one BLAS call each on the BLAS's own threads,
    outside the model: what the library does with them, the best of the runs, since like the
    forklift and the workbench it is what this machine can do."""
    return timing.measure(products_alone(bench.floors, n),
                          min(bench.runs, BREAKDOWN_RUNS), stat="best",
                          what=f"the table products of {n} {plural(n, 'token')}, one BLAS call "
                               f"each")


def read_question(bench, notes, seed):
    """One user's notebook after the model read a `notes`-token question: the typers' start."""
    book = model.notebook(bench.cfg, 1, notes)
    if notes:
        trip_of(bench, tokens(bench.cfg, notes, seed), [(book, notes)])()
    return book


def typing(bench, first, users, seed):
    """`users` users, each with the notes in `first`, type one token: -> (x, segments)."""
    return tokens(bench.cfg, users, seed), [(copies(bench, first, users, room=1), 1)]


def copies(bench, first, users, room):
    """The notebook of `users` users who each hold the notes in `first`, with room for `room`
    more each."""
    n = first["len"]
    book = model.notebook(bench.cfg, users, n + room)
    book["k"][..., :n] = first["k"][..., :n]  # one user's notes, copied to every user
    book["v"][..., :n, :] = first["v"][..., :n, :]
    book["len"] = n
    return book


class Server:
    """Typers typing while a newcomer's question is read in pieces: the typers' notebook (each
    with the same first notes), the newcomer's, and their tokens. It owns where each notebook
    stands, so that every timed schedule starts from the same place."""

    def __init__(self, bench, notes, users, question, room, seeds):
        self.bench, self.notes = bench, notes
        self.typers = copies(bench, read_question(bench, notes, seeds[0]), users, room)
        self.newcomer = model.notebook(bench.cfg, 1, question + 1)
        self.xt = tokens(bench.cfg, users, seeds[1])  # (width, typers)
        self.xn = np.concatenate([tokens(bench.cfg, question, seeds[2]),  # its question, then
                                  tokens(bench.cfg, 1, seeds[3])], 1)  # its word: (width, q + 1)
        self.alone = (self.xt, [(self.typers, 1)])  # the typers' trip with no newcomer
        self.before(0, slice(0, 0))

    def before(self, i, s):
        """The notebooks as they stand before step i, which reads the newcomer's tokens s."""
        self.typers["len"], self.newcomer["len"] = self.notes + i, s.start

    def trip(self, s):
        """A step's trip, built before the timer starts: -> (x, segments)."""
        x = np.concatenate([self.xt, self.xn[:, s]], 1)  # (width, typers + newcomer's tokens)
        return x, [(self.typers, 1), (self.newcomer, s.stop - s.start)]

    def schedule(self, steps, what):
        """Every step of a schedule, timed --runs times from the start: -> (the seconds of each
        step per run, the trip of the step that was slowest in the middle of the runs, with the
        notebooks set to where it starts, to be recorded)"""
        trips = [self.trip(s) for s in steps]
        per_run = timing.time_steps([trip_of(self.bench, *t) for t in trips], self.bench.runs,
                                    setup=lambda: self.before(0, slice(0, 0)), what=what)
        worst = max(range(len(trips)), key=lambda i: statistics.median(r[i] for r in per_run))
        self.before(worst, steps[worst])
        return per_run, trips[worst]


TOKENS = (2, 4, 8, 16)  # the token counts whose table products may go in blocks ...
ROWS = (64, 128, 256, 512)  # ... of this many rows of a thread's share, and a table of more
#                             inputs than the model's width may meet them that many at a time
TRIES = 5  # each candidate timed this often (at most --runs), the best kept: under a second
TRIAL_USERS, TRIAL_NOTES = 8, 512  # attention's choice is timed on the post's 8 typers' notes


def choose(bench, attention="auto", blocks="auto"):
    """The paths that are fastest on this machine, timed on the trip's own shapes (one floor's
    products at each token count, by the tables' size; 8 typers' attention over 512 notes),
    where not given: -> (Paths, {what: {candidate: seconds}})"""
    seen = {}
    if attention == "auto":
        seen["attention"] = {how: best(typing_attention(bench, how), tries(bench))
                             for how in ATTENTION}
        attention = min(seen["attention"], key=seen["attention"].get)
    chosen = []
    for n in TOKENS:
        if blocks == "auto":
            for inputs, timed in tables_by_size(bench, n).items():
                seen[f"tables of {inputs} inputs at {n} tokens"] = {
                    shown(*block): seconds for block, seconds in timed.items()}
                chosen.append(Block(n, inputs, *min(timed, key=timed.get)))
        else:
            chosen += [Block(n, inputs, None if blocks == "off" else int(blocks))
                       for inputs in sizes(bench)]
    return Paths(attention, tuple(chosen)), seen


def sizes(bench):
    """The tables' numbers of inputs: 768 (qkv, out, up) and 3072 (down) in GPT-2 small."""
    return sorted({w.shape[1] for w in bench.floors[0].values()})


def candidates(bench, inputs):
    """The blocks worth timing for the tables of `inputs` inputs, as (rows, depth): unblocked,
    rows fewer than a thread's share of the tallest such table, and, for tables of more inputs
    than the model's width, each of those met the model's width of inputs at a time."""
    threads = bench.pool["threads"] if bench.pool else 1
    tallest = max(w.shape[0] for w in bench.floors[0].values() if w.shape[1] == inputs)
    rows = [None, *(r for r in ROWS if r < tallest // threads)]
    depths = [None, *([bench.cfg.width] if bench.cfg.width < inputs else [])]
    return [(r, d) for d in depths for r in rows]


def tables_by_size(bench, n, seed=0):
    """One floor's table products at n tokens, the tables of each size in each of their
    candidate blocks: -> {inputs: {(rows, depth): the best seconds}}. Each try takes the next
    floor in turn, so that its tables come from memory as a trip's do and not from the cache
    the last try left them in; the candidates take turns, so that a noisy moment falls on all."""
    rng, floors = np.random.default_rng(seed), itertools.cycle(bench.floors)
    pool = sharing(bench.pool, n)
    timed = {i: dict.fromkeys(candidates(bench, i), math.inf) for i in sizes(bench)}
    xs = {i: rng.standard_normal((i, n), dtype=np.float32) for i in timed}  # (inputs, n)
    with blas_threads(pool):
        for tried in range(tries(bench) + 1):  # the first try warms up
            for inputs, best_of in timed.items():
                for block in best_of:
                    tables = [w for w in next(floors).values() if w.shape[1] == inputs]
                    start = time.perf_counter()
                    for w in tables:
                        table(w, xs[inputs], pool, block)
                    if tried:
                        best_of[block] = min(best_of[block], time.perf_counter() - start)
    return timed


def tries(bench):
    return min(TRIES, bench.runs)


def best(fn, runs):
    """The best of `runs` calls after a warm-up, in seconds."""
    return min(timing.time_runs(fn, runs))


def typing_attention(bench, how):
    """One floor's attention for TRIAL_USERS typers with TRIAL_NOTES notes each, as a trip does
    it (shared among the pool's threads, the BLAS on one thread); the notes are zeros, which read
    as fast as any: -> a function to time"""
    cfg = dataclasses.replace(bench.cfg, layers=1)
    book = model.notebook(cfg, TRIAL_USERS, TRIAL_NOTES + 1)
    book["len"] = TRIAL_NOTES
    q, k, v = (tokens(cfg, TRIAL_USERS, seed) for seed in range(3))  # 3 x (width, users)
    trial = ways(Paths(how), bench.pool)(TRIAL_USERS)

    def read():
        with trial.threads():
            model.attention(cfg, q, k, v, [(book, 1)], 0, trial)
    return read


def with_paths(bench, attention, blocks):
    """The bench with the paths chosen (see choose()), and the choice as a run saves it:
    {"attention", "blocks", "timed": {what: {candidate: seconds}}}."""
    paths, timed = choose(bench, attention, blocks)
    return dataclasses.replace(bench, paths=paths), {
        "attention": paths.attention, "blocks": paths.blocks, "timed": timed}


def add_flags(g):
    """The flags that force a path instead of timing the candidates."""
    g.add_argument("--attention", choices=("auto", *ATTENTION), default="auto",
                   help="how one query reads its notes: the fastest on this machine, timed at "
                        "the start, or the one given")
    g.add_argument("--blocks", type=cli.whole(1, 4096, words=("auto", "off")), default="auto",
                   metavar="{auto,off,N}",
                   help="table products for 2 to 16 tokens: auto (the blocks fastest here, "
                        "timed at the start), off (unblocked), or blocks of N rows (1 to 4,096)")


def paths_line(chosen, args):
    """The line after the machine line: the paths the trips take, and whether timed or asked."""
    how = {what: "the fastest here, timed at the start" if given == "auto" else "as asked"
           for what, given in (("attention", args.attention), ("blocks", args.blocks))}
    origin = (how["attention"] if len(set(how.values())) == 1
              else "; ".join(f"{what} {chosen}" for what, chosen in how.items()))
    return f"paths: {Paths(chosen['attention'], chosen['blocks'])} ({origin})"
