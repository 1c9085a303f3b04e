"""The compiled kernels themselves (see compiled.py, which imports this module only where
Numba is installed). Each parallel kernel hands out tasks to a serial one, whose loops compile
into vector registers (a loop inside a parallel loop does not); each is compiled on first use
and kept in Numba's cache beside this file, as Python keeps its bytecode."""
import math

import numba as nb
import numpy as np

from harness.measuring.compiled import TANH_EDGE, TANH_P, TANH_Q

serial = nb.njit(fastmath=True, boundscheck=False, cache=True, nogil=True,
                 error_model="numpy")  # (NumPy's division: no check for zero, which would keep
#                                         a loop out of vector registers)
parallel = nb.njit(fastmath=True, boundscheck=False, cache=True, nogil=True,
                   error_model="numpy", parallel=True)


@serial
def rows_times(w, xt, out_t, a, b):
    """out_t[:, a:b] = (w[a:b] @ xt.T).T: each row of w read once, met by the tokens four at
    a time (a dot along k each), one token alone where fewer are left."""
    k, n = w.shape[1], xt.shape[0]
    for r in range(a, b):
        j = 0
        while j + 4 <= n:
            s0 = s1 = s2 = s3 = np.float32(0)
            for c in range(k):
                wc = w[r, c]
                s0 += wc * xt[j, c]
                s1 += wc * xt[j + 1, c]
                s2 += wc * xt[j + 2, c]
                s3 += wc * xt[j + 3, c]
            out_t[j, r], out_t[j + 1, r], out_t[j + 2, r], out_t[j + 3, r] = s0, s1, s2, s3
            j += 4
        while j < n:
            s = np.float32(0)
            for c in range(k):
                s += w[r, c] * xt[j, c]
            out_t[j, r] = s
            j += 1

@parallel
def table(w, xt, out_t, parts):
    """out_t (n, rows) = (w (rows, k) @ xt.T (k, n)).T, in `parts` contiguous parts of w's
    rows, one a thread."""
    rows = w.shape[0]
    for p in nb.prange(parts):
        rows_times(w, xt, out_t, rows * p // parts, rows * (p + 1) // parts)

@serial
def rows_dot(w, x, out, a, b):
    """out[a:b] = w[a:b] @ x: four rows at a time meet x."""
    k, r = w.shape[1], a
    while r + 4 <= b:
        s0 = s1 = s2 = s3 = np.float32(0)
        for c in range(k):
            xc = x[c]
            s0 += w[r, c] * xc
            s1 += w[r + 1, c] * xc
            s2 += w[r + 2, c] * xc
            s3 += w[r + 3, c] * xc
        out[r], out[r + 1], out[r + 2], out[r + 3] = s0, s1, s2, s3
        r += 4
    while r < b:
        s = np.float32(0)
        for c in range(k):
            s += w[r, c] * x[c]
        out[r] = s
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
    """row (n,) = q (64,) . keys (64, room)[:, :n]: four rows of keys at a time, so that
    row passes a quarter as often."""
    d = q.shape[0]
    row[:] = 0
    for i in range(0, d - 3, 4):
        q0, q1, q2, q3 = q[i], q[i + 1], q[i + 2], q[i + 3]
        for j in range(n):
            row[j] += (q0 * keys[i, j] + q1 * keys[i + 1, j] + q2 * keys[i + 2, j]
                       + q3 * keys[i + 3, j])
    for i in range(d - d % 4, d):
        for j in range(n):
            row[j] += q[i] * keys[i, j]

@parallel
def scores(q, keys, n, s):
    """s (users, heads, n) = each query's dot with its n keys: q (users, heads, 64), already
    scaled; keys (users, heads, 64, room). Every (user, head) pair a task, shared among the
    threads."""
    users, heads = q.shape[:2]
    for task in nb.prange(users * heads):
        u, h = task // heads, task % heads
        head_scores(q[u, h], keys[u, h], n, s[u, h])

@serial
def head_weighted(w, values, n, out):
    """out (64,) = w (n,) @ values (room, 64)[:n] / sum(w)."""
    out[:] = 0
    total = np.float32(0)
    for j in range(n):
        wj = w[j]
        total += wj
        for i in range(out.shape[0]):
            out[i] += wj * values[j, i]
    out /= total

@parallel
def weighted(w, values, n, out):
    """out (users, heads, 64) = each query's weights w (users, heads, n), softmax's
    numerators, times its n values (users, heads, room, 64), over their sum."""
    users, heads = out.shape[:2]
    for task in nb.prange(users * heads):
        u, h = task // heads, task % heads
        head_weighted(w[u, h], values[u, h], n, out[u, h])

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
