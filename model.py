"""A random-weight GPT-2 (small by default, the post's: 12 floors of width 768) of exact GPT-2
block math, and a notebook (KV cache) for the users who type together; what a trip weighs, its
FLOPs and bytes, is counted in accounting.py. Tokens are columns: x is (width, tokens) and every
table is applied as W @ x, as in the post. The arrays are NumPy's; the same math runs on
PyTorch's or CuPy's (a GPU's) through the array API standard (namespace())."""
import contextlib
import functools
import math
import types

import numpy as np

from accounting import CONTEXT, RUNS_IN, SIZES, TINY, Config, gpt2  # noqa: F401 (a model's shape)

EPS = 1e-5  # GPT-2's LayerNorm epsilon


# ---- the tables
def floors(cfg, seed=0):
    """Random float32 tables for every floor, scaled like GPT-2's init so activations stay
    realistic: [{"qkv", "out", "up", "down"}], one dict per floor (a device rounds them to its
    precision when they are copied there).

    Same seed, same tables, bit for bit. GPT-2 draws every weight from N(0, 0.02) and shrinks
    the two projections that add into the residual stream by 1/sqrt(2 * layers).
    """
    if not cfg.runnable:
        raise ValueError(f"{cfg} is predicted only: the model runs GPT-2's block in "
                         f"{', '.join(RUNS_IN)}")
    rng = np.random.default_rng(seed)
    std, residual_std, w = 0.02, 0.02 / math.sqrt(2 * cfg.layers), cfg.width

    def table(rows, cols, scale):
        t = rng.standard_normal((rows, cols), dtype=np.float32)
        t *= np.float32(scale)
        return t

    return [{"qkv": table(3 * w, w, std),  # (3 width, width): q, k, v stacked
             "out": table(w, w, residual_std),  # (width, width)
             "up": table(4 * w, w, std),  # (4 width, width)
             "down": table(w, 4 * w, residual_std)}  # (width, 4 width)
            for _ in range(cfg.layers)]


# ---- notebooks (KV caches): arrays set aside up front, filled from the front, plus a length
def namespace(x):
    """The array library x belongs to: NumPy itself for a NumPy array (the post's code, as it
    reads), else its array API namespace (array-api-compat: PyTorch, CuPy), imported only then."""
    if isinstance(x, np.ndarray):
        return np
    import array_api_compat
    return array_api_compat.array_namespace(x)


def notebook(cfg, users, capacity, like=None):
    """The notebooks of `users` users who type together, with room for `capacity` notes each.

    As in the post's q @ K and softmax(att) @ V, keys are (layers, users, heads, 64, capacity)
    and values (layers, users, heads, capacity, 64): a new value is written in one piece. All its
    users have the same number of notes, "len"; another number keeps another notebook. like:
    an array (a table) whose library, device and precision the notebook is made in; NumPy's
    float32 if None.
    """
    shape = (cfg.layers, users, cfg.heads)
    if like is None:
        return {"k": np.zeros((*shape, cfg.head, capacity), dtype=np.float32),
                "v": np.zeros((*shape, capacity, cfg.head), dtype=np.float32),
                "len": 0}
    xp, device = namespace(like), like.device
    return {"k": xp.zeros((*shape, cfg.head, capacity), dtype=like.dtype, device=device),
            "v": xp.zeros((*shape, capacity, cfg.head), dtype=like.dtype, device=device),
            "len": 0}


def readers(book):
    """How many users keep their notes in this notebook."""
    return book["k"].shape[1]


def room(book):
    """How many notes each of its users can hold."""
    return book["k"].shape[-1]


# ---- one floor's pieces
def norm(x):
    """LayerNorm over features with no learned scale or shift. x: (width, tokens)."""
    xp = namespace(x)
    d = x - xp.mean(x, axis=0)  # (width, tokens)
    var = squares(d) / d.shape[0]  # (tokens,)
    d /= xp.sqrt(var + EPS) if var.dtype == d.dtype else xp.astype(xp.sqrt(var + EPS), d.dtype)
    return d


def squares(d):
    """Each column's sum of squares: (width, tokens) -> (tokens,), in one pass of NumPy's einsum;
    other libraries sum d * d, float16's in float32 (its sum would overflow)."""
    if isinstance(d, np.ndarray):
        return np.einsum("ij,ij->j", d, d)
    xp = namespace(d)
    if d.dtype == xp.float16:  # summed in float32: 768 squares of 10 pass float16's 65,504
        d = xp.astype(d, xp.float32)
    return xp.sum(d * d, axis=0)


def gelu(h, cube="product"):
    """GPT-2's tanh GELU, in place. The cube is h*h*h: h**3 (cube="power", the post's bug, kept
    to measure it) takes a slow road for negative numbers (cube_bug.py)."""
    c = h ** 3 if cube == "power" else h * h * h
    c *= 0.044715
    c += h
    c *= math.sqrt(2 / math.pi)
    c = in_place("tanh", c)
    c += 1
    h *= 0.5
    h *= c
    return h


