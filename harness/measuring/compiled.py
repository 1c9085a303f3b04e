"""Compiled kernels for the trips of a few tokens, where NumPy's calls cost more than the work:
a table product that streams each table once, its rows shared among the threads, and attention
for one query per user with every (user, head) pair shared among them. Numba compiles them on
first use (a few seconds); without Numba, or where they lose to NumPy's way on this machine
(tuning.choose times both), the trips keep NumPy's. Every kernel gives NumPy's answer within
float32 rounding (the equivalence tests hold it).

While a trip runs these, nothing calls the BLAS: its threads would spin on the cores these
threads need (kernels.ways holds the BLAS to one thread meanwhile)."""
import contextlib
import functools
import math

import numpy as np

TANH_P = tuple(np.float32(a) for a in (
    -2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
    1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03))  # Eigen's float tanh:
TANH_Q = tuple(np.float32(b) for b in (  # its numerator's and denominator's coefficients, the
    1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,  # highest power first
    4.89352518554385e-03))
TANH_EDGE = np.float32(7.90531110763549805)  # past which float32's tanh is +-1
TRIED = (1, 2, 4, 8, 16)  # the token counts whose trips are timed both ways (tuning.choose);
#                         a trip of more tokens is NumPy's, whose BLAS products win there


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
    return {name: getattr(k, name) for name in ("table", "vector", "scores", "weighted",
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
    """w @ x for a trip of a few tokens: w (rows, k), x (k, tokens) -> (rows, tokens)."""
    k = kernels()
    if x.shape[1] == 1:
        out = np.empty(w.shape[0], np.float32)
        k["vector"](w, np.ascontiguousarray(x[:, 0]), out, numba().get_num_threads())
        return out[:, None]
    out_t = np.empty((x.shape[1], w.shape[0]), np.float32)  # (tokens, rows)
    k["table"](w, np.ascontiguousarray(x.T), out_t, numba().get_num_threads())
    return out_t.T


def attend_one(q, keys, values, n):
    """Attention for one query per user and head: q (users, heads, 64), already scaled; keys
    (users, heads, 64, room), values (users, heads, room, 64), the new note among the first n.
    The scores and the weighted sum compiled, shared among the threads; the exponentials
    between them NumPy's, whose vector exp is faster than a compiled loop's. -> (users, heads,
    64)"""
    k = kernels()
    s = np.empty((*q.shape[:2], n), np.float32)  # (users, heads, n)
    k["scores"](np.ascontiguousarray(q), keys, n, s)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    out = np.empty(q.shape, np.float32)
    k["weighted"](s, values, n, out)
    return out


def norm(x):
    """model.norm(x), compiled: x (width, tokens) -> a new array."""
    import model
    out = np.empty_like(x)
    kernels()["norm"](x, np.float32(model.EPS), out)
    return out


def gelu(h, cube="product"):
    """model.gelu(h) in place, compiled (the post's h**3, cube="power", NumPy's as it was)."""
    import model
    if cube != "product" or not h.flags.c_contiguous:
        return model.gelu(h, cube)
    kernels()["gelu"](h.reshape(-1))
    return h


def attention(cfg, q, k, v, segments, floor, ways=None):
    """model.attention, with every segment whose users bring one token each read by the
    compiled kernel (the others as the model reads them). q, k, v: (width, tokens)."""
    import model
    if any(t != 1 for _, t in segments):
        return model.attention(cfg, q, k, v, segments, floor, ways)
    scale = np.float32(1 / math.sqrt(q.shape[0] // cfg.heads))
    out, col = np.empty_like(q), 0  # (width, tokens)
    for book, _ in segments:
        u, n = model.readers(book), book["len"] + 1
        cols = slice(col, col + u)
        col += u
        keys, values = book["k"][floor], book["v"][floor]  # (u, heads, 64, room), (u, heads,
        #                                                    room, 64)
        keys[..., n - 1] = model.by_head(k[:, cols], u, cfg.heads)[..., 0]  # the new notes
        values[:, :, n - 1] = model.by_head(v[:, cols], u, cfg.heads)[..., 0]
        asked = model.by_head(q[:, cols], u, cfg.heads)[..., 0] * scale  # (u, heads, 64)
        out[:, cols] = attend_one(asked, keys, values, n).transpose(1, 2, 0).reshape(-1, u)
    return out
