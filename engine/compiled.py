"""Compiled kernels for the trips of a few tokens, where NumPy's calls cost more than the work:
a table product that reads each table once, its rows shared among the threads (tiles that keep
their sums in vector registers from 2 tokens on); attention for one query per user, whole (the
new note written, the scores, softmax, the weighted sum), two (user, head) pairs a task; the
norm and GELU in one call each. Numba compiles them on first use (a few seconds, then kept in
its cache), and they are used only once each has given NumPy's answer on a tiny shape in the
process (available()); without Numba, where it fails in any way (said in one line), or where
they lose to NumPy's way on this machine (tuning.choose times both), the trips keep NumPy's.
Where they win some trips, NumPy's trips of more tokens take the norm, GELU and one-query
attention too wherever that was timed faster (blocks.ways), on the suite's own threads, and
the tiles for their table products of up to 256 tokens wherever those were timed faster. A
question (a user's several tokens on a trip: a reading, or a piece of one) is read in blocks of
queries in compiled tiles, the masked notes skipped, wherever that was timed faster (asked()).
Every kernel gives NumPy's answer within float32 rounding (the equivalence tests hold it).

While a trip runs these on Numba's threads, nothing calls the BLAS: its threads would spin on
the cores these threads need (running() holds the BLAS to one thread meanwhile)."""
import contextlib
import functools
import math
import types
import warnings

import numpy as np

import model
from engine.cache import (forget, from_cache, kernels, keep_cache, numba, set_threads,
                          threads_now, words)
from engine.laid import (LAID, LAID_ASKED, LAID_STREAMS, one_laid, operand, panels, side_by_side,
                         wide)
from harness.terminal import warn

EPS = np.float32(model.EPS)  # GPT-2's LayerNorm epsilon, as the kernel takes it
TRIED = (1, 2, 4, 8, 16, 32, 64)  # the token counts whose trips are timed both ways
#   (tuning.choose): Numba's threads wait for the next product spinning, where the suite's own
#   pool's wake from sleep (45 us each on a 2-core EPYC VM, six times a floor); a trip of more
#   tokens is NumPy's, whose BLAS products win there ...
FEW = 16  # ... and a NumPy trip of more tokens than this, where its count's compiled trip lost,
TILED = (32, 64)  # its norm, GELU and one-token attention in trips of up to these
#                   counts are timed both ways too (a typing trip of many users: blocks.ways()),
TABLES = (32, 64, 128, 256, 1024)  # and its table products in trips of up to these: the
#                                    tiles on the suite's own threads, or the BLAS (see
#                                    table_shared())
SHAPED = (8, 16, 64, 256)  # the token counts whose tiles' shape is timed (of shapes()): each
#                            speaks for the counts down to the last one's, the last for more
READS = (16, 64, 256, 1024)  # the questions' lengths whose attention is timed both ways: NumPy's,
#                              or in the compiled tiles (see asked())
STREAMS = (8, 1, LAID_STREAMS)  # the rows a one-token product reads at a time: 8 streams from
#   memory, 1, or the table laid out side by side, one stream a thread (side_by_side()); the
#   first kept where no other is timed faster (tuning.choose)
ASKING = (2, 0)  # kernels.ASKING, where Numba need not load: the key rows asked for ahead
LONG = (256, 1024)  # the trips of more tokens than TILED whose norm and GELU are timed both ways
BLOCK = 64  # a question's queries a block: their scores (64 x the notes) stay in the core's
#             cache between the products and the softmax


def available(part="all"):
    """Whether the trips may run the compiled kernels in this process (see unloaded())."""
    return not unloaded(part)


def unloaded(part="all"):
    """Why the compiled kernels (of part) cannot run in this process, or "" where they can
    (see why_not())."""
    return why_not(part)


