"""The kernels a trip runs where the fastest way depends on the CPU: the paths chosen where the
suite runs (tuning.choose, printed on the line after the machine line), the table products done
in the blocks chosen (or, for a few tokens, compiled.py's kernels), and both handed to the
model as its `ways` (model.PLAIN names them)."""
import dataclasses
import functools
import types
import typing

import numpy as np

import model
from engine import compiled
from engine.compiled import ASKING, STREAMS, timed_for
from engine.pool import blas_threads, share, sharing

ATTENTION = ("einsum", "matmul", "vec") if hasattr(np, "vecmat") else ("einsum", "matmul")
#           the ways one query may read its notes (model.product): "vec" needs NumPy 2.2


class Block(typing.NamedTuple):
    """How the table products of up to `tokens` tokens go, for tables of `inputs` inputs (the
    numbers each row meets a token with): `rows` rows of a thread's share at a time (None: all),
    which meet `depth` inputs at a time (None: all at once); neither: unblocked."""
    tokens: int
    inputs: int
    rows: typing.Optional[int] = None
    depth: typing.Optional[int] = None

    def block_words(self):
        return block_words(self.rows, self.depth)


def block_words(rows, depth):
    """A block as the paths line and the saved trials name it: "unblocked", "512" (rows),
    "512x768" (rows x inputs at a time), "all x768" (all of a thread's rows)."""
    if not (rows or depth):
        return "unblocked"
    return f"{rows or 'all '}" + (f"x{depth}" if depth else "")


