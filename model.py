"""A random-weight GPT-2 small: 12 floors of exact GPT-2 block math, a notebook (KV cache) per
user, and the accounting of the FLOPs and bytes of one trip.

    python -c "import model; print(model.table_numbers(), model.NOTE_BYTES)"

Tokens are columns: x is (width, tokens) and every table is applied as W @ x, as in the post.
No token embedding and no LM head: like the post, we count the 12 floors only.
"""
import concurrent.futures
import contextlib
import functools
import math

import numpy as np
import threadpoolctl

LAYERS, WIDTH, HEADS = 12, 768, 12  # GPT-2 small: 12 floors, width 768, 12 heads of 64
CONTEXT = 1024  # GPT-2's n_ctx: the longest question, or notebook of a typer, the flags accept
EPS = 1e-5  # GPT-2's LayerNorm epsilon
BYTES = 4  # float32
SMALL = {"layers": 2, "width": 64, "heads": 4}  # a tiny configuration of the same math, for tests


# ---------------------------------------------------------------------------------------------
# the tables


def tables(seed=0, layers=LAYERS, width=WIDTH):
    """Random float32 tables, scaled like GPT-2's init so activations stay realistic.

    Same seed, same tables, bit for bit. GPT-2 draws every weight from N(0, 0.02) and shrinks
    the two projections that add into the residual stream by 1/sqrt(2 * layers).
    """
    rng = np.random.default_rng(seed)
    std, residual_std = 0.02, 0.02 / math.sqrt(2 * layers)

    def table(rows, cols, scale):
        w = rng.standard_normal((rows, cols), dtype=np.float32)
        w *= np.float32(scale)
        return w

    return [{"qkv": table(3 * width, width, std),  # (3 width, width): q, k, v stacked
             "out": table(width, width, residual_std),  # (width, width)
             "up": table(4 * width, width, std),  # (4 width, width)
             "down": table(width, 4 * width, residual_std)}  # (width, 4 width)
            for _ in range(layers)]


# ---------------------------------------------------------------------------------------------
# notebooks (KV caches): arrays set aside up front, filled from the front, plus a length


def notebooks(users, capacity, layers=LAYERS, width=WIDTH, heads=HEADS):
    """One notebook per user, each with room for `capacity` tokens on every floor.

    Notes are columns, as tokens are in x: keys and values are (heads, 64, capacity) per floor.
    The notebooks stand side by side on one shelf, so that users who type together can have
    their notebooks read in one pass; each user's dict still holds only that user's notes.
    """
    hd = width // heads
    shelf = {"k": np.zeros((layers, users, heads, hd, capacity), dtype=np.float32),
             "v": np.zeros((layers, users, heads, hd, capacity), dtype=np.float32)}
    return [{"k": shelf["k"][:, u], "v": shelf["v"][:, u], "len": 0, "shelf": shelf, "seat": u}
            for u in range(users)]


def notebook(capacity, layers=LAYERS, width=WIDTH, heads=HEADS):
    """One user's notebook, on a shelf of its own."""
    return notebooks(1, capacity, layers, width, heads)[0]


def capacity(book):
    return book["k"].shape[-1]


# ---------------------------------------------------------------------------------------------
# one floor's pieces


def norm(x):
    """LayerNorm over features with no learned scale or shift. x: (width, tokens)."""
    mu = x.mean(axis=0)  # (tokens,)
    d = x - mu  # (width, tokens)
    var = np.einsum("ij,ij->j", d, d) / np.float32(d.shape[0])  # (tokens,)
    d /= np.sqrt(var + np.float32(EPS))
    return d


def gelu(h):
    """GPT-2's tanh GELU, in place. The cube is h*h*h: h**3 takes a slow road (cube_bug.py)."""
    c = h * h * h
    c *= np.float32(0.044715)
    c += h
    c *= np.float32(math.sqrt(2 / math.pi))
    np.tanh(c, out=c)
    c += np.float32(1)
    h *= np.float32(0.5)
    h *= c
    return h