@functools.lru_cache(maxsize=None)
def why_not(part):
    """Why the compiled kernels cannot run in this process, or "" where they can: Numba loads,
    and every kernel compiles (or comes from Numba's cache) and gives NumPy's answers on a tiny
    shape (part "all"; "tables": the table products' alone, all the tiles' workbench needs,
    a fifth of the first run's compiling). Any failure (Numba absent or refusing to start, its
    JIT switched off, no threading layer, a cache file it cannot read, a compile error,
    another answer) is said in one line on stderr, and the trips keep NumPy's way; a cache
    file that could not be read is removed (the kernels' own, no other), so that the next run
    compiles them afresh."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Numba's own warnings: the one line below says why
        try:
            why = loaded(part)
        except Exception as e:  # whatever Numba raises: it has many ways to fail
            why = words(e)
            if from_cache(e):
                forget()
                why += ", reading Numba's cache: their files there are removed, and the next " \
                       "run compiles them afresh"
    if why:
        warn(f"the compiled kernels could not load ({why}): the trips take NumPy's way")
    return why


def loaded(part="all"):
    """Why the kernels cannot run, or "" once Numba is imported with a cache folder it can
    write and every kernel (of part: see unloaded()) gave NumPy's answers (checked()). Raises
    what Numba raises."""
    keep_cache()
    if numba().config.DISABLE_JIT:
        return "NUMBA_DISABLE_JIT is set: they would run as plain Python, slower than NumPy"
    wrong = checked(part)
    return f"{', '.join(wrong)} gave other answers than NumPy's" if wrong else ""


def checked(part="all"):
    """Every kernel (or the table products' alone, part "tables") on tiny shapes against
    NumPy's way: -> the names of those whose answers differ beyond float32 rounding. The
    shapes reach each kernel's every branch: 13 rows (two tiles of six and a row over; eight
    rows at a time and five; six pairs and one), 9 inputs (one past a vector of 8), and 1, 3,
    5, 16 and 20 tokens (a vector, two to four tokens, half a tile, a tile that is its own
    panel, a whole tile and a half), and each tile shape's own counts."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((13, 9), dtype=np.float32)  # (rows, inputs)
    xs = {n: rng.standard_normal((9, n), dtype=np.float32) for n in (1, 3, 5, 16, 20)}
    h = rng.standard_normal((8, 3), dtype=np.float32) * np.float32(4)  # GELU's bend and tails
    pairs = {f"the table product of {n} {'token' if n == 1 else 'tokens'}": (table(w, x), w @ x)
             for n, x in xs.items()}
    for shape in kernels()["SHAPES"]:  # every shape's tiles: a last panel alone, one panel,
        lanes, _, vectors, _ = shape  # panels and a last, the rows of a tile or two and one
        #                               left over
        for n in sorted({5, lanes + 1, lanes * vectors, lanes * (vectors + 1) + 1}):
            x = rng.standard_normal((9, n), dtype=np.float32)
            pairs[f"the tiles {shape_words(shape)} at {n} tokens"] = (table(w, x, shape=shape),
                                                                       w @ x)
    pairs["the table product of 1 token, a row at a time"] = table(w, xs[1], 1), w @ xs[1]
    pairs["the table product of 1 token, laid side by side"] = table(w, xs[1], 0), w @ xs[1]
    for dotting in kernels()["DOTTED"]:
        pairs[f"the table product of 3 tokens, {dotting_words(dotting)}"] = (
            table(w, xs[3], dotting=dotting), w @ xs[3])
    pairs["the shared tiles"] = table_shared(w, xs[20], model.PLAIN.share), w @ xs[20]
    if part == "tables":
        return wrong(pairs)
    for n in (1, 3, 20):  # a column at a time, and along the rows (kernels.NORMED)
        pairs[f"the norm of {n} {'token' if n == 1 else 'tokens'}"] = norm(xs[n]), model.norm(xs[n])
    pairs["GELU"] = gelu(h.copy()), model.gelu(h.copy())
    pairs["GELU on Numba's threads"] = gelu(h.copy(), threads=True), model.gelu(h.copy())
    pairs["attention"] = attended(attention)
    pairs["the shared attention"] = attended(lambda *a: attention_shared(*a, model.PLAIN))
    for ahead in kernels()["ASKING"]:  # notes past a block of scores (kernels.scored())
        pairs[f"the attention of 300 notes, {asking_words(ahead)}"] = attended(
            functools.partial(attention, ways=types.SimpleNamespace(asking=ahead)), notes=300)
    pairs["a question's attention"] = asked_here()
    for panel in kernels()["PANELS"][1:]:
        pairs[f"a question's attention in panels of {panel}"] = asked_here(
            types.SimpleNamespace(share=model.PLAIN.share, panel=panel))
    pairs["a compiled trip's question"] = asked_here(types.SimpleNamespace(share=one))
    return wrong(pairs)


