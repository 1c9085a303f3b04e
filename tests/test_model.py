"""The model is exact GPT-2 block math: checked against a reference, and against itself across
the three ways of cutting the same work into trips (cached decode, chunks, batches)."""
import importlib.util
import sys
import types

import numpy as np
import pytest

import accounting

import model
from conftest import NUMBA
from engine import blocks, compiled, pool as pool_
from harness.measuring import bench, devices
from engine.blocks import ATTENTION, Paths, ways

CFG = model.TINY  # 2 floors, width 64, 4 heads: the same math, fast
SMALL = model.SIZES["small"]  # the post's: 12 floors, width 768, 12 heads
# float32 against float32 (or float64) with a different order of sums. Measured: the largest
# difference is ~3e-7 on the small model and ~1.3e-6 at full size, for activations up to ~4.
TOL = {"rtol": 1e-5, "atol": 1e-5}


def floors(seed=0):
    return model.floors(CFG, seed)


def book(cap, users=1):
    on = ON["now"]
    return model.notebook(CFG, users, cap,
                          None if on.numpy else on.asarray(np.zeros(1, np.float32)))


def tokens(t, seed=1, width=CFG.width):
    return np.random.default_rng(seed).standard_normal((width, t), dtype=np.float32)


def trip(layers, x, segments):
    """A trip on the test's path: NumPy's kernels, or another library's arrays (the tables and
    tokens copied there, the answer copied back)."""
    on = ON["now"]
    if on.numpy:
        return model.trip(CFG, layers, x, segments, ways(PATH["now"]))
    there = [{k: on.asarray(t) for k, t in p.items()} for p in layers]
    return on.to_numpy(model.trip(CFG, there, on.asarray(x), segments))


FEW = tuple(n for n in compiled.TRIED if n <= compiled.FEW)  # the counts compiled where a
#   trip of more tokens is NumPy's (with the compiled pieces or tiles where they won)
PATHS = {"einsum, one call": Paths(),  # every path the suite may choose must agree
         "matmul, in blocks": Paths("matmul", ((2, 64, 16, None), (2, 256, 16, 64),
                                                     (8, 64, 8, None), (8, 256, 32, 16),
                                                     (64, 64, 32, None))),
         **({"vec": Paths("vec")} if "vec" in ATTENTION else {}),
         **({"compiled": Paths("matmul", compiled=FEW, pieces=compiled.TILED,
                               reading=compiled.READS),
             "compiled whole": Paths("matmul", compiled=compiled.TRIED, reading=compiled.READS,
                                     streams=compiled.STREAMS[-1])}
            if NUMBA else {})}  # (trips of up to 16 tokens on the compiled
#   kernels, the rest NumPy's, up to 64 tokens with the compiled norm, GELU and attention, and
#   every question of several tokens read in the compiled tiles; or every trip of up to 64
#   tokens compiled, its questions read on Numba's threads, a one-token product a row at a
#   time)
PATH = {"now": Paths()}  # the path the trips of a test take
ON = {"now": devices.NUMPY}  # and the arrays it takes it on
DEVICES = [name for name in ("torch:cpu",) if importlib.util.find_spec(name.split(":")[0])]
#   every other array library installed here, on this CPU: the same math through the array API


def on_path(request, monkeypatch):
    """The trips of the test take the path request.param names (the compiled kernels' where
    they run here: loaded from Numba's cache as the test needs them). -> the path"""
    if request.param == "compiled":
        request.getfixturevalue("kernels")
    monkeypatch.setitem(PATH, "now", PATHS[request.param])
    return PATHS[request.param]


@pytest.fixture(params=PATHS)
def paths(request, monkeypatch):
    """Run the test once on every path."""
    return on_path(request, monkeypatch)


@pytest.fixture(params=[*PATHS, *(pytest.param(d, marks=pytest.mark.xdist_group("torch"))
                                  for d in DEVICES)])
def every_library(request, monkeypatch):
    """Run the test once on every path, and on every other array library at hand."""
    if request.param in DEVICES:
        monkeypatch.setitem(ON, "now", devices.device(request.param))
        ON["now"].threads(1)  # a tiny model: one thread, the other core left to the other tests
        return Paths()
    return on_path(request, monkeypatch)


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


