"""A random-weight GPT-2 small: 12 floors of exact GPT-2 block math, a notebook (KV cache) per
user, and the accounting of the FLOPs and bytes of one trip.

    python -c "import model; print(model.table_numbers(), model.NOTE_BYTES)"

Tokens are columns: x is (width, tokens) and every table is applied as W @ x, as in the post.
No token embedding and no LM head: like the post, we count the 12 floors only.
"""
import math

import numpy as np

LAYERS, WIDTH, HEADS = 12, 768, 12  # GPT-2 small: 12 floors, width 768, 12 heads of 64
CONTEXT = 1024  # GPT-2's n_ctx: the most tokens one notebook ever holds
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


def dims(layers):
    """(floors, width) of a list of tables."""
    return len(layers), layers[0]["out"].shape[0]


# ---------------------------------------------------------------------------------------------
# a notebook (KV cache): arrays set aside up front, filled from the front, plus a length


def notebook(capacity, layers=LAYERS, width=WIDTH, heads=HEADS):
    """Room for `capacity` tokens of one user's keys and values on every floor.

    Keys are token-major and values feature-major per head, so that both attention products
    read each head's notes as contiguous rows: scores = K @ q and out = V @ weights.
    """
    hd = width // heads
    return {"k": np.zeros((layers, heads, capacity, hd), dtype=np.float32),
            "v": np.zeros((layers, heads, hd, capacity), dtype=np.float32),
            "len": 0}


def capacity(book):
    return book["k"].shape[2]


def write(book, layer, k, v, heads):
    """Append t tokens' keys and values (width, t) after the notes already in the book."""
    hd, t = k.shape[0] // heads, k.shape[1]
    n0 = book["len"]
    book["k"][layer, :, n0:n0 + t, :] = k.reshape(heads, hd, t).transpose(0, 2, 1)  # (heads, t, hd)
    book["v"][layer, :, :, n0:n0 + t] = v.reshape(heads, hd, t)  # (heads, hd, t)


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


def softmax(s):
    """Softmax over axis 1 (the notes), in place. s: (heads, notes, tokens)."""
    s -= s.max(axis=1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=1, keepdims=True)
    return s


def causal_bias(n0, t):
    """(n0 + t, t) float32: 0 where note j may be read by new token i (j <= n0 + i), else -inf."""
    if t == 1:
        return None  # a single new token may read every note
    notes = np.arange(n0 + t)[:, None]  # (n, 1)
    tokens = n0 + np.arange(t)[None, :]  # (1, t)
    return np.where(notes > tokens, np.float32(-np.inf), np.float32(0))  # (n, t)


def attend(q, k, v, book, layer, heads, bias):
    """One user's attention on one floor: write the new notes, then read the whole notebook.

    q, k, v: (width, t) for this user's t new tokens; returns (width, t).
    """
    width, t = q.shape
    hd = width // heads
    write(book, layer, k, v, heads)
    n = book["len"] + t
    q = q.reshape(heads, hd, t) * np.float32(1 / math.sqrt(hd))  # (heads, hd, t)
    s = book["k"][layer, :, :n, :] @ q  # (heads, n, hd) @ (heads, hd, t) -> (heads, n, t)
    if bias is not None:
        s += bias  # (n, t) broadcast over heads: causal within the segment
    out = book["v"][layer, :, :, :n] @ softmax(s)  # (heads, hd, n) @ (heads, n, t) -> (heads, hd, t)
    return out.reshape(width, t)


# ---------------------------------------------------------------------------------------------
# one trip through the floors


def trip(layers, x, segments, heads=HEADS):
    """Push every token on the trip through every floor; returns the new hidden states.

    x: (width, tokens), the segments' tokens side by side. segments: [(notebook, t)], t new
    tokens for that user. The tables are shared by every token on the trip; each user's
    attention reads only that user's notebook. Prefill is one segment holding a whole prompt;
    decode is one token for each waiting user; chunked prefill is a piece of a prompt riding
    with the typers' tokens. Each notebook grows by its t tokens.
    """
    check_trip(x, segments)
    cuts = np.cumsum([t for _, t in segments])[:-1]
    biases = [causal_bias(book["len"], t) for book, t in segments]
    for i, p in enumerate(layers):  # the floors
        q, k, v = np.split(p["qkv"] @ norm(x), 3)  # (3 width, width) @ (width, tokens) -> 3 x (width, tokens)
        outs = [attend(qu, ku, vu, book, i, heads, bias)
                for qu, ku, vu, (book, _), bias in zip(np.split(q, cuts, 1), np.split(k, cuts, 1),
                                                       np.split(v, cuts, 1), segments, biases)]
        x = x + p["out"] @ np.concatenate(outs, 1)  # (width, width) @ (width, tokens)
        x = x + p["down"] @ gelu(p["up"] @ norm(x))  # (width, 4 width) @ (4 width, tokens)
    for book, t in segments:
        book["len"] += t
    return x


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
    if len({id(book) for book, _ in segments}) != len(segments):
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


def shape_of(segments):
    """[(notebook, t)] -> [(notes_before, t)]: what the accounting needs to know of a trip."""
    return [(book["len"], t) for book, t in segments]


def table_flops(tokens, layers=LAYERS, width=WIDTH):
    """Each table number meets each token once: one multiply and one add."""
    return 2 * table_numbers(layers, width) * tokens


def attended_pairs(segments):
    """(new token, note) pairs that causality allows: token i of a segment reads n0 + i + 1 notes."""
    return sum(t * n0 + t * (t + 1) // 2 for n0, t in segments)


def attention_flops(segments, layers=LAYERS, width=WIDTH):
    """Scores q.k and the weighted sum of v: 2 FLOPs per feature each, for every allowed pair."""
    return layers * 4 * width * attended_pairs(segments)


def bytes_read(segments, layers=LAYERS, width=WIDTH):
    """What the forklift must bring for one trip: the tables once, plus every note already in
    the notebooks it reads. Notes written on this trip are read back while still close by."""
    return table_numbers(layers, width) * BYTES + note_bytes(layers, width) * sum(
        n0 for n0, _ in segments)


def trip_scratch_bytes(segments, layers=LAYERS, width=WIDTH, heads=HEADS):
    """A generous bound on the temporary memory of one trip: attention scores plus activations."""
    tokens = sum(t for _, t in segments)
    scores = max(heads * (n0 + t) * t for n0, t in segments) * BYTES * 2  # scores + causal bias
    activations = 12 * width * tokens * BYTES  # qkv (3w), up/gelu (2 x 4w), residuals
    return scores + activations
