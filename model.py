"""A random-weight GPT-2 (small by default, the post's: 12 floors of width 768) of exact GPT-2
block math, a notebook (KV cache) for the users who type together, and the accounting of the
FLOPs and bytes of one trip, part by part. It needs NumPy alone.

    python -c "import model; print(model.table_numbers(model.SIZES['small']), model.NOTE_BYTES)"

Tokens are columns: x is (width, tokens) and every table is applied as W @ x, as in the post.
The arrays are NumPy's; the same math runs on PyTorch's or CuPy's (a GPU's) through the array
API standard (namespace()), the tables and notebooks made there by the caller.
The model runs the 12 floors only, like the post; a prediction counts the token embedding
and the LM head too (Config.vocab), and a mixture of experts, and a model split over devices.
"""
import contextlib
import dataclasses
import functools
import math
import time
import types

import numpy as np


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1,
               "int8-weights": 1, "int4-weights": 0.5}
#   bytes per number: what a table number or a note weighs, by its precision. int8 is 8-bit
#   math on 8-bit activations; int8-weights and int4-weights keep only the tables that small,
#   the math at 16 bits (as most engines run a quantized model); fp8 is e4m3
GROUP, SCALE_BYTES = 128, 2  # a weights-only table keeps a 16-bit scale for every 128 numbers
#   (GPTQ's and AWQ's usual groups): int4-weights weigh 0.5 + 2/128 bytes a number, not 0.5
HEAD_DTYPE = "bfloat16"  # what engines keep the LM head and the embedding in when the floors'
#   tables are 8 or 4 bits: 16 bits (--quantize-head keeps them at the tables' precision)
NOTE_DTYPES = ("float32", "bfloat16", "float16", "fp8", "int8")  # what a note can be kept in
RUNS_IN = ("float32", "bfloat16", "float16")  # what the model computes in: float32 (NumPy's, the
#   post's), or 16 bits on PyTorch's or CuPy's device (two_phases.py --dtype)
CONTEXT = 1024  # GPT-2's n_ctx: the longest question, or notebook of a typer, the flags accept


@dataclasses.dataclass(frozen=True)
class Config:
    """A model's shape, passed to everything that depends on it, and the precision its numbers
    are kept in. GPT-2 is gpt2(name, layers, width, heads); a Llama-style model (predicted only)
    says the rest: fewer key/value heads than query heads (grouped-query attention), a
    feed-forward width of its own, and a gated feed-forward (SwiGLU: a gate table beside up)."""
    name: str
    layers: int  # floors
    width: int  # numbers per token on the residual stream
    heads: int  # query heads, each `head` numbers wide
    kv_heads: int  # key/value heads, whose notes each user keeps (GPT-2: as many as heads)
    ffn: int  # the feed-forward's width (GPT-2: 4 x width)
    head: int  # numbers per head (64 in every GPT-2)
    gated: bool = False  # a gate table beside up, multiplied into it (SwiGLU)
    context: int = CONTEXT  # the longest notebook the model was trained for
    dtype: str = "float32"  # a table number's precision; the model runs in RUNS_IN
    note_dtype: str = "float32"  # a note's
    family: str = "GPT-2"
    vocab: int = 0  # the LM head's rows, and the embedding's; 0: neither counted (the post's)
    tied: bool = True  # the embedding is the head's own table (GPT-2's), not a second one
    experts: int = 0  # a mixture of experts: feed-forwards per floor (0: one, a dense model)
    active: int = 0  # the experts each token is routed to, of `experts`
    shared: int = 0  # a mixture's shared experts: the width every token meets beside its own
    dense: int = 0  # a mixture's floors with one dense feed-forward instead (DeepSeek's first)
    dense_ffn: int = 0  # their feed-forward's width
    latent: int = 0  # latent attention (DeepSeek's MLA): a note is one compressed vector of
    #                  `latent` numbers and `rope` more per floor, shared by every head
    rope: int = 0  # the rotary part of a query and a key head, within `head`
    q_latent: int = 0  # the queries' compression, where they have one
    v_head: int = 0  # a value head's width under latent attention (`head` is a query's)
    devices: int = 1  # tensor parallel: each device holds 1/devices of every table and note
    head_dtype: str = ""  # the LM head's and the embedding's precision ("": the tables')
    act_dtype: str = ""  # the activations', which the math runs at ("": as the tables say)

    @property
    def runnable(self):
        """Whether this file can run it, not only count it: GPT-2's block, in float32 (or, on a
        GPU library's device, a 16-bit precision, tables and notes alike)."""
        return self.dtype in RUNS_IN and self == dataclasses.replace(
            gpt2(self.name, self.layers, self.width, self.heads), context=self.context,
            family=self.family, dtype=self.dtype, note_dtype=self.dtype)

    def __str__(self):
        shape = [f"{self.layers} floors", f"width {self.width}"]
        if self.kv_heads != self.heads:
            shape.append(f"{self.kv_heads} key/value heads for {self.heads} query heads")
        if self.latent:
            shape.append(f"latent notes of {self.latent} + {self.rope}")
        if self.experts:
            shape.append(f"{self.active} of {self.experts} experts a token"
                         + (" and a shared one" if self.shared else "")
                         + (f", the first {self.dense} floors dense" if self.dense else ""))
        if self.dtype != "float32" or self.note_dtype != "float32":
            shape.append(self.dtype if self.dtype == self.note_dtype
                         else f"{self.dtype} tables, {self.note_dtype} notes")
        if self.vocab:
            shape.append(f"a vocabulary of {self.vocab:,} tokens" + (
                f" in {self.head_dtype}" if self.head_dtype not in ("", self.dtype) else ""))
        if self.devices > 1:
            shape.append(f"split over {self.devices} devices")
        return f"{self.family} {self.name}".strip() + f" ({', '.join(shape)})"


