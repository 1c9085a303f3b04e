"""The compiled kernels themselves (see compiled.py, which imports this module only where
Numba is installed). Each parallel kernel hands out tasks to a serial one, whose loops compile
into vector registers (a loop inside a parallel loop does not); each is compiled on first use
and kept in Numba's cache beside this file, as Python keeps its bytecode."""
import math

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types

TANH_P = tuple(np.float32(a) for a in (
    -2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
    1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03))  # Eigen's float tanh:
TANH_Q = tuple(np.float32(b) for b in (  # its numerator's and denominator's coefficients, the
    1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,  # highest power first
    4.89352518554385e-03))
TANH_EDGE = np.float32(7.90531110763549805)  # past which float32's tanh is +-1
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


@nb.extending.intrinsic
def prefetch(typingctx, a, i, j):
    """Ask the memory for a[i, j]'s line now, to be in the caches when a loop reaches it (LLVM's
    llvm.prefetch, the CPU's prefetch instruction: a read, kept in every cache level). The
    CPU's own prefetcher follows a stream once it sees one, and falls behind a loop that meets
    each of a table's rows several times before it moves on."""
    def codegen(context, builder, signature, args):
        kind = signature.args[0]
        array = context.make_array(kind)(context, builder, args[0])
        at = cgutils.get_item_pointer(context, builder, kind, array, args[1:], wraparound=False)
        byte, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
            ir.VoidType(), [byte, i32, i32, i32]), "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(at, byte), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.none(a, i, j), codegen


@serial
def ask_ahead(w, r, part, parts):
    """Prefetch part `part` of `parts` of row r of w (one line in sixteen numbers)."""
    k = w.shape[1]
    a, b = k * part // parts, k * (part + 1) // parts
    for c in range(a - a % 16, b, 16):
        prefetch(w, r, c)


@serial
def dot(a, b):
    """a . b, two rows of numbers (a dot along them, in vector registers)."""
    s = np.float32(0)
    for c in range(a.shape[0]):
        s += a[c] * b[c]
    return s


@serial
def row_times(w, xt, out, r):
    """out[r] = w[r] @ xt.T: row r of w met by the tokens four at a time (a dot along k
    each), one token alone where fewer are left."""
    k, n = w.shape[1], xt.shape[0]
    j = 0
    while j + 4 <= n:
        s0 = s1 = s2 = s3 = np.float32(0)
        for c in range(k):
            wc = w[r, c]
            s0 += wc * xt[j, c]
            s1 += wc * xt[j + 1, c]
            s2 += wc * xt[j + 2, c]
            s3 += wc * xt[j + 3, c]
        out[r, j], out[r, j + 1], out[r, j + 2], out[r, j + 3] = s0, s1, s2, s3
        j += 4
    while j < n:
        out[r, j] = dot(w[r], xt[j])
        j += 1


@serial
def eight(w0, w1, x0, x1, x2, x3):
    """The eight dots of two rows of a table with four tokens' numbers, all rows alike (each a
    dot along them in vector registers: each number loaded serves two or four of them)."""
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = np.float32(0)
    for c in range(w0.shape[0]):
        a, b = w0[c], w1[c]
        s00 += a * x0[c]
        s01 += a * x1[c]
        s02 += a * x2[c]
        s03 += a * x3[c]
        s10 += b * x0[c]
        s11 += b * x1[c]
        s12 += b * x2[c]
        s13 += b * x3[c]
    return s00, s01, s02, s03, s10, s11, s12, s13


DEPTH = 768  # the most inputs met at a time: two rows' and four tokens' numbers, 18 KiB, stay
#              in a core's first cache (32 KiB or more) while the four tokens pass


