"""Measuring the model: each row's trips as a trial a round visits (rounds.py), its one trip
recorded part by part, the notebooks the typers start with (one for all the rows of an
experiment, each row reading its users and notes of it), and the same table products timed
alone, outside the model."""
import ctypes
import ctypes.util
import dataclasses
import functools
import types

import numpy as np

from harness.terminal import plural
from harness.measuring import devices, rounds, speeds, timing
from engine.blocks import Paths, table, ways
from engine.pool import sharing
from harness.measuring.rounds import Trial
import model

ALONE_RUNS = 2  # the table products alone, best of this many calls in each process
KEPT = 64 << 20  # bytes: a freed block up to this size stays in the process (keep_freed_memory)


@functools.lru_cache(maxsize=None)
def keep_freed_memory():
    """Where the C library is glibc's, the arrays a trip frees stay in the process for the next
    trip's (every block up to KEPT bytes), where glibc would hand some back to the system and
    fault fresh pages in for the next trip, one by one (thousands of pages in a 64-user typing
    step, more after a long read's arrays). An engine keeps its working memory; so does the
    trip. -> whether glibc took the settings."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or not glibc's
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, KEPT)) and bool(mallopt(m_trim_threshold, 2 * KEPT))


@dataclasses.dataclass(frozen=True)
class Bench:
    """What every measurement of the model needs: its shape, its tables, the threads, --runs."""
    cfg: model.Config
    floors: list
    pool: object  # pool.workers(threads), or None for one thread
    runs: int
    paths: Paths = Paths()  # how the work is done, chosen on this machine
    again: int = timing.AGAIN  # disturbed runs measured again, x runs (0 in a quick run)
    on: devices.Device = devices.NUMPY  # where the tables, notes and tokens live
    graphs: bool = False  # each timed trip replayed as one CUDA graph (--graphs, torch:cuda)
    questions: dict = dataclasses.field(default_factory=dict, compare=False)  # the questions
    #                                       read so far, by (notes, seed): see read_question()


def tokens(cfg, t, seed, on=devices.NUMPY):
    """t tokens' hidden states as they enter the first floor: (width, t), seeded, the same
    numbers on every device (float32, or rounded to the device's --dtype)."""
    return on.asarray(np.random.default_rng(seed).standard_normal((cfg.width, t),
                                                                  dtype=np.float32), on.dtype)


def book(bench, users, capacity, touch=True):
    """A notebook for `users` users, on the bench's device, its memory touched now (unless the
    caller writes all of it itself): NumPy's zeros are the system's untouched pages, and the
    first trip to write into them would pay for them (a 256-token read's first trip: attention
    40 to 50 ms instead of 28)."""
    made = model.notebook(bench.cfg, users, capacity,
                          None if bench.on.numpy else bench.floors[0]["qkv"])
    if bench.on.numpy and touch:
        made["k"].fill(0)
        made["v"].fill(0)
    return made


def device_table(w, x):
    """W @ x on another library's device, computed as (x^T W^T)^T: the same numbers, the layout
    PyTorch's CPU products are several times faster in (a GPU's are as fast either way)."""
    return (x.T @ w.T).T  # (CuPy's arrays have .T, not the array API's .mT, before CuPy 14)


def restore(segments):
    """A setup that puts every notebook of the trip back to where it is now."""
    start = [(book, book["len"]) for book, _ in segments]

    def setup():
        for book, n in start:
            book["len"] = n
    return setup


def trip_of(bench, x, segments, watch=None):
    """The trip as a call, built before the timer starts; with `watch`, a trip whose parts are
    timed (watched()). On another library's device each part is marked by the device's own timer
    (a GPU's events), read once the trip is done."""
    if bench.on.numpy:
        how, timer = ways(bench.paths, bench.pool), rounds.HOST
    else:
        one = types.SimpleNamespace(**{**vars(model.PLAIN), "cube": bench.paths.cube,
                                       "table": device_table})
        how, timer = (lambda tokens: one), bench.on
    if watch is not None:
        return lambda: watched(bench.cfg, bench.floors, x, segments, how, watch, timer)
    run = lambda: model.trip(bench.cfg, bench.floors, x, segments, how)
    return replayed(bench.on, run, segments) if bench.graphs and not bench.on.numpy else run


PARTS = ("tables", "attention", "elementwise", "other")  # where a trip's time goes; "other" is
#                                                          what is left (splits, Python)
PIECES = {"table": "tables", "reads": "attention", "norm": "elementwise", "mlp": "elementwise",
          "add": "elementwise"}  # the ways' pieces a trip calls, and the part each is charged to


def watched(cfg, floors, x, segments, ways, watch, timer=rounds.HOST):
    """model.trip with each piece of every floor charged to its part: fills `watch` with the
    seconds of each of PARTS and of the whole trip, "trip" ("other" is what lies between the
    pieces). timer marks a piece's two ends and says the seconds between (rounds.HOST, this
    CPU's clock; a GPU's events, read once the trip is done, so that no part waits)."""
    marks = []  # [(part, start mark, end mark)]

    def charged(part, fn):
        def run(*args):
            start = timer.mark()
            out = fn(*args)
            marks.append((part, start, timer.mark()))
            return out
        return run

    def pieces(tokens):
        w = ways(tokens)
        return types.SimpleNamespace(**{**vars(w), **{
            name: charged(part, getattr(w, name)) for name, part in PIECES.items()}})

    start = timer.mark()
    y = model.trip(cfg, floors, x, segments, pieces)
    end = timer.mark()
    watch.clear()
    watch.update(dict.fromkeys(PARTS, 0.0))
    for part, a, b in marks:
        watch[part] += timer.between(a, b)
    watch["trip"] = timer.between(start, end)
    watch["other"] = watch["trip"] - sum(watch[p] for p in PARTS[:-1])
    return y


def replayed(on, run, segments):
    """A trip captured once as a CUDA graph, from where its notebooks stand now, and a call
    that replays it: its ~500 kernels launched as one, the notebooks moved on as the trip moves
    them (a graph replays the device's work, not Python's). The breakdown's recorded trips are
    not replayed: a graph has no parts to time."""
    start = [(book, book["len"]) for book, _ in segments]

    def back():
        for book, n in start:
            book["len"] = n
    graph = on.capture(run, back)

    def replay():
        graph()
        for book, t in segments:
            book["len"] += t
    return replay


def trial(bench, name, x, segments, warm=True, recorded=True):
    """A one-trip row as a round visits it: its trip, each visit starting with every notebook
    as it is now, and (where recorded) the same trip recorded part by part for the breakdown.
    warm: it warms up on its own (else its recording, or a larger row's warm-up, does)."""
    setup = restore(segments)

    def record(watch):
        setup()
        trip_of(bench, x, segments, watch)()
    return Trial(name, [trip_of(bench, x, segments)], setup, record if recorded else None,
                 group=group(bench, [x.shape[1]]), warm=warm, timer=bench.on)


def group(bench, tokens):
    """A trial's group in a round (rounds.Trial): 0 where every trip's table products go to the
    BLAS's own threads (one token, on this CPU), which spin for a while after; 2 where every
    trip runs the compiled kernels, whose threads spin too; else 1."""
    if bench.on.numpy and all(bench.paths.compiles(n) for n in tokens):
        return 2
    return 0 if bench.on.numpy and all(sharing(bench.pool, n) is None for n in tokens) else 1


def products_alone(floors, tokens, seed=0, on=devices.NUMPY):
    """The table products of a trip of `tokens` tokens, alone, outside the model: every floor's
    four tables times random activations, with the same shapes and layout as the trip, each one
    BLAS call on the BLAS's own threads: what the library does with exactly these products.
    -> a function to time"""
    rng = np.random.default_rng(seed)
    width = floors[0]["qkv"].shape[1]
    x, h = (on.asarray(rng.standard_normal((n, tokens), dtype=np.float32), on.dtype)
            for n in (width, 4 * width))
    product = table if on.numpy else device_table  # the trip's own layout

    def products():
        for p in floors:
            for name, into in (("qkv", x), ("out", x), ("up", x), ("down", h)):
                product(p[name], into)
    return products


def tables_alone(bench, n, again=timing.AGAIN):
    """The table products of a trip of n tokens, one BLAS call each on the BLAS's own threads,
    outside the model (on a device, a burst of them between its events, per call): what the
    library does with them, best of ALONE_RUNS calls (like the
    forklift and the workbench, it is what this machine can do; a call other work disturbed is
    made again, `again` times at most, the least disturbed kept). -> their seconds"""
    trial = Trial(f"the table products of {n} {plural(n, 'token')}, one BLAS call each",
                  [products_alone(bench.floors, n, on=bench.on)],
                  timer=None if bench.on.numpy else bench.on)
    if not bench.on.numpy:  # a burst between the device's events: a few tokens' 48 small
        trial = rounds.calibrate(trial, speeds.BURST_S)  # products are not charged the host's
        #                                                  wait at each end of every call
    rounds.visit(trial, watch=rounds.unwatched)  # a warm-up: not counted
    return [rounds.visited(trial, again)[0][0] for _ in range(ALONE_RUNS)]


def read_question(bench, notes, seed):
    """One user's notebook after the model read a `notes`-token question: the typers' start
    (read once for every experiment that starts from it)."""
    if (notes, seed) not in bench.questions:
        first = book(bench, 1, notes)
        if notes:
            trip_of(bench, tokens(bench.cfg, notes, seed, bench.on), [(first, notes)])()
        bench.questions[notes, seed] = first
    return bench.questions[notes, seed]


def typing(bench, first, users, seed):
    """`users` users, each with the notes in `first`, type one token: -> (x, segments)."""
    return tokens(bench.cfg, users, seed, bench.on), [(copies(bench, first, users, room=1), 1)]


def view(book, users, notes):
    """The notebook of the first `users` users of `book`, holding `notes` notes each: the same
    arrays (a row of fewer users, or shallower notes, reads part of the fullest row's)."""
    return {"k": book["k"][:, :users], "v": book["v"][:, :users], "len": notes}


def copies(bench, first, users, room):
    """The notebook of `users` users who each hold the notes in `first`, with room for `room`
    more each."""
    n = first["len"]
    theirs = book(bench, users, n + room, touch=False)  # every number written once, here:
    theirs["k"][..., :n] = first["k"][..., :n]  # one user's notes, copied to every user
    theirs["v"][..., :n, :] = first["v"][..., :n, :]
    theirs["k"][..., n:] = 0  # and the room for more, touched
    theirs["v"][..., n:, :] = 0
    theirs["len"] = n
    return theirs


class Server:
    """Typers typing while a newcomer's question is read in pieces: the typers' notebook (each
    with the same first notes), the newcomer's, and their tokens. It owns where each notebook
    stands, so that every timed schedule starts from the same place."""

    def __init__(self, bench, notes, users, question, room, seeds):
        self.bench, self.notes = bench, notes
        self.typers = copies(bench, read_question(bench, notes, seeds[0]), users, room)
        self.newcomer = book(bench, 1, question + 1)
        on = bench.on
        self.xt = tokens(bench.cfg, users, seeds[1], on)  # (width, typers)
        self.xn = on.concat([tokens(bench.cfg, question, seeds[2], on),  # its question, then
                             tokens(bench.cfg, 1, seeds[3], on)], 1)  # its word: (width, q + 1)
        self.alone = (self.xt, [(self.typers, 1)])  # the typers' trip with no newcomer
        self.before(0, slice(0, 0))

    def before(self, i, s):
        """The notebooks as they stand before step i, which reads the newcomer's tokens s."""
        self.typers["len"], self.newcomer["len"] = self.notes + i, s.start

    def trip(self, s):
        """A step's trip, built before the timer starts: -> (x, segments)."""
        x = self.bench.on.concat([self.xt, self.xn[:, s]], 1)  # (width, typers + newcomer's)
        return x, [(self.typers, 1), (self.newcomer, s.stop - s.start)]

    def trial(self, name, steps, worst, warm=True):
        """A schedule as a round visits it: every step from the start, and its step `worst`
        (the one the accounting says is slowest), set to where it starts, recorded part by part
        for the breakdown (and, where it warms up on its own, run once to warm up)."""
        trips, calls = [self.trip(s) for s in steps], []
        for i, (s, trip) in enumerate(zip(steps, trips)):
            self.before(i, s)  # each step's call made from where it starts (a graph's capture)
            calls.append(trip_of(self.bench, *trip))
        self.before(0, slice(0, 0))

        def recorded(watch):
            self.before(worst, steps[worst])
            trip_of(self.bench, *trips[worst], watch)()
        return Trial(name, calls, lambda: self.before(0, slice(0, 0)), recorded,
                     group=group(self.bench, [x.shape[1] for x, _ in trips]), warm=warm,
                     timer=self.bench.on, once=True)  # its parts back no claim