def test_one_pass_matches_reference_gpt2(every_library):
    layers, x = floors(), tokens(40)
    ours = trip(layers, x, [(book(40), 40)])
    np.testing.assert_allclose(ours, ref_gpt2(x.T, layers, CFG.heads).T, **TOL)


@pytest.fixture(scope="module")
def small_floors():
    """GPT-2 small's tables, drawn once for the tests that need them at full size."""
    return model.floors(SMALL, 0)


def test_full_size_spot_check_matches_reference(small_floors):
    """One full GPT-2-small spot check: 12 floors of width 768, a short prompt, on every path."""
    layers, x = small_floors, tokens(6, width=SMALL.width)
    reference = ref_gpt2(x.T, layers, SMALL.heads).T
    questions = [Paths("matmul", reading=compiled.READS)] if NUMBA and compiled.available() \
        else []  # (the question read in the compiled tiles, at full size too)
    for path in [*PATHS.values(), Paths("einsum", ((8, 768, 128, None),
                                                          (8, 3072, 256, 768))), *questions]:
        ours = model.trip(SMALL, layers, x, [(model.notebook(SMALL, 1, 6), 6)], ways(path))
        np.testing.assert_allclose(ours, reference, **TOL)


def test_cached_decode_equals_one_causal_pass(every_library):
    layers, x = floors(), tokens(24)
    whole = trip(layers, x, [(book(24), 24)])
    b = book(24)
    typed = np.concatenate([trip(layers, x[:, i:i + 1], [(b, 1)]) for i in range(24)], 1)
    np.testing.assert_allclose(typed, whole, **TOL)
    assert b["len"] == 24


@pytest.mark.parametrize("chunks", [(1, 23), (5, 5, 5, 5, 4), (7, 1, 16), (24,), (3,) * 8])
def test_chunked_prefill_equals_prefill_in_one_go(chunks, paths):
    layers, x = floors(), tokens(24)
    whole = trip(layers, x, [(book(24), 24)])
    b, outs, start = book(24), [], 0
    for c in chunks:
        outs.append(trip(layers, x[:, start:start + c], [(b, c)]))
        start += c
    np.testing.assert_allclose(np.concatenate(outs, 1), whole, **TOL)


@pytest.mark.xdist_group("torch")
@pytest.mark.parametrize("library", DEVICES)
def test_chunked_prefill_equals_prefill_in_one_go_on_another_library(library, monkeypatch):
    monkeypatch.setitem(ON, "now", devices.device(library))
    test_chunked_prefill_equals_prefill_in_one_go((7, 1, 16), Paths())


def prefilled(layers, n, seed, cap):
    b = book(cap)
    trip(layers, tokens(n, seed), [(b, n)])
    return b


def test_batched_decode_equals_each_user_alone(every_library):
    layers = floors()
    lengths = (3, 9, 1, 17)  # different notebook lengths on one trip: one notebook each
    x = tokens(len(lengths), seed=99)
    alone = [trip(layers, x[:, u:u + 1], [(prefilled(layers, n, u, 20), 1)])
             for u, n in enumerate(lengths)]
    books = [prefilled(layers, n, u, 20) for u, n in enumerate(lengths)]
    together = trip(layers, x, [(b, 1) for b in books])
    np.testing.assert_allclose(together, np.concatenate(alone, 1), **TOL)


