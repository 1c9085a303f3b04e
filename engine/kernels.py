"""The compiled kernels themselves (see compiled.py, which imports this module only where
Numba is installed). Each parallel kernel hands out tasks to a serial one, whose loops compile
into vector registers (a loop inside a parallel loop does not); the table products of 5 tokens
or more, and a question's attention (question()), are tiles written in LLVM's own terms
(product()), as wide as the CPU's vector registers (LANES: 16 floats with AVX-512, 8 with AVX,
4 otherwise), in a shape timed at the start (SHAPES); its softmax a tile's rows side by side in
them too (tile_exp()), and its copies from and to the model's (width, tokens) layout 8 x 8
blocks turned over (flip()). Each is compiled on first use and kept in Numba's cache beside
this file, as Python keeps its bytecode."""
import functools
import math

import numba as nb
import numpy as np
from llvmlite import binding, ir
from numba.core import cgutils, types

TANH_P = tuple(np.float32(a) for a in (
    -2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
    1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03))  # Eigen's float tanh:
TANH_Q = tuple(np.float32(b) for b in (  # its numerator's and denominator's coefficients, the
    1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,  # highest power first
    4.89352518554385e-03))
TANH_EDGE = np.float32(7.90531110763549805)  # Eigen's: the rational function's range, past
#   which float32's tanh is within 3e-7 of +-1 (and +-1 itself past about 9.01, where 1 - tanh
#   falls below half a unit in float32's last place)
EXP = tuple(np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                    4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))
#   Cephes's expf: exp(r) = 1 + r + r^2 (c0 r^5 + ... + c5) on |r| <= ln(2) / 2
e0, e1, e2, e3, e4, e5 = EXP
LOG2E, EXP_C1, EXP_C2 = np.float32(1.44269504088896341), np.float32(0.693359375), \
    np.float32(-2.12194440e-4)  # 1 / ln 2, and ln 2 in two parts (the first exact in float32)
EXP_LOW = np.float32(-87.3)  # about where float32's normal numbers end: exp(-87.3) ~ 1.2e-38

serial = nb.njit(fastmath=True, boundscheck=False, cache=True, nogil=True,
                 error_model="numpy")  # (NumPy's division: no check for zero, which would keep
#                                         a loop out of vector registers)
parallel = nb.njit(fastmath=True, boundscheck=False, cache=True, nogil=True,
                   error_model="numpy", parallel=True)
ieee = nb.njit(fastmath={"contract"}, boundscheck=False, cache=True, nogil=True,
               error_model="numpy")  # for the kernels that compare numbers: fused multiply-adds,
#   but no fast-math beyond, which lets LLVM assume there is no NaN or infinity and drop the
#   very comparisons that keep them as NumPy has them (GELU's and exp's at the extremes)


@serial
def dot(a, b):
    """a . b, two rows of numbers (a dot along them, in vector registers)."""
    s = np.float32(0)
    for c in range(a.shape[0]):
        s += a[c] * b[c]
    return s


def widest(features):
    """The float32 numbers in the widest vector register of a CPU with these LLVM features
    ("+avx2,+avx512f,..."): 16 with AVX-512, 8 with AVX, 4 otherwise (SSE; ARM's NEON)."""
    on = {f[1:] for f in features.split(",") if f.startswith("+")}
    return 16 if "avx512f" in on else 8 if "avx" in on else 4


def target_features():
    """The CPU features Numba compiles for: NUMBA_CPU_FEATURES where set, else the host's as
    LLVM sees them (Numba's own choice, so that these kernels are as wide as its code)."""
    return nb.config.CPU_FEATURES or binding.get_host_cpu_features().flatten()


LANES = widest(target_features())  # numbers in a vector register the kernels below use
MENU = {16: ((16, 6, 2), (16, 6, 4), (16, 12, 2), (16, 12, 1), (8, 6, 2)),
        8: ((8, 6, 2), (8, 4, 2), (8, 3, 4), (8, 6, 1)),
        4: ((4, 6, 4), (4, 6, 2), (4, 4, 4), (4, 12, 1))}
#   the table products' tiles worth timing at each width, (lanes, rows, vectors): rows x
#   vectors sums in registers, with a vector for each of the x's vectors and one to spread a
#   row's number (32 registers with AVX-512 and NEON, 16 with AVX2 and SSE), and, on AVX-512,
#   AVX's 8 lanes (where the CPU splits 16 in two)
LAID = 2  # a tile's (or a 2 to 4 tokens' product's) `ahead` where it reads the table laid out
#           a vector's rows side by side (side_by_side()): a tile asks for the next panel as it
#           goes, a 2 to 4 tokens' product for nothing
LAID_ASKED = 3  # a 2 to 4 tokens' product's that reads it laid out and asks for the lines
#                 ASKED_ON on (side_dotted())
SIDE = {16: (16, 16, 1), 8: (8, 8, 1), 4: (4, 4, 2)}[LANES]  # its tile at each width: a
#   vector's rows (a panel of the laid-out table) by as many vectors as leave registers spare
SHAPES = tuple((*shape, ahead) for shape in MENU[LANES] for ahead in (1, 0)) + ((*SIDE, LAID),)
#   each asking memory for the next tile's rows or not (product()), or reading the table laid
#   out: the first the default, where none was timed
LINE = 64  # bytes in a cache line (x86's and most ARM cores')
FLIPPED = 8  # an 8 x 8 block turned over (flip()): in AVX's 8 lanes on any CPU
NORMED = 8  # the tokens whose norm takes their columns one at a time (norm())


class Emit:
    """What the kernels below say in LLVM's terms, within one kernel's code: pointers into 2-D
    float32 C arrays, vectors of `lanes` floats, multiply-adds, asking memory for a line ahead
    (LLVM's llvm.prefetch: the CPU's prefetch instruction), and a counted loop whose values are
    carried from step to step. Numba compiles a loop into a register for each of its sums, and a
    tile of sums only through memory: these kernels keep a tile of vectors in registers.
    Pointers are LLVM's opaque ones: each load, and each step along a pointer, says what it
    reads, and no pointer is cast (llvmlite's typed pointers are deprecated)."""

    def __init__(self, context, builder, lanes=LANES):
        self.context, self.b, self.lanes = context, builder, lanes
        self.i32, self.i64 = ir.IntType(32), ir.IntType(64)
        self.float, self.vec = ir.FloatType(), ir.VectorType(ir.FloatType(), lanes)

    def function(self, name, returns, *takes):
        return cgutils.get_or_insert_function(self.b.module, ir.FunctionType(returns, takes),
                                              name)

    def arrays(self, kinds, values):
        return [self.context.make_array(k)(self.context, self.b, v) for k, v in zip(kinds, values)]

    def plus(self, a, n):
        return self.b.add(a, ir.Constant(self.i64, n))

    def at(self, array, i, c):
        """A pointer to array[i, c]."""
        shape, strides = (cgutils.unpack_tuple(self.b, t, 2) for t in (array.shape, array.strides))
        return cgutils.get_item_pointer2(self.context, self.b, array.data, shape, strides, "C",
                                         [i, c])

    def load(self, array, i, c):
        """array[i, c:c + 8], one vector."""
        return self.b.load(self.at(array, i, c), typ=self.vec, align=4)

    def number(self, array, i, c):
        """array[i, c], one number."""
        return self.b.load(self.at(array, i, c), typ=self.float, align=4)

    def put(self, value, array, i, c):
        """array[i, c:c + 8] = value, one vector store (a masked store with every lane on, which
        takes the pointer as it is: a plain store would need it cast to a vector's)."""
        every = ir.Constant(ir.VectorType(ir.IntType(1), self.lanes), [1] * self.lanes)
        self.b.call(self.function(f"llvm.masked.store.v{self.lanes}f32.p0", ir.VoidType(), self.vec,
                                  ir.PointerType(), self.i32, every.type),
                    [value, self.at(array, i, c), self.i32(4), every])

    def spread(self, number):
        """number in every lane of a vector."""
        undef = ir.Constant(self.vec, ir.Undefined)
        return self.b.shuffle_vector(self.b.insert_element(undef, number, self.i32(0)), undef,
                                     ir.Constant(ir.VectorType(self.i32, self.lanes),
                                                 [0] * self.lanes))

    def any(self, flags):
        """Whether any lane of a vector of flags is set."""
        return self.b.call(self.function(f"llvm.vector.reduce.or.v{self.lanes}i1", ir.IntType(1),
                                         flags.type), [flags])

    def fma(self, a, b, c):  # a * b + c, lane by lane (fused where the CPU can)
        return self.b.call(self.function(f"llvm.fmuladd.v{self.lanes}f32", *[self.vec] * 4),
                           [a, b, c])

    def ask(self, array, i, numbers, near=True, once=False):
        """Ask memory for the line `numbers` numbers on from array[i, 0] (a read, kept in every
        cache, or only from the core's second cache out where not `near`, or, where read `once`,
        kept out of the caches the cores share once read; it never faults, wherever that is)."""
        at = self.b.gep(self.at(array, i, self.i64(0)), [numbers], source_etype=self.float)
        self.b.call(self.function("llvm.prefetch.p0", ir.VoidType(), ir.PointerType(),
                                  *[self.i32] * 3),
                    [at, self.i32(0), self.i32(0 if once else 3 if near else 2), self.i32(1)])

    def loop(self, start, stop, step, values, body):
        """for c in range(start, stop, step): values = body(c, values); -> the last values."""
        b, entry = self.b, self.b.block
        head, work, done = (b.append_basic_block(f"loop.{n}") for n in ("head", "work", "done"))
        b.branch(head)
        b.position_at_end(head)
        c, carried = b.phi(self.i64), [b.phi(v.type) for v in values]
        for phi, value in zip([c, *carried], [start, *values]):
            phi.add_incoming(value, entry)
        b.cbranch(b.icmp_signed("<", c, stop), work, done)
        b.position_at_end(work)
        after = body(c, carried)
        for phi, value in zip([c, *carried], [self.plus(c, step), *after]):
            phi.add_incoming(value, b.block)
        b.branch(head)
        b.position_at_end(done)
        return carried

    def loop_twice(self, start, stop, values, body):
        """loop() by 1, two steps a turn (and the last alone, where their count is odd): what
        LLVM does of itself to a small loop, and not to one of 16 multiply-adds a step."""
        pairs = self.b.sub(stop, self.b.urem(self.b.sub(stop, start), self.i64(2)))
        values = self.loop(start, pairs, 2, values,
                           lambda c, v: body(self.plus(c, 1), body(c, v)))
        return self.loop(pairs, stop, 1, values, body)