def gpt2(name, layers, width, heads):
    """GPT-2's shape: every head 64 numbers wide in the real sizes, a feed-forward of 4 x width."""
    return Config(name, layers, width, heads, kv_heads=heads, ffn=4 * width, head=width // heads)


SIZES = {c.name: c for c in (gpt2("small", 12, 768, 12), gpt2("medium", 24, 1024, 16),
                             gpt2("large", 36, 1280, 20), gpt2("xl", 48, 1600, 25))}
#        GPT-2's four sizes (Radford et al. 2019)
TINY = gpt2("tiny", 2, 64, 4)  # the same math at a size tests run in milliseconds
EPS = 1e-5  # GPT-2's LayerNorm epsilon
BYTES = DTYPE_BYTES["float32"]  # the model runs in float32
FLOPS_PER_NUMBER = 2  # a table number meets a token once: one multiply, one add


# ---------------------------------------------------------------------------------------------
# the tables


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


# ---------------------------------------------------------------------------------------------
# notebooks (KV caches): arrays set aside up front, filled from the front, plus a length


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


# ---------------------------------------------------------------------------------------------
# one floor's pieces


def norm(x):
    """LayerNorm over features with no learned scale or shift. x: (width, tokens)."""
    xp = namespace(x)
    d = x - xp.mean(x, axis=0)  # (width, tokens)
    var = squares(d) / d.shape[0]  # (tokens,)
    d /= xp.sqrt(var + EPS) if var.dtype == d.dtype else xp.astype(xp.sqrt(var + EPS), d.dtype)
    return d


def squares(d):
    """Each column's sum of squares: (width, tokens) -> (tokens,). NumPy's einsum does it in one
    pass (its vecdot along the first axis is many times slower); other libraries sum d * d,
    float16's in float32 (its sum would overflow)."""
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
    """exp(s - max) over the last axis, in place: a softmax before its division by the sum.
    attend() divides after the weighted sum of values, where there are 64 numbers per query to
    divide instead of one per note."""
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
    """a @ b over the last two axes, for every user and head. With one query (t = 1) each is a
    pass over the notes, and the fastest way depends on the CPU: einsum's loop, a batched
    matmul (a small BLAS call per user and head), or "vec", NumPy's vector-matrix products (NumPy
    2.2 and later). With more queries they are real matrix products: BLAS's."""
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


# ---------------------------------------------------------------------------------------------
# how a trip does its work: by default the post's plain NumPy, one call for each product


PLAIN = types.SimpleNamespace(
    table=lambda w, x: w @ x,  # a table product: (rows, k) @ (k, tokens)
    share=lambda fn, n, size: fn(slice(0, n)),  # fn over items 0..n-1: here all at once
    threads=contextlib.nullcontext,  # what the library's own threads do meanwhile
    attention="einsum",  # how one query reads its notes (see product())
    cube="product",  # h*h*h; "power" is the post's bug, h**3, kept to measure it
    reads=attention,  # a floor's attention: attention() above, or a compiled kernel's
    norm=norm, gelu=gelu)  # the elementwise pieces: the ones above, or compiled kernels
#   A faster way for a machine (the suite's kernels: blocked products, work shared among
#   threads) is handed to trip() as `ways`, a function of the trip's token count that returns
#   the same eight names; every way gives the same answers within float32 rounding.


def plain(tokens):
    return PLAIN


# ---------------------------------------------------------------------------------------------
# one trip through the floors


def trip(cfg, floors, x, segments, ways=plain, watch=None, timer=None):
    """Push every token on the trip through every floor; returns the new hidden states.

    x: (width, tokens), the segments' tokens side by side. segments: [(notebook, t)], t new
    tokens for each of that notebook's users (user by user in x). The tables are shared by every
    token on the trip; each user's attention reads only that user's notes. Prefill is one
    segment holding a whole prompt; decode is one token for each waiting user; chunked prefill
    is a piece of a prompt riding with the typers' tokens. Each notebook grows by its t tokens.
    ways(tokens): how the work is done (see PLAIN). watch: a dict to fill with the seconds of
    each part of the trip and of the whole, "trip" (see timed()), or None. timer: what marks
    each part's two ends and says the seconds between (CLOCK, this CPU's clock, by default; a
    GPU's events, read once the trip is done, so that no part waits for the device).
    """
    validate(cfg, x, segments)
    w, timer = ways(x.shape[1]), timer or CLOCK
    marks = [] if watch is not None else None
    f = timed(w, marks, timer)
    start = timer.mark() if watch is not None else None
    with w.threads():
        for i, p in enumerate(floors):
            qkv = f.table(p["qkv"], f.norm(x))  # (3 width, tokens): q, k, v stacked
            q, k, v = (qkv[j * cfg.width:(j + 1) * cfg.width] for j in range(3))
            x = f.add(x, f.table(p["out"], f.attention(cfg, q, k, v, segments, i, w)))
            h = f.mlp(f.table(p["up"], f.norm(x)), w)  # (4 width, tokens)
            x = f.add(x, f.table(p["down"], h))
    if watch is not None:
        end = timer.mark()
        watch.clear()
        watch.update({p: 0.0 for p in PARTS})
        for part, a, b in marks:
            watch[part] += timer.between(a, b)
        watch["trip"] = timer.between(start, end)
        watch["other"] = watch["trip"] - sum(watch[p] for p in PARTS[:-1])
    for book, t in segments:
        book["len"] += t
    return x


PARTS = ("tables", "attention", "elementwise", "other")  # where a trip's time goes; "other" is
#                                                          what is left (splits, Python)
CLOCK = types.SimpleNamespace(mark=time.perf_counter, between=lambda start, end: end - start)
#   this CPU's clock as a timer: a mark is the time itself


def timed(ways, marks=None, timer=CLOCK):
    """A floor's pieces, each adding (its part, the marks of its two ends) to `marks` when that
    is a list."""
    pieces = {"table": ("tables", ways.table), "attention": ("attention", ways.reads),
              "norm": ("elementwise", ways.norm), "mlp": ("elementwise", mlp),
              "add": ("elementwise", add)}
    if marks is None:
        return types.SimpleNamespace(**{name: fn for name, (_, fn) in pieces.items()})

    def charged(part, fn):
        def run(*args):
            start = timer.mark()
            out = fn(*args)
            marks.append((part, start, timer.mark()))
            return out
        return run
    return types.SimpleNamespace(**{name: charged(part, fn)
                                    for name, (part, fn) in pieces.items()})


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


def riders(segments):
    """What the accounting below needs of a trip: [(notes before, new tokens)], one per user."""
    return [(book["len"], t) for book, t in segments for _ in range(readers(book))]


# ---------------------------------------------------------------------------------------------
# accounting: what a trip must fetch and compute. riders: [(notes before, new tokens)] per user.


def attention_numbers(cfg):
    """One floor's attention tables: the queries' (width, heads x head), the keys' and values'
    (width, kv_heads x head) each, and out (heads x head, width). Latent attention: the
    queries' (through their compression, where they have one), the notes' compression (width,
    latent + rope), its expansion to every head's key and value (latent, heads x (head - rope +
    v_head)) and out (heads x v_head, width)."""
    if not cfg.latent:
        return cfg.width * cfg.head * (2 * cfg.heads + 2 * cfg.kv_heads)
    queries = (cfg.width * cfg.q_latent + cfg.q_latent * cfg.heads * cfg.head if cfg.q_latent
               else cfg.width * cfg.heads * cfg.head)
    notes = (cfg.width * (cfg.latent + cfg.rope)
             + cfg.latent * cfg.heads * (cfg.head - cfg.rope + cfg.v_head))
    return queries + notes + cfg.heads * cfg.v_head * cfg.width


def ffn_numbers(cfg):
    """One feed-forward's tables (one expert's, in a mixture): up and down (width, ffn) each,
    and the gate's where there is one."""
    return (3 if cfg.gated else 2) * cfg.width * cfg.ffn


def routed(cfg):
    """The floors whose feed-forward is cfg.ffn wide (a mixture's: its experts, and its shared
    ones), all but the dense ones."""
    return cfg.layers - cfg.dense


def fixed_numbers(cfg):
    """A mixture's numbers every token meets whatever its experts, over all floors: the
    shared experts' and the dense floors' feed-forwards."""
    per = (3 if cfg.gated else 2) * cfg.width
    return routed(cfg) * per * cfg.shared + cfg.dense * per * cfg.dense_ffn


def table_numbers(cfg):
    """Numbers in the floors' tables, every expert's and the router's among them. GPT-2:
    (3 w*w + w*w + 4 w*w + 4 w*w) per floor."""
    return (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        max(cfg.experts, 1) * ffn_numbers(cfg) + cfg.width * cfg.experts))
    #       84,934,656 for GPT-2 small


