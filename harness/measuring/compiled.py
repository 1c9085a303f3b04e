"""Compiled kernels for the trips of a few tokens, where NumPy's calls cost more than the work:
a table product that reads each table once, its rows shared among the threads (tiles that keep
their sums in vector registers from 2 tokens on); attention for one query per user, whole (the
new note written, the scores, softmax, the weighted sum), two (user, head) pairs a task; the
norm and GELU in one call each. Numba compiles them on first use (a few seconds, then kept in
its cache); without Numba, or where they lose to NumPy's way on this machine (tuning.choose
times both), the trips keep NumPy's. Where they win some trips, NumPy's trips of more tokens
take the norm, GELU and one-query attention too, on the suite's own threads (kernels.ways), and
the tiles for their table products of up to 64 tokens wherever those were timed faster.
Every kernel gives NumPy's answer within float32 rounding (the equivalence tests hold it).

While a trip runs these on Numba's threads, nothing calls the BLAS: its threads would spin on
the cores these threads need (running() holds the BLAS to one thread meanwhile)."""
import contextlib
import functools
import math

import numpy as np

import model

EPS = np.float32(model.EPS)  # GPT-2's LayerNorm epsilon, as the kernel takes it
TRIED = (1, 2, 4, 8, 16)  # the token counts whose trips are timed both ways (tuning.choose);
#                         a trip of more tokens is NumPy's, whose BLAS products win there ...
TILED = (32, 64)  # ... but for the table products of up to these counts, timed both ways too:
#                   the tiles on the suite's own threads, or the BLAS (see table_shared())


@functools.lru_cache(maxsize=None)
def numba():
    """Numba, imported on first use, or None where it is not installed (or will not load)."""
    try:
        import numba as nb
    except Exception:  # an ImportError, or a Numba built for another NumPy
        return None
    return nb


def available():
    return numba() is not None


@functools.lru_cache(maxsize=None)
def kernels():
    """The kernels (compiled_kernels.py), imported once per process: {name: kernel}."""
    from harness.measuring import compiled_kernels as k
    return {name: getattr(k, name)
            for name in ("table", "tiles", "rows_tiled", "vector", "attend", "attend_tasks",
                         "norm", "gelu")}


def threads(n):
    """Numba's threads for the kernels: n of them (at most what it started with)."""
    numba().set_num_threads(min(n, numba().config.NUMBA_NUM_THREADS))


@contextlib.contextmanager
def running(n):
    """While a trip runs the kernels: n threads for them, the BLAS held to one (its own threads
    would spin on the cores these need)."""
    from harness.measuring.pool import blas
    threads(n)
    with blas().limit(limits=1, user_api="blas"):
        yield


def table(w, x):
    """w @ x for a trip of a few tokens: w (rows, k), x (k, tokens) -> (rows, tokens). One token:
    a matrix-vector product; two to four: two rows by four tokens at a time, x padded with
    zeros to 4 tokens; more: tiles of six rows by 16 tokens (8 for the last, where their
    count is not a multiple of 16), x padded with zeros to a multiple of 8 and laid out in
    panels (the tables' bytes, not the math, set a few tokens' time). Where one way gives way
    to the next was measured on a 2-core AMD EPYC; on any CPU, the trips of a count whose
    compiled kernels lose keep NumPy's (tuning.choose times both)."""
    k, threads = kernels(), numba().get_num_threads()
    rows, tokens = w.shape[0], x.shape[1]
    if tokens == 1:
        out = np.empty(rows, np.float32)
        k["vector"](w, np.ascontiguousarray(x[:, 0]), out, threads)
        return out[:, None]
    if tokens > 4:
        out = np.empty((rows, wide(tokens)), np.float32)
        k["tiles"](w, *panels(x), out, threads)
        return first(out, tokens)
    xt = np.zeros((4, x.shape[0]), np.float32)  # (4, k): the tokens, padded with zeros
    xt[:tokens] = x.T
    out = np.empty((rows, 4), np.float32)
    k["table"](w, xt, out, threads)
    return first(out, tokens)


