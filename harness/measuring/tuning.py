"""Choosing the kernels: the paths a trip takes where the fastest way depends on the CPU, each
candidate timed on the trip's own shapes at the start of a run (or forced by a flag), and the
line after the machine line that says which were chosen."""
import dataclasses
import functools
import itertools
import statistics
import types

import numpy as np

from harness.post import NOTES, TYPERS
from harness.terminal import plural
from harness.measuring.bench import tokens
import engine.compiled
import engine.laid
from engine.blocks import ATTENTION, Block, Paths, block_words, table, ways
from engine.pool import blas_threads, share, sharing
from harness.measuring.contests import (POOLED_S, TRIAL_TRIPS, alternately, beats, best,
                                         each_in_turn, fastest, kept_unless_beaten, sample,
                                         won)
import model

TOKENS = (2, 4, 8, 16)  # the token counts whose table products may go in blocks ...
ROWS = (64, 128, 256, 512)  # ... of this many rows of a thread's share, and a table of more
#                             inputs than the model's width may meet them that many at a time
TRIES = 5  # each candidate timed this often (at most --runs), the best kept: under a second
TRIAL_USERS, TRIAL_NOTES = TYPERS, NOTES  # attention's choice is timed on the post's typers' notes


def choose(bench, attention="auto", blocks="auto", compiled="off"):
    """The paths that are fastest on this machine, timed on the trip's own shapes (one floor's
    products at each token count, by the tables' size; 8 typers' attention over 512 notes; and,
    where compiled is "auto" and the compiled kernels load, one floor's table products at
    each count of compiled.TABLES, the BLAS's against the tiles', NumPy's typing trips of
    each count of compiled.TILED with NumPy's norm, GELU and attention against the compiled
    ones, the pieces of longer trips both ways: a question's attention, and the norm and
    GELU, and last whole typing trips of each count of compiled.TRIED, NumPy's way with every
    piece chosen before against the compiled kernels), where not given: -> (Paths, {what:
    {candidate: the best seconds}})"""
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
    if compiled == "auto" and engine.compiled.available():
        laid = engine.laid.room_to_lay_out(bench.floors)
        engine.laid.lay_out(bench.floors, laid)  # (before any is timed)
        kept, other, side = engine.compiled.STREAMS
        streams = alternately(streams_both_ways(bench, (kept, other)), POOLED_S)[1]
        kept = other if beats(streams, other, kept) else kept
        if laid:  # the tables laid out, kept unless the other wins beyond its spread: as fast
            #       where the memory is slow, and faster where it is fast (0.86x the time in
            #       one state of a Zen 5 EPYC's memory), the contest at the start may fall in
            #       either: a tie decided by the middles kept 8 rows in 6 runs of 9, and
            #       8 rows winning the pairs by 0.2% in the slow state in one run of 2
            against = alternately(streams_both_ways(bench, (side, kept)), POOLED_S)[1]
            streams = {**streams, **against}
            kept = kept_unless_beaten(against, side, kept)
        paths = dataclasses.replace(paths, streams=kept)
        dotted = each_in_turn(dottings_timed(bench, laid)) \
            if len(engine.compiled.dottings(laid)) > 1 else {}
        paths = dataclasses.replace(paths, dotting=min(
            dotted, key=lambda d: statistics.median(dotted[d])) if dotted else ())
        shaped = {n: shapes_both_ways(bench, n, laid) for n in engine.compiled.SHAPED} \
            if len(engine.compiled.shapes(laid)) > 1 else {}
        paths = dataclasses.replace(paths, shapes=tuple(
            (n, *min(t, key=lambda shape: statistics.median(t[shape])))
            for n, t in shaped.items()))
        engine.laid.lay_out(bench.floors, paths.lays_out())  # (kept where taken)
        products = {n: tables_both_ways(bench, n, paths.shape(n))
                    for n in engine.compiled.TABLES}
        paths = dataclasses.replace(paths, tiled=won(products))
        panelled = each_in_turn(panels_timed(bench)) \
            if len(engine.compiled.question_panels()) > 1 else {}
        paths = dataclasses.replace(paths, panel=min(
            panelled, key=lambda p: statistics.median(panelled[p])) if panelled else 0)
        asks = each_in_turn(askings_timed(bench)) if len(engine.compiled.ASKING) > 1 else {}
        paths = dataclasses.replace(paths, asking=kept_unless_beaten(
            asks, *engine.compiled.ASKING) if asks else engine.compiled.ASKING[0])
        pieces = pieces_both_ways(bench, paths)
        paths = dataclasses.replace(paths, pieces=won(pieces))
        timed = alternately(long_trips_both_ways(bench, paths), POOLED_S)  # (both in one)
        reading, wide = ({n: t for (what, n), t in timed.items() if what == part}
                         for part in ("reading", "elementwise"))
        paths = dataclasses.replace(paths, reading=won(reading), elementwise=won(wide))
        trips = typing_both_ways(bench, paths)  # whole trips last: against NumPy's at its best
        paths = dataclasses.replace(paths, compiled=won(trips))
        seen["one-token products"] = {
            engine.compiled.streams_words(n): seconds for n, seconds in fastest(streams).items()}
        seen["2 to 4 tokens' products"] = {engine.compiled.dotting_words(d): min(seconds)
                                           for d, seconds in dotted.items()}
        seen["one-token attention, its keys asked for ahead"] = {
            engine.compiled.asking_words(a): min(seconds) for a, seconds in asks.items()}
        seen["a question's attention, its panels"] = {
            f"{p} notes": min(seconds) for p, seconds in panelled.items()}
        seen.update({f"the tiles' shapes at {n} tokens": {
            engine.compiled.shape_words(shape): min(seconds) for shape, seconds in t.items()}
            for n, t in shaped.items()})
        seen.update({f"typing trips of {n} {plural(n, 'token')}": fastest(t)
                     for n, t in trips.items()})
        seen.update({f"table products of {n} tokens": fastest(t) for n, t in products.items()})
        seen.update({f"the norm, GELU and attention of typing trips of {n} tokens": fastest(t)
                     for n, t in pieces.items()})
        seen.update({f"the attention of a question of {n} tokens": fastest(t)
                     for n, t in reading.items()})
        seen.update({f"the norm and GELU of a trip of {n} tokens": fastest(t)
                     for n, t in wide.items()})
    return paths, seen