@serial
def rows_times(w, xt, out, a, b):
    """out[a:b] = w[a:b] @ xt.T: each row of w read once from memory; two rows at a
    time meet four tokens at a time (eight dots along k, each a vector register: each number
    loaded serves two or four of them), the rows or tokens left over one by one."""
    k, n = w.shape[1], xt.shape[0]
    r = a
    while r + 2 <= b and n >= 4:
        j = 0
        while j + 4 <= n:
            s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = np.float32(0)
            for c in range(k):
                w0, w1 = w[r, c], w[r + 1, c]
                x0, x1, x2, x3 = xt[j, c], xt[j + 1, c], xt[j + 2, c], xt[j + 3, c]
                s00 += w0 * x0
                s01 += w0 * x1
                s02 += w0 * x2
                s03 += w0 * x3
                s10 += w1 * x0
                s11 += w1 * x1
                s12 += w1 * x2
                s13 += w1 * x3
            out[r, j], out[r, j + 1], out[r, j + 2], out[r, j + 3] = s00, s01, s02, s03
            out[r + 1, j], out[r + 1, j + 1], out[r + 1, j + 2], out[r + 1, j + 3] = \
                s10, s11, s12, s13
            j += 4
        for rr in range(r, r + 2):  # the tokens left over
            for jj in range(j, n):
                out[rr, jj] = dot(w[rr], xt[jj])
        r += 2
    while r < b:
        row_times(w, xt, out, r)
        r += 1


@serial
def rows_in_pieces(w, xt, out, a, b):
    """rows_times() for sixteen tokens or more, whose two rows meet the tokens in four passes
    or more: DEPTH inputs at a time, so that the rows stay in the first cache from pass to
    pass, the pieces summed; meanwhile the next two rows are asked for, a share with each
    pass, so that memory works while the core does (with fewer passes, asking cost more than it
    saved on a 2-core AMD EPYC: the rows pass too quickly)."""
    k, n = w.shape[1], xt.shape[0]
    groups, chunks = n // 4, (k + DEPTH - 1) // DEPTH
    r = a
    while r + 2 <= b:
        out[r:r + 2] = 0
        for chunk in range(chunks):
            c0, c1 = k * chunk // chunks, k * (chunk + 1) // chunks
            for g in range(groups):
                for nxt in range(r + 2, min(r + 4, b)):
                    ask_ahead(w, nxt, chunk * groups + g, chunks * groups)
                j = 4 * g
                s = eight(w[r, c0:c1], w[r + 1, c0:c1], xt[j, c0:c1], xt[j + 1, c0:c1],
                          xt[j + 2, c0:c1], xt[j + 3, c0:c1])
                for t in range(4):
                    out[r, j + t] += s[t]
                    out[r + 1, j + t] += s[4 + t]
        for rr in range(r, r + 2):  # the tokens left over
            for jj in range(4 * groups, n):
                out[rr, jj] = dot(w[rr], xt[jj])
        r += 2
    while r < b:
        row_times(w, xt, out, r)
        r += 1


@parallel
def table(w, xt, out, parts):
    """out (rows, n) = w (rows, k) @ xt.T (k, n), in `parts` contiguous parts of w's rows, one
    a thread."""
    rows = w.shape[0]
    pieces = xt.shape[0] >= 16
    for p in nb.prange(parts):
        a, b = rows * p // parts, rows * (p + 1) // parts
        if pieces:
            rows_in_pieces(w, xt, out, a, b)
        else:
            rows_times(w, xt, out, a, b)


