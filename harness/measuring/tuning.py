"""Choosing the kernels: the paths a trip takes where the fastest way depends on the CPU, each
candidate timed on the trip's own shapes at the start of a run (or forced by a flag), and the
line after the machine line that says which were chosen."""
import dataclasses
import functools
import itertools
import math
import time

import numpy as np

from harness.post import NOTES, TYPERS
from harness.terminal import plural
from harness.measuring import timing
from harness.measuring.bench import tokens
from harness.measuring import kernels
from harness.measuring.kernels import ATTENTION, Block, Paths, block_words, table, ways
from harness.measuring.pool import blas_threads, share, sharing
import model

TOKENS = (2, 4, 8, 16)  # the token counts whose table products may go in blocks ...
ROWS = (64, 128, 256, 512)  # ... of this many rows of a thread's share, and a table of more
#                             inputs than the model's width may meet them that many at a time
TRIES = 5  # each candidate timed this often (at most --runs), the best kept: under a second
TRIAL_USERS, TRIAL_NOTES = TYPERS, NOTES  # attention's choice is timed on the post's typers' notes


def choose(bench, attention="auto", blocks="auto", compiled="off"):
    """The paths that are fastest on this machine, timed on the trip's own shapes (one floor's
    products at each token count, by the tables' size; 8 typers' attention over 512 notes; and,
    where compiled is "auto", whole typing trips of each count of compiled.TRIED, NumPy's way
    against the compiled kernels, and one floor's table products at each count of
    compiled.TILED, the BLAS's against the tiles'), where not given:
    -> (Paths, {what: {candidate: seconds}})"""
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
                    block_words(*block): seconds for block, seconds in timed.items()}
                chosen.append(Block(n, inputs, *min(timed, key=timed.get)))
        else:
            chosen += [Block(n, inputs, None if blocks == "off" else int(blocks))
                       for inputs in sizes(bench)]
    paths = Paths(attention, tuple(chosen))
    if compiled == "auto" and kernels.compiled.available():
        trips = typing_both_ways(bench, paths)
        products = {n: tables_both_ways(bench, n) for n in kernels.compiled.TILED}
        seen.update({f"typing trips of {n} {plural(n, 'token')}": t for n, t in trips.items()})
        seen.update({f"table products of {n} tokens": t for n, t in products.items()})
        paths = dataclasses.replace(paths, compiled=won(trips), tiled=won(products))
    return paths, seen


def won(timed):
    """The counts whose compiled way was faster: timed {count: {"numpy": s, "compiled": s}}."""
    return tuple(n for n, t in timed.items() if t["compiled"] < t["numpy"])


TRIAL_FLOORS = 2  # a typing trip timed both ways rides this many floors: the shapes of a whole
#                   trip, the notes of 16 users in 100 MB
TRIAL_TRIPS = 3  # each way's trips timed this often (at most --runs), the best kept


def typing_both_ways(bench, paths):
    """Whole typing trips of each count in compiled.TRIED (that many users with TRIAL_NOTES
    notes each, over TRIAL_FLOORS floors), NumPy's way (the paths chosen) against the compiled
    kernels, each the best of its tries after a warm-up (which compiles them): all of NumPy's
    first, then the compiled ones, so that neither's spinning threads fall on the other's.
    -> {tokens: {"numpy": seconds, "compiled": seconds}}"""
    cfg = dataclasses.replace(bench.cfg, layers=min(TRIAL_FLOORS, bench.cfg.layers))
    floors = bench.floors[:cfg.layers]
    trips = {}
    for n in kernels.compiled.TRIED:
        book = model.notebook(cfg, n, TRIAL_NOTES + 1)
        book["k"].fill(0)
        book["v"].fill(0)
        trips[n] = (tokens(cfg, n, n), book)
    timed = {n: {} for n in trips}
    for way, how in (("numpy", paths), ("compiled", dataclasses.replace(
            paths, compiled=kernels.compiled.TRIED))):
        for n, (x, book) in trips.items():
            def trip():
                book["len"] = TRIAL_NOTES
                model.trip(cfg, floors, x, [(book, 1)], ways(how, bench.pool))
            timed[n][way] = best(trip, min(TRIAL_TRIPS, bench.runs))
    return timed