@dataclasses.dataclass(frozen=True)
class Paths:
    """How a trip does the work whose fastest way depends on the CPU: attention's products for
    one query (one of ATTENTION), and the Blocks of the table products (see table() below),
    ascending in tokens; a token count past them all, or a table size not among them, goes
    unblocked; how GELU cubes: h*h*h ("product"), or the post's bug h**3 ("power"), kept to
    measure it; the token counts whose whole trips run the compiled kernels (compiled.py);
    those whose NumPy trips do their table products on the compiled tiles, and those whose
    NumPy trips take the compiled norm, GELU and one-token attention; the question lengths
    read in the compiled tiles, and the longer trips' counts that take the
    compiled norm and GELU. Every path gives the same answer within float32 rounding."""
    attention: str = "einsum"
    blocks: tuple = ()
    cube: str = "product"
    compiled: tuple = ()  # the token counts of compiled.TRIED whose trips ran faster compiled
    tiled: tuple = ()  # those of compiled.TABLES whose table products ran faster on the tiles
    pieces: tuple = ()  # those of compiled.TILED whose NumPy trips ran faster with the compiled
    #                     norm, GELU and one-token attention (none is taken where not timed)
    reading: tuple = ()  # the question lengths of compiled.READS whose attention ran faster in
    #                      the compiled tiles (compiled.asked())
    elementwise: tuple = ()  # the token counts of compiled.LONG whose trips' norm and GELU ran
    #                          faster compiled
    streams: int = STREAMS[0]  # the rows a compiled one-token product reads at a time
    panel: int = 0  # a question's attention's panel timed fastest, of
    #                 compiled.question_panels() (0: the width's first)
    dotting: tuple = ()  # the 2 to 4 tokens' products timed fastest, (rows, ahead), of
    #                      compiled.dottings() (none: the width's first)
    shapes: tuple = ()  # the tiles' shapes timed fastest: (tokens, lanes, rows, vectors, ahead)
    #                     for the counts of compiled.SHAPED, ascending (none: the width's first)
    asking: int = ASKING[0]  # the key rows a compiled one-token attention asks for ahead, of
    #                        compiled.ASKING

    def compiles(self, tokens):
        """Whether a trip of `tokens` tokens runs the compiled kernels: as the smallest count
        timed at or above it did."""
        return timed_for(compiled.TRIED, tokens) in self.compiled and compiled.available()

    def tiles(self, tokens):
        """Whether a NumPy trip of `tokens` tokens does its table products on the compiled
        tiles (see past_tried()); past the largest count timed, as it did (the same products a
        token: the collision's 1,032 as a 1,024-token question, which took the BLAS's, at 2x
        the limit on a CPU whose BLAS is the narrower)."""
        return past_tried(self.tiled, min(tokens, compiled.TABLES[-1]), compiled.TABLES)

    def takes_pieces(self, tokens):
        """Whether a NumPy trip of `tokens` tokens takes the compiled norm, GELU and one-token
        attention (see past_tried())."""
        return past_tried(self.pieces, tokens)

    def takes_elementwise(self, tokens):
        """Whether a NumPy trip of `tokens` tokens, more than any of compiled.TILED, takes the
        compiled norm and GELU: as the smallest count of compiled.LONG timed at or above it
        did, and past them all as the largest did (the same work for each number at any
        count: the 8 typers' 1,032 tokens as the 1,024 timed); none where the kernels do not
        load."""
        return (tokens > compiled.TILED[-1] and timed_for(
            compiled.LONG, min(tokens, compiled.LONG[-1])) in self.elementwise
                and compiled.available())

    def reads_questions(self):
        """The counts of compiled.READS whose questions are read in blocks with the compiled
        softmax (each speaks for the questions up to it), none where the kernels do not load."""
        return self.reading if self.reading and compiled.available() else ()

    def shape(self, tokens):
        """The tiles' shape (lanes, rows, vectors, ahead) for a trip of `tokens` tokens: as the
        smallest count timed at or above it took, and past them all as the largest did; None
        (the width's first) where none was timed."""
        if not self.shapes:
            return None
        timed = [s[0] for s in self.shapes]
        at = timed_for(timed, min(tokens, timed[-1]))
        return next(tuple(s[1:]) for s in self.shapes if s[0] == at)

    def lays_out(self):
        """Whether a tile shape, the 2 to 4 tokens' product or the one-token product taken reads
        the tables laid out (compiled.side_by_side())."""
        return any(s[-1] == compiled.LAID for s in self.shapes) or (
            self.dotting[-1:] in ((compiled.LAID,), (compiled.LAID_ASKED,))) \
            or self.streams == compiled.LAID_STREAMS

    def __post_init__(self):  # plain lists, as read back from saved results, become Blocks
        object.__setattr__(self, "blocks", tuple(Block(*b) for b in self.blocks))
        for counts in ("compiled", "tiled", "pieces", "reading", "elementwise"):
            object.__setattr__(self, counts, tuple(getattr(self, counts)))
        object.__setattr__(self, "shapes", tuple(tuple(s) for s in self.shapes))
        object.__setattr__(self, "dotting", tuple(self.dotting))

    def saved(self):
        """As a run hands its paths to its worker processes and saves them: JSON's lists."""
        return {f.name: ([list(v) for v in getattr(self, f.name)]
                         if f.name in ("blocks", "shapes") else
                         list(getattr(self, f.name)) if isinstance(getattr(self, f.name), tuple)
                         else getattr(self, f.name)) for f in dataclasses.fields(self)}

    def block(self, tokens, inputs):  # -> (rows, depth) for table(), or None: unblocked
        if tokens < 2:  # one token: a matrix-vector product, for the BLAS's own threads
            return None
        b = next((b for b in self.blocks if tokens <= b.tokens and b.inputs == inputs), None)
        return (b.rows, b.depth) if b and (b.rows or b.depth) else None

    def __str__(self):
        """e.g. "attention by vec; table blocks at 2, 4 tokens (rows, or rows x inputs at a
        time): tables of 64 inputs 8, unblocked; of 256 inputs 8x64, all x64" """
        if self.cube != "product":
            return f"{dataclasses.replace(self, cube='product')}; the cube as h**3"
        if self.asking != compiled.ASKING[0]:
            return (f"{dataclasses.replace(self, asking=compiled.ASKING[0])}; one-token "
                    f"attention {compiled.asking_words(self.asking)}")
        if self.panel:
            return (f"{dataclasses.replace(self, panel=0)}; a question's attention in panels of "
                    f"{self.panel} notes")
        if self.dotting:
            return (f"{dataclasses.replace(self, dotting=())}; 2 to 4 tokens' products "
                    f"{compiled.dotting_words(self.dotting)}")
        if self.shapes:
            low = dict(zip((s[0] for s in self.shapes), (5, *(s[0] + 1 for s in self.shapes))))
            return (f"{dataclasses.replace(self, shapes=())}; tiles of " + ", ".join(
                f"{compiled.shape_words(s[1:])} for {low[s[0]]} "
                + ("or more" if s is self.shapes[-1] else f"to {s[0]}") for s in self.shapes)
                + " tokens")
        if self.streams != compiled.STREAMS[0]:
            return (f"{dataclasses.replace(self, streams=compiled.STREAMS[0])}; one-token "
                    f"products {compiled.streams_words(self.streams)}")
        if self.elementwise:
            trips = spans(self.elementwise, compiled.LONG, True, compiled.TILED[-1] + 1)
            return (f"{dataclasses.replace(self, elementwise=())}; the compiled norm and GELU "
                    f"in trips of {trips} tokens")
        if self.reading:
            return (f"{dataclasses.replace(self, reading=())}; questions of "
                    f"{spans(self.reading, compiled.READS, first=2)} tokens read in the "
                    f"compiled tiles")
        if self.pieces:
            return (f"{dataclasses.replace(self, pieces=())}; the compiled norm, GELU and "
                    f"one-token attention in trips of {spans(self.pieces)} tokens")
        if self.tiled:
            return (f"{dataclasses.replace(self, tiled=())}; compiled tiles for the table "
                    f"products of trips of {spans(self.tiled, compiled.TABLES, True)} tokens")
        if self.compiled:
            counts = ", ".join(map(str, self.compiled))
            return (f"{dataclasses.replace(self, compiled=())}; compiled kernels for trips of "
                    f"{counts} {'token' if self.compiled == (1,) else 'tokens'}")
        if not any(b.rows or b.depth for b in self.blocks):
            return f"attention by {self.attention}; tables unblocked"
        counts = sorted({b.tokens for b in self.blocks})
        sizes = sorted({b.inputs for b in self.blocks})
        words = {(b.tokens, b.inputs): b.block_words() for b in self.blocks}
        return (f"attention by {self.attention}; table blocks at {', '.join(map(str, counts))} "
                "tokens (rows, or rows x inputs at a time): tables of " + "; of ".join(
                    f"{i} inputs " + ", ".join(words.get((n, i), "unblocked") for n in counts)
                    for i in sizes))