def wrong(pairs):
    """{name: (an answer, NumPy's)} -> the names whose answers differ beyond float32 rounding."""
    return [name for name, (got, numpys) in pairs.items()
            if not np.allclose(got, numpys, rtol=1e-4, atol=1e-5)]


def attended(read, users=3, notes=5):
    """read(cfg, q, k, v, segments, floor) and model.attention on the same tiny notebooks (a
    small GPT-2's, `users` users with `notes` notes each, one new token each): -> both answers,
    (width, users) each."""
    cfg, rng = model.TINY, np.random.default_rng(1)
    q, k, v = (rng.standard_normal((cfg.width, users), dtype=np.float32) for _ in range(3))
    books = [model.notebook(cfg, users, notes + 1) for _ in range(2)]
    for part in ("k", "v"):
        books[1][part][...] = books[0][part][...] = rng.standard_normal(
            books[0][part].shape, dtype=np.float32)
    for book in books:
        book["len"] = notes
    return (read(cfg, q, k, v, [(books[0], 1)], 0),
            model.attention(cfg, q, k, v, [(books[1], 1)], 0))


@contextlib.contextmanager
def running(n):
    """While a trip runs the kernels: n threads for them, the BLAS held to one (its own threads
    would spin on the cores these need)."""
    from engine.pool import blas
    set_threads(n)
    with blas().limit(limits=1, user_api="blas"):
        yield


def table(w, x, streams=STREAMS[0], shape=None, dotting=None):
    """w @ x for a trip of a few tokens: w (rows, k), x (k, tokens) -> (rows, tokens). One token:
    a matrix-vector product, `streams` rows at a time (one of STREAMS; 0: the table laid out,
    side_by_side()); two to four: rows by
    four tokens at a time as `dotting` says ((rows, ahead) of dottings(); the width's first
    where None), x padded with zeros to 4 tokens; more: tiles of `shape` (lanes,
    rows, vectors, ahead; the width's first where None: shapes()), x padded with zeros to a
    multiple of its lanes and laid out in panels (the tables' bytes, not the math, set a few
    tokens' time). A shape or dotting whose ahead is kernels.LAID reads the table laid out
    (side_by_side()). Where one way gives way to the next was set by measuring; on any CPU, the
    trips of a count whose compiled kernels lose keep NumPy's (tuning.choose times both)."""
    k, threads = kernels(), threads_now()
    rows, tokens = w.shape[0], x.shape[1]
    if tokens == 1 and streams == LAID_STREAMS:  # the table laid out: one stream a thread
        return one_laid(side_by_side(w), x, rows)
    if tokens == 1:
        out = np.empty(rows, np.float32)
        k["vector"](w, np.ascontiguousarray(x[:, 0]), out, threads, streams)
        return out[:, None]
    if tokens > 4:
        shape = known(shape)
        read, tall = operand(w, shape)
        out = np.empty((read.shape[0] * tall, wide(tokens, shape[0])), np.float32)
        k["tiles"](read, *panels(x, shape, threads), out, threads, shape)
        return first(out[:rows], tokens)
    dotting = known(dotting, "DOTTED")
    out = np.empty((rows, 4), np.float32)
    if dotting[1] >= LAID:  # the tokens as x has them: (k, 4), padded with zeros (4: x itself)
        x4 = x if tokens == 4 and x.flags.c_contiguous and x.dtype == np.float32 else \
            np.concatenate([x, np.zeros((x.shape[0], 4 - tokens))], axis=1, dtype=np.float32)
        k["table"](side_by_side(w), x4, out, threads, dotting)
        return first(out, tokens)
    xt = np.zeros((4, x.shape[0]), np.float32)  # (4, k): the tokens, padded with zeros
    xt[:tokens] = x.T
    k["table"](w, xt, out, threads, dotting)
    return first(out, tokens)