def kernel(codegen, counts, lanes=LANES):
    """A Numba intrinsic, kernel(a, b, c, (n, ...)): codegen(emit, (a, b, c), (n, ...)) run
    where it is called, on three 2-D float32 C arrays and a tuple of `counts` integers; other
    arguments are a typing error."""
    def typing(typingctx, a, b, c, where):
        if all(isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 2
               and t.layout == "C" for t in (a, b, c)) and isinstance(where, types.UniTuple) \
                and where.count == counts and isinstance(where.dtype, types.Integer):
            def emit(context, builder, signature, values):
                e = Emit(context, builder, lanes)
                numbers = [context.cast(builder, n, where.dtype, types.int64)
                           for n in cgutils.unpack_tuple(builder, values[3], counts)]
                codegen(e, e.arrays(signature.args[:3], values[:3]), numbers)
                return context.get_dummy_value()
            return types.none(a, b, c, where), emit
    return nb.extending.intrinsic(typing)


def row_pass(codegen, reads_top=False, returns=True):
    """A Numba intrinsic f(s, i, n) (or f(s, i, n, top), where reads_top) -> float32 (or None,
    where not `returns`), on a 2-D float32 C array s, row i, its first n numbers (a multiple
    of LANES): codegen(emit, s, i, n) (or (emit, s, i, n, top)) run where it is called, returning
    a float (or nothing)."""
    def typing(typingctx, s, i, n, *top):
        if isinstance(s, types.Array) and s.dtype == types.float32 and s.ndim == 2 \
                and s.layout == "C" and all(isinstance(c, types.Integer) for c in (i, n)) \
                and len(top) == reads_top and all(x == types.float32 for x in top):
            def emit(context, builder, signature, values):
                e = Emit(context, builder)
                counts = [context.cast(builder, v, k, types.int64)
                          for v, k in zip(values[1:3], signature.args[1:3])]
                out = codegen(e, e.arrays(signature.args[:1], values[:1])[0], *counts,
                              *values[3:])
                return out if returns else context.get_dummy_value()
            return (types.float32 if returns else types.none)(s, i, n, *top), emit
    if reads_top:
        return nb.extending.intrinsic(lambda ctx, s, i, n, top: typing(ctx, s, i, n, top))
    return nb.extending.intrinsic(lambda ctx, s, i, n: typing(ctx, s, i, n))


def across(e, lanes, take):
    """One number from a vector's lanes: take(low half, high half), lane by lane, until one is
    left (a tree: the lanes one by one would be as many waits, 15 of them in 16 lanes, and the
    2 to 4 tokens' products end in 8 of those a pair of rows)."""
    width = e.lanes
    while width > 1:
        width //= 2
        low, high = (e.b.shuffle_vector(lanes, lanes, ir.Constant(ir.VectorType(e.i32, width),
                                                                  list(range(a, a + width))))
                     for a in (0, width))
        lanes = take(low, high)
    return e.b.extract_element(lanes, e.i32(0))


def larger(e):
    """take() for across(): the larger of two numbers (the first where either is NaN)."""
    return lambda a, b: e.b.select(e.b.fcmp_ordered(">", b, a), b, a)


def lanes_top(e, s, i, n):
    """The largest of s[i, :n], a vector at a time, or NaN where any is NaN (a lane's max
    alone would pass over it)."""
    first = e.load(s, i, ir.Constant(e.i64, 0))

    def step(c, carried):
        top, odd = carried
        v = e.load(s, i, c)
        return [e.b.select(e.b.fcmp_ordered(">", v, top), v, top),
                e.b.or_(odd, e.b.fcmp_unordered("uno", v, v))]
    top, odd = e.loop(ir.Constant(e.i64, e.lanes), n, e.lanes,
                      [first, e.b.fcmp_unordered("uno", first, first)], step)
    best = across(e, top, larger(e))
    odd = e.any(odd)
    return e.b.select(odd, ir.Constant(e.float, float("nan")), best)


def exp_of(e, x):
    """exp(x), a vector of it: exp_shifted()'s arithmetic, 1.2e-38 at the least (see
    lanes_exp())."""
    def const(number):
        return e.spread(ir.Constant(e.float, float(np.float32(number))))
    vi = ir.VectorType(e.i32, e.lanes)
    floor = e.function(f"llvm.floor.v{e.lanes}f32", e.vec, e.vec)
    low_edge = const(EXP_LOW)
    y = e.b.select(e.b.fcmp_ordered("<", x, low_edge), low_edge, x)  # (a max)
    t = e.b.call(floor, [e.fma(y, const(LOG2E), const(0.5))])
    minus = e.b.fneg(t)
    r = e.fma(minus, const(EXP_C2), e.fma(minus, const(EXP_C1), y))
    p = const(e0)
    for coefficient in (e1, e2, e3, e4, e5):
        p = e.fma(p, r, const(coefficient))
    near = e.b.fadd(e.fma(e.b.fmul(p, r), r, r), const(1))
    bits = e.b.shl(e.b.add(e.b.fptosi(t, vi), ir.Constant(vi, [127] * e.lanes)),
                   ir.Constant(vi, [23] * e.lanes))
    return e.b.fmul(near, e.b.bitcast(bits, e.vec))


def lanes_exp(e, s, i, n, top):
    """s[i, :n] = exp(s[i, :n] - top), exp_shifted()'s arithmetic a vector at a time, for a
    top that is a number (neither NaN nor infinite: no difference is NaN); below -87.3, where
    float32's normal numbers end, exp(-87.3), 1.2e-38, where exp_shifted() gives 0 (and NumPy
    a number under 1.2e-38): a softmax's weight that small is nothing beside its largest, 1,
    and the select it would take costs a fifth of the pass."""
    top = e.spread(top)

    def exp(c):
        return exp_of(e, e.b.fsub(e.load(s, i, c), top))  # never NaN: top is a number

    def steps(ways):  # `ways` vectors a step, side by side (each a long chain of waits)
        def step(c, carried):
            values = [exp(e.plus(c, e.lanes * w) if w else c) for w in range(ways)]
            for w, value in enumerate(values):
                e.put(value, s, i, e.plus(c, e.lanes * w) if w else c)
            return []
        return step
    twice = e.b.and_(n, ir.Constant(e.i64, -2 * e.lanes))
    e.loop(ir.Constant(e.i64, 0), twice, 2 * e.lanes, [], steps(2))
    e.loop(twice, n, e.lanes, [], steps(1))


def lanes_sum(e, s, i, n):
    """The sum of s[i, :n], in two vectors (a pass of its own: a sum carried in
    lanes_exp()'s pass, among its many constants, leaves the registers and waits on memory at
    every step)."""
    twice = e.b.and_(n, ir.Constant(e.i64, -2 * e.lanes))
    zero = ir.Constant(e.vec, None)
    a, b = e.loop(ir.Constant(e.i64, 0), twice, 2 * e.lanes, [zero, zero], lambda c, sums: [
        e.b.fadd(sums[0], e.load(s, i, c)), e.b.fadd(sums[1], e.load(s, i, e.plus(c, e.lanes)))])
    total = e.loop(twice, n, e.lanes, [e.b.fadd(a, b)],
                   lambda c, sums: [e.b.fadd(sums[0], e.load(s, i, c))])[0]
    return across(e, total, e.b.fadd)