def exp_shifted(s):
    """exp(s - max) over the last axis, in place: a softmax before its division by the sum.
    attend() divides after the weighted sum of values, where there are 64 numbers per query to
    divide instead of one per note."""
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    return s


@functools.lru_cache(maxsize=None)
def causal(t):
    """(t, t): 0 where new token i may read new token j (j <= i), -inf where it may not."""
    mask = np.triu(np.full((t, t), -np.inf, dtype=np.float32), k=1)
    mask.flags.writeable = False
    return mask


def by_head(x, users, heads):
    """(width, users * t) -> (users, heads, 64, t): each user's tokens, split into heads."""
    width, cols = x.shape
    return x.reshape(heads, width // heads, users, cols // users).transpose(2, 0, 1, 3)


BLOCK = 128  # queries per block; a block reads only the notes up to its last query (64 to 1024
#               tried: 128 was fastest for a 1,024-token question on a 2-core machine)


def attend(q, k, v, books, layer, heads, pool=None):
    """Attention on one floor for users who sit side by side on one shelf, each with the same
    number of notes and of new tokens: write the new notes, then each user reads their own
    notebook, causally. q, k, v: (width, users * t), the users' tokens side by side."""
    width, cols = q.shape
    users, hd, n0 = len(books), width // heads, books[0]["len"]
    t = cols // users
    seats = slice(books[0]["seat"], books[0]["seat"] + users)
    K = books[0]["shelf"]["k"][layer, seats]  # (users, heads, hd, capacity)
    V = books[0]["shelf"]["v"][layer, seats]  # (users, heads, hd, capacity)
    K[..., n0:n0 + t] = by_head(k, users, heads)
    V[..., n0:n0 + t] = by_head(v, users, heads)
    # (users, heads, t, hd), scaled by 1/sqrt(64) before the product rather than after
    q = by_head(q, users, heads).swapaxes(-1, -2) * np.float32(1 / math.sqrt(hd))
    out = np.empty((users, heads, hd, t), dtype=np.float32)

    def block(hs, a, b):  # heads hs, queries a..b-1: they read notes 0 .. n0+b-1 only
        n = n0 + b
        s = q[:, hs, a:b] @ K[:, hs, :, :n]  # (u, h, b-a, hd) @ (u, h, hd, n) -> (u, h, b-a, n)
        s[..., n0 + a:] += causal(b - a)  # the block's own tokens: a triangle
        w = exp_shifted(s)  # softmax's numerator ...
        o = V[:, hs, :, :n] @ w.swapaxes(-1, -2)  # (u, h, hd, n) @ (u, h, n, b-a): (u, h, hd, b-a)
        out[:, hs, :, a:b] = o / w.sum(axis=-1)[:, :, None, :]  # ... and its denominator

    notes = K[..., :n0 + t].size
    each(pool, block, [(hs, a, min(a + BLOCK, t)) for hs in split(heads, pool, notes)
                       for a in range(0, t, BLOCK)])
    return out.transpose(1, 2, 0, 3).reshape(width, cols)  # (heads, hd, users, t) -> (width, cols)


# ---------------------------------------------------------------------------------------------
# work shared by threads: NumPy lets go of the GIL inside matmuls and elementwise loops


PARALLEL_MIN = 1 << 16  # numbers; less work than this is quicker on one thread than handed out
BLAS = threadpoolctl.ThreadpoolController()


def workers(threads):
    """A pool for `threads` threads: the caller's own plus threads - 1 helpers (None for 1)."""
    if threads <= 1:
        return None
    return {"threads": threads, "helpers": concurrent.futures.ThreadPoolExecutor(threads - 1)}


def each(pool, fn, jobs):
    """fn(*job) for every job. The jobs are dealt out in contiguous shares, one per thread; the
    caller does the first share itself while the helpers do the others."""
    def do(share):
        for job in share:
            fn(*job)
    if pool is None or len(jobs) < 2:
        return do(jobs)
    shares = [jobs[s] for s in split(len(jobs), pool, size=PARALLEL_MIN)]
    helping = [pool["helpers"].submit(do, share) for share in shares[1:]]
    do(shares[0])
    for f in helping:
        f.result()


def split(n, pool, size=PARALLEL_MIN):
    """0..n-1 cut into one contiguous slice per thread; one slice if the work (`size` numbers to
    touch) is too small to share."""
    parts = min(n, pool["threads"]) if pool is not None and size >= PARALLEL_MIN else 1
    cuts = np.linspace(0, n, parts + 1).astype(int)
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:])]