def head_numbers(cfg):
    """The LM head's (vocab, width) and, untied, the token embedding's own (vocab, width)."""
    return cfg.vocab * cfg.width * (1 if cfg.tied else 2)


def number_bytes(dtype):
    """What a table number weighs at its precision, a weights-only one's share of its group's
    scale among it (int4-weights: 0.515625 bytes)."""
    scales = SCALE_BYTES / GROUP if dtype in ("int8-weights", "int4-weights") else 0
    return DTYPE_BYTES[dtype] + scales


def head_dtype(cfg):
    """The precision the LM head and the embedding are kept in: cfg.head_dtype, else the
    tables'."""
    return cfg.head_dtype or cfg.dtype


def table_bytes(cfg):
    """What the floors' tables weigh at their precision: 340 MB for GPT-2 small in float32."""
    return table_numbers(cfg) * number_bytes(cfg.dtype)


def held_bytes(cfg):
    """What one device holds of every table, the head and the embedding among them."""
    return (table_numbers(cfg) * number_bytes(cfg.dtype)
            + head_numbers(cfg) * number_bytes(head_dtype(cfg))) / cfg.devices


def note_bytes(cfg):
    """One token's notes: a key and a value per key/value head on every floor, at the notes'
    precision (72 KB for GPT-2 small in float32); under latent attention, its compressed
    vector and rotary key on every floor."""
    numbers = cfg.latent + cfg.rope if cfg.latent else 2 * cfg.kv_heads * cfg.head
    return cfg.layers * numbers * DTYPE_BYTES[cfg.note_dtype]