ROW_TOP, ROW_EXP, ROW_SUM = (row_pass(lanes_top), row_pass(lanes_exp, True, False),
                             row_pass(lanes_sum))


def tile_tops(e, arrays, counts):
    """tops[0, r + i] = the largest of s[r + i, :n] for the ROWS rows of a tile (n a multiple
    of LANES, at least LANES), or NaN where any of them is NaN: the rows side by side, a vector of
    each a step."""
    (s, tops, _), (r, n) = arrays, counts
    firsts = [e.load(s, e.plus(r, i), ir.Constant(e.i64, 0)) for i in range(ROWS)]

    def step(c, carried):
        vs = [e.load(s, e.plus(r, i), c) for i in range(ROWS)]
        return ([e.b.select(e.b.fcmp_ordered(">", v, top), v, top)
                 for v, top in zip(vs, carried[:ROWS])]
                + [e.b.or_(odd, e.b.fcmp_unordered("uno", v, v))
                   for v, odd in zip(vs, carried[ROWS:])])
    carried = e.loop(ir.Constant(e.i64, e.lanes), n, e.lanes,
                     firsts + [e.b.fcmp_unordered("uno", f, f) for f in firsts], step)
    for i in range(ROWS):
        best = across(e, carried[i], larger(e))
        odd = e.any(carried[ROWS + i])
        e.b.store(e.b.select(odd, ir.Constant(e.float, float("nan")), best),
                  e.at(tops, ir.Constant(e.i64, 0), e.plus(r, i)))


def tile_exp(e, arrays, counts):
    """s[r + i, :n] = exp(s[r + i, :n] - tops[0, r + i]) for the ROWS rows of a tile, over
    whole vectors (to n's next multiple of LANES): the rows side by side, their chains of waits
    beside each other (a row alone waits on its own); each top a number (no NaN, no inf)."""
    (s, tops, _), (r, n) = arrays, counts
    shift = [e.spread(e.number(tops, ir.Constant(e.i64, 0), e.plus(r, i))) for i in range(ROWS)]

    def step(c, carried):
        values = [exp_of(e, e.b.fsub(e.load(s, e.plus(r, i), c), shift[i]))
                  for i in range(ROWS)]
        for i, value in enumerate(values):
            e.put(value, s, e.plus(r, i), c)
        return []
    e.loop(ir.Constant(e.i64, 0), n, e.lanes, [], step)


def tile_sums(e, arrays, counts):
    """sums[0, r + i] = the sum of s[r + i, :n] for the ROWS rows of a tile (n a multiple of
    LANES): the rows side by side, a vector of sums each."""
    (s, sums, _), (r, n) = arrays, counts
    zero = ir.Constant(e.vec, None)
    carried = e.loop(ir.Constant(e.i64, 0), n, e.lanes, [zero] * ROWS, lambda c, carried: [
        e.b.fadd(carried[i], e.load(s, e.plus(r, i), c)) for i in range(ROWS)])
    for i in range(ROWS):
        e.b.store(across(e, carried[i], e.b.fadd),
                  e.at(sums, ir.Constant(e.i64, 0), e.plus(r, i)))