TRIAL_FLOORS = 2  # a typing trip timed both ways rides this many floors: the shapes of a whole
#                   trip, the notes of 16 users in 100 MB
TRIAL_TYPERS = 16  # the most users a trial trip gives TRIAL_NOTES notes each: more share theirs


def every_product(bench, tokens, **how):
    """Every floor's table products for `tokens` tokens on the compiled kernel
    (compiled.table(), on as many of Numba's threads as the pool's, the BLAS on one), as `how`
    says (streams=, dotting=): -> a function to time"""
    x = {n: np.random.default_rng(n).standard_normal((n, tokens), dtype=np.float32)
         for n in sizes(bench)}  # (inputs, tokens)
    threads = bench.pool["threads"] if bench.pool else 1

    def run():
        with engine.compiled.running(threads):
            for p in bench.floors:
                for w in p.values():
                    engine.compiled.table(w, x[w.shape[1]], **how)
    return run


def streams_both_ways(bench, both):
    """One token's products, its rows met as many at a time as each of both (two of
    compiled.STREAMS) gives: -> {streams: {1: a function to time}}, for alternately()"""
    return {streams: {1: every_product(bench, 1, streams=streams)} for streams in both}


def dottings_timed(bench, laid=True, tokens=4):
    """`tokens` tokens' products in each of the 2 to 4 tokens' ways here (compiled.dottings(),
    those of a laid-out table where `laid`): -> {dotting: a function to time}, for
    each_in_turn()"""
    return {dotting: every_product(bench, tokens, dotting=dotting)
            for dotting in engine.compiled.dottings(laid)}


def panels_timed(bench):
    """One floor's attention for one user's question of compiled.READS[-1] tokens on the
    compiled kernel (on as many of Numba's threads as the pool's), its keys and values laid
    out in each panel here (compiled.question_panels()): -> {panel: a function to time}, for
    each_in_turn()"""
    cfg, n = dataclasses.replace(bench.cfg, layers=1), engine.compiled.READS[-1]
    book, out = model.notebook(cfg, 1, n), np.empty((cfg.width, n), np.float32)
    q, k, v = (tokens(cfg, n, seed) for seed in range(3))  # 3 x (width, n)
    threads = bench.pool["threads"] if bench.pool else 1

    def read(panel):
        how = types.SimpleNamespace(share=engine.compiled.one, panel=panel)

        def run():
            with engine.compiled.running(threads):
                book["len"] = 0
                engine.compiled.asked(cfg, q, k, v, book, n, slice(0, n), 0, how, out)
        return run
    return {panel: read(panel) for panel in engine.compiled.question_panels()}