def test_users_in_one_notebook_equal_each_user_alone(paths):
    """Three users read their own 5-token questions in one trip, then type a word each, all in
    one notebook; a fourth user with another length rides along in a notebook of their own."""
    layers, users = floors(), 3
    questions = [tokens(5, seed=u) for u in range(users)]
    words, loner = tokens(users, seed=98), prefilled(layers, 9, 7, 12)
    shared = book(8, users)
    read = trip(layers, np.concatenate(questions, 1), [(shared, 5)])
    typed = trip(layers, np.concatenate([words, tokens(1, seed=97)], 1),
                 [(shared, 1), (loner, 1)])
    books = [book(8) for _ in range(users)]
    read_alone = [trip(layers, q, [(b, 5)]) for q, b in zip(questions, books)]
    typed_alone = [trip(layers, words[:, u:u + 1], [(b, 1)]) for u, b in enumerate(books)]
    typed_alone.append(trip(layers, tokens(1, seed=97), [(prefilled(layers, 9, 7, 12), 1)]))
    np.testing.assert_allclose(read, np.concatenate(read_alone, 1), **TOL)
    np.testing.assert_allclose(typed, np.concatenate(typed_alone, 1), **TOL)
    assert shared["len"] == 6 and loner["len"] == 10


def test_chunk_riding_with_typers_equals_each_alone(paths):
    layers = floors()
    typers = [prefilled(layers, 5, s, 10) for s in (1, 2)]
    x = tokens(2 + 6, seed=7)
    mixed = trip(layers, x, [(typers[0], 1), (typers[1], 1), (book(6), 6)])
    alone = [trip(layers, x[:, 0:1], [(prefilled(layers, 5, 1, 10), 1)]),
             trip(layers, x[:, 1:2], [(prefilled(layers, 5, 2, 10), 1)]),
             trip(layers, x[:, 2:], [(book(6), 6)])]
    np.testing.assert_allclose(mixed, np.concatenate(alone, 1), **TOL)


@pytest.mark.parametrize("together", [False, True], ids=["two notebooks", "one notebook"])
def test_a_user_never_reads_another_users_notes(together, paths):
    layers, x = floors(), tokens(2, seed=3)
    if together:
        shared = book(8, users=2)
        trip(layers, np.concatenate([tokens(6, seed=1), tokens(6, seed=2)], 1), [(shared, 6)])
        segments, b = [(shared, 1)], {"k": shared["k"][:, 1], "v": shared["v"][:, 1]}
    else:
        a, b = prefilled(layers, 6, 1, 8), prefilled(layers, 6, 2, 8)
        segments = [(a, 1), (b, 1)]
    before = trip(layers, x, segments)
    for book_, _ in segments:
        book_["len"] = 6
    b["k"][:] = 1e3  # scribble over user B's notes
    b["v"][:] = -1e3
    after = trip(layers, x, segments)
    np.testing.assert_array_equal(after[:, 0], before[:, 0])
    assert not np.allclose(after[:, 1], before[:, 1])


def test_same_seed_same_tables_and_outputs():
    one, two = floors(5), floors(5)
    for p, q in zip(one, two):
        for name in p:
            np.testing.assert_array_equal(p[name], q[name])
    x = tokens(4)
    np.testing.assert_array_equal(trip(one, x, [(book(4), 4)]), trip(two, x, [(book(4), 4)]))
    assert not np.array_equal(floors(6)[0]["qkv"], one[0]["qkv"])


FINGERPRINT = """if True:
    import hashlib, numpy as np, model
    from engine import blocks, pool as threads
    cfg = model.gpt2("two floors of small", 2, 768, 12)  # small's width and heads: its kernels
    floors = model.floors(cfg, 0)
    x = np.random.default_rng(1).standard_normal((768, 20), dtype=np.float32)
    b, pool = model.notebook(cfg, 2, 12), threads.workers(2)
    y = model.trip(cfg, floors, x, [(b, 10)], blocks.ways(pool=pool))
    y2 = model.trip(cfg, floors, x[:, :2], [(b, 1)], blocks.ways(pool=pool))
    notes = b["k"].tobytes() + b["v"].tobytes()
    print(hashlib.sha256(y.tobytes() + y2.tobytes() + notes).hexdigest())
"""