NOTE_BYTES = note_bytes(SIZES["small"])  # 73,728: the post's 72 KB a note


def notes_share(cfg):
    """The share of every note one device keeps: split by key/value heads, a head per device at
    least (with more devices than heads, a head's notes are kept on each that needs them);
    latent notes, which every head reads, whole on each device."""
    if cfg.latent:
        return 1
    return -(-cfg.kv_heads // cfg.devices) / cfg.kv_heads


def experts_read(cfg, tokens):
    """The feed-forwards a trip of `tokens` tokens reads per floor: one in a dense model; in a
    mixture, the experts at least one token is routed to, expected with routing at random:
    experts x (1 - (1 - active/experts)^tokens), every expert once enough tokens ride."""
    if not cfg.experts:
        return 1
    return cfg.experts * (1 - (1 - cfg.active / cfg.experts) ** tokens)


def tables_read(cfg, tokens):
    """Bytes of the floors' tables a trip of `tokens` tokens brings, on one device."""
    numbers = (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        cfg.width * cfg.experts + experts_read(cfg, tokens) * ffn_numbers(cfg)))
    return numbers * number_bytes(cfg.dtype) / cfg.devices


def table_flops(cfg, tokens):
    """Each table number meets each token once, one multiply and one add: every token meets the
    attention tables, the router's and its own experts' feed-forwards."""
    per_token = (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        cfg.width * cfg.experts + max(cfg.active, 1) * ffn_numbers(cfg)))
    return FLOPS_PER_NUMBER * per_token * tokens / cfg.devices