def exp_shifted(s):
    """exp(s - max) over the last axis, in place: a softmax before its division by the sum
    (attend() divides after the weighted sum: 64 numbers a query, not one a note)."""
    s -= namespace(s).max(s, axis=-1, keepdims=True)
    return in_place("exp", s)


def in_place(name, a):
    """xp.<name>(a) written over a where the library can (NumPy's out=: no new array), else a
    new array (the array API has no out=)."""
    if isinstance(a, np.ndarray):
        return getattr(np, name)(a, out=a)
    return getattr(namespace(a), name)(a)


@functools.lru_cache(maxsize=None)
def causal(t):
    """(t, t): 0 where new token i may read new token j (j <= i), -inf where it may not."""
    mask = np.triu(np.full((t, t), -np.inf, dtype=np.float32), k=1)
    mask.flags.writeable = False
    return mask


MASKS = {}  # causal(t) on another library's device, in its precision: copied there once


def causal_like(t, s):
    """causal(t) as s's library keeps it, on s's device and in its precision. Made there once
    (a copy from the host waits for the device: once per trip would stall every one)."""
    if isinstance(s, np.ndarray):
        return causal(t)
    key = (t, str(s.device), str(s.dtype))
    if key not in MASKS:
        xp = namespace(s)
        MASKS[key] = xp.astype(xp.asarray(causal(t), device=s.device, copy=True), s.dtype)
    return MASKS[key]