@serial
def rows_dot(w, x, out, a, b):
    """out[a:b] = w[a:b] @ x: eight rows at a time meet x (eight streams from memory at once),
    the rows left over one by one."""
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
def vector(w, x, out, parts):
    """out (rows,) = w (rows, k) @ x (k,), in `parts` contiguous parts of w's rows, one a
    thread."""
    rows = w.shape[0]
    for p in nb.prange(parts):
        rows_dot(w, x, out, rows * p // parts, rows * (p + 1) // parts)


@serial
def head_scores(q, keys, n, row):
    """row (n,) = q (64,) . keys (64, room)[:, :n]: the keys a row at a time, in the order they
    lie in memory (one stream, which the prefetcher follows; four rows at a time are four short
    ones)."""
    row[:n] = 0
    for i in range(q.shape[0]):
        qi = q[i]
        for j in range(n):
            row[j] += qi * keys[i, j]


@serial
def head_weighted(w, values, n, out):
    """out (64,) = w (n,) @ values (room, 64)[:n] / sum(w): four notes at a time, so that out
    passes a quarter as often."""
    d = out.shape[0]
    out[:] = 0
    total = np.float32(0)
    for j in range(0, n - 3, 4):
        w0, w1, w2, w3 = w[j], w[j + 1], w[j + 2], w[j + 3]
        total += w0 + w1 + w2 + w3
        for i in range(d):
            out[i] += (w0 * values[j, i] + w1 * values[j + 1, i] + w2 * values[j + 2, i]
                       + w3 * values[j + 3, i])
    for j in range(n - n % 4, n):
        total += w[j]
        for i in range(d):
            out[i] += w[j] * values[j, i]
    out /= total


@serial
def exp_shifted(s, bits):
    """s = exp(s - max(s)) in place, model.exp_shifted's, in float32 as Cephes computes it:
    exp(x) = 2^t exp(r), t = round(x / ln 2), exp(r) a polynomial on |r| <= ln(2) / 2 (within
    a unit in float32's last place), 2^t made from its bits in `bits` (int32, as long as s);
    below -87.3, where float32 ends, as exp(-87.3). Plain arithmetic: vector registers."""
    n = s.shape[0]
    top = s[0]
    for j in range(n):
        top = max(top, s[j])
    for j in range(n):
        x = max(s[j] - top, EXP_LOW)
        t = np.floor(x * LOG2E + np.float32(0.5))
        r = x - t * EXP_C1 - t * EXP_C2
        s[j] = ((((((e0 * r + e1) * r + e2) * r + e3) * r + e4) * r + e5) * r * r) + r + 1
        bits[j] = (np.int32(t) + 127) << 23
    twos = bits.view(np.float32)
    for j in range(n):
        s[j] *= twos[j]


@parallel
def attend(q, k, v, first, scale, keys, values, n, out, work, scores, bits):
    """Attention for one query per user and head, whole, for the users whose tokens are
    columns first, first + 1, ... of q, k, v and out (width, tokens), heads of 64 rows each.
    Each writes its new note (its column of k and v) as note n - 1 of keys (users, heads, 64,
    room) and values (users, heads, room, 64), then its query times scale reads its n notes
    into its column of out. Every (user, head) pair a task, shared among the threads; work
    (2, users, heads, 64), scores (users, heads, n) and bits (int32, as scores) its room to
    work in, made once by the caller (an array made in each task costs more than a task of
    few notes; a column of q or out, read in place, would keep the loops out of vectors)."""
    users, heads, d = keys.shape[0], keys.shape[1], keys.shape[2]
    for task in nb.prange(users * heads):
        u, h = task // heads, task % heads
        col, rows = first + u, h * d
        asked, answer = work[0, u, h], work[1, u, h]
        for i in range(d):
            keys[u, h, i, n - 1] = k[rows + i, col]
            values[u, h, n - 1, i] = v[rows + i, col]
            asked[i] = q[rows + i, col] * scale
        mine = scores[u, h, :n]
        head_scores(asked, keys[u, h], n, mine)
        exp_shifted(mine, bits[u, h, :n])
        head_weighted(mine, values[u, h], n, answer)
        for i in range(d):
            out[rows + i, col] = answer[i]


@serial
def norm(x, eps, out):
    """out = model.norm(x): each column of x (width, tokens) less its mean, over the root
    of its mean square (plus eps), in one pass for the sums and one for the rest."""
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
C, EDGE = np.float32(math.sqrt(2 / math.pi)), TANH_EDGE


@serial
def gelu(flat):
    """model.gelu in place over flat (h's numbers), on one thread (a few microseconds): tanh as Eigen computes it in
    float32, a 13/6 rational function on [-7.9, 7.9] (past which float32's tanh is +-1),
    within 4e-7 of the true value; plain arithmetic, so that the loop runs in vector
    registers (a libm call's would not)."""
    for i in range(flat.size):
        v = flat[i]
        z = C * (v + np.float32(0.044715) * v * v * v)
        z = min(max(z, -EDGE), EDGE)
        z2 = z * z
        p = (((((p0 * z2 + p1) * z2 + p2) * z2 + p3) * z2 + p4) * z2 + p5) * z2 + p6
        q = ((q0 * z2 + q1) * z2 + q2) * z2 + q3
        flat[i] = np.float32(0.5) * v * (1 + z * p / q)