def table_shared(w, x, share, shape=None):
    """table() for NumPy's trips of more tokens (see TABLES), x laid out and the tiles' rows
    (a laid-out table's panels) shared among the suite's own threads by share, each running
    them alone (no Numba threads beside the BLAS)."""
    shape = known(shape)
    read, tall = operand(w, shape)
    out = np.empty((read.shape[0] * tall, wide(x.shape[1], shape[0])), np.float32)
    panelled = panels(x, shape, share=share)
    tiled = kernels()["rows_tiled"]
    share(lambda part: tiled(read, *panelled, out, part.start, part.stop, shape), read.shape[0],
          w.size)
    return first(out[:w.shape[0]], x.shape[1])


@functools.lru_cache(maxsize=None)
def shapes(laid=True):
    """The table products' tile shapes worth timing here, (lanes, rows, vectors, ahead), the
    first the default (kernels.SHAPES: as wide as the CPU's vector registers), those that read
    a laid-out table (ahead kernels.LAID) only where `laid`; none where the kernels cannot
    load."""
    return () if unloaded() else tuple(s for s in kernels()["SHAPES"]
                                       if laid or s[3] != LAID)


@functools.lru_cache(maxsize=None)
def dottings(laid=True):
    """The 2 to 4 tokens' products worth timing here, (rows, ahead), the first the default
    (kernels.DOTTED), those that read a laid-out table only where `laid`; none where the
    kernels cannot load."""
    return () if unloaded() else tuple(d for d in kernels()["DOTTED"]
                                       if laid or d[1] < LAID)


@functools.lru_cache(maxsize=None)
def question_panels():
    """A question's attention's panels worth timing here (kernels.PANELS), the first the
    default; none where the kernels cannot load."""
    return () if unloaded() else kernels()["PANELS"]


def known(shape, menu="SHAPES"):
    """shape (of the kernels' tiles, or of their 2 to 4 tokens' products: menu "DOTTED"), or
    the width's first where None; one the kernels were not compiled for (which would compute
    nothing) is an error."""
    made = kernels()[menu]
    if shape is None:
        return made[0]
    if tuple(shape) not in made:
        raise ValueError(f"no {menu.lower()} of {shape} here: {', '.join(map(str, made))}")
    return tuple(shape)


def asking_words(ahead):
    """A one-token attention's asking as the paths line names it (ASKING)."""
    return f"its keys asked for {ahead} rows ahead" if ahead else "asking for no keys ahead"


def streams_words(streams):
    """A one-token product as the paths line names it: "8 rows at a time", or "from the tables
    laid side by side" (LAID_STREAMS)."""
    return "from the tables laid side by side" if streams == LAID_STREAMS else \
        f"{streams} {'row' if streams == 1 else 'rows'} at a time"


def dotting_words(dotting):
    """A 2 to 4 tokens' product as the paths line names it: "4 rows at a time, asking ahead"."""
    rows, ahead = dotting
    return f"{rows} rows at a time" + {LAID: ", laid side by side", 1: ", asking ahead", 0: "",
                                       LAID_ASKED: ", laid side by side, asking 4 KiB on"}[ahead]