def past_tried(won, tokens, timed=compiled.TILED):
    """Whether a NumPy trip of `tokens` tokens, more than compiled.FEW, takes a compiled part:
    as the smallest count of `timed` (compiled.TILED, or compiled.TABLES) timed at or above it
    did (won: the counts where it was faster); past them all, or where the kernels do not
    load, it does not. (A trip of a count whose compiled trip won is compiled whole.)"""
    return (tokens > compiled.FEW and timed_for(timed, tokens) in won
            and compiled.available())


def spans(won, timed=compiled.TILED, beyond=False, first=compiled.FEW + 1):
    """The token counts that the counts of `timed` in `won` speak for, the first from `first`:
    "17 to 32" (and, where the largest speaks for every count past it too, "257 or more")."""
    low = dict(zip(timed, (first, *(n + 1 for n in timed))))
    return ", ".join(f"{low[n]} or more" if beyond and n == timed[-1] else f"{low[n]} to {n}"
                     for n in won)


CUBES = ("product", "power")  # Paths.cube's ways


def readable(saved):
    """Whether `saved` (Paths as a run hands it to its worker processes, in JSON's lists) makes
    Paths that a trip can run: only its fields, each of its kind."""
    def counts(v):
        return isinstance(v, list) and all(type(n) is int and n >= 0 for n in v)

    def block(b):
        return (isinstance(b, list) and 2 <= len(b) <= 4 and counts(b[:2])
                and all(n is None or type(n) is int and n >= 1 for n in b[2:]))
    if not (isinstance(saved, dict) and set(saved) <= {f.name for f in dataclasses.fields(Paths)}):
        return False
    blocks = saved.get("blocks", [])
    shapes, dotting = saved.get("shapes", []), saved.get("dotting", [])
    return (saved.get("attention", "einsum") in ATTENTION and saved.get("cube", "product") in CUBES
            and isinstance(dotting, list) and (not dotting or tuple(dotting)
                                               in compiled.dottings())
            and saved.get("panel", 0) in (0, *compiled.question_panels())
            and type(saved.get("asking", 0)) is int
            and saved.get("asking", compiled.ASKING[0]) in compiled.ASKING
            and isinstance(shapes, list) and all(
                isinstance(s, list) and len(s) == 5 and counts(s) and tuple(s[1:])
                in compiled.shapes() for s in shapes)
            and saved.get("streams", compiled.STREAMS[0]) in compiled.STREAMS
            and isinstance(blocks, list) and all(map(block, blocks))
            and all(counts(saved.get(n, [])) for n in ("compiled", "tiled", "pieces", "reading",
                                                       "elementwise")))