def askings_timed(bench):
    """One floor's attention for TRIAL_TYPERS typers with TRIAL_NOTES notes each on the
    compiled kernel (on as many of Numba's threads as the pool's), its keys asked for as far
    ahead as each of compiled.ASKING says: -> {ahead: a function to time}, for each_in_turn().
    The notes (50 MB in GPT-2 small) come from memory, as a trip's do."""
    cfg = dataclasses.replace(bench.cfg, layers=1)
    book = model.notebook(cfg, TRIAL_TYPERS, TRIAL_NOTES + 1)
    book["k"].fill(0)  # (every page touched now)
    book["v"].fill(0)
    book["len"] = TRIAL_NOTES
    q, k, v = (tokens(cfg, TRIAL_TYPERS, seed) for seed in range(3))  # 3 x (width, typers)
    threads = bench.pool["threads"] if bench.pool else 1

    def read(ahead):
        how = types.SimpleNamespace(asking=ahead)

        def run():
            with engine.compiled.running(threads):
                book["len"] = TRIAL_NOTES
                engine.compiled.attention(cfg, q, k, v, [(book, 1)], 0, how)
        return run
    return {ahead: read(ahead) for ahead in engine.compiled.ASKING}


def typing_both_ways(bench, paths):
    """Whole typing trips of each count in compiled.TRIED (typing_trips()), NumPy's way (the
    paths chosen) against the compiled kernels, taking turns (alternately()):
    -> {tokens: {"numpy": [seconds], "compiled": [seconds]}}"""
    counts = engine.compiled.TRIED
    return alternately(typing_trips(bench, counts, {
        "numpy": paths, "compiled": dataclasses.replace(paths, compiled=counts)}))


def pieces_both_ways(bench, paths):
    """NumPy's whole typing trips of each count in compiled.TILED (typing_trips(), the paths
    chosen), with NumPy's norm, GELU and attention against the compiled ones, taking turns
    (alternately()): -> {tokens: {"numpy": [seconds], "compiled": [seconds]}}"""
    counts = engine.compiled.TILED
    return alternately(typing_trips(bench, counts, {
        "numpy": paths, "compiled": dataclasses.replace(paths, pieces=counts)}), POOLED_S)