def table_shared(w, x, share):
    """table() for NumPy's trips of more tokens (see TILED), the tiles' rows shared among the
    suite's own threads by share, each running them alone (no Numba threads beside the BLAS)."""
    out, laid = np.empty((w.shape[0], wide(x.shape[1])), np.float32), panels(x)
    tiled = kernels()["rows_tiled"]
    share(lambda part: tiled(w, *laid, out, part.start, part.stop), w.shape[0], w.size)
    return first(out, x.shape[1])


def first(out, tokens):
    """out (rows, tokens padded) cut back to its first `tokens` columns, contiguous."""
    return out if out.shape[1] == tokens else np.ascontiguousarray(out[:, :tokens])


def wide(tokens):
    """The tokens a tile product computes: `tokens` padded to a multiple of 8."""
    return -(-tokens // 8) * 8


def panels(x):
    """x (k, tokens) as the tiles meet it: -> panels (groups * k, 16), x's tokens 16 at a time,
    one panel under the next, and last (k, 8), the 8 left over where the tokens padded with
    zeros to a multiple of 8 are not a multiple of 16, or (0, 8); each number copied once."""
    k, tokens = x.shape
    groups, left = divmod(wide(tokens), 16)
    laid = np.empty((groups, k, 16), np.float32)
    full = min(groups, tokens // 16)  # the panels x fills (the last may be short of 16)
    laid[:full] = x[:, :16 * full].reshape(k, full, 16).swapaxes(0, 1)
    if full < groups:
        laid[full:] = 0
        laid[full, :, :tokens - 16 * full] = x[:, 16 * full:]
    last = np.zeros((k if left else 0, 8), np.float32)
    if left:
        last[:, :tokens - 16 * groups] = x[:, 16 * groups:]
    return laid.reshape(groups * k, 16), last


def norm(x):
    """model.norm(x), compiled: x (width, tokens) -> a new array."""
    out = np.empty(x.shape, np.float32)
    kernels()["norm"](x, EPS, out)
    return out


def gelu(h, cube="product"):
    """model.gelu(h) in place, compiled (the post's h**3, cube="power", NumPy's as it was)."""
    if cube != "product" or not h.flags.c_contiguous:
        return model.gelu(h, cube)
    kernels()["gelu"](h.reshape(-1))
    return h


def attention(cfg, q, k, v, segments, floor, ways=None):
    """model.attention, with every segment whose users bring one token each read by the
    compiled kernel on Numba's threads (the others as the model reads them). q, k, v: (width,
    tokens)."""
    return read(cfg, q, k, v, segments, floor, ways, None)


def attention_shared(cfg, q, k, v, segments, floor, ways):
    """attention() for NumPy's trips: the kernel's tasks shared among the suite's own threads
    by ways.share, each running them on its own (no Numba threads to spin beside the BLAS)."""
    return read(cfg, q, k, v, segments, floor, ways, ways.share)


def read(cfg, q, k, v, segments, floor, ways, share):
    if any(t != 1 for _, t in segments):
        return model.attention(cfg, q, k, v, segments, floor, ways)
    out, col = np.empty_like(q), 0  # (width, tokens)
    for book, _ in segments:
        u, n = model.readers(book), book["len"] + 1
        notes = book["k"][floor], book["v"][floor]
        args = (q, k, v, col, scale(cfg.head), *notes, n, out,
                *room(u, cfg.heads, cfg.head, model.room(book)))
        if share is None:
            kernels()["attend"](*args)
        else:
            tasks = kernels()["attend_tasks"]
            share(lambda part: tasks(*args, part.start, part.stop), (u * cfg.heads + 1) // 2,
                  2 * u * cfg.heads * cfg.head * n)
        col += u
    return out


@functools.lru_cache(maxsize=None)
def scale(head):
    """A query's scale, one over the root of its head's width, as the kernel takes it."""
    return np.float32(1 / math.sqrt(head))


@functools.lru_cache(maxsize=8)
def room(users, heads, head, notes):
    """The attention kernel's room to work in, made once for each notebook's shape (an array
    made in every call costs more than one user's notes on a floor): the queries and answers
    (2, users, heads, head), the scores (users, heads, notes) and their exponents' bits."""
    return (np.empty((2, users, heads, head), np.float32),
            np.empty((users, heads, notes), np.float32), np.empty((users, heads, notes), np.int32))