def product(e, arrays, counts, rows, vectors, ahead):
    """out[r:r + rows, j:j + lanes x vectors] = w[r:r + rows, :k] @ x[p:p + k, :lanes x
    vectors], in e's lanes: the rows x vectors sums stay in registers along the whole stretch,
    each of w's numbers spread over the lanes meets a vector of x's in each multiply-add, and
    are stored a vector at a time. For a table product, x a panel of tokens (p: its first
    row); for a question's attention, queries and a panel of keys, or weights and a panel of
    values. With `ahead`, each step also asks for the next tile's rows (w's `rows` rows from
    r + rows, one stretch of memory), `rows` numbers of them a step, into the core's second
    cache: they arrive while this tile works, spread over its steps (asking for the lines just
    ahead of this tile's own rows left each tile's first lines to wait on memory: 5% of 16
    tokens' tables). With ahead LAID, w is a table laid out by side_by_side() and r a panel of
    it: the tile's rows are out's r x rows .., and each step's numbers lie side by side, one
    stretch met in order (a table's own rows are a stretch each, `rows` pointers stepping on
    together: 16 tokens' tiles took 1.2x the time from the cache), the next panel asked for as
    far on."""
    (w, x, out), (r, j, p, k) = arrays, counts
    laid = ahead == LAID

    def step(c, sums):
        if laid:  # panel r's numbers for input c, side by side; the next panel's as far on,
            at = e.b.mul(c, ir.Constant(e.i64, rows))  # into every cache (into the second
            e.ask(w, e.plus(r, 1), at)  # alone: 1.03 to 1.05x the time on a Zen 5 EPYC)
            numbers = [e.number(w, r, e.plus(at, i)) for i in range(rows)]
        else:
            if ahead:  # rows r + rows .., `rows` numbers a step: all of them over a row's steps
                e.ask(w, e.plus(r, rows), e.b.mul(c, ir.Constant(e.i64, rows)), near=False)
            numbers = [e.number(w, e.plus(r, i), c) for i in range(rows)]
        xs = [e.load(x, e.b.add(p, c), ir.Constant(e.i64, e.lanes * v)) for v in range(vectors)]
        spread = [e.spread(n) for n in numbers]
        return [e.fma(spread[i], xs[v], sums[i * vectors + v])
                for i in range(rows) for v in range(vectors)]
    zero = ir.Constant(e.vec, None)
    sums = (e.loop_twice if laid else functools.partial(e.loop, step=1))(
        ir.Constant(e.i64, 0), k, values=[zero] * (rows * vectors), body=step)
    top = e.b.mul(r, ir.Constant(e.i64, rows)) if laid else r  # out's row of the first sums
    for n, value in enumerate(sums):
        e.put(value, out, e.plus(top, n // vectors), e.plus(j, e.lanes * (n % vectors)))


def tile(rows, vectors, ahead=False, lanes=LANES):
    """A Numba intrinsic tile(w, x, out, (r, j, p, k)): product()'s, of one shape."""
    return kernel(lambda e, arrays, counts: product(e, arrays, counts, rows, vectors, ahead),
                  counts=4, lanes=lanes)


@serial
def which(lanes, rows, vectors, ahead):
    """The number TILED knows a tile by (rows x vectors of `lanes` lanes, asking `ahead` or not,
    or reading a laid-out table: LAID)."""
    return ((lanes * 64 + rows) * 8 + vectors) * 3 + ahead


def tiles_of(shapes):
    """A Numba intrinsic TILED(w, x, out, (r, j, p, k, which(lanes, rows, vectors, ahead))):
    product()'s for the tile `which` names, one of every tile the products in these shapes
    (lanes, rows, vectors, ahead) take: a shape's rows by as many vectors or fewer (a last
    panel), asking ahead or not, and one row of them (the rows left over). One switch a
    tile, rather than a kernel compiled for each shape: the shape is chosen by timing them
    (tuning.choose), and one compiled driver takes any of them. A laid-out table's tiles
    (ahead LAID) are its panels: none is left over."""
    return switch({which.py_func(lanes, r, v, a): lambda e, arrays, where, lanes=lanes, r=r, v=v,
                   a=a: product(Emit(e.context, e.b, lanes), arrays, where, r, v, a)
                   for lanes, rows, vectors, ahead in shapes for v in range(1, vectors + 1)
                   for r, a in (((rows, LAID),) if ahead == LAID
                                else ((rows, 0), (rows, 1), (1, 0)))}, counts=5)


def switch(cases, counts):
    """A Numba intrinsic f(a, b, c, (n, ..., which)) on three 2-D float32 C arrays and `counts`
    integers: cases[which](emit, (a, b, c), (n, ...)) run where it is called; another `which`
    does nothing."""
    def codegen(e, arrays, numbers):
        *where, chosen = numbers
        done = e.b.append_basic_block("switch.done")
        branches = e.b.switch(chosen, done)
        for number, case in cases.items():
            block = e.b.append_basic_block(f"case.{number}")
            branches.add_case(ir.Constant(e.i64, number), block)
            e.b.position_at_end(block)
            case(e, arrays, where)
            e.b.branch(done)
        e.b.position_at_end(done)
    return kernel(codegen, counts)


def dotted(e, arrays, counts, rows, tokens, ahead):
    """out[r + i, t] = w[r + i, :k8] . xt[t, :k8] for i < rows, t < tokens (w (rows, k), xt
    (tokens, k), out (rows, tokens), k8 a multiple of the lanes): rows x tokens sums, each a
    vector along k in a register, added across at the end. With `ahead`, each step also asks
    for the next rows' lines at the same place (where a vector is a line, every row's; else
    one of them in turn): they arrive while these are met."""
    (w, xt, out), (r, k8) = arrays, counts
    k = e.b.extract_value(w.shape, 1)

    def step(c, sums):
        if ahead and e.lanes * 4 >= LINE:  # a line of each row a step: every next row's
            for i in range(rows):
                e.ask(w, r, e.b.add(e.b.mul(ir.Constant(e.i64, rows + i), k), c))
        elif ahead:  # row r + rows + (c / lanes) % rows, at c
            row = e.b.urem(e.b.udiv(c, ir.Constant(e.i64, e.lanes)), ir.Constant(e.i64, rows))
            e.ask(w, r, e.b.add(e.b.mul(e.plus(row, rows), k), c))
        ws = [e.load(w, e.plus(r, i), c) for i in range(rows)]
        xs = [e.load(xt, ir.Constant(e.i64, t), c) for t in range(tokens)]
        return [e.fma(ws[i], xs[t], sums[i * tokens + t])
                for i in range(rows) for t in range(tokens)]
    zero = ir.Constant(e.vec, None)
    sums = e.loop(ir.Constant(e.i64, 0), k8, e.lanes, [zero] * (rows * tokens), step)
    for n, value in enumerate(sums):
        e.b.store(across(e, value, e.b.fadd),
                  e.at(out, e.plus(r, n // tokens), ir.Constant(e.i64, n % tokens)))


def dots(rows, tokens, ahead):
    """A Numba intrinsic dots(w, xt, out, (r, k8)): dotted()'s, of one shape."""
    return kernel(lambda e, arrays, counts: dotted(e, arrays, counts, rows, tokens, ahead),
                  counts=2)


def dots_of(menu):
    """A Numba intrinsic DOTS(w, xt, out, (r, k8, 2 rows + ahead)): dotted()'s for 4 tokens and
    each (rows, ahead) of the menu, as tiles_of() takes its shapes."""
    return switch({2 * rows + ahead: lambda e, arrays, where, rows=rows, ahead=ahead: dotted(
        e, arrays, where, rows, 4, ahead) for rows, ahead in menu}, counts=3)


def side_dotted(e, arrays, counts, tokens, split, ahead=0):
    """out[t, :lanes] = panel g of w (a table laid out a vector's rows side by side:
    side_by_side()) @ x[:k, t] for t < tokens (x (k, tokens), out (tokens or more, lanes)): a
    vector of the panel's rows a step, the tokens' numbers for its input (side by side in x:
    as rows of the tokens' inputs, 1.1x the time) each spread over the lanes; the steps
    `split` at a time, each into its own sums (a multiply-add waits on the last into the same
    sums), added at the end; where `ahead`, each step asks for the line that many numbers on
    into the core's second cache (else the CPU's own prefetcher alone follows the stretch).
    From one stretch of memory met in order, 4 tokens' products take about the time of
    one token's by rows (4 rows at a time by 4 tokens, dotted(), took 1.2x it on a Zen 5 EPYC),
    and one token's read the memory as fast as it is read at all."""
    (w, x, out), (g, k4) = arrays, counts
    lanes = ir.Constant(e.i64, e.lanes)

    def step(c, sums):
        sums = list(sums)
        for u in range(split):
            cu = e.plus(c, u)
            at = e.b.mul(cu, lanes)
            if ahead:
                e.ask(w, g, e.plus(at, ahead), near=False)
            rows = e.load(w, g, at)
            for t in range(tokens):
                token = e.spread(e.number(x, cu, ir.Constant(e.i64, t)))
                sums[tokens * u + t] = e.fma(rows, token, sums[tokens * u + t])
        return sums
    zero = ir.Constant(e.vec, None)
    sums = e.loop(ir.Constant(e.i64, 0), k4, split, [zero] * (tokens * split), step)
    for t in range(tokens):
        total = sums[t]
        for u in range(1, split):
            total = e.b.fadd(total, sums[tokens * u + t])
        e.put(total, out, ir.Constant(e.i64, t), ir.Constant(e.i64, 0))


def weighed(e, arrays, counts, vectors, ahead=0):
    """out[o, :d] = s[i, :n] @ values[:n, :d], d = lanes x vectors: a note at a time, its values
    in the order they lie in memory, the d sums in registers from the first note to the last
    (kept in memory, every note's sums waited on the last's store: 2x the time in the cache on
    a Zen 5 EPYC, 1.2x from memory). Where `ahead`, each note asks for the one that many on, read
    once (see scored())."""
    (s, values, out), (i, n, o) = arrays, counts
    zero = ir.Constant(e.vec, None)
    on = e.b.mul(e.b.extract_value(values.shape, 1), e.i64(ahead))  # `ahead` notes on
    lines = [v for v in range(vectors) if v * e.lanes % (LINE // 4) == 0] if ahead else []

    def step(j, sums):
        for v in lines:
            e.ask(values, j, e.plus(on, v * e.lanes), once=True)
        a = e.spread(e.number(s, i, j))
        return [e.fma(a, e.load(values, j, ir.Constant(e.i64, v * e.lanes)), sums[v])
                for v in range(vectors)]
    sums = e.loop(ir.Constant(e.i64, 0), n, 1, [zero] * vectors, step)
    for v, value in enumerate(sums):
        e.put(value, out, o, ir.Constant(e.i64, v * e.lanes))


def scored(e, arrays, counts, vectors, ahead=0):
    """s[h, start:m] = q[h] @ keys[:, start:m] (keys (d, room), q (heads, d), s (heads, room);
    m - start a multiple of lanes x vectors): a block of the notes' scores at a time, in
    registers from the keys' first row to their last, each row's stretch of the block read in
    the order it lies in memory, and, where `ahead`, the same stretch of the row that many on
    asked for meanwhile, a line at a time, read once. On a Zen 5 EPYC in its faster memory
    state, eight rows at a time, the scores read and written back for each eight, read the
    keys at 0.80x to 0.86x the forklift's speed, blocks of 16 vectors at 0.87x to 0.89x, and
    those asking 2 rows ahead at 0.97x in two runs (1, 3, 4 and 6 rows: 0.94x to 0.97x), 0.87x
    in a third, its forklift slower; in its slower state 0.93x to 0.99x, asking or not. Read
    once, the notes a floor reads leave the trip's own arrays in the shared cache: 64 users'
    typing trip took 0.976x the time so (the values asked for too, weighed()), 0.985x asking
    for them to be kept, in the faster state; 0.968x and 0.989x in the slower."""
    (keys, q, s), (h, start, m) = arrays, counts
    d, zero = e.b.extract_value(keys.shape, 0), ir.Constant(e.vec, None)
    on = e.b.mul(e.b.extract_value(keys.shape, 1), e.i64(ahead))  # `ahead` rows on
    lines = [v for v in range(vectors) if v * e.lanes % (LINE // 4) == 0] if ahead else []

    def block(j, _):
        def step(i, sums):
            for v in lines:
                e.ask(keys, i, e.b.add(on, e.plus(j, v * e.lanes)), once=True)
            a = e.spread(e.number(q, h, i))
            return [e.fma(a, e.load(keys, i, e.plus(j, v * e.lanes)), sums[v])
                    for v in range(vectors)]
        for v, value in enumerate(e.loop(ir.Constant(e.i64, 0), d, 1, [zero] * vectors, step)):
            e.put(value, s, h, e.plus(j, v * e.lanes))
        return []
    e.loop(start, m, e.lanes * vectors, [], block)


def transposed(e, rows):
    """The 8 columns of an 8 x 8 block whose rows are 8 vectors, as 8 vectors: pairs of rows
    interleaved, then pairs of pairs, then the halves swapped (three rounds of shuffles, as
    AVX's unpack, shuffle and permute take them)."""
    def mix(a, b, lanes):
        return e.b.shuffle_vector(a, b, ir.Constant(ir.VectorType(e.i32, FLIPPED), lanes))
    pairs = [mix(rows[r], rows[r + 1], lanes) for r in range(0, 8, 2)
             for lanes in ((0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15))]
    #        rows 0-1 (columns 0, 1, 4, 5; then 2, 3, 6, 7), rows 2-3, 4-5, 6-7
    fours = [mix(pairs[g + half], pairs[g + 2 + half], lanes) for g in (0, 4) for half in (0, 1)
             for lanes in ((0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15))]
    #        rows 0-3's columns (0, 4), (1, 5), (2, 6), (3, 7); then rows 4-7's
    low, high = (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)
    return [mix(fours[c % 4], fours[4 + c % 4], low if c < 4 else high) for c in range(8)]


def flip(over):
    """dst[p + l, q:q + 8] = src[i:i + 8, j + l] * by[0, b:b + 8] (or / by[...], where `over`)
    for l < 8: an 8 x 8 block turned over, a row of 8 read and a row of 8 written at a time
    (a number at a time, the copy across rows a page apart waits on each)."""
    def codegen(e, arrays, counts):
        (src, dst, by), (i, j, p, q, b) = arrays, counts
        rows = [e.load(src, e.plus(i, r), j) for r in range(FLIPPED)]
        factor = e.load(by, ir.Constant(e.i64, 0), b)
        for r, column in enumerate(transposed(e, rows)):
            e.put((e.b.fdiv if over else e.b.fmul)(column, factor), dst, e.plus(p, r), q)
    return kernel(codegen, counts=5, lanes=FLIPPED)


ROWS = 6  # a question's tile's rows: six queries (or notes' weights) ...
PANELS = {16: (32, 16), 8: (16,), 4: (16, 8)}[LANES]  # ... by this many notes (or numbers of
#   a head) a tile, each worth timing: 2 vectors of them, 12 vectors of sums and 1 to spread
#   (with AVX-512's 32 registers, two vectors of 16 keep more sums in flight than one), or 16
#   in 4 lanes' 4 vectors where there are registers for 24 sums (NEON's 32, not SSE's 16); the
#   first the default, the one used timed at the start
NARROW = 16  # a head's numbers a value panel, where the head is not a multiple of the panel
SPANS = switch({vectors: lambda e, arrays, where, vectors=vectors: product(
    e, arrays, where, ROWS, vectors, False) for vectors in {p // LANES for p in (*PANELS, NARROW)}},
    counts=5)  # SPANS(x, y, out, (r, j, p, k, vectors)): ROWS rows by that many vectors
DOTTED = tuple((rows, ahead) for ahead in (1, 0) for rows in ((4, 2) if LANES == 16 else (2, 4))) \
    + ((LANES, LAID), (LANES, LAID_ASKED))
#   2 to 4 tokens' products, (rows, ahead): rows a time by 4 tokens, asking ahead or not, their
#   sums, their vectors and the tokens' in the registers (32 with AVX-512: 4 x 4 + 4 + 4, the
#   first where none was timed; 16 with AVX2: 2 x 4 + 2 + 4); or a vector's rows of the
#   table laid out (side_dotted()), asking for nothing or for the lines ASKED_ON on
DOTS, DOTS_ROW = dots_of(tuple(d for d in DOTTED if d[1] < LAID)), dots(1, 4, ahead=False)
SPLIT = 4 if LANES == 16 else 2  # 4 tokens' steps at a time (side_dotted()): 16 sums where
#   there are 32 registers (AVX-512's; NEON's 4 lanes take 2 like SSE's 16, where 16 would not
#   fit)
ASKED_ON = 1024  # numbers (4 KiB) on in the stretch a laid-out 4 tokens' product asks for
#   (LAID_ASKED): every table's products read at 0.85x to 0.87x the forklift on a Zen 5 EPYC
#   in its faster memory state, 0.82x to 0.83x asking for nothing (1 and 2 KiB: 0.81x to 0.83x,
#   8 KiB 0.84x, 16 and 32 KiB 0.81x; the line at the next panel's step, into the first
#   cache, 0.83x); in its slower, 0.94x to 0.95x, and 0.92x to 0.93x
SIDE_DOTS = switch({LAID: lambda e, arrays, where: side_dotted(e, arrays, where, 4, SPLIT),
                    LAID_ASKED: lambda e, arrays, where: side_dotted(
                        e, arrays, where, 4, SPLIT, ASKED_ON)}, counts=3)
#   SIDE_DOTS(w, x, out, (g, k4, ahead)): side_dotted() for 4 tokens, asking as `ahead` says
ONE_SPLIT = 8  # one token's steps at a time (side_dotted()), asking for nothing: the CPU's own
#   prefetcher follows one stream a core (asking took 1.08x the time on a Zen 5 EPYC)
SIDE_DOT = kernel(lambda e, arrays, counts: side_dotted(e, arrays, counts, 1, ONE_SPLIT),
                  counts=2)
HEADS = tuple(head // LANES for head in (64, 16) if head % LANES == 0)  # the heads' vectors
#   weighed() is compiled for: GPT-2's 64 numbers (every size's), and the tiny model's 16; a
#   head of another width takes a loop of plain numbers (each case compiled costs a first run)
VALUES_ON = 8  # the notes on a one-token attention's weighted sum asks for, where it asks for
#               its keys (ASKING): 2 KiB of a head of 64 (values alone: 1.01x the speed, on a
#               Zen 5 EPYC in its faster memory state; 4 and 8 KiB on, 0.98x and 1.01x)
WEIGHED = switch({2 * vectors + asks: lambda e, arrays, where, vectors=vectors, asks=asks: weighed(
    e, arrays, where, vectors, VALUES_ON * asks) for vectors in HEADS for asks in (0, 1)},
    counts=4)
#   WEIGHED(s, values, out, (i, n, o, 2 x vectors + asks)): weighed(), a head of HEADS' vectors,
#   asking ahead or not
SCORE_VECTORS = 16 if LANES == 16 else 8  # a block of scores' vectors (scored()): half the
#   registers (32 with AVX-512, 16 with AVX2; 8 for 4 lanes, where SSE's 16 fit them too)
ASKING = (2, 0)  # the key rows a one-token attention's scores ask for ahead (scored()): each
#   worth timing (0: none), the first the default, the one used timed at the start
SCORES = switch({ahead: lambda e, arrays, where, ahead=ahead: scored(
    e, arrays, where, SCORE_VECTORS, ahead) for ahead in ASKING}, counts=4)
#   SCORES(keys, q, s, (h, start, m, ahead)): a block of SCORE_VECTORS a step
SCORES_ONE = kernel(lambda e, arrays, counts: scored(e, arrays, counts, 1), counts=3)
TILED = tiles_of(SHAPES)  # the table products' tiles, of every shape
TILE_TOPS, TILE_EXP, TILE_SUMS = (kernel(tile_tops, counts=2), kernel(tile_exp, counts=2),
                                  kernel(tile_sums, counts=2))  # a tile's softmax, its rows
#   side by side (tops and sums in a (1, rows) array, given twice)
FLIP, FLIP_OVER = flip(over=False), flip(over=True)  # an 8 x 8 block turned over: times, over


@serial
def rows_dotted(w, xt, out, a, b, dotting):
    """out[a:b] = w[a:b] @ xt.T for 4 tokens (xt (4, k), padded by the caller): dotting =
    (rows, ahead) of DOTTED, that many rows at a time meet the four (dotted()), the rows left
    over alone, the inputs past a multiple of LANES one by one. Where ahead is LAID (or
    LAID_ASKED: asking for lines ahead, side_dotted()), w is the table laid out
    (side_by_side()), xt the tokens as x has them (k, 4; or (k, 1): one token),
    and a .. b its panels: out[a x lanes:b x lanes] = their rows @ xt (side_dotted(), a
    panel's vectors of sums turned into out's rows), the inputs past a multiple of its steps
    at a time one by one."""
    rows, ahead = dotting
    if ahead >= LAID:
        tokens, k, part = xt.shape[1], w.shape[1] // LANES, np.empty((4, LANES), np.float32)
        k4 = k - k % (SPLIT if tokens == 4 else ONE_SPLIT)
        for g in range(a, b):
            if tokens == 4:
                SIDE_DOTS(w, xt, part, (g, k4, ahead))
            else:
                SIDE_DOT(w, xt, part, (g, k4))
            for i in range(min(LANES, out.shape[0] - g * LANES)):
                for t in range(tokens):
                    s = part[t, i]
                    for c in range(k4, k):
                        s += w[g, c * LANES + i] * xt[c, t]
                    out[g * LANES + i, t] = s
        return
    k = w.shape[1]
    k8, r = k - k % LANES, a
    while r + rows <= b:
        DOTS(w, xt, out, (r, k8, 2 * rows + ahead))
        r += rows
    while r < b:
        DOTS_ROW(w, xt, out, (r, k8))
        r += 1
    for r in range(a, b):
        for t in range(4):
            for c in range(k8, k):
                out[r, t] += w[r, c] * xt[t, c]


@parallel
def table(w, xt, out, parts, dotting):
    """out (rows, 4) = w (rows, k) @ xt.T (k, 4) for 2 to 4 tokens (rows_dotted()), in `parts`
    contiguous parts of w's rows (a laid-out table's panels), one a thread."""
    rows = w.shape[0]
    for p in nb.prange(parts):
        rows_dotted(w, xt, out, rows * p // parts, rows * (p + 1) // parts, dotting)


@serial
def rows_tiled(w, panels, last, out, a, b, shape):
    """out[a:b] = w[a:b] @ x, in tiles of shape (lanes, rows, vectors, ahead): x's tokens in
    panels of lanes x vectors (panels (groups * k, lanes x vectors): panel g is rows g * k ..
    of it) and, where their count is not a multiple of that, a last panel of fewer vectors
    (last (k, lanes x fewer), or (0, lanes)): `rows` rows at a time meet each panel in turn
    (the rows from the memory in the first, asking for the next ones meanwhile where `ahead`;
    from the core's caches after), the rows left over one at a time. Where ahead is LAID, w
    is the table laid out `rows` rows side by side (side_by_side()) and a .. b its panels:
    out[a x rows:b x rows] = their rows @ x.
    Each panel lies in memory in the order the tile meets it: in x's own layout, a token count
    apart, every load of the tile would stride across memory."""
    lanes, rows, ahead = shape[0], shape[1], shape[3]
    laid = ahead == LAID
    k, width = w.shape[1] // rows if laid else w.shape[1], panels.shape[1]
    groups, vectors = panels.shape[0] // k, width // lanes
    rest = last.shape[1] // lanes if last.shape[0] else 0  # the last panel's vectors
    r = a
    while r < b:
        tall = rows if laid or r + rows <= b else 1
        for g in range(groups + (rest > 0)):  # (one call of the tiles: each is compiled once)
            whole = g < groups
            TILED(w, panels if whole else last, out,
                  (r, width * g, g * k if whole else 0, k,
                   which(lanes, tall, vectors if whole else rest,
                         LAID if laid else g == 0 and tall > 1 and ahead == 1)))
        r += 1 if laid else tall


@serial
def side_by_side(w, laid, a=0, b=-1):
    """w (rows, k) laid out a vector's rows side by side: laid (groups, k x lanes), panel g is
    w's rows g x lanes .. (g + 1) x lanes - 1, input by input, each input's numbers for those
    rows side by side (laid[g, c x lanes + i] = w[g x lanes + i, c]; the rows past w's, 0);
    panels a .. b - 1 (all of them where b is -1). What the tiles and the 2 to 4 tokens'
    products of a laid-out table read (ahead LAID): every step's numbers in one stretch."""
    rows, k = w.shape
    for g in range(a, laid.shape[0] if b < 0 else b):
        for c in range(k):
            for i in range(LANES):
                r = g * LANES + i
                laid[g, c * LANES + i] = w[r, c] if r < rows else 0


@parallel
def sides_by_side(w, laid, parts):
    """side_by_side() in `parts` contiguous parts of the panels, one a thread."""
    groups = laid.shape[0]
    for p in nb.prange(parts):
        side_by_side(w, laid, groups * p // parts, groups * (p + 1) // parts)


@serial
def laid_out(x, laid, last, a=0, b=-1):
    """x (k, tokens) into its panels, as compiled.panels() lays them out: laid (groups * k,
    width), last (k, fewer) or (0, lanes), the places past x's tokens 0; each number copied
    once, along x's rows (NumPy's copy of the same, a short stretch at a time, takes 1.5x as
    long); x's rows a .. b - 1 (all of them where b is -1)."""
    k, tokens = x.shape
    width, groups = laid.shape[1], laid.shape[0] // k
    full = min(groups, tokens // width)  # the panels x fills (the last may be short)
    for c in range(a, k if b < 0 else b):
        for g in range(full):
            for j in range(width):
                laid[g * k + c, j] = x[c, width * g + j]
        for g in range(full, groups):
            for j in range(width):
                laid[g * k + c, j] = x[c, width * g + j] if width * g + j < tokens else 0
        for j in range(last.shape[1] if last.shape[0] else 0):
            last[c, j] = x[c, width * groups + j] if width * groups + j < tokens else 0


@parallel
def laid_outs(x, laid, last, parts):
    """laid_out() in `parts` contiguous parts of x's rows, one a thread (a compiled trip's: laid
    out on one thread, while the other core idled, a 16-token trip took 1.19x the time)."""
    k = x.shape[0]
    for p in nb.prange(parts):
        laid_out(x, laid, last, k * p // parts, k * (p + 1) // parts)


@parallel
def tiles(w, panels, last, out, parts, shape):
    """out (rows, n) = w (rows, k) @ x (k, n) (rows_tiled(), in tiles of shape; n a multiple of
    its lanes, x in panels), in `parts` contiguous parts of w's rows, one a thread: each of w's
    numbers read once from memory."""
    rows = w.shape[0]
    for p in nb.prange(parts):
        rows_tiled(w, panels, last, out, rows * p // parts, rows * (p + 1) // parts, shape)


@serial
def rows_dot(w, x, out, a, b, streams):
    """out[a:b] = w[a:b] @ x: `streams` rows at a time meet x, 8 (eight streams from memory at
    once, the rows left over one by one) or 1 (one stream, which the prefetcher may follow
    further: 0.82x the time of eight for a 1-token trip on a Zen 4 EPYC)."""
    if streams == 1:
        for r in range(a, b):
            out[r] = dot(w[r], x)
        return
    k, r = w.shape[1], a
    while r + 8 <= b:
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0)
        for c in range(k):
            xc = x[c]
            s0 += w[r, c] * xc
            s1 += w[r + 1, c] * xc
            s2 += w[r + 2, c] * xc
            s3 += w[r + 3, c] * xc
            s4 += w[r + 4, c] * xc
            s5 += w[r + 5, c] * xc
            s6 += w[r + 6, c] * xc
            s7 += w[r + 7, c] * xc
        out[r], out[r + 1], out[r + 2], out[r + 3] = s0, s1, s2, s3
        out[r + 4], out[r + 5], out[r + 6], out[r + 7] = s4, s5, s6, s7
        r += 8
    while r < b:
        out[r] = dot(w[r], x)
        r += 1


@parallel
def vector(w, x, out, parts, streams):
    """out (rows,) = w (rows, k) @ x (k,), in `parts` contiguous parts of w's rows, one a
    thread, `streams` rows at a time (rows_dot())."""
    rows = w.shape[0]
    for p in nb.prange(parts):
        rows_dot(w, x, out, rows * p // parts, rows * (p + 1) // parts, streams)


@serial
def head_scores(q, h, keys, n, s, ahead):
    """s[h, :n] = q[h] (d,) . keys (d, room)[:, :n]: blocks of SCORE_VECTORS vectors of notes
    (scored(), asking for the rows `ahead` on: one of ASKING), then blocks of one, the notes
    past the last whole vector a key's row at a time."""
    block, d = LANES * SCORE_VECTORS, keys.shape[0]
    m, m1 = n - n % block, n - n % LANES
    SCORES(keys, q, s, (h, 0, m, ahead))
    SCORES_ONE(keys, q, s, (h, m, m1))
    s[h, m1:n] = 0
    for i in range(d):
        qi, ki = q[h, i], keys[i]
        for j in range(m1, n):
            s[h, j] += qi * ki[j]


@serial
def head_weighted(s, h, values, n, out, ahead):
    """out[h] (64,) = s[h, :n] @ values (room, 64)[:n] / sum(s[h, :n]): a note at a time, its
    values in the order they lie in memory (four at a time took 2x the time on one core of a Zen
    5 EPYC), in registers where the head is one of HEADS (weighed(), asking VALUES_ON notes on
    where `ahead`, the keys' rows asked for ahead: one of ASKING)."""
    d = values.shape[1]
    if d % LANES == 0 and d // LANES in HEADS:
        WEIGHED(s, values, out, (h, n, h, 2 * (d // LANES) + (ahead > 0)))
    else:
        out[h] = 0
        for j in range(n):
            a, vj = s[h, j], values[j]
            for i in range(d):
                out[h, i] += a * vj[i]
    total = np.float32(0)
    for j in range(n):
        total += s[h, j]
    for i in range(d):  # (out[h] /= total, a slice divided in place, compiles Numba's message
        out[h, i] /= total  # for slices of unequal shapes: 2 s of a first run's 22)


@ieee
def exp_shifted(s, bits):
    """s = exp(s - max(s)) in place, model.exp_shifted's, in float32 as Cephes computes it:
    exp(x) = 2^t exp(r), t = round(x / ln 2), exp(r) a polynomial on |r| <= ln(2) / 2 (within
    a unit in float32's last place), 2^t made from its bits in `bits` (int32, as long as s);
    below -87.3, where float32's normal numbers end, 0 (NumPy's is below 1.2e-38 there). A NaN
    anywhere makes every number NaN, as NumPy's max does; t is taken from a number, never
    from NaN, whose conversion to an integer is undefined. Plain arithmetic: vector
    registers."""
    n = s.shape[0]
    top = s[0]
    for j in range(n):
        top = s[j] if s[j] > top or s[j] != s[j] else top
    for j in range(n):
        x = s[j] - top
        low = not x >= EXP_LOW  # below float32's normal numbers, or NaN
        y = EXP_LOW if low else x
        t = np.floor(y * LOG2E + np.float32(0.5))
        r = y - t * EXP_C1 - t * EXP_C2
        e = ((((((e0 * r + e1) * r + e2) * r + e3) * r + e4) * r + e5) * r * r) + r + 1
        s[j] = (x if x != x else np.float32(0)) if low else e
        bits[j] = (np.int32(t) + 127) << 23
    twos = bits.view(np.float32)
    for j in range(n):
        s[j] *= twos[j]


@ieee
def exp_row(s, i, n, bits):
    """exp_shifted(s[i, :n], bits), and the sum of the numbers it leaves: -> that sum. In
    vector registers, a vector at a time (ROW_TOP, ROW_EXP, ROW_SUM), the max over the n, the
    exponents over whole vectors (the numbers of the last past n, to the next multiple of LANES,
    are overwritten: s must have room for them), 1.2e-38 at the least (lanes_exp()); a NaN or
    an infinite max is left to exp_shifted(), which keeps NumPy's NaN."""
    row, n8 = s[i, :n], n - n % LANES
    top = ROW_TOP(s, i, n8) if n8 else row[0]
    for j in range(n8, n):
        top = row[j] if row[j] > top or row[j] != row[j] else top
    if top != top or top == np.inf:  # (NaN, or inf - inf: exp_shifted() keeps NumPy's NaN)
        exp_shifted(row, bits)
        n8 = 0
    else:
        ROW_EXP(s, i, -(-n // LANES) * LANES, top)
    total = ROW_SUM(s, i, n8) if n8 else np.float32(0)
    for j in range(n8, n):
        total += row[j]
    return total


@ieee
def softmax_tile(s, r, before, m, reach, sums, tops, bits):
    """A tile's softmax in place: rows r .. r + ROWS - 1 of s, row i a query that reads notes
    up to before + i (its `mine`, at most `reach`, the tile's last query's), the rest up to
    reach 0, and sums[0, i] the sum it leaves; a row past m (no query) all 0, its sum 1.
    The tops (tops (1, rows)), the exponents and the sums each in one pass over the tile's
    rows side by side (TILE_TOPS, TILE_EXP, TILE_SUMS: a row alone waits on each step's chain
    of arithmetic), their last numbers a number at a time; where a query's top is NaN or
    infinite, the tile row by row as exp_row() keeps NumPy's NaN."""
    shortest = min(before + r + 1, reach)  # row r reads the fewest notes
    n8 = shortest - shortest % LANES
    if n8:
        TILE_TOPS(s, tops, tops, (r, n8))
    odd = False
    for i in range(r, r + ROWS):
        row, mine = s[i], min(before + i + 1, reach)
        top = tops[0, i] if n8 else row[0]
        for j in range(n8, mine):
            top = row[j] if row[j] > top or row[j] != row[j] else top
        tops[0, i] = top
        odd = odd or (i < m and (top != top or top == np.inf))
    if odd:
        for i in range(r, r + ROWS):
            row, mine = s[i], min(before + i + 1, reach)
            sums[0, i] = exp_row(s, i, mine, bits) if i < m else 1
            for j in range(mine if i < m else 0, reach):
                row[j] = 0
        return
    TILE_EXP(s, tops, tops, (r, reach))
    for i in range(r, r + ROWS):
        row = s[i]
        for j in range(min(before + i + 1, reach) if i < m else 0, reach):
            row[j] = 0
    n8 = reach - reach % LANES
    TILE_SUMS(s, sums, sums, (r, n8))
    for i in range(r, r + ROWS):
        row, total = s[i], sums[0, i]
        for j in range(n8, reach):
            total += row[j]
        sums[0, i] = total if i < m else 1


@parallel
def attend(q, k, v, first, scale, keys, values, n, out, work, scores, bits, ahead, parts):
    """Attention for one query per user and head, whole, for the users whose tokens are
    columns first, first + 1, ... of q, k, v and out (width, tokens), heads of 64 rows each.
    Each writes its new note (its column of k and v) as note n - 1 of keys (users, heads, 64,
    room) and values (users, heads, room, 64), then its query times scale reads its n notes
    into its column of out. Every two (user, head) pairs in turn a task, the last alone where
    their count is odd, the tasks in `parts` contiguous parts, one a thread (attend_tasks());
    work (2, users, heads, 64), scores (users, heads, n or more: room for whole vectors past
    n) and bits (int32, as scores) its room to work in, made once by the caller (an array
    made in each task costs more than a task of few notes; a column of q or out, read in
    place, would keep the loops out of vectors); the keys' rows asked for `ahead` on (one of
    ASKING: head_scores())."""
    tasks = (keys.shape[0] * keys.shape[1] + 1) // 2
    for p in nb.prange(parts):
        attend_tasks(q, k, v, first, scale, keys, values, n, out, work, scores, bits, ahead,
                     tasks * p // parts, tasks * (p + 1) // parts)


@serial
def attend_tasks(q, k, v, first, scale, keys, values, n, out, work, scores, bits, ahead, lo,
                 hi):
    """attend()'s tasks lo .. hi - 1 on this thread (a part the caller's threads share out): the
    new values and the queries of all of them, then the scores and softmax of all, then the
    weighted sums of all, so that the thread reads its share of the keys as one stretch of
    memory, and then of the values (a task's keys, then its values, then the next's: 1.06x the
    time for 64 users on 2 cores of a Zen 5 EPYC). A new key is written as it is scored, after
    the notes kept: its rows' lines were just read (written first, a line a row for every pair
    before any was read, 64 users' attention took 1.03x the time)."""
    users, heads, d = keys.shape[0], keys.shape[1], keys.shape[2]
    pairs = users * heads
    first_pair, last_pair = 2 * lo, min(2 * hi, pairs)
    for pair in range(first_pair, last_pair):
        u, h = pair // heads, pair % heads
        col, rows = first + u, h * d
        for i in range(d):
            values[u, h, n - 1, i] = v[rows + i, col]
            work[0, u, h, i] = q[rows + i, col] * scale
    for pair in range(first_pair, last_pair):  # every key first: one stretch of memory
        u, h = pair // heads, pair % heads
        col, rows = first + u, h * d
        head_scores(work[0, u], h, keys[u, h], n - 1, scores[u], ahead)  # the notes kept
        new = np.float32(0)  # then the new one
        for i in range(d):
            keys[u, h, i, n - 1] = k[rows + i, col]
            new += work[0, u, h, i] * k[rows + i, col]
        scores[u, h, n - 1] = new
        exp_row(scores[u], h, n, bits[u, h])  # (a pass, in vectors: exp_shifted()'s three
        #                                        took 1.15x the time of 4 users' floor)
    for pair in range(first_pair, last_pair):  # then every value
        u, h = pair // heads, pair % heads
        head_weighted(scores[u], h, values[u, h], n, work[1, u], ahead)
        col, rows = first + u, h * d
        for i in range(d):
            out[rows + i, col] = work[1, u, h, i]


@serial
def norm(x, eps, out):
    """out = model.norm(x): each column of x (width, tokens) less its mean, over the root
    of its mean square (plus eps). A few tokens' columns one at a time, copied out into a row
    (a sum along a row runs in vector registers; one token's norm took 0.08x the time of the
    rows' loops below on a Zen 5 EPYC, 4 tokens' 0.27x, 16 tokens' 1.6x); more tokens' in
    one pass along the rows for the sums and one for the rest."""
    width, tokens = x.shape
    if tokens > NORMED:
        return norm_rows(x, eps, out)
    column = np.empty(width, np.float32)
    for j in range(tokens):
        for i in range(width):
            column[i] = x[i, j]
        mean, scale = moments(column, eps)
        for i in range(width):
            out[i, j] = (column[i] - mean) * scale


@serial
def moments(row, eps):
    """-> the mean of row's numbers, and 1 over the root of their variance plus eps."""
    total = np.float32(0)
    for i in range(row.shape[0]):
        total += row[i]
    mean = total / row.shape[0]
    squares = np.float32(0)
    for i in range(row.shape[0]):
        d = row[i] - mean
        squares += d * d
    return mean, 1 / np.sqrt(squares / row.shape[0] + eps)


@serial
def norm_rows(x, eps, out):
    """norm() along x's rows: every column's sums at once, a row at a time."""
    width, tokens = x.shape
    mean = np.zeros(tokens, np.float32)
    for i in range(width):
        for j in range(tokens):
            mean[j] += x[i, j]
    mean /= width
    var = np.zeros(tokens, np.float32)
    for i in range(width):
        for j in range(tokens):
            d = x[i, j] - mean[j]
            var[j] += d * d
    scale = 1 / np.sqrt(var / width + eps)
    for i in range(width):
        for j in range(tokens):
            out[i, j] = (x[i, j] - mean[j]) * scale[j]


p0, p1, p2, p3, p4, p5, p6 = TANH_P
q0, q1, q2, q3 = TANH_Q
C, EDGE, ONE = np.float32(math.sqrt(2 / math.pi)), TANH_EDGE, np.float32(1)


@ieee
def gelu(flat):
    """model.gelu in place over flat (h's numbers), on one thread (a few microseconds), its
    steps in model.gelu's order (h*h*h first: the same overflow to +-inf): tanh as Eigen
    computes it in float32, a 13/6 rational function on [-7.9, 7.9], within 4e-7 of the true
    value, and +-1 past it, so that GELU gives NumPy's answer at the extremes (-0.0 at -100,
    NaN at -inf and at NaN); plain arithmetic, so that the loop runs in vector registers (a
    libm call's would not)."""
    for i in range(flat.size):
        v = flat[i]
        z = (v * v * v * np.float32(0.044715) + v) * C
        z2 = z * z
        p = (((((p0 * z2 + p1) * z2 + p2) * z2 + p3) * z2 + p4) * z2 + p5) * z2 + p6
        q = ((q0 * z2 + q1) * z2 + q2) * z2 + q3
        t = z * p / q if abs(z) < EDGE else (ONE if z > 0 else -ONE)  # (NaN: -1, and v NaN)
        flat[i] = np.float32(0.5) * v * (1 + t)


@parallel
def gelus(flat, parts):
    """gelu() over flat in `parts` contiguous parts, one a thread (a compiled trip's: Numba's
    threads, which spin between its kernels)."""
    n = flat.size
    for p in nb.prange(parts):
        gelu(flat[n * p // parts:n * (p + 1) // parts])


@serial
def copy_row(a, b):
    """b[:len(a)] = a, along one row each (a loop on rows of their own compiles into vector
    registers)."""
    for i in range(a.shape[0]):
        b[i] = a[i]


@serial
def panels_of(K, V, n, panels, laid):
    """A head's first n notes as its tiles read them: keys (K (64, room)) in panels of as many
    notes as panels' rows (panels (groups x 64, panel): panel g rows g x 64 ..), values (V
    (room, 64)) in panels of their numbers as wide as laid's (laid (parts x groups x panel,
    wide): part p rows p x groups x panel ..); the last panel's places past n left as they are.
    Plain loops over numbers (a view made for every 16 numbers cost 1.9x the time)."""
    d, groups, panel = K.shape[0], panels.shape[0] // K.shape[0], panels.shape[1]
    wide = laid.shape[1]
    for c in range(d):
        for g in range(n // panel):
            for j in range(panel):
                panels[g * d + c, j] = K[c, panel * g + j]
        for g in range(n // panel, groups):
            for j in range(n - panel * g):
                panels[g * d + c, j] = K[c, panel * g + j]
    for i in range(n):
        for part in range(d // wide):
            for j in range(wide):
                laid[part * groups * panel + i, j] = V[i, wide * part + j]


@serial
def rows_of_columns(src, top, col, m, by, dst, at):
    """dst[at + i, c] = src[top + c, col + i] * by[0, 0] for i < m, c < dst's width: columns of
    src (a token's numbers, rows a page apart) as rows of dst, 8 x 8 at a time (FLIP; by (1, 8)
    holds one number 8 times), the rest a number at a time. Each 8 of src's rows are read
    through (every line whole) before the next 8: rows a page apart share the core's first
    cache's set, and 64 of them read 8 numbers at a time lost each line before its next 8
    (2x the time of a 1,024-token question's copies on a Zen 5 EPYC)."""
    d = dst.shape[1]
    m8, d8 = m - m % FLIPPED, d - d % FLIPPED
    for c in range(0, d8, FLIPPED):
        for i in range(0, m8, FLIPPED):
            FLIP(src, dst, by, (top + c, col + i, at + i, c, 0))
    for c in range(d):
        row = src[top + c, col:col + m]
        for i in range(m8 if c < d8 else 0, m):
            dst[at + i, c] = row[i] * by[0, 0]


@ieee
def columns_of_rows(src, m, sums, dst, top, col):
    """dst[top + c, col + i] = src[i, c] / sums[0, i] for i < m, c < src's width: rows of src (a
    query's answer) as columns of dst, 8 x 8 at a time (FLIP_OVER), the rest a number at a
    time; IEEE's division, as NumPy's. Each 8 of dst's rows are written through before the next
    8 (as rows_of_columns() reads its src)."""
    d = src.shape[1]
    m8, d8 = m - m % FLIPPED, d - d % FLIPPED
    for c in range(0, d8, FLIPPED):
        for i in range(0, m8, FLIPPED):
            FLIP_OVER(src, dst, sums, (i, c, top + c, col + i, i))
    for c in range(d):
        row = dst[top + c, col:col + m]
        for i in range(m8 if c < d8 else 0, m):
            row[i] = src[i, c] / sums[0, i]


@serial
def question(q, k, v, first, t, scale, keys, values, n0, out, lo, hi, block, panel):
    """A question's attention, t tokens from each user (columns first + t u .. of q, k, v and
    out (width, tokens), heads of 64 rows each), for the (user, head) pairs lo .. hi - 1 in
    turn, on this thread: each writes its new notes after the n0 in its notebook (keys
    (users, heads, 64, room), values (users, heads, room, 64)), lays its keys out in panels of
    `panel` notes and its values in panels of `panel` of their numbers (NARROW where the head
    is not a multiple of it wide; each tile then reads one stretch of memory in turn; a key's
    row of the notebook is a page apart from the next, a value's row wider than a tile), and
    reads a block of queries at a time: the scores of six queries by `panel` notes a tile
    (SPANS), the tiles wholly past the causal mask skipped; the softmax in place, a tile's six
    queries side by side (softmax_tile(), each query's notes up to its own, the rest up to its
    tile's last query's 0); the weighted sum of values, six queries by `panel` numbers a tile,
    over the notes the tile's last query reads; over softmax's
    denominator. The values' notes, the queries and the answers cross between a token a
    column and a token a row 8 x 8 at a time (rows_of_columns(), columns_of_rows())."""
    heads, d = keys.shape[1], keys.shape[2]
    n = n0 + t
    groups = (n + panel - 1) // panel
    tall = (block + ROWS - 1) // ROWS * ROWS
    panels = np.zeros((groups * d, panel), np.float32)  # panel g: keys' rows, notes panel g ..
    wide = panel if d % panel == 0 else NARROW  # a head's numbers a value panel
    lanes = LANES
    laid = np.empty((d // wide * groups * panel, wide), np.float32)  # part p: its numbers
    #                                                                   wide p ..
    qs = np.zeros((tall, d), np.float32)  # a block's queries, scaled, a row each
    s = np.empty((tall, groups * panel), np.float32)  # their scores, then softmax's numerators
    o = np.empty((tall, d), np.float32)  # their answers before the division
    sums, tops = np.empty((1, tall), np.float32), np.empty((1, tall), np.float32)
    bits = np.empty(groups * panel, np.int32)
    scales, ones = (np.full((1, FLIPPED), scale, np.float32),
                    np.ones((1, FLIPPED), np.float32))
    for task in range(lo, hi):
        u, h = task // heads, task % heads
        K, V = keys[u, h], values[u, h]
        col, top = first + u * t, h * d
        for c in range(d):  # (each copy reads and writes rows of its own: an index with an
            #                   offset added is checked for wrapping below 0, number by number)
            copy_row(k[top + c, col:col + t], K[c, n0:n])
        rows_of_columns(v, top, col, t, ones, V, n0)
        panels_of(K, V, n, panels, laid)
        for a in range(0, t, block):
            m = min(block, t - a)  # queries a .. a + m - 1 read notes 0 .. n0 + a + m - 1
            rows = (m + ROWS - 1) // ROWS * ROWS
            qs[m:rows] = 0
            rows_of_columns(q, top, col + a, m, scales, qs, 0)
            for g in range((n0 + a + m + panel - 1) // panel):
                for r in range(0, rows, ROWS):
                    if panel * g < n0 + a + min(r + ROWS, m):
                        SPANS(qs, panels, s, (r, panel * g, g * d, d, panel // lanes))
            for r in range(0, rows, ROWS):
                reach = n0 + a + min(r + ROWS, m)  # the notes the tile's last query reads
                softmax_tile(s, r, n0 + a, m, reach, sums, tops, bits)
                for part in range(d // wide):
                    SPANS(s, laid, o, (r, wide * part, part * groups * panel, reach,
                                       wide // lanes))
            columns_of_rows(o, m, sums, out, top, col + a)


@parallel
def questions(q, k, v, first, t, scale, keys, values, n0, out, tasks, block, parts, panel):
    """question() for the (user, head) tasks 0 .. tasks - 1 in `parts` contiguous parts, one a
    thread (a compiled trip's: Numba's threads, which spin between its kernels)."""
    for p in nb.prange(parts):
        question(q, k, v, first, t, scale, keys, values, n0, out, tasks * p // parts,
                 tasks * (p + 1) // parts, block, panel)