def test_the_same_seed_gives_bit_identical_outputs_in_every_process():
    """At small's width, with threads: a fresh process agrees with this one to the last bit, as
    the results that users compare across runs assume."""
    import contextlib
    import io
    import subprocess
    from conftest import ROOT
    fresh = subprocess.Popen([sys.executable, "-c", FINGERPRINT], stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(FINGERPRINT, {})  # meanwhile, the same in this process
    there = fresh.communicate(timeout=300)[0]
    assert there == here.getvalue() and len(there.strip()) == 64


def test_a_trip_stays_float32(monkeypatch):
    """Every piece of a trip returns float32: none silently becomes float64."""
    seen = {}
    for name in ("norm", "gelu", "exp_shifted", "attend", "attention", "table"):
        home = blocks if name == "table" else model  # the suite's table products
        fn = getattr(home, name)

        def spy(*a, fn=fn, name=name, **kw):
            out = fn(*a, **kw)
            seen.setdefault(name, set()).add(out.dtype)
            return out
        monkeypatch.setattr(home, name, spy)
    layers, x, b = floors(), tokens(5), book(6)
    trip(layers, x, [(b, 5)])
    y = trip(layers, x[:, :1], [(b, 1)])
    assert y.dtype == np.float32 and b["k"].dtype == b["v"].dtype == np.float32
    assert seen == {name: {np.dtype(np.float32)} for name in
                    ("norm", "gelu", "exp_shifted", "attend", "attention", "table")}


def test_table_shapes_and_post_sizes(small_floors):
    layers = small_floors
    assert len(layers) == 12
    assert {k: v.shape for k, v in layers[0].items()} == {
        "qkv": (2304, 768), "out": (768, 768), "up": (3072, 768), "down": (768, 3072)}
    assert all(v.dtype == np.float32 for p in layers for v in p.values())
    numbers = sum(v.size for p in layers for v in p.values())
    assert numbers == accounting.table_numbers(SMALL) == 84_934_656


def test_accounting_matches_the_post():
    assert accounting.NOTE_BYTES == 73_728  # 72 KB per note
    assert accounting.table_bytes(SMALL) == 339_738_624  # 340 MB
    assert round(accounting.bytes_read(SMALL, [(512, 1)]) / 1e6) == 377  # activations not fetched
    assert round(accounting.bytes_read(SMALL, [(512, 1)] * 64) / 1e6) == 2756
    assert accounting.table_flops(SMALL, 256) == 2 * 84_934_656 * 256


def test_attention_count_is_causal():
    # one token after 512 notes reads 513; a 4-token prompt reads 1 + 2 + 3 + 4 = 10
    assert accounting.attended_pairs([(512, 1)]) == 513
    assert accounting.attended_pairs([(0, 4)]) == 10
    assert accounting.attended_pairs([(2, 3)]) == 3 + 4 + 5
    assert accounting.attention_flops(model.gpt2("one", 1, 8, 1), [(0, 4)]) == 4 * 8 * 10


def test_riders_are_one_per_user_with_their_notes():
    typers, newcomer = book(10, users=3), book(10)
    typers["len"] = 4
    assert accounting.riders([(typers, 1), (newcomer, 5)]) == [(4, 1)] * 3 + [(0, 5)]


def test_writing_past_capacity_is_a_clear_error_and_changes_nothing():
    layers, b = floors(), book(4)
    trip(layers, tokens(3), [(b, 3)])
    k_before = b["k"].copy()
    with pytest.raises(ValueError, match="notebook full"):
        trip(layers, tokens(2), [(b, 2)])
    assert b["len"] == 3
    np.testing.assert_array_equal(b["k"], k_before)


def test_a_trip_whose_tokens_do_not_match_is_refused():
    layers, b = floors(), book(8, users=2)
    with pytest.raises(ValueError, match="x has 3"):
        trip(layers, tokens(3), [(b, 2)])  # two users of 2 tokens each: 4 columns
    with pytest.raises(ValueError, match="twice"):
        trip(layers, tokens(4), [(b, 1), (b, 1)])
    assert b["len"] == 0


# ---- a recorded trip

def test_a_recorded_trip_gives_the_same_answers_bit_for_bit():
    layers, x = floors(), tokens(9)
    plain = trip(layers, x, [(book(10), 9)])
    watch = {}
    recorded = bench.watched(CFG, layers, x, [(book(10), 9)], model.plain, watch)
    np.testing.assert_array_equal(recorded, plain)
    assert set(watch) == {"tables", "attention", "elementwise", "other", "trip"}


def test_each_piece_is_charged_to_its_part_and_the_parts_add_up():
    ticks = iter(range(10 ** 6))  # every reading of the clock is one second later
    layers, watch = floors(), {}
    clock = types.SimpleNamespace(mark=lambda: next(ticks), between=lambda a, b: b - a)
    bench.watched(CFG, layers, tokens(3), [(book(3), 3)], model.plain, watch, clock)
    n = CFG.layers  # each floor: 4 table products, attention, 2 norms + GELU + 2 adds
    assert (watch["tables"], watch["attention"], watch["elementwise"]) == (4 * n, n, 5 * n)
    assert watch["trip"] == 2 * 10 * n + 1  # two readings per piece, then the last one
    assert watch["other"] == watch["trip"] - 10 * n  # what lies between the pieces
    model.trip(CFG, layers, tokens(1), [(book(3), 1)])  # not recorded ...
    assert watch["trip"] == 2 * 10 * n + 1  # ... leaves it be


# ---- the same answers when the work is shared among threads

@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(pool_, "PARALLEL_MIN", 0)  # share even the tiny test model's work
    return pool_.workers(2)


def test_threads_give_the_same_answers(pool, paths):
    layers, x = floors(), tokens(20)
    alone = trip(layers, x, [(book(20), 20)])
    shared = model.trip(CFG, layers, x, [(book(20), 20)], ways(paths, pool))
    np.testing.assert_allclose(shared, alone, **TOL)


def test_threads_give_the_same_batched_decode(pool, paths):
    layers = floors()
    typers, loner = book(12, users=3), prefilled(layers, 7, 4, 12)
    trip(layers, tokens(15, seed=5), [(typers, 5)])
    x = tokens(4, seed=9)
    alone = trip(layers, x, [(typers, 1), (loner, 1)])
    typers["len"], loner["len"] = 5, 7  # back to where they were
    shared = model.trip(CFG, layers, x, [(typers, 1), (loner, 1)], ways(paths, pool))
    np.testing.assert_allclose(shared, alone, **TOL)


def test_a_typing_trip_past_the_compiled_counts_reads_its_notes_with_the_shared_kernel(
        pool, kernels):
    """21 typers, more tokens than any compiled trip: NumPy's trip, whose one-token attention
    the compiled kernel reads where 32 typers' trips were faster so, its tasks shared among the
    pool's threads."""
    layers = floors()
    typers, loner = book(64, users=20), prefilled(layers, 7, 4, 12)
    trip(layers, tokens(20 * 60, seed=5), [(typers, 60)])  # (enough notes to share out)
    x = tokens(21, seed=9)
    alone = model.trip(CFG, layers, x, [(typers, 1), (loner, 1)])
    typers["len"], loner["len"] = 60, 7  # back to where they were
    how = ways(Paths("matmul", compiled=FEW, pieces=(32,)), pool)
    assert how(21).reads is compiled.attention_shared
    shared = model.trip(CFG, layers, x, [(typers, 1), (loner, 1)], how)
    np.testing.assert_allclose(shared, alone, **TOL)


@pytest.mark.parametrize("block", [2, 3, compiled.BLOCK])
def test_a_question_read_in_blocks_equals_the_models_reading(pool, kernels, block):
    """Two users asking 5 tokens each over 4 notes, beside 3 typers with 6 notes: the questions
    read in blocks of queries (one, or several and a short last), each block's scores no
    further than its last query, in the compiled tiles; the typers as the model reads them."""
    layers = floors()
    for timed in (compiled.READS[:1], ()):  # the questions' length timed faster so, or not
        askers, typers = book(12, users=2), book(12, users=3)
        trip(layers, tokens(2 * 4, seed=2), [(askers, 4)])
        trip(layers, tokens(3 * 6, seed=4), [(typers, 6)])
        x = tokens(2 * 5 + 3, seed=7)
        segments = [(askers, 5), (typers, 1)]
        alone = model.trip(CFG, layers, x, segments)
        askers["len"], typers["len"] = 4, 6  # back to where they were
        w = ways(Paths("matmul"), pool)
        how = lambda n: types.SimpleNamespace(**{**vars(w(n)), "reads": lambda *a: (
            compiled.reading(*a, typed=model.attention, won=timed, block=block))})
        np.testing.assert_allclose(model.trip(CFG, layers, x, segments, how), alone, **TOL)


@pytest.mark.parametrize("notes, asked, block", [(37, 29, 12), (0, 50, compiled.BLOCK),
                                                  (16, 1, compiled.BLOCK), (5, 7, 6)])
def test_a_question_at_gpt2s_head_width_equals_the_models_reading(pool, kernels, notes, asked,
                                                                  block):
    """The compiled question's tiles at a head of 64 numbers (panels of values of each width
    this CPU takes), two users with `notes` notes each asking `asked` tokens: tiles of six
    queries cut short at a block's end, panels of notes cut short at the notebook's, every
    query's own notes."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((SMALL.width, 2 * asked), dtype=np.float32)
               for _ in range(3))
    books = [model.notebook(SMALL, 2, notes + asked + 3) for _ in range(2)]
    for b in books:
        b["k"][0, ..., :notes] = rng.standard_normal(b["k"][0, ..., :notes].shape)
        b["v"][0, :, :, :notes] = rng.standard_normal(b["v"][0, :, :, :notes].shape)
        b["len"] = notes
    books[1]["k"][...], books[1]["v"][...] = books[0]["k"], books[0]["v"]
    reference = model.attention(SMALL, q, k, v, [(books[1], asked)], 0)
    n = notes + asked  # the new notes written into the notebook as the model writes them
    for panel in compiled.question_panels():  # (each panel this CPU's width may take)
        books[0]["len"], out = notes, np.empty_like(q)
        compiled.asked(SMALL, q, k, v, books[0], asked, slice(0, 2 * asked), 0,
                       ways(Paths("matmul", panel=panel), pool)(2 * asked), out, block)
        np.testing.assert_allclose(out, reference, **TOL)
        np.testing.assert_array_equal(books[0]["k"][0, ..., :n], books[1]["k"][0, ..., :n])
        np.testing.assert_array_equal(books[0]["v"][0, :, :, :n], books[1]["v"][0, :, :, :n])


def test_a_compiled_trips_question_is_read_by_the_kernel_and_equals_the_models(kernels,
                                                                               monkeypatch):
    """A question in a compiled trip (a reading of up to 16 tokens, or a piece of one) went to
    NumPy's small calls on one thread: it is read by the question's kernel, beside typers read
    by the one-token kernel, and gives the model's answer."""
    layers, asked, real = floors(), [], compiled.asked
    monkeypatch.setattr(compiled, "asked", lambda *a, **kw: asked.append(a[5]) or real(*a, **kw))
    askers, typers = book(12, users=1), prefilled(layers, 4, 3, 12)
    x = tokens(5 + 1, seed=11)
    alone = model.trip(CFG, layers, x, [(askers, 5), (typers, 1)])
    askers["len"], typers["len"] = 0, 4
    compiled_trip = ways(Paths("matmul", compiled=compiled.TRIED))
    np.testing.assert_allclose(model.trip(CFG, layers, x, [(askers, 5), (typers, 1)],
                                          compiled_trip), alone, **TOL)
    assert asked == [5] * CFG.layers  # the question's 5 tokens, on every floor


def test_the_tiles_shared_among_the_pools_threads_give_every_row_once(pool, kernels):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((301, 200), dtype=np.float32) / np.float32(np.sqrt(200))
    x = rng.standard_normal((200, 40), dtype=np.float32)
    parts = []

    def share(fn, n, size):
        parts.append(n)
        pool_.share(pool, fn, n, size)
    got = compiled.table_shared(w, x, share)
    assert parts == [200, 301] and got.shape == (301, 40)  # x's rows laid out, then w's met
    np.testing.assert_allclose(got, w @ x, rtol=1e-5, atol=1e-5)


def test_a_trip_past_the_compiled_counts_takes_the_tiles_for_the_counts_they_won(pool,
                                                                                 kernels):
    """21 typers: NumPy's trip, whose table products are the tiles' where 32 tokens' were
    faster on them; past the largest count timed, as it did."""
    paths = Paths("matmul", compiled=FEW, tiled=(32,))
    assert [n for n in (16, 17, 32, 33, 64) if paths.tiles(n)] == [17, 32]
    longer = Paths("matmul", tiled=(32, 256), pieces=(32,))  # the tables' counts, not the pieces'
    assert [n for n in (32, 33, 128, 129, 256, 257) if longer.tiles(n)] == [32, 129, 256]
    widest = Paths("matmul", tiled=(1024,))  # past the largest count timed: as it did
    assert [n for n in (256, 257, 1024, 1032) if widest.tiles(n)] == [257, 1024, 1032]
    assert [n for n in (32, 33, 128) if longer.takes_pieces(n)] == [32]
    assert "compiled tiles for the table products of trips of 17 to 32, 129 to 256 tokens" in \
        str(longer)
    layers = floors()
    typers, loner = book(8, users=20), prefilled(layers, 7, 4, 12)
    trip(layers, tokens(20 * 6, seed=5), [(typers, 6)])
    x = tokens(21, seed=9)
    alone = model.trip(CFG, layers, x, [(typers, 1), (loner, 1)])
    typers["len"], loner["len"] = 6, 7  # back to where they were
    shared = model.trip(CFG, layers, x, [(typers, 1), (loner, 1)], ways(paths, pool))
    np.testing.assert_allclose(shared, alone, **TOL)


def test_shared_work_is_done_once_in_even_contiguous_parts(pool):
    import threading
    seen = []
    pool_.share(pool, lambda part: seen.append((part, threading.get_ident())), 10, size=1)
    assert sorted((p.start, p.stop) for p, _ in seen) == [(0, 5), (5, 10)]
    assert len({who for _, who in seen}) == 2
    seen.clear()
    pool_.share(None, lambda part: seen.append((part, None)), 10, size=1)
    assert [p for p, _ in seen] == [slice(0, 10)]


# ---- the limit of a trip

def test_limit_of_a_fetch_bound_trip():
    # 1 token, 512 notes: 377.5 MB at 10 GB/s = 37.7 ms; 0.17 GFLOP at 100 GFLOP/s = 1.7 ms
    seconds, bound = accounting.limit(SMALL, [(512, 1)], bytes_per_s=10e9, flops_per_s=100e9)
    assert bound == "forklift"
    assert seconds == pytest.approx((339_738_624 + 512 * 73_728) / 10e9)


def test_limit_of_a_math_bound_trip_counts_causal_attention():
    # a 256-token question: tables 2 x 84,934,656 x 256 FLOPs, causal attention, and the
    # elementwise work: 48 FLOPs per token and feature of each floor
    seconds, bound = accounting.limit(SMALL, [(0, 256)], bytes_per_s=10e9, flops_per_s=100e9)
    flops = 2 * 84_934_656 * 256 + 12 * 4 * 768 * (256 * 257 // 2) + 12 * 48 * 768 * 256
    assert bound == "workbench" and seconds == pytest.approx(flops / 100e9)


@pytest.mark.parametrize("riders", [[(0, 1024)], [(512, 1)] * 16, [(600, 1)] * 8 + [(256, 128)]],
                         ids=["prefill", "decode", "a chunk riding with typers"])
def test_the_parts_add_up_to_the_trip(riders):
    parts = accounting.costs(SMALL, riders)
    assert set(parts) == {"tables", "attention", "elementwise"}
    assert sum(b for b, _ in parts.values()) == accounting.bytes_read(SMALL, riders)
    assert sum(f for _, f in parts.values()) == accounting.trip_flops(SMALL, riders)
    assert parts["tables"] == (accounting.table_bytes(SMALL),
                               accounting.table_flops(SMALL, sum(t for _, t in riders)))
    assert parts["attention"] == (accounting.NOTE_BYTES * sum(n for n, _ in riders),
                                  accounting.attention_flops(SMALL, riders))
    limits = accounting.part_limits(SMALL, riders, 10e9, 100e9)
    assert limits["tables"] == max(accounting.table_bytes(SMALL) / 10e9, parts["tables"][1] / 100e9)
    assert limits["elementwise"] == parts["elementwise"][1] / 100e9  # nothing to fetch



def test_a_table_in_blocks_gives_each_row_once(pool):
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((100, 30), dtype=np.float32), tokens(3, width=30)
    for block in (None, (1, None), (7, None), (64, None), (500, None), (7, 8), (64, 30), (3, 1)):
        for p in (None, pool):
            np.testing.assert_allclose(blocks.table(w, x, p, block), w @ x, rtol=1e-5, atol=1e-5)


def test_a_paths_blocks_follow_the_column_count_and_the_tables_width():
    paths = Paths("matmul", ((2, 64, 512, None), (2, 256, 128, 64), (4, 64, 256, None),
                                   (16, 64, None, None)))
    assert [paths.block(n, 64) for n in (1, 2, 3, 4, 8, 16, 17)] == [
        None, (512, None), (256, None), (256, None), None, None, None]
    assert [paths.block(n, 256) for n in (1, 2, 3)] == [None, (128, 64), None]
    assert paths.block(2, 100) is None  # a width it was not chosen for: one call a thread
    assert str(paths) == ("attention by matmul; table blocks at 2, 4, 16 tokens (rows, or rows "
                          "x inputs at a time): tables of 64 inputs 512, 256, unblocked; of 256 "
                          "inputs 128x64, unblocked, unblocked")
    assert str(Paths("vec", ((2, 64, None, None),))) == "attention by vec; tables unblocked"


def imports_of(module):
    import ast
    tree = ast.parse(open(module.__file__).read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    return imported | {node.module.split(".")[0] for node in ast.walk(tree)
                       if isinstance(node, ast.ImportFrom)}


def test_the_model_is_the_posts_own_file_and_imports_nothing_of_the_suite():
    """model.py stands on NumPy and its accounting alone (another array library's arrays reach
    it through the array API, array_api_compat, imported only then), accounting.py on Python
    alone: the suite hands the model faster kernels, never the reverse; and the post's model
    reads in under 300 lines."""
    import accounting
    assert imports_of(model) <= {"contextlib", "functools", "math", "types", "numpy",
                                 "array_api_compat", "accounting"}
    assert imports_of(accounting) <= {"dataclasses", "math"}
    assert len(open(model.__file__).read().splitlines()) < 300
    assert model.trip(CFG, floors(), tokens(3), [(book(3), 3)]).dtype == np.float32  # plain ways


@pytest.mark.parametrize("rows,inputs,tokens", [(7, 33, 1), (7, 33, 3), (9, 40, 5), (10, 64, 8),
                                                (11, 64, 13), (64, 192, 16), (9, 1600, 18),
                                                (13, 100, 32), (13, 1100, 50)])
def test_a_compiled_table_product_gives_every_row_and_token_once(rows, inputs, tokens,
                                                                 kernels):
    """Six rows by sixteen or eight tokens at a time, the rows left over one by one, the tokens
    padded to a multiple of 8 and laid out in panels of 16 (and a last of 8); up to four tokens
    two rows by four tokens: every shape's answer is w @ x's (one token; rows, tokens and
    inputs not a multiple of any of those; two panels, and three and a last of 8)."""
    rng = np.random.default_rng(rows * tokens)
    w = rng.standard_normal((rows, inputs), dtype=np.float32) / np.float32(np.sqrt(inputs))
    x = rng.standard_normal((inputs, tokens), dtype=np.float32)  # (answers of about 1, as a
    got = compiled.table(w, x)  # model's tables give, whose float32 rounding the tolerance is)
    assert got.shape == (rows, tokens) and got.dtype == np.float32
    np.testing.assert_allclose(got, w @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(compiled.table(w, np.asfortranarray(x)), got)  # (8 or 16
    #   tokens are their own panel: x as it is, where its rows lie as a panel's would)
