"""The layouts the compiled tiles read (compiled.table()): a trip's tokens in panels, as wide as
a tile, laid out for each product (panels()); and a table laid out a vector's rows side by
side, as the tiles and 2 to 4 tokens' products read it where their shape says kernels.LAID:
each step's numbers in one stretch of memory, met in order, where a table's own rows are as
many stretches a step. A table is laid out once, kept while it lives, and only where there is
room for it beside the table (it is as large)."""
import math
import os
import weakref

import numpy as np

from engine.cache import kernels, threads_now

LAID = 2  # kernels.LAID, here where Numba need not load (a test holds the two equal): a tile
#           shape's or 2 to 4 tokens' product's `ahead` where it reads the table laid out
LAID_ASKED = 3  # kernels.LAID_ASKED: a 2 to 4 tokens' product's, reading it laid out and asking
LAID_STREAMS = 0  # a one-token product's `streams` where it reads the table laid out
HUGE = 2 << 20  # bytes in the memory's large pages (x86's, and ARM's beside pages of 4 KiB)


def wide(tokens, lanes):
    """The tokens a tile product computes: `tokens` padded to a multiple of its lanes."""
    return -(-tokens // lanes) * lanes


def panels(x, shape, threads=0, share=None):
    """x (k, tokens) as tiles of shape (lanes, rows, vectors, ahead) meet it: -> panels
    (groups * k, lanes x vectors), x's tokens that many at a time, one panel under the next,
    and last (k, fewer), the tokens left over, padded with zeros to a multiple of the lanes,
    where there are any, or (0, lanes) (kernels.laid_out(), on `threads` of Numba's threads,
    or shared by `share` among the suite's, or on this one). Tokens that fill one panel, or a
    last one alone, are their own panel: x as it is."""
    lanes, _, vectors, _ = shape
    k, tokens = x.shape
    width = lanes * vectors
    groups, left = divmod(wide(tokens, lanes), width)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if tokens == groups * width + left and groups + (left > 0) == 1:
        return (x, np.empty((0, lanes), np.float32)) if groups else (
            np.empty((0, width), np.float32), x)
    laid = np.empty((groups * k, width), np.float32)
    last = np.empty((k, left) if left else (0, lanes), np.float32)
    if threads:
        kernels()["laid_outs"](x, laid, last, threads)
    elif share:
        lay = kernels()["laid_out"]
        share(lambda part: lay(x, laid, last, part.start, part.stop), k, x.size)
    else:
        kernels()["laid_out"](x, laid, last)
    return laid, last


LAID_OUT = {}  # id(table) -> (a weak reference to it, the table laid out: side_by_side())


def side_by_side(w):
    """w (rows, k) laid out a vector's rows side by side, as the tiles and products of a shape or
    dotting whose ahead is kernels.LAID read it: (ceil(rows / lanes), k x lanes), panel g its
    rows g x lanes .., input by input, each input's numbers for them side by side (the rows
    past w's 0). Made once for each table, on Numba's threads, and kept while the table lives:
    a model's tables are made once and never written (model.floors())."""
    laid = held(w)
    return laid if laid is not None else keep(w, laid_out(w))


def held(w):
    """w laid out, where it was (side_by_side()), else None."""
    kept = LAID_OUT.get(id(w))
    return kept[1] if kept is not None and kept[0]() is w else None


def keep(w, laid):
    """laid, w laid out, kept while w lives (side_by_side()): -> laid."""
    key = id(w)
    LAID_OUT[key] = weakref.ref(w, lambda _: LAID_OUT.pop(key, None)), laid
    return laid


def laid_out(w, into=None):
    """w laid out (see side_by_side()), afresh, on Numba's threads: into `into` (its numbers
    in a stretch of memory, as many as laid_shape(w) holds), or into memory of its own."""
    shape = laid_shape(w)
    laid = np.empty(shape, np.float32) if into is None else into.reshape(shape)
    kernels()["sides_by_side"](np.ascontiguousarray(w, dtype=np.float32), laid, threads_now())
    return laid


def laid_shape(w):
    """w's shape laid out (side_by_side()): (its panels, k x lanes), its rows padded to a
    multiple of the lanes."""
    lanes = kernels()["LANES"]
    return -(-w.shape[0] // lanes), w.shape[1] * lanes


def stretch(numbers):
    """Room for `numbers` float32 numbers in one stretch of memory that starts on a boundary of
    the memory's large pages (HUGE), so that the system may back all of it with them."""
    room = np.empty(numbers + HUGE // 4, np.float32)
    skip = (-room.ctypes.data % HUGE) // 4
    return room[skip:skip + numbers]


def operand(w, shape):
    """What a tile of shape reads for table w: -> (w laid out, its panels' rows) where the
    shape's ahead is LAID, else (w, 1)."""
    return (side_by_side(w), shape[1]) if shape[3] == LAID else (w, 1)


def one_laid(laid, x, rows):
    """laid @ x for one token, the table laid out (engine.laid), on Numba's threads: x (k, 1)
    -> (rows, 1)."""
    k, out = kernels(), np.empty((rows, 1), np.float32)
    k["table"](laid, np.ascontiguousarray(x, np.float32), out, threads_now(),
               (k["LANES"], LAID))
    return out


def lay_out(floors, needed):
    """Every table of the floors laid out (side_by_side()) where `needed`, before anything is
    timed, all in one stretch of memory (stretch(): 48 tables each in memory of its own, a
    third of it in small pages, took 1.05x the time of GPT-2 small's one-token products on a
    Zen 5 EPYC); else none kept (a laid-out table is as large as the table)."""
    if not needed:
        LAID_OUT.clear()
        return
    tables = [w for floor in floors for w in floor.values() if held(w) is None]
    sizes = [math.prod(laid_shape(w)) for w in tables]
    room, at = stretch(sum(sizes)), 0
    for w, n in zip(tables, sizes):
        keep(w, laid_out(w, room[at:at + n]))
        at += n


def room_to_lay_out(floors):
    """Whether the floors' tables may be laid out beside themselves: their bytes at most a
    quarter of the memory free now (an eighth of all of it, where what is free is not known)."""
    size = sum(w.nbytes for floor in floors for w in floor.values())
    try:
        room = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 4
    except (ValueError, OSError, AttributeError):
        try:
            room = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 8
        except (ValueError, OSError, AttributeError):
            return False
    return size <= room