def gelu_rows(h, pool=None):
    """gelu(h) in place, its rows shared among the pool's threads. h: (features, tokens)."""
    each(pool, lambda rows: gelu(h[rows]), [(rows,) for rows in split(h.shape[0], pool, h.size)])
    return h


def threads_of(pool):
    """With a pool, the pool's threads do all the sharing and BLAS keeps to one thread: BLAS's
    own threads would otherwise spin on a core after each product, starving the pool."""
    if pool is None:
        return contextlib.nullcontext()
    return BLAS.limit(limits=1, user_api="blas")


def matmul(w, x, pool=None):
    """w @ x, w's rows shared among the pool's threads. w: (rows, k), x: (k, tokens)."""
    if pool is None:
        return w @ x
    out = np.empty((w.shape[0], x.shape[1]), dtype=np.float32)  # (rows, tokens)
    each(pool, lambda rows: np.matmul(w[rows], x, out=out[rows]),
         [(rows,) for rows in split(w.shape[0], pool, w.size)])
    return out


# ---------------------------------------------------------------------------------------------
# one trip through the floors


def trip(layers, x, segments, heads=HEADS, pool=None):
    """Push every token on the trip through every floor; returns the new hidden states.

    x: (width, tokens), the segments' tokens side by side. segments: [(notebook, t)], t new
    tokens for that user. The tables are shared by every token on the trip; each user's
    attention reads only that user's notebook. Prefill is one segment holding a whole prompt;
    decode is one token for each waiting user; chunked prefill is a piece of a prompt riding
    with the typers' tokens. Each notebook grows by its t tokens. pool: threads to share the
    tables, the attention and the GELU among (see workers()), or None.
    """
    check_trip(x, segments)
    runs = groups(segments)
    if x.shape[1] == 1:  # matrix-vector products only: BLAS's own threads hand them out faster
        pool = None
    with threads_of(pool):
        for i, p in enumerate(layers):  # the floors
            qkv = matmul(p["qkv"], norm(x), pool)  # (3 width, width) @ (width, tokens)
            q, k, v = np.split(qkv, 3)  # 3 x (width, tokens)
            att = np.concatenate([attend(q[:, a:b], k[:, a:b], v[:, a:b], books, i, heads, pool)
                                  for a, b, books in runs], 1)  # (width, tokens)
            x = x + matmul(p["out"], att, pool)  # (width, width) @ (width, tokens)
            h = gelu_rows(matmul(p["up"], norm(x), pool), pool)  # (4 width, width) @ (width, tok)
            x = x + matmul(p["down"], h, pool)  # (width, 4 width) @ (4 width, tokens)
    for book, t in segments:
        book["len"] += t
    return x


def groups(segments):
    """Runs of segments that attention takes in one pass: neighbours on one shelf, in seat
    order, with the same number of notes and new tokens. -> [(first column, end column, books)]"""
    runs, col = [], 0
    for book, t in segments:
        if runs:
            a, b, books = runs[-1]
            last = books[-1]
            if (last["shelf"] is book["shelf"] and last["seat"] + 1 == book["seat"]
                    and last["len"] == book["len"] and b - a == t * len(books)):
                runs[-1] = (a, b + t, books + [book])
                col += t
                continue
        runs.append((col, col + t, [book]))
        col += t
    return runs