def tables_both_ways(bench, n, seed=0):
    """One floor's table products at n tokens, as NumPy's trips do them (shared among the
    pool's threads, the BLAS on one thread each) against the compiled tiles (shared the same
    way: compiled.table_shared), taking turns (in_turns()):
    -> {"numpy": the best seconds, "compiled": the best seconds}"""
    pool, every = sharing(bench.pool, n), lambda w: True
    return in_turns(bench, n, {
        "numpy": (every, lambda w, x: table(w, x, pool)),
        "compiled": (every, lambda w, x: kernels.compiled.table_shared(
            w, x, functools.partial(share, pool)))}, seed)


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
    candidate blocks, taking turns (in_turns()): -> {inputs: {(rows, depth): the best seconds}}"""
    pool = sharing(bench.pool, n)
    timed = in_turns(bench, n, {
        (inputs, block): (lambda w, inputs=inputs: w.shape[1] == inputs,
                          lambda w, x, block=block: table(w, x, pool, block))
        for inputs in sizes(bench) for block in candidates(bench, inputs)}, seed)
    return {inputs: {block: s for (i, block), s in timed.items() if i == inputs}
            for inputs in sizes(bench)}


def in_turns(bench, n, ways, seed=0):
    """One floor's table products at n tokens, each of these ways in turn, so that a noisy
    moment falls on all: ways {key: (takes(w): whether it times table w, product(w, x))} ->
    {key: the best seconds}. Each try takes the next floor, so that its tables come from memory
    as a trip's do and not from the cache the last try left them in."""
    rng, floors = np.random.default_rng(seed), itertools.cycle(bench.floors)
    xs = {i: rng.standard_normal((i, n), dtype=np.float32) for i in sizes(bench)}  # (inputs, n)
    timed = dict.fromkeys(ways, math.inf)
    with blas_threads(sharing(bench.pool, n)):
        for tried in range(tries(bench) + 1):  # the first try warms up
            for key, (takes, product) in ways.items():
                tables = [w for w in next(floors).values() if takes(w)]
                start = time.perf_counter()
                for w in tables:
                    product(w, xs[w.shape[1]])
                if tried:
                    timed[key] = min(timed[key], time.perf_counter() - start)
    return timed


def tries(bench):
    return min(TRIES, bench.runs)


def best(fn, runs):
    """The best of `runs` calls after a warm-up, in seconds."""
    return min(s[0] for s in timing.time_runs(fn, runs, again=0).steps)  # the best: a disturbed
    #                                                                     try only loses


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


def with_paths(bench, attention, blocks, compiled="off"):
    """The bench with the paths chosen (see choose()), and the choice as a run saves it:
    {"attention", "blocks", "compiled", "tiled", "timed": {what: {candidate: seconds}}}."""
    paths, timed = choose(bench, attention, blocks, compiled)
    return dataclasses.replace(bench, paths=paths), {
        "attention": paths.attention, "blocks": paths.blocks, "compiled": paths.compiled,
        "tiled": paths.tiled, "timed": timed}


def paths_line(chosen, args):
    """The line after the machine line: the paths the trips take, and whether timed or asked."""
    asked = [("attention", args.attention), ("blocks", args.blocks)] + (
        [("compiled", args.compiled)] if args.compiled == "auto"
        or "compiled" in getattr(args, "given", ()) else [])  # (--quick's off goes unsaid)
    how = {what: "the fastest here, timed at the start" if given == "auto" else "as asked"
           for what, given in asked}
    origin = (how["attention"] if len(set(how.values())) == 1
              else "; ".join(f"{what} {chosen}" for what, chosen in how.items()))
    paths = Paths(chosen["attention"], chosen["blocks"], compiled=chosen.get("compiled", ()),
                  tiled=chosen.get("tiled", ()))
    return f"paths: {paths} ({origin})"