def shape_words(shape):
    """A tile shape as the paths line names it: "6 rows x 2 vectors of 16 lanes, asking ahead"."""
    lanes, rows, vectors, ahead = shape
    return f"{rows} {'row' if rows == 1 else 'rows'}" \
           + (" laid side by side" if ahead == LAID else "") + f" x {vectors} " \
           f"{'vector' if vectors == 1 else 'vectors'} of {lanes} lanes" \
           + (", asking ahead" if ahead else "")


def first(out, tokens):
    """out (rows, tokens padded) cut back to its first `tokens` columns, contiguous."""
    return out if out.shape[1] == tokens else np.ascontiguousarray(out[:, :tokens])


def norm(x):
    """model.norm(x), compiled: x (width, tokens) -> a new array."""
    out = np.empty(x.shape, np.float32)
    kernels()["norm"](x, EPS, out)
    return out


def gelu(h, cube="product", threads=False):
    """model.gelu(h) in place, compiled (the post's h**3, cube="power", NumPy's as it was), on
    this thread, or shared among Numba's threads (a compiled trip's: a 64-token trip's GELU
    took 0.56x the time on a 2-core EPYC's two)."""
    if cube != "product" or not h.flags.c_contiguous:
        return model.gelu(h, cube)
    if threads:
        kernels()["gelus"](h.reshape(-1), threads_now())
    else:
        kernels()["gelu"](h.reshape(-1))
    return h


def attention(cfg, q, k, v, segments, floor, ways=None):
    """model.attention for a compiled trip: every segment whose users bring one token each
    read by the compiled kernel on Numba's threads, and a question of up to READS[-1] notes by
    asked() (NumPy's small calls on one thread cost a 16-token read 3% more); a longer one as
    the model reads it. q, k, v: (width, tokens)."""
    if all(t == 1 for _, t in segments):
        return read(cfg, q, k, v, segments, floor, ways, None)
    return reading(cfg, q, k, v, segments, floor, ways or model.PLAIN,
                   functools.partial(read, share=None), READS)


def attention_shared(cfg, q, k, v, segments, floor, ways):
    """attention() for NumPy's trips: the kernel's tasks shared among the suite's own threads
    by ways.share, each running them on its own (no Numba threads to spin beside the BLAS)."""
    return read(cfg, q, k, v, segments, floor, ways, ways.share)


def read(cfg, q, k, v, segments, floor, ways, share):
    if any(t != 1 for _, t in segments):
        return model.attention(cfg, q, k, v, segments, floor, ways)
    out, col = np.empty_like(q), 0  # (width, tokens)
    ahead = getattr(ways, "asking", ASKING[0])
    if ahead not in kernels()["ASKING"]:  # (the kernel would skip every score)
        raise ValueError(f"no attention asking {ahead} rows ahead here: {kernels()['ASKING']}")
    for book, _ in segments:
        u, n = model.readers(book), book["len"] + 1
        notes = book["k"][floor], book["v"][floor]
        args = (q, k, v, col, scale(cfg.head), *notes, n, out,
                *room(u, cfg.heads, cfg.head, model.room(book)), ahead)
        if share is None:
            kernels()["attend"](*args, threads_now())
        else:
            tasks = kernels()["attend_tasks"]
            share(lambda part: tasks(*args, part.start, part.stop), (u * cfg.heads + 1) // 2,
                  2 * u * cfg.heads * cfg.head * n)
        col += u
    return out


def asked_here(ways=model.PLAIN, users=2, notes=3, tokens=13):
    """asked() (with the `ways` of a NumPy trip, or a compiled one's) and model.attention on
    the same tiny notebooks (a small GPT-2's, `users` users with `notes` notes each, each
    asking a question of `tokens` tokens, in two blocks of up to 8: the 8 x 8 blocks turned
    over and the numbers past them, a tile's rows of 8 notes or more and fewer): -> both
    answers, (width, users * tokens) each."""
    cfg, rng = model.TINY, np.random.default_rng(2)
    q, k, v = (rng.standard_normal((cfg.width, users * tokens), dtype=np.float32)
               for _ in range(3))
    books = [model.notebook(cfg, users, notes + tokens) for _ in range(2)]
    for book in books:
        book["len"] = notes
    return (reading(cfg, q, k, v, [(books[0], tokens)], 0, ways, model.attention, READS,
                    block=8),
            model.attention(cfg, q, k, v, [(books[1], tokens)], 0))