NORM_FLOPS, GELU_FLOPS, ADD_FLOPS = 5, 9, 1  # per number: a norm's mean, subtract, square,
#    sum, divide; GELU's three products for the cube and its scale, add, scale, tanh, add one,
#    halve, product; the residual add


def elementwise_flops(cfg, tokens):
    """Two norms and two adds over the width, the activation over each routed feed-forward
    (and, gated, its product with the gate), split over the devices."""
    widths = (routed(cfg) * (cfg.ffn * max(cfg.active, 1) + cfg.shared)
              + cfg.dense * cfg.dense_ffn)  # every floor's feed-forward a token crosses
    per_token = (cfg.layers * (2 * NORM_FLOPS + 2 * ADD_FLOPS) * cfg.width
                 + (GELU_FLOPS + cfg.gated) * widths)
    return per_token * tokens / cfg.devices


def attended_pairs(riders):
    """(new token, note) pairs that causality allows: token i of a rider reads n0 + i + 1."""
    return sum(t * n0 + t * (t + 1) // 2 for n0, t in riders)


@dataclasses.dataclass(frozen=True)
class Load:
    """All the accounting needs of what rides a trip: the new tokens, the notes already kept,
    the (token, note) pairs attention reads, and the users."""
    tokens: int
    notes: int
    pairs: int
    users: int


def load(riders):
    """The Load of riders ([(notes before, new tokens)], or a Load already)."""
    if isinstance(riders, Load):
        return riders
    return Load(sum(t for _, t in riders), sum(n0 for n0, _ in riders), attended_pairs(riders),
                len(riders))


def typing_load(notes, users):
    """`users` users typing one token each, with `notes` notes each, counted without a list of
    them: a prediction's turning point may lie at billions of users."""
    return Load(users, notes * users, (notes + 1) * users, users)


def attention_flops(cfg, riders):
    """Scores q.k and the weighted sum of v: 2 FLOPs per number of every query head, for every
    allowed pair (a shared key/value head saves bytes, not math). Latent attention, as engines
    run it on the compressed notes: each head's scores over latent + rope numbers, its sum
    over latent."""
    per_pair = (2 * cfg.heads * (2 * cfg.latent + cfg.rope) if cfg.latent
                else 4 * cfg.heads * cfg.head)
    return cfg.layers * per_pair * load(riders).pairs / cfg.devices


def head_costs(cfg, riders):
    """The LM head on a trip: its table once, and, untied, the embedding rows of the new tokens,
    at the head's precision (head_dtype); the words of each user's last new token (2 FLOPs a
    head number, counted at the trip's math rate). -> (bytes, FLOPs)"""
    ride = load(riders)
    rows = 0 if cfg.tied else ride.tokens * cfg.width
    return ((cfg.vocab * cfg.width + rows) * number_bytes(head_dtype(cfg)) / cfg.devices,
            FLOPS_PER_NUMBER * cfg.vocab * cfg.width * ride.users / cfg.devices)


def costs(cfg, riders):
    """What each part of a trip must fetch and compute, on one device: {part: (bytes, FLOPs)}.
    The forklift brings the tables once (those the trip's tokens are routed to) and every note
    already in the notebooks the trip reads; the activations, and the notes written on this
    trip, are read back while still close by. The head, where counted, is a part of its own.
    riders: a list, or their Load."""
    ride = load(riders)
    parts = {"tables": (tables_read(cfg, ride.tokens), table_flops(cfg, ride.tokens)),
             "attention": (note_bytes(cfg) * notes_share(cfg) * ride.notes,
                           attention_flops(cfg, ride)),
             "elementwise": (0, elementwise_flops(cfg, ride.tokens))}
    return {**parts, "head": head_costs(cfg, ride)} if cfg.vocab else parts


ALL_REDUCES = 2  # per floor, split over devices: after attention's out, after the feed-forward's


def link_bytes(cfg, riders):
    """What each device sends over the link on a trip split over cfg.devices (tensor parallel):
    a ring all-reduce of the new tokens' (width,) activations, at 16 bits (32 in float32),
    twice a floor, sends 2 (devices - 1) / devices of it. 0 on one device."""
    tokens, n = load(riders).tokens, cfg.devices
    size = tokens * cfg.width * activation_bytes(cfg)
    return cfg.layers * ALL_REDUCES * size * 2 * (n - 1) / n


def bytes_read(cfg, riders):
    """What the forklift must bring for one trip."""
    return sum(b for b, _ in costs(cfg, riders).values())


def trip_flops(cfg, riders):
    """All the math of one trip: the tables for every token, causal attention, the rest."""
    return sum(f for _, f in costs(cfg, riders).values())


def link_wait(cfg, latency_s):
    """What a trip split over devices waits on its all-reduces however small they are: two a
    floor, each `latency_s`, none hidden behind work (each one's sum is the next product's
    input). 0 on one device."""
    return cfg.layers * ALL_REDUCES * latency_s if cfg.devices > 1 else 0


def limit(cfg, riders, bytes_per_s, flops_per_s, link_per_s=math.inf, latency_s=0):
    """The fastest a trip can be on a machine: max(fetching / forklift, math / workbench), and,
    split over devices, sending / the link between them, each send hidden behind the work but
    for the all-reduces' latency, which every floor waits out (link_wait).

    -> (seconds, "forklift", "workbench" or "link"): whichever job is slowest bounds the trip.
    """
    jobs = {"forklift": bytes_read(cfg, riders) / bytes_per_s,
            "workbench": trip_flops(cfg, riders) / flops_per_s,
            "link": link_bytes(cfg, riders) / link_per_s if cfg.devices > 1 else 0}
    wait = link_wait(cfg, latency_s)
    slowest = max(jobs, key=jobs.get)
    bound = "link" if jobs["link"] + wait > jobs[slowest] else slowest
    return jobs[slowest] + wait, bound


def serial_limit(cfg, riders, bytes_per_s, flops_per_s, link_per_s=math.inf, latency_s=0):
    """The same trip with the link's sends after the device's own work, not beside it: max(
    fetching, math) + sending + the all-reduces' latency. limit() is the other bound, every
    send hidden behind the work; an engine that overlaps none of its all-reduces pays this
    one. On one device they agree."""
    work = max(bytes_read(cfg, riders) / bytes_per_s, trip_flops(cfg, riders) / flops_per_s)
    return work + (link_bytes(cfg, riders) / link_per_s if cfg.devices > 1 else 0) + link_wait(
        cfg, latency_s)


def part_limits(cfg, riders, bytes_per_s, flops_per_s):
    """The fastest each part of a trip can be: {part: seconds}, each part on its own."""
    return {name: max(b / bytes_per_s, f / flops_per_s)
            for name, (b, f) in costs(cfg, riders).items()}


def activation_bytes(cfg):
    """What an activation weighs, kept between products and sent over a link: float32 where
    the math is (the post's model), else 16 bits (8-bit activations are made from 16-bit ones
    for each product, and engines all-reduce at 16 bits)."""
    return BYTES if (cfg.act_dtype or cfg.dtype) == "float32" else 2


def trip_scratch_bytes(cfg, riders):
    """A generous bound on the temporary memory of one trip, at the activations' precision: the
    attention scores (and causal bias) of its longest rider, and every token's activations on
    one floor: queries, keys and values, the feed-forward's two (up and gelu, or gate and up) of
    each expert it is routed to, the residual (12 x width a token in GPT-2)."""
    tokens = sum(t for _, t in riders)
    scores = max(cfg.heads * (n0 + t) * t for n0, t in riders) * 2  # scores + causal bias
    heads = (cfg.heads * (cfg.head + cfg.v_head) + cfg.latent + cfg.rope if cfg.latent
             else (cfg.heads + 2 * cfg.kv_heads) * cfg.head)
    per_token = (heads + 2 * max(cfg.ffn * max(cfg.active, 1) + cfg.shared, cfg.dense_ffn)
                 + cfg.width)
    return (scores + per_token * tokens) * activation_bytes(cfg) / cfg.devices