def long_trips_both_ways(bench, paths):
    """The pieces of a long trip whose compiled way is timed against NumPy's (the paths chosen):
    one floor's attention for one user's question of each length in compiled.READS, as a trip
    reads it (shared among the pool's threads, the BLAS on one thread), read again to as many
    tokens as the longest (a 64-token question's floor takes 0.4 ms, and a hiccup of the
    machine chose NumPy's way, 2x slower, in one run of three), and one floor's two
    norms and GELU at each count of compiled.LONG (the GELU's rows shared the same way):
    -> {way: {(part, tokens): a function to time}}, for alternately()"""
    cfg, trials = dataclasses.replace(bench.cfg, layers=1), {"numpy": {}, "compiled": {}}
    for n in engine.compiled.READS:
        book = model.notebook(cfg, 1, n)
        q, k, v = (tokens(cfg, n, seed) for seed in range(3))  # 3 x (width, n)
        for way, chosen in (("numpy", paths), ("compiled", dataclasses.replace(paths,
                                                                               reading=(n,)))):
            def read(how=ways(chosen, bench.pool)(n), book=book, q=q, k=k, v=v, n=n):
                with how.threads():
                    for _ in range(max(1, engine.compiled.READS[-1] // n)):
                        book["len"] = 0
                        how.reads(cfg, q, k, v, [(book, n)], 0, how)
            trials[way]["reading", n] = read
    for n in engine.compiled.LONG:
        x = tokens(cfg, n, 0)  # (width, n), and the GELU's h (4 width, n):
        h = np.random.default_rng(1).standard_normal((4 * cfg.width, n), dtype=np.float32)
        for way, chosen in (("numpy", paths), ("compiled", dataclasses.replace(
                paths, elementwise=(n,)))):
            def pieces(how=ways(chosen, bench.pool)(n), x=x, h=h):
                with how.threads():
                    how.norm(x), how.norm(x)
                    model.mlp(h.copy(), how)  # (GELU again on its own answers would shrink
            trials[way]["elementwise", n] = pieces  # them to subnormals, slow on any CPU)
    return trials


def typing_trips(bench, counts, ways_by_name):
    """For each count n of counts, a typing trip of n users, one token each, over TRIAL_FLOORS
    floors, with TRIAL_NOTES notes each (fewer past TRIAL_TYPERS users: the same 100 MB at any
    n), taken each way of ways_by_name {way: Paths}, on one notebook, again up to TRIAL_TYPERS
    users' tokens in all (a 1-token trip of two floors takes 2 ms: one hiccup of the machine
    kept NumPy's way, 1.3x slower, for one user's typing in one run of four):
    -> {way: {n: a function to time, which puts the notebook back where it was first}}"""
    cfg = dataclasses.replace(bench.cfg, layers=min(TRIAL_FLOORS, bench.cfg.layers))
    floors, trips = bench.floors[:cfg.layers], {way: {} for way in ways_by_name}
    for n in counts:
        notes = TRIAL_NOTES * TRIAL_TYPERS // max(n, TRIAL_TYPERS)
        book, x = model.notebook(cfg, n, notes + 1), tokens(cfg, n, n)
        book["k"].fill(0)  # (every page touched now: a trip's first read comes from memory)
        book["v"].fill(0)
        for way, paths in ways_by_name.items():
            def trip(x=x, book=book, notes=notes, how=ways(paths, bench.pool), n=n):
                for _ in range(max(1, TRIAL_TYPERS // n)):
                    book["len"] = notes
                    model.trip(cfg, floors, x, [(book, 1)], how)
            trips[way][n] = trip
    return trips


def shapes_both_ways(bench, n, laid=True, seed=0):
    """One floor's table products at n tokens on the compiled tiles of each shape here
    (compiled.shapes(), those of a laid-out table where `laid`), as NumPy's trips do them
    (compiled.table_shared, shared among the pool's threads), taking turns (in_turns()),
    TRIAL_TRIPS times each: -> {shape: [seconds]}"""
    pool, every = sharing(bench.pool, n), lambda w: True
    return in_turns(bench, n, {
        shape: (every, lambda w, x, shape=shape: engine.compiled.table_shared(
            w, x, functools.partial(share, pool), shape))
        for shape in engine.compiled.shapes(laid)}, TRIAL_TRIPS, seed)


def tables_both_ways(bench, n, shape=None, seed=0):
    """One floor's table products at n tokens, as NumPy's trips do them (shared among the
    pool's threads, the BLAS on one thread each) against the compiled tiles of shape (shared
    the same way: compiled.table_shared), taking turns (in_turns()), TRIAL_TRIPS times each:
    -> {"numpy": [seconds], "compiled": [seconds]}"""
    pool, every = sharing(bench.pool, n), lambda w: True
    return in_turns(bench, n, {
        "numpy": (every, lambda w, x: table(w, x, pool)),
        "compiled": (every, lambda w, x: engine.compiled.table_shared(
            w, x, functools.partial(share, pool), shape))}, TRIAL_TRIPS, seed)


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
        for inputs in sizes(bench) for block in candidates(bench, inputs)}, tries(bench), seed)
    return {inputs: {block: min(s) for (i, block), s in timed.items() if i == inputs}
            for inputs in sizes(bench)}


def in_turns(bench, n, ways, times, seed=0):
    """One floor's table products at n tokens, each of these ways in turn, `times` times after
    a warm-up, so that a noisy moment falls on all: ways {key: (takes(w): whether it times
    table w, product(w, x))} -> {key: [seconds of each try]}. Each try takes the next floor, so
    that its tables come from memory as a trip's do and not from the cache the last try left
    them in."""
    rng, floors = np.random.default_rng(seed), itertools.cycle(bench.floors)
    xs = {i: rng.standard_normal((i, n), dtype=np.float32) for i in sizes(bench)}  # (inputs, n)
    timed = {key: [] for key in ways}
    with blas_threads(sharing(bench.pool, n)):
        for tried in range(times + 1):  # the first try warms up
            for key, (takes, product) in ways.items():
                tables = [w for w in next(floors).values() if takes(w)]
                seconds = sample(lambda: [product(w, xs[w.shape[1]]) for w in tables])
                if tried:
                    timed[key].append(seconds)
    return timed


def tries(bench):
    return min(TRIES, bench.runs)


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
    {"attention", "blocks", "compiled", "tiled", "pieces", "reading", "elementwise", "streams",
    "shapes", "dotting", "panel", "asking", "timed": {what: {candidate: seconds}}, and
    "unloaded": why,
    where the compiled kernels were asked for and could not load}."""
    paths, timed = choose(bench, attention, blocks, compiled)
    why = engine.compiled.unloaded() if compiled == "auto" else ""
    return dataclasses.replace(bench, paths=paths), {
        "attention": paths.attention, "blocks": paths.blocks, "compiled": paths.compiled,
        "tiled": paths.tiled, "pieces": paths.pieces, "reading": paths.reading,
        "elementwise": paths.elementwise, "streams": paths.streams, "shapes": paths.shapes,
        "dotting": paths.dotting, "panel": paths.panel, "asking": paths.asking,
        "timed": timed,
        **({"unloaded": why} if why else {})}


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
                  tiled=chosen.get("tiled", ()), pieces=chosen.get("pieces", ()),
                  reading=chosen.get("reading", ()), elementwise=chosen.get("elementwise", ()),
                  streams=chosen.get("streams", engine.compiled.STREAMS[0]),
                  shapes=chosen.get("shapes", ()), dotting=chosen.get("dotting", ()),
                  panel=chosen.get("panel", 0),
                  asking=chosen.get("asking", engine.compiled.ASKING[0]))
    unloaded = (f"; no compiled kernels: they could not load here ({chosen['unloaded']})"
                if chosen.get("unloaded") else "")
    return f"paths: {paths}{unloaded} ({origin})"
