"""The model is exact GPT-2 block math: checked against a reference, and against itself across
the three ways of cutting the same work into trips (cached decode, chunks, batches)."""
import numpy as np
import pytest

import model

CFG = model.SMALL  # 2 floors, width 64, 4 heads: the same math, fast
# float32 against float32 (or float64) with a different order of sums. Measured: the largest
# difference is ~3e-7 on the small model and ~1.3e-6 at full size, for activations up to ~4.
TOL = {"rtol": 1e-5, "atol": 1e-5}


def tables(seed=0):
    return model.tables(seed, CFG["layers"], CFG["width"])


def book(cap):
    return model.notebook(cap, CFG["layers"], CFG["width"], CFG["heads"])


def tokens(t, seed=1, width=CFG["width"]):
    return np.random.default_rng(seed).standard_normal((width, t), dtype=np.float32)


def trip(layers, x, segments):
    return model.trip(layers, x, segments, heads=CFG["heads"])


# ---- an independent reference: picoGPT's GPT-2, token-major, float64, written from the paper's
# formulas (biases zero, LayerNorm scale one and shift zero; our W @ x is its x @ W.T)

def ref_layer_norm(x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def ref_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def ref_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_gpt2(x, layers, n_head):
    """x: (tokens, width) -> (tokens, width), GPT-2's blocks without embeddings or head."""
    x = x.astype(np.float64)
    n = x.shape[0]
    causal = (1 - np.tri(n)) * -1e10
    for p in layers:
        qkv = ref_layer_norm(x) @ p["qkv"].T.astype(np.float64)
        heads = [np.split(m, n_head, axis=-1) for m in np.split(qkv, 3, axis=-1)]
        outs = [ref_softmax(q @ k.T / np.sqrt(q.shape[-1]) + causal) @ v for q, k, v in zip(*heads)]
        x = x + np.hstack(outs) @ p["out"].T.astype(np.float64)
        x = x + ref_gelu(ref_layer_norm(x) @ p["up"].T.astype(np.float64)) @ p["down"].T.astype(
            np.float64)
    return x


def test_one_pass_matches_reference_gpt2():
    layers, x = tables(), tokens(40)
    ours = trip(layers, x, [(book(40), 40)])
    np.testing.assert_allclose(ours, ref_gpt2(x.T, layers, CFG["heads"]).T, **TOL)


def test_full_size_spot_check_matches_reference():
    """One full GPT-2-small spot check: 12 floors of width 768, a short prompt."""
    layers, x = model.tables(0), tokens(6, width=model.WIDTH)
    ours = model.trip(layers, x, [(model.notebook(6), 6)])
    np.testing.assert_allclose(ours, ref_gpt2(x.T, layers, model.HEADS).T, **TOL)


def test_cached_decode_equals_one_causal_pass():
    layers, x = tables(), tokens(24)
    whole = trip(layers, x, [(book(24), 24)])
    b = book(24)
    typed = np.concatenate([trip(layers, x[:, i:i + 1], [(b, 1)]) for i in range(24)], 1)
    np.testing.assert_allclose(typed, whole, **TOL)
    assert b["len"] == 24


@pytest.mark.parametrize("chunks", [(1, 23), (5, 5, 5, 5, 4), (7, 1, 16), (24,), (3,) * 8])
def test_chunked_prefill_equals_prefill_in_one_go(chunks):
    layers, x = tables(), tokens(24)
    whole = trip(layers, x, [(book(24), 24)])
    b, outs, start = book(24), [], 0
    for c in chunks:
        outs.append(trip(layers, x[:, start:start + c], [(b, c)]))
        start += c
    np.testing.assert_allclose(np.concatenate(outs, 1), whole, **TOL)


def prefilled(layers, n, seed, cap):
    b = book(cap)
    trip(layers, tokens(n, seed), [(b, n)])
    return b


def test_batched_decode_equals_each_user_alone():
    layers = tables()
    lengths = (3, 9, 1, 17)  # different notebook lengths on one trip
    x = tokens(len(lengths), seed=99)
    alone = [trip(layers, x[:, u:u + 1], [(prefilled(layers, n, u, 20), 1)])
             for u, n in enumerate(lengths)]
    books = [prefilled(layers, n, u, 20) for u, n in enumerate(lengths)]
    together = trip(layers, x, [(b, 1) for b in books])
    np.testing.assert_allclose(together, np.concatenate(alone, 1), **TOL)


def test_chunk_riding_with_typers_equals_each_alone():
    layers = tables()
    typers = [prefilled(layers, 5, s, 10) for s in (1, 2)]
    x = tokens(2 + 6, seed=7)
    mixed = trip(layers, x, [(typers[0], 1), (typers[1], 1), (book(6), 6)])
    alone = [trip(layers, x[:, 0:1], [(prefilled(layers, 5, 1, 10), 1)]),
             trip(layers, x[:, 1:2], [(prefilled(layers, 5, 2, 10), 1)]),
             trip(layers, x[:, 2:], [(book(6), 6)])]
    np.testing.assert_allclose(mixed, np.concatenate(alone, 1), **TOL)


def test_a_user_never_reads_another_users_notebook():
    layers = tables()
    a, b = prefilled(layers, 6, 1, 8), prefilled(layers, 6, 2, 8)
    x = tokens(2, seed=3)
    before = trip(layers, x, [(a, 1), (b, 1)])
    a["len"] = b["len"] = 6
    b["k"][:] = 1e3  # scribble over user B's notes
    b["v"][:] = -1e3
    after = trip(layers, x, [(a, 1), (b, 1)])
    np.testing.assert_array_equal(after[:, 0], before[:, 0])
    assert not np.allclose(after[:, 1], before[:, 1])


def test_same_seed_same_tables_and_outputs():
    one, two = tables(5), tables(5)
    for p, q in zip(one, two):
        for name in p:
            np.testing.assert_array_equal(p[name], q[name])
    x = tokens(4)
    np.testing.assert_array_equal(trip(one, x, [(book(4), 4)]), trip(two, x, [(book(4), 4)]))
    assert not np.array_equal(tables(6)[0]["qkv"], one[0]["qkv"])


def test_a_trip_stays_float32(monkeypatch):
    """Every piece of a trip returns float32: none silently becomes float64."""
    seen = []
    for name in ("norm", "gelu", "exp_shifted", "attend"):
        fn = getattr(model, name)

        def spy(*a, fn=fn, **kw):
            out = fn(*a, **kw)
            seen.append(out.dtype)
            return out
        monkeypatch.setattr(model, name, spy)
    layers, x, b = tables(), tokens(5), book(6)
    trip(layers, x, [(b, 5)])
    y = trip(layers, x[:, :1], [(b, 1)])
    assert y.dtype == np.float32 and b["k"].dtype == b["v"].dtype == np.float32
    assert len(seen) == 2 * 2 * 5  # 2 trips x 2 floors x (2 norms, gelu, exp, attend)
    assert set(seen) == {np.dtype(np.float32)}


def test_table_shapes_and_post_sizes():
    layers = model.tables(0)
    assert len(layers) == 12
    assert {k: v.shape for k, v in layers[0].items()} == {
        "qkv": (2304, 768), "out": (768, 768), "up": (3072, 768), "down": (768, 3072)}
    assert all(v.dtype == np.float32 for p in layers for v in p.values())
    assert sum(v.size for p in layers for v in p.values()) == model.table_numbers() == 84_934_656


def test_accounting_matches_the_post():
    assert model.NOTE_BYTES == 73_728  # 72 KB per note
    assert model.TABLE_BYTES == 339_738_624  # 340 MB
    assert round(model.bytes_read([(512, 1)]) / 1e6) == 377
    assert round(model.bytes_read([(512, 1)] * 64) / 1e6) == 2756
    assert model.table_flops(256) == 2 * 84_934_656 * 256


def test_attention_count_is_causal():
    # one token after 512 notes reads 513; a 4-token prompt reads 1 + 2 + 3 + 4 = 10
    assert model.attended_pairs([(512, 1)]) == 513
    assert model.attended_pairs([(0, 4)]) == 10
    assert model.attended_pairs([(2, 3)]) == 3 + 4 + 5
    assert model.attention_flops([(0, 4)], layers=1, width=8) == 4 * 8 * 10


def test_writing_past_capacity_is_a_clear_error_and_changes_nothing():
    layers, b = tables(), book(4)
    trip(layers, tokens(3), [(b, 3)])
    k_before = b["k"].copy()
    with pytest.raises(ValueError, match="notebook full"):
        trip(layers, tokens(2), [(b, 2)])
    assert b["len"] == 3
    np.testing.assert_array_equal(b["k"], k_before)


# ---- the same answers when the work is shared among threads

@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(model, "PARALLEL_MIN", 0)  # share even the tiny test model's work
    return model.workers(2)


def test_threads_give_the_same_answers(pool):
    layers, x = tables(), tokens(20)
    alone = trip(layers, x, [(book(20), 20)])
    shared = model.trip(layers, x, [(book(20), 20)], heads=CFG["heads"], pool=pool)
    np.testing.assert_allclose(shared, alone, **TOL)


def test_threads_give_the_same_batched_decode(pool):
    layers = tables()
    books = model.notebooks(3, 12, CFG["layers"], CFG["width"], CFG["heads"])
    for u, b in enumerate(books):
        trip(layers, tokens(5, seed=u), [(b, 5)])
    x = tokens(3, seed=9)
    alone = trip(layers, x, [(b, 1) for b in books])
    for b in books:
        b["len"] = 5  # back to where they were
    shared = model.trip(layers, x, [(b, 1) for b in books], heads=CFG["heads"], pool=pool)
    np.testing.assert_allclose(shared, alone, **TOL)


# ---- users side by side on one shelf are read in one pass: same answers as alone

def test_users_on_one_shelf_equal_each_user_alone():
    layers, lengths = tables(), (4, 4, 9, 9, 9, 2)  # runs of equal lengths, and a loner
    books = model.notebooks(len(lengths), 12, CFG["layers"], CFG["width"], CFG["heads"])
    for u, (b, n) in enumerate(zip(books, lengths)):
        trip(layers, tokens(n, seed=u), [(b, n)])
    x = tokens(len(lengths), seed=99)
    assert [len(g[2]) for g in model.groups([(b, 1) for b in books])] == [2, 3, 1]
    together = trip(layers, x, [(b, 1) for b in books])
    alone = [trip(layers, x[:, u:u + 1], [(prefilled(layers, n, u, 12), 1)])
             for u, n in enumerate(lengths)]
    np.testing.assert_allclose(together, np.concatenate(alone, 1), **TOL)


def test_a_user_on_a_shared_shelf_never_reads_a_neighbours_notes():
    layers = tables()
    a, b = model.notebooks(2, 8, CFG["layers"], CFG["width"], CFG["heads"])
    for u, book_ in enumerate((a, b)):
        trip(layers, tokens(6, seed=u), [(book_, 6)])
    x = tokens(2, seed=3)
    before = trip(layers, x, [(a, 1), (b, 1)])
    a["len"] = b["len"] = 6
    b["k"][:] = 1e3
    b["v"][:] = -1e3
    after = trip(layers, x, [(a, 1), (b, 1)])
    np.testing.assert_array_equal(after[:, 0], before[:, 0])
    assert not np.allclose(after[:, 1], before[:, 1])


# ---- the limit of a trip

def test_limit_of_a_fetch_bound_trip():
    # 1 token, 512 notes: 377.5 MB at 10 GB/s = 37.7 ms; 0.17 GFLOP at 100 GFLOP/s = 1.7 ms
    seconds, bound = model.limit([(512, 1)], bytes_per_s=10e9, flops_per_s=100e9)
    assert bound == "forklift"
    assert seconds == pytest.approx((339_738_624 + 512 * 73_728) / 10e9)


def test_limit_of_a_math_bound_trip_counts_causal_attention():
    # a 256-token question: tables 2 x 84,934,656 x 256 FLOPs plus causal attention
    seconds, bound = model.limit([(0, 256)], bytes_per_s=10e9, flops_per_s=100e9)
    flops = 2 * 84_934_656 * 256 + 12 * 4 * 768 * (256 * 257 // 2)
    assert bound == "workbench" and seconds == pytest.approx(flops / 100e9)


def test_limit_binds_on_the_slower_job():
    fetch, _ = model.limit([(0, 4)], bytes_per_s=1e9, flops_per_s=1e15)
    work, _ = model.limit([(0, 4)], bytes_per_s=1e15, flops_per_s=1e9)
    both, bound = model.limit([(0, 4)], bytes_per_s=1e9, flops_per_s=1e9)
    assert both == max(fetch, work) and bound == ("forklift" if fetch > work else "workbench")


def test_pool_jobs_run_once_each_in_even_shares():
    import threading
    pool = model.workers(2)
    seen = []
    model.each(pool, lambda i: seen.append((i, threading.get_ident())), [(i,) for i in range(16)])
    assert sorted(i for i, _ in seen) == list(range(16))
    by_thread = {}
    for i, who in seen:
        by_thread.setdefault(who, []).append(i)
    assert sorted(len(v) for v in by_thread.values()) == [8, 8]
    assert model.split(10, None) == [slice(0, 10)]
