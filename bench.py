"""Measuring the model: a trip timed, a trip recorded part by part, the notebooks the typers
start with, and the same table products timed alone, outside the model."""
import dataclasses

import numpy as np

import model
import timing
from terminal import plural

BREAKDOWN_RUNS = 3  # at most: enough to pick a typical recorded run, and it keeps a default
#                    run of the suite within three minutes; the timed figures keep --runs


@dataclasses.dataclass(frozen=True)
class Bench:
    """What every measurement of the model needs: its shape, its tables, the threads, --runs."""
    cfg: model.Config
    floors: list
    pool: object  # model.workers(threads), or None for one thread
    runs: int


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
    return lambda: model.trip(bench.cfg, bench.floors, x, segments, pool=bench.pool, watch=watch)


def time_trip(bench, x, segments, what):
    """--runs trips, each starting with every notebook as it is now, and left so: -> the seconds
    of each counted run, as [[seconds]] (a schedule of one step)."""
    setup = restore(segments)
    per_run = timing.time_steps([trip_of(bench, x, segments)], bench.runs, setup, what=what)
    setup()
    return per_run


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


def tables_alone(bench, n):
    """The table products of a trip of n tokens, alone, outside the model: the best of the runs,
    since like the forklift and the workbench it is what this machine can do."""
    return timing.measure(model.tables_alone(bench.floors, n, bench.pool),
                          min(bench.runs, BREAKDOWN_RUNS), stat="best",
                          what=f"the table products of {n} {plural(n, 'token')}, alone")


def read_question(bench, notes, seed):
    """One user's notebook after the model read a `notes`-token question: the typers' start."""
    book = model.notebook(bench.cfg, 1, notes)
    if notes:
        trip_of(bench, tokens(bench.cfg, notes, seed), [(book, notes)])()
    return book


def typers(bench, first, users, room):
    """The notebook of `users` users who each hold the notes in `first`, with room for `room`
    more each."""
    n = first["len"]
    book = model.notebook(bench.cfg, users, n + room)
    book["k"][..., :n] = first["k"][..., :n]  # one user's notes, copied to every user
    book["v"][..., :n] = first["v"][..., :n]
    book["len"] = n
    return book