def table(w, x, pool=None, block=None):
    """w @ x, w's rows shared among the pool's threads, each thread's share in blocks of
    block = (rows, depth): `rows` rows of w at a time (None: all of the share), which meet x
    `depth` numbers at a time (None: all at once), so that a block stays in the core's cache
    while the tokens pass; block None: one call a thread. w: (rows, k), x: (k, tokens)."""
    if block is None and pool is None:
        return w @ x  # one call with nothing around it: a one-token trip makes four a floor
    out = np.empty((w.shape[0], x.shape[1]), dtype=np.float32)  # (rows, tokens)
    step, depth = block or (None, None)

    def part(mine):
        rows = step or mine.stop - mine.start
        for a in range(mine.start, mine.stop, max(rows, 1)):
            b = min(a + rows, mine.stop)
            product_into(w[a:b], x, out[a:b], depth)  # (b - a, tokens)
    share(pool, part, w.shape[0], w.size)
    return out


def product_into(w, x, out, depth=None):
    """out = w @ x (see table()), x met `depth` numbers at a time, the pieces summed."""
    depth = depth or w.shape[1]
    np.matmul(w[:, :depth], x[:depth], out=out)
    for c in range(depth, w.shape[1], depth):
        out += w[:, c:c + depth] @ x[c:c + depth]


def ways(paths=Paths(), pool=None):
    """How the model's trips do their work (see model.PLAIN): the table products in the blocks
    `paths` gives for the trip's token count and each table's size, the work shared among the
    pool's threads (none for one token, whose products BLAS's own threads hand out faster) with
    BLAS held to one thread meanwhile, and attention and the cube as `paths` says; or, for the
    token counts `paths` compiles, the compiled kernels on as many threads as the pool's, the
    BLAS held to one meanwhile (compiled.py); NumPy's trips of the counts `paths` says take
    the compiled norm and GELU, and read their users' one-token attention with the compiled
    kernel, its tasks shared among the pool's threads (each running alone: no Numba threads
    beside them), and the trips whose counts `paths` tiles do their table products on the
    compiled tiles, shared the same way; questions (several tokens a user) are read in blocks
    in the compiled tiles, and longer trips take the compiled norm and GELU, where `paths`
    says; a compiled one-token attention asks for its keys' rows as far ahead as it says."""
    def of(tokens):
        if paths.compiles(tokens):
            return types.SimpleNamespace(
                table=functools.partial(compiled.table, streams=paths.streams,
                                        shape=paths.shape(tokens),
                                        dotting=paths.dotting or None),
                share=compiled.one,
                threads=lambda: compiled.running(pool["threads"] if pool else 1),
                attention=paths.attention, cube=paths.cube, reads=compiled.attention,
                panel=paths.panel or None, asking=paths.asking,
                norm=compiled.norm, gelu=functools.partial(compiled.gelu, threads=True),
                mlp=model.mlp, add=model.add)
        mine, fast, asks = sharing(pool, tokens), paths.takes_pieces(tokens), \
            paths.reads_questions()
        wide = fast or paths.takes_elementwise(tokens)

        def shared(fn, n, size):
            return share(mine, fn, n, size)

        def products(w, x):
            if paths.tiles(tokens):
                return compiled.table_shared(w, x, shared, paths.shape(tokens))
            return table(w, x, mine, paths.block(tokens, w.shape[1]))
        return types.SimpleNamespace(
            table=products, share=shared, panel=paths.panel or None, asking=paths.asking,
            threads=lambda: blas_threads(mine),
            attention=paths.attention, cube=paths.cube,
            reads=functools.partial(
                compiled.reading, typed=compiled.attention_shared if fast else model.attention,
                won=asks) if asks else compiled.attention_shared if fast else model.attention,
            norm=compiled.norm if wide else model.norm,
            gelu=compiled.gelu if wide else model.gelu, mlp=model.mlp, add=model.add)
    return of
