"""Work shared by threads: NumPy lets go of the GIL inside matmuls and elementwise loops, so a
pool of threads can split one op's work. Every op cuts its work into one contiguous share per
thread, and the caller does the first share."""
import concurrent.futures
import contextlib
import functools

import threadpoolctl

PARALLEL_MIN = 1 << 16  # numbers; less work than this is quicker on one thread than handed out


def sharing(pool, tokens):
    """The pool a trip of `tokens` tokens uses: none for one token, whose table products are
    matrix-vector products that BLAS's own threads hand out faster."""
    return pool if tokens > 1 else None


def workers(threads):
    """A pool for `threads` threads: the caller's own plus threads - 1 helpers (None for 1)."""
    if threads <= 1:
        return None
    return {"threads": threads, "helpers": concurrent.futures.ThreadPoolExecutor(threads - 1)}


def share(pool, fn, n, size):
    """fn(part) for 0..n-1 cut into one contiguous part per thread, or fn(all of it) when there
    is no pool or the work (`size` numbers to touch) is too small to hand out."""
    parts = min(n, pool["threads"]) if pool is not None and size >= PARALLEL_MIN else 1
    if parts == 1:
        return fn(slice(0, n))
    cuts = [n * i // parts for i in range(parts + 1)]
    helping = [pool["helpers"].submit(fn, slice(a, b)) for a, b in zip(cuts[1:-1], cuts[2:])]
    fn(slice(cuts[0], cuts[1]))
    for f in helping:
        f.result()


def blas_threads(pool):
    """With a pool, the pool's threads do all the sharing and BLAS keeps to one thread: BLAS's
    own threads would otherwise spin on a core after each product, starving the pool."""
    if pool is None:
        return contextlib.nullcontext()
    return blas().limit(limits=1, user_api="blas")


@functools.lru_cache(maxsize=None)
def blas():
    """The BLAS libraries NumPy loaded, found once, when first needed (not at import)."""
    return threadpoolctl.ThreadpoolController()