def by_head(x, users, heads):
    """(width, users * t) -> (users, heads, 64, t): each user's tokens, split into heads. A view."""
    width, cols = x.shape
    xp = namespace(x)
    return xp.permute_dims(xp.reshape(x, (heads, width // heads, users, cols // users)),
                           (2, 0, 1, 3))


def attend(q, k, v, how="einsum"):
    """Causal attention. q: (users, heads, t, 64), already scaled by 1/sqrt(64); k: (users,
    heads, 64, n) and v: (users, heads, n, 64), whose last t notes are the queries' own tokens:
    query i reads every note up to its own. how: see product(). -> (users, heads, t, 64)"""
    t, n = q.shape[-2], k.shape[-1]
    xp = namespace(q)
    s = product(q, k, how)  # (u, h, t, 64) @ (u, h, 64, n) -> (u, h, t, n)
    if t > 1:  # the queries' own tokens: a triangle
        s[..., n - t:] += causal_like(t, s)
    w = exp_shifted(s)  # softmax's numerator ...
    o = product(w, v, how)  # (u, h, t, n) @ (u, h, n, 64) -> (u, h, t, 64)
    return o / xp.sum(w, axis=-1)[..., None]  # ... and its denominator


def product(a, b, how="einsum"):
    """a @ b over the last two axes, for every user and head. With one query (t = 1), a pass over
    the notes whose fastest way depends on the CPU: einsum's loop, a batched "matmul" (a BLAS
    call per user and head) or "vec" (NumPy's vecmat); with more queries, BLAS's products."""
    if how == "matmul" or 1 not in (a.shape[-2], b.shape[-1]) or not isinstance(a, np.ndarray):
        return a @ b  # (another library's own batched product, on its device)
    if how == "vec":
        if a.shape[-2] == 1:  # (u, h, 1, k) @ (u, h, k, n): the query's keys, or values
            return np.vecmat(a[..., 0, :], b)[..., None, :]
        return np.matvec(a, b[..., 0])[..., None]  # (u, h, m, k) @ (u, h, k, 1)
    return np.einsum("...ij,...jk->...ik", a, b)


def add(x, y):
    """The residual stream: x + what a floor's half adds to it."""
    return x + y


BLOCK = 128  # queries per block, each reading the notes up to its last query (fastest of 64-1024)


def attention(cfg, q, k, v, segments, floor, ways=None):
    """Every user writes their new notes on this floor, then reads their own notebook.
    q, k, v: (width, tokens), the segments' tokens side by side. -> (width, tokens)"""
    ways = ways or PLAIN
    scale = 1 / math.sqrt(q.shape[0] // cfg.heads)
    out = namespace(q).empty_like(q)  # (width, tokens)
    books, col = [], 0  # each notebook's notes, and its users' queries, keys, values, answers
    for book, t in segments:
        u, n = readers(book), book["len"] + t
        cols = slice(col, col + u * t)
        col += u * t
        notes = book["k"][floor, ..., :n], book["v"][floor, :, :, :n]  # see notebook()
        books.append((*notes, *(by_head(a[:, cols], u, cfg.heads) for a in (q, k, v, out))))
        #                       4 x (u, heads, 64, t): queries, keys, values, answers

    def read(hs):  # heads hs of every notebook: write the new notes, then read them
        for K, V, qh, kh, vh, oh in books:
            t, n0 = qh.shape[-1], K.shape[-1] - qh.shape[-1]
            K[:, hs, :, n0:] = kh[:, hs]
            V[:, hs, n0:] = vh[:, hs].swapaxes(-1, -2)
            qs = qh[:, hs].swapaxes(-1, -2) * scale  # (u, h, t, 64): scaled before the product
            for a in range(0, t, BLOCK):
                b = min(a + BLOCK, t)  # queries a..b-1 read notes 0 .. n0+b-1 only
                oh[:, hs, :, a:b] = attend(qs[:, :, a:b], K[:, hs, :, :n0 + b],
                                           V[:, hs, :n0 + b], ways.attention).swapaxes(-1, -2)

    ways.share(read, cfg.heads, sum(math.prod(K.shape) for K, *_ in books))
    return out


def mlp(h, ways=None):
    """gelu(h) in place, its rows handed out as the ways share work. h: (4 width, tokens)."""
    ways = ways or PLAIN
    ways.share(lambda rows: ways.gelu(h[rows], ways.cube), h.shape[0], math.prod(h.shape))
    return h


# ---- how a trip does its work: by default the post's plain NumPy, one call for each product
PLAIN = types.SimpleNamespace(
    table=lambda w, x: w @ x,  # a table product: (rows, k) @ (k, tokens)
    share=lambda fn, n, size: fn(slice(0, n)),  # fn over items 0..n-1: here all at once
    threads=contextlib.nullcontext,  # what the library's own threads do meanwhile
    attention="einsum",  # how one query reads its notes (see product())
    cube="product",  # h*h*h; "power" is the post's bug, h**3, kept to measure it
    reads=attention,  # a floor's attention: attention() above, or a compiled kernel's
    norm=norm, gelu=gelu,  # the elementwise pieces: the ones above, or compiled kernels
    mlp=mlp, add=add)  # the feed-forward's GELU (through share and gelu) and the residual add
#   A faster way for a machine (the suite's kernels: blocked products, work shared among
#   threads) is handed to trip() as `ways`, a function of the trip's token count that returns
#   the same ten names; every way gives the same answers within float32 rounding.


def plain(tokens):
    return PLAIN


# ---- one trip through the floors
def trip(cfg, floors, x, segments, ways=plain):
    """Push every token on the trip through every floor; returns the new hidden states.

    x: (width, tokens), the segments' tokens side by side. segments: [(notebook, t)], t new
    tokens for each of that notebook's users (user by user in x). The tables are shared by every
    token on the trip; each user's attention reads only that user's notes. Prefill is one
    segment holding a whole prompt; decode is one token for each waiting user; chunked prefill
    is a piece of a prompt riding with the typers' tokens. Each notebook grows by its t tokens.
    ways(tokens): how the work is done (see PLAIN).
    """
    validate(cfg, x, segments)
    w = ways(x.shape[1])
    with w.threads():
        for i, p in enumerate(floors):
            qkv = w.table(p["qkv"], w.norm(x))  # (3 width, tokens): q, k, v stacked
            q, k, v = (qkv[j * cfg.width:(j + 1) * cfg.width] for j in range(3))
            x = w.add(x, w.table(p["out"], w.reads(cfg, q, k, v, segments, i, w)))
            h = w.mlp(w.table(p["up"], w.norm(x)), w)  # (4 width, tokens)
            x = w.add(x, w.table(p["down"], h))
    for book, t in segments:
        book["len"] += t
    return x


def validate(cfg, x, segments):
    """Refuse a trip before it changes anything: tokens must match, notebooks must have room."""
    kept = {str(book["k"].dtype) for book, _ in segments} or {str(namespace(x).float32)}
    if str(x.dtype) not in kept or len(kept) > 1 or x.shape[0] != cfg.width:
        raise TypeError(f"x must be {' or '.join(sorted(kept))} (the notebooks' precision) of "
                        f"{cfg.width} rows, got {x.dtype} {x.shape}")
    if any(t < 1 for _, t in segments):
        raise ValueError(f"every segment needs a new token, got {[t for _, t in segments]}")
    if sum(readers(book) * t for book, t in segments) != x.shape[1]:
        raise ValueError(f"segments hold {[readers(b) * t for b, t in segments]} tokens, "
                         f"x has {x.shape[1]}")
    for book, t in segments:
        if book["len"] + t > room(book):
            raise ValueError(f"notebook full: {book['len']} notes + {t} new tokens > "
                             f"capacity {room(book)}")
    if len({id(book) for book, _ in segments}) != len(segments):
        raise ValueError("a notebook appears twice on one trip")