def check_trip(x, segments):
    """Refuse a trip before it changes anything: tokens must match, notebooks must have room."""
    if x.dtype != np.float32:
        raise TypeError(f"x must be float32, got {x.dtype}")
    if sum(t for _, t in segments) != x.shape[1] or any(t < 1 for _, t in segments):
        raise ValueError(f"segments hold {[t for _, t in segments]} tokens, x has {x.shape[1]}")
    for book, t in segments:
        if book["len"] + t > capacity(book):
            raise ValueError(f"notebook full: {book['len']} notes + {t} new tokens > "
                             f"capacity {capacity(book)}")
    if len({(id(book["shelf"]), book["seat"]) for book, _ in segments}) != len(segments):
        raise ValueError("a notebook appears twice on one trip")


# ---------------------------------------------------------------------------------------------
# accounting: what a trip must fetch and compute. A segment here is (notes_before, new_tokens).


def table_numbers(layers=LAYERS, width=WIDTH):
    """Numbers in the tables: qkv 3 w*w, out w*w, up 4 w*w, down 4 w*w per floor."""
    return layers * 12 * width * width  # 84,934,656 for GPT-2 small


def note_bytes(layers=LAYERS, width=WIDTH):
    """One token's notes: a key and a value of `width` float32 on every floor (72 KB)."""
    return layers * 2 * width * BYTES  # 73,728 for GPT-2 small


NOTE_BYTES = note_bytes()
TABLE_BYTES = table_numbers() * BYTES  # 339,738,624: the post's 340 MB


def table_flops(tokens, layers=LAYERS, width=WIDTH):
    """Each table number meets each token once: one multiply and one add."""
    return 2 * table_numbers(layers, width) * tokens


def attended_pairs(segments):
    """(new token, note) pairs that causality allows: token i of a segment reads n0 + i + 1."""
    return sum(t * n0 + t * (t + 1) // 2 for n0, t in segments)


def attention_flops(segments, layers=LAYERS, width=WIDTH):
    """Scores q.k and the weighted sum of v: 2 FLOPs per feature each, for every allowed pair."""
    return layers * 4 * width * attended_pairs(segments)


def bytes_read(segments, layers=LAYERS, width=WIDTH):
    """What the forklift must bring for one trip: the tables once, plus every note already in
    the notebooks it reads. Notes written on this trip are read back while still close by."""
    return table_numbers(layers, width) * BYTES + note_bytes(layers, width) * sum(
        n0 for n0, _ in segments)


def trip_flops(segments, layers=LAYERS, width=WIDTH):
    """All the math of one trip: the tables for every token, and causal attention."""
    tokens = sum(t for _, t in segments)
    return table_flops(tokens, layers, width) + attention_flops(segments, layers, width)


def limit(segments, bytes_per_s, flops_per_s, layers=LAYERS, width=WIDTH):
    """The fastest a trip can be on a machine: max(fetching / forklift, math / workbench).

    -> (seconds, "forklift" or "workbench"): whichever job is slower bounds the trip.
    """
    fetch = bytes_read(segments, layers, width) / bytes_per_s
    work = trip_flops(segments, layers, width) / flops_per_s
    return (fetch, "forklift") if fetch >= work else (work, "workbench")


def trip_scratch_bytes(segments, layers=LAYERS, width=WIDTH, heads=HEADS):
    """A generous bound on the temporary memory of one trip: attention scores plus activations."""
    tokens = sum(t for _, t in segments)
    scores = max(heads * (n0 + t) * t for n0, t in segments) * BYTES * 2  # scores + causal bias
    activations = 12 * width * tokens * BYTES  # qkv (3w), up/gelu (2 x 4w), residuals
    return scores + activations