def reading(cfg, q, k, v, segments, floor, ways, typed, won, block=BLOCK):
    """model.attention, with each segment whose users ask a question (several tokens each)
    read by asked() where a question of as many notes as its last query reads (its notebook's,
    and its own) was timed faster so (won: the counts of READS that were, see
    blocks.Paths.reads_questions()): a piece of a question deep in its notebook reads as many
    notes a query as a long question's last queries do. The others as typed (model.attention,
    or attention_shared) reads them. q, k, v: (width, tokens), the segments' tokens side by
    side."""
    asks = [t > 1 and timed_for(READS, book["len"] + t) in won for book, t in segments]
    if not any(asks):
        return typed(cfg, q, k, v, segments, floor, ways)
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))  # (the kernel's tiles read rows)
    out, col = np.empty_like(q), 0  # (width, tokens)
    for (book, t), ask in zip(segments, asks):
        cols = slice(col, col + model.readers(book) * t)
        col = cols.stop
        if ask:
            asked(cfg, q, k, v, book, t, cols, floor, ways, out, block)
        else:
            out[:, cols] = typed(cfg, *(np.ascontiguousarray(a[:, cols]) for a in (q, k, v)),
                                 [(book, t)], floor, ways)
    return out


def timed_for(counts, tokens):
    """The count of `counts` (ascending) whose timing speaks for `tokens`: the smallest at or
    above it, or None past them all."""
    return next((n for n in counts if n >= tokens), None)


def one(fn, n, size):
    """A compiled trip's share: fn over all n items at once, on this thread (its kernels hand
    out their own work among Numba's threads)."""
    return fn(slice(0, n))


def asked(cfg, q, k, v, book, t, cols, floor, ways, out, block=BLOCK, panel=None):
    """One segment's questions, t tokens from each of its users (columns cols of q, k, v and
    out), read into out by the compiled kernel (kernels.question()): each (user, head) a task,
    shared among the threads as ways.share hands them out (a compiled trip's, one(), among
    Numba's threads: kernels.questions()), each task reading a block of
    queries at a time in tiles that keep their sums in registers, the masked notes skipped."""
    users = model.readers(book)
    keys, values = book["k"][floor], book["v"][floor]  # (users, heads, 64, room), (.., room, 64)
    args = (q, k, v, cols.start, t, scale(cfg.head), keys, values, book["len"], out)
    panel = panel or getattr(ways, "panel", None) or kernels()["PANELS"][0]
    if ways.share is one:  # a compiled trip: the tasks shared among Numba's threads
        kernels()["questions"](*args, users * cfg.heads, block, threads_now(),
                               panel)
        return
    run = kernels()["question"]
    ways.share(lambda part: run(*args, part.start, part.stop, block, panel),
               users * cfg.heads, 2 * users * cfg.heads * t * (book["len"] + t))
    #          (the numbers to touch: every score, written, then read as a weight)


@functools.lru_cache(maxsize=None)
def scale(head):
    """A query's scale, one over the root of its head's width, as the kernel takes it."""
    return np.float32(1 / math.sqrt(head))


@functools.lru_cache(maxsize=8)
def room(users, heads, head, notes):
    """The attention kernel's room to work in, made once for each notebook's shape (an array
    made in every call costs more than one user's notes on a floor): the queries and answers
    (2, users, heads, head), the scores (users, heads, notes, to whole vectors: the softmax's
    pass writes them) and their exponents' bits."""
    wide = -(-notes // kernels()["LANES"]) * kernels()["LANES"]
    return (np.empty((2, users, heads, head), np.float32),
            np.empty((users, heads, wide), np.float32), np.empty((users, heads, wide), np.int32))
