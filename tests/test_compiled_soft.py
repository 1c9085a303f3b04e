"""The compiled path fails soft: wherever Numba cannot run the kernels (absent, its JIT off, no
threading layer, no threads, a cache file it cannot read, a checkout it cannot write), a run
says so in one line and takes NumPy's way; where it can, its choice is timed in turns and kept
on NumPy's way unless the kernels win beyond their spread, and its answers are NumPy's at the
extremes too. Each check of the kernels loading runs compiled.available() in a fresh process
(a second or so: the kernels come from the cache the import below filled)."""
import ast
import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

import model
from conftest import NUMBA, ROOT, script
from engine import cache, compiled
from harness.measuring import contests, host
from engine.blocks import Paths, ways

needs_numba = pytest.mark.usefixtures("kernels")  # (loaded: compiled once, for every process)
KERNELS = os.path.join(ROOT, "engine")


def loads(env=(), cwd=ROOT):
    """compiled.available() in a fresh process, with these environment variables set: -> the
    finished process."""
    return subprocess.run(
        [sys.executable, "-c", "from engine import compiled; "
                               "print(compiled.available())"],
        capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, **dict(env)})


def numpys_way(r, *words):
    """The process found the kernels unusable, and said why in one line on stderr."""
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "the compiled kernels could not load" in lines[0], r.stderr
    assert "NumPy's way" in lines[0] and "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.skipif(not NUMBA, reason="Numba is not installed here")
def test_numbas_jit_switched_off_is_numpys_way_in_one_line_and_no_wait():
    """NUMBA_DISABLE_JIT=1 ran the kernels as plain Python for 14 s, then failed."""
    numpys_way(loads({"NUMBA_DISABLE_JIT": "1"}), "NUMBA_DISABLE_JIT")


@pytest.mark.skipif(not NUMBA or importlib.util.find_spec("tbb") is not None,
                    reason="needs Numba, and no TBB")
def test_a_threading_layer_that_cannot_load_is_numpys_way_in_one_line():
    """NUMBA_THREADING_LAYER=tbb without TBB: "No threading layer could be loaded" ended the
    worker."""
    numpys_way(loads({"NUMBA_THREADING_LAYER": "tbb"}), "threading layer")


@pytest.mark.skipif(not NUMBA, reason="Numba is not installed here")
def test_no_threads_for_numba_is_said_not_silent():
    """NUMBA_NUM_THREADS=0: Numba refuses to start, and the kernels were dropped silently."""
    numpys_way(loads({"NUMBA_NUM_THREADS": "0"}), "threads")


def checkout(tmp_path):
    """A copy of the suite's code (harness/, engine/, model.py, accounting.py), with the compiled
    kernels' cache."""
    copy = tmp_path / "checkout"
    shutil.copytree(os.path.join(ROOT, "harness"), copy / "harness")
    shutil.copytree(os.path.join(ROOT, "engine"), copy / "engine")
    for name in ("model.py", "accounting.py"):
        shutil.copy(os.path.join(ROOT, name), copy)
    return copy


@needs_numba
@pytest.mark.skipif("NUMBA_CACHE_DIR" in os.environ, reason="the kernels' cache is elsewhere")
@pytest.mark.parametrize("spoil", ["an index cut to nothing", "a data file of junk"])
def test_a_cache_file_numba_cannot_read_is_numpys_way_once_and_removed(tmp_path, spoil):
    """A 0-byte .nbi (EOFError) or junk in a .nbc (UnpicklingError) ended every later run: now
    one line, NumPy's way, and the kernels' own cache files removed (no other file), so that the
    next run compiles them afresh."""
    copy = checkout(tmp_path)
    cache = copy / "engine" / "__pycache__"
    index = spoil.startswith("an index")
    ours = list(cache.glob("kernels.table-*." + ("nbi" if index else "nbc")))
    assert ours, "the compiled kernels' cache is empty"
    for path in ours:  # (one for each line the kernel was on, as the file was edited)
        path.write_bytes(b"" if index else b"junk\n")
    (cache / "another.nbi").write_bytes(b"")  # not the kernels': it stays
    numpys_way(loads(cwd=copy), "Numba's cache")
    assert not list(cache.glob("kernels.*.nb?")) and (cache / "another.nbi").exists()


@pytest.mark.skipif(not NUMBA, reason="Numba is not installed here")
def test_a_checkout_numba_cannot_write_keeps_its_cache_in_a_folder_of_the_users(tmp_path):
    """A read-only checkout and no writable home: "cannot cache function 'dot': no locator
    available". Here the kernels' __pycache__ is a file, which no one can write in, even root."""
    copy = checkout(tmp_path)
    shutil.rmtree(copy / "engine" / "__pycache__")
    (copy / "engine" / "__pycache__").write_text("")
    (tmp_path / "home").write_text("")  # a home below a file: nothing can be made there
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    r = subprocess.run(
        [sys.executable, "-c", "import os; from engine import cache; "
                               "cache.keep_cache(); print(os.environ['NUMBA_CACHE_DIR']); "
                               "from engine import kernels"],
        capture_output=True, text=True, timeout=120, cwd=copy,
        env={**env, "HOME": str(tmp_path / "home" / "x"), "TMPDIR": str(tmp_path / "tmp")})
    assert r.returncode == 0, r.stderr
    folder = r.stdout.strip()
    assert os.path.dirname(folder) == str(tmp_path / "tmp")
    assert os.stat(folder).st_mode & 0o777 == 0o700  # this user's alone


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX's owners and modes")
def test_a_cache_folder_the_user_set_is_kept_and_one_others_can_write_is_refused(
        tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    cache.keep_cache()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")
    monkeypatch.setattr(cache.tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / f"prefill-vs-decode-{os.getuid()}-numba"
    planted.mkdir()
    planted.chmod(0o777)  # another user's could plant a cache file there, which runs code
    assert cache.own_temp() is None
    planted.chmod(0o700)
    assert cache.own_temp() == str(planted)


@pytest.mark.kernels
def test_a_run_without_numba_takes_numpys_way_and_says_so_once(tmp_path):
    """Numba absent (here: made unimportable): a quick run asked for the compiled kernels
    measures NumPy's way, says so in one line and on the paths line, and exits 0."""
    shim = tmp_path / "shim" / "numba"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('no Numba here')\n")
    r = script("two_phases.py", "--quick", "--no-save", "--compiled", "auto", "--attention",
               "einsum", "--blocks", "off", "--experiments", "decode", "--users", "1", "--runs",
               "1", "--forklift", "20", "--workbench", "200",
               env={**os.environ, "PYTHONPATH": str(tmp_path / "shim")})
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "compiled kernels" in line]
    assert len(said) == 1 and "no Numba here" in said[0] and "Traceback" not in r.stderr
    paths = next(line for line in r.stdout.splitlines() if line.startswith("paths: "))
    assert "no compiled kernels: they could not load here (ImportError: no Numba here)" in paths


def test_numbas_variables_are_on_the_machine_line(monkeypatch):
    monkeypatch.setenv("NUMBA_THREADING_LAYER", "tbb")
    assert "NUMBA_THREADING_LAYER=tbb" in host.line(host.facts())


@needs_numba
def test_gelu_and_exp_give_numpys_answers_at_the_extremes():
    """The compiled GELU gave -1.19e-5 at -100 where NumPy gives -0.0, and -3.6e31 at -3e38;
    its exp turned NaN into an integer (undefined)."""
    h = np.array([1e-3, -1e-3, 10, -10, 100, -100, 3e38, -3e38, np.inf, -np.inf, np.nan],
                 np.float32)
    with np.errstate(all="ignore"):  # NumPy's own overflows, at the extremes
        numpys = model.gelu(h.copy())
    got = compiled.gelu(h.copy())
    np.testing.assert_allclose(got, numpys, rtol=1e-6, atol=0)  # NaN where NumPy's is
    assert list(np.signbit(got)) == list(np.signbit(numpys))  # -0.0 where NumPy's is
    from engine.kernels import exp_shifted
    for s in ([0, -1, -100, -np.inf, 3], [0, np.nan, -1], [np.inf, 0, 1]):
        s = np.array(s, np.float32)
        with np.errstate(invalid="ignore"):
            numpys = model.exp_shifted(s.copy())
        got = s.copy()
        exp_shifted(got, np.empty(len(s), np.int32))
        np.testing.assert_allclose(got, numpys, rtol=1e-6, atol=1e-37)


@needs_numba
@pytest.mark.parametrize("shape", [(3072, 64), (7, 3), (1, 1)])
def test_gelu_on_numbas_threads_gives_the_one_threads_numbers(shape):
    """A compiled trip's GELU, its numbers shared among Numba's threads: every number once, each
    bit for bit the one-thread kernel's."""
    h = 3 * np.random.default_rng(1).standard_normal(shape, dtype=np.float32)
    h[0, 0] = np.nan
    with compiled.running(2):
        shared = compiled.gelu(h.copy(), threads=True)
    np.testing.assert_array_equal(shared, compiled.gelu(h.copy()))


@needs_numba
@pytest.mark.parametrize("s", [[0, -1, -100, -np.inf, 3], [0, np.nan, -1], [np.inf, 0, 1],
                               [np.inf] * 9, [1.0] * 8 + [np.nan] + [2.0] * 8, [-1e30, 1e30] * 9,
                               list(range(19)), [5]])
def test_a_questions_softmax_row_gives_numpys_answer_and_sum(s):
    """exp_row(), a question's softmax in vector registers: NumPy's numbers (NaN where any
    is NaN, or where the max is infinite) and their sum, whole vectors and a short last."""
    from engine.kernels import LANES, exp_row
    s = np.array(s, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        numpys = model.exp_shifted(s.copy())
    rows = np.full((2, -(-len(s) // LANES) * LANES), 7, np.float32)  # (room past the row's
    #                                                                    numbers: whole vectors)
    rows[1, :len(s)] = s
    total = exp_row(rows, 1, len(s), np.empty(rows.shape[1], np.int32))
    np.testing.assert_allclose(rows[1, :len(s)], numpys, rtol=1e-6, atol=1e-37)
    np.testing.assert_allclose(total, numpys.sum(), rtol=1e-6)
    assert (rows[0] == 7).all()  # the row above untouched


@needs_numba
@pytest.mark.parametrize("before, m, reach, odd", [
    (40, 6, 46, None), (0, 6, 6, None), (9, 4, 13, None), (17, 6, 23, np.nan),
    (17, 6, 23, np.inf), (3, 2, 5, np.nan), (60, 5, 65, -np.inf)])
def test_a_tiles_softmax_gives_each_querys_own_numpy_softmax(before, m, reach, odd):
    """softmax_tile(), a tile's six queries side by side: query i's own notes (before + i + 1,
    at most reach) NumPy's softmax numerators, the rest up to reach 0, and their sum; a row
    past m (no query) 0 with a sum of 1; a NaN, an infinite top or all of -inf in a row as
    NumPy has them (the row-by-row way); rows and places outside the tile untouched."""
    from engine.kernels import ROWS, softmax_tile
    rng = np.random.default_rng(before + m)
    s = 4 * rng.standard_normal((2 * ROWS + 1, 80), dtype=np.float32)  # (room for whole
    #   vectors of 4, 8 or 16 past the notes: the exponents' pass writes them)
    r = ROWS + 1 if before % 2 else 0  # (a tile further down, too)
    if odd is not None:
        if odd != odd:
            s[r + 1, before // 2] = odd  # one NaN among numbers (past the first vector, where
        else:  #                           the tops' pass reads 8 or more)
            s[r + 1, :before + 2] = odd  # every note inf, or -inf
    was = s.copy()
    sums, tops = np.full((1, len(s)), 7, np.float32), np.empty((1, len(s)), np.float32)
    softmax_tile(s, r, before - r, m + r, reach, sums, tops, np.empty(80, np.int32))
    for i in range(r, r + ROWS):
        mine = min(before - r + i + 1, reach) if i < m + r else 0
        with np.errstate(invalid="ignore", over="ignore"):
            numpys = model.exp_shifted(was[i, :mine].copy()) if mine else np.ones(1)
        np.testing.assert_allclose(s[i, :mine], numpys[:mine], rtol=1e-6, atol=1e-37)
        assert (s[i, mine:reach] == 0).all()
        np.testing.assert_allclose(sums[0, i], numpys.sum(), rtol=1e-6)
    rest = np.ones(len(s), bool)
    rest[r:r + ROWS] = False
    np.testing.assert_array_equal(s[rest], was[rest])
    assert (sums[0, rest] == 7).all()


@needs_numba
@pytest.mark.parametrize("m, d", [(13, 16), (8, 64), (5, 19), (24, 11)])
def test_columns_turned_into_rows_and_back_are_numpys_transposes(m, d):
    """rows_of_columns() and columns_of_rows(), 8 x 8 blocks turned over in vector registers
    and the numbers past them one at a time: a block of a (width, tokens) array's columns
    times a number, as rows; rows over their sums, as columns; nothing else written."""
    from engine.kernels import LANES, columns_of_rows, rows_of_columns
    rng = np.random.default_rng(m * d)
    src = rng.standard_normal((d + 9, m + 11), dtype=np.float32)
    dst = np.full((m + 5, d), 3, np.float32)
    scale = np.full((1, LANES), 0.3, np.float32)
    rows_of_columns(src, 4, 6, m, scale, dst, 2)
    np.testing.assert_array_equal(dst[2:2 + m], src[4:4 + d, 6:6 + m].T * np.float32(0.3))
    assert (dst[:2] == 3).all() and (dst[2 + m:] == 3).all()
    rows, sums = rng.standard_normal((m + 3, d), dtype=np.float32), \
        rng.uniform(1, 9, (1, m + 3)).astype(np.float32)
    out = np.full((d + 9, m + 11), 3, np.float32)
    columns_of_rows(rows, m, sums, out, 5, 7)
    np.testing.assert_array_equal(out[5:5 + d, 7:7 + m], (rows[:m] / sums[0, :m, None]).T)
    out[5:5 + d, 7:7 + m] = 3
    assert (out == 3).all()


def test_the_compiled_way_is_taken_only_where_it_wins_beyond_its_spread():
    """A best of 3 by a strict "<" flipped between runs: a compiled way faster at its best
    but not beyond NumPy's spread keeps NumPy's way; one faster in every try but one that
    other work slowed is taken."""
    numpy = [1.0, 1.1, 1.2, 1.0, 1.1, 1.2]
    assert contests.won({1: {"numpy": numpy, "compiled": [0.9, 1.05, 0.95, 1.15, 1.0, 1.1]},
                       2: {"numpy": numpy, "compiled": [0.6, 0.7, 0.8, 0.6, 0.7, 5.0]},
                       3: {"numpy": numpy, "compiled": numpy}}) == (2,)


def test_a_way_kept_by_default_gives_way_only_to_a_win_beyond_its_spread():
    kept, other = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95], [0.98, 1.08, 0.92, 0.99, 1.02, 0.97]
    t = {"laid": kept, "rows": other}  # (the other faster in the middle only: a tie)
    assert contests.kept_unless_beaten(t, "laid", "rows") == "laid"
    t = {"laid": kept, "rows": [s * 0.8 for s in kept]}  # every pair won
    assert contests.kept_unless_beaten(t, "laid", "rows") == "rows"
    still = [1.0, 1.001, 1.002, 1.003, 1.004, 1.005]  # each try 0.2% faster than the kept
    t = {"laid": still, "rows": [s - 0.002 for s in still]}  # way's, whose own differ by 0.5%
    assert contests.kept_unless_beaten(t, "laid", "rows") == "laid"
    t = {"laid": still, "rows": [s - 0.01 for s in still]}  # by 1%: beyond them
    assert contests.kept_unless_beaten(t, "laid", "rows") == "rows"


def test_the_two_ways_are_timed_in_turns(monkeypatch):
    """All of NumPy's trips were timed first, then all the compiled ones: a drift of the machine
    favoured one."""
    seen = []
    monkeypatch.setattr(contests, "BRIDGE_S", 0.0)
    monkeypatch.setattr(contests, "undecided", lambda *a: False)  # (no count timed again)
    order = ("numpy", "compiled")
    timed = contests.alternately({way: {n: (lambda way=way, n=n: seen.append((way, n)))
                                      for n in (1, 2)} for way in order})
    assert seen == [(way, n) for turn in range(contests.TRIAL_TRIPS + 1)  # (the first warms up)
                    for way in (order if turn % 2 == 0 else order[::-1]) for n in (1, 2)]
    assert all(len(t[way]) == contests.TRIAL_TRIPS for t in timed.values() for way in t)


@needs_numba
def test_bigger_trips_take_the_compiled_pieces_only_where_timed_faster():
    """The norm, GELU and attention were compiled for every bigger trip where any token count
    won, never timed there."""
    numpys = ways(Paths(compiled=(1, 2)))
    assert all(numpys(n).norm is model.norm for n in (4, 21, 40, 100))
    some = ways(Paths(pieces=(32,)))
    assert [n for n in (16, 17, 32, 33, 64, 65) if some(n).norm is compiled.norm] == [17, 32]
    assert some(21).gelu is compiled.gelu and some(21).reads is compiled.attention_shared
    long = ways(Paths(elementwise=(256,)))  # past the pieces' counts: the long trips' own
    assert [n for n in (64, 65, 256, 257, 1024) if long(n).norm is compiled.norm] == [65, 256]
    assert ways(Paths(elementwise=(1024,)))(1032).gelu is compiled.gelu  # as the largest timed
    assert long(100).gelu is compiled.gelu and long(100).reads is model.attention


def test_the_kernels_ir_is_in_opaque_pointer_terms():
    """llvmlite deprecates typed pointers: no type's as_pointer(), no cast of a pointer (a
    bitcast only of numbers: an exponent's bits read as a float's), every load saying what it
    reads, and the prefetch and masked-store intrinsics for an opaque pointer."""
    with open(os.path.join(KERNELS, "kernels.py")) as f:
        tree = ast.parse(f.read())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute)]
    assert not [c for c in calls if c.func.attr == "as_pointer"]
    casts = [c for c in calls if c.func.attr == "bitcast"]
    assert not [c for c in casts if "Pointer" in ast.unparse(c.args[1])]
    assert all(ast.unparse(c.args[1]) == "e.vec" for c in casts)  # to floats, never a pointer
    reads = [c for c in calls if c.func.attr == "load" and isinstance(c.func.value, ast.Attribute)
             and c.func.value.attr == "b"]  # the builder's loads (e.b.load, self.b.load)
    assert reads and all(any(k.arg == "typ" for k in c.keywords) for c in reads)
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
             and isinstance(n.value, str)]
    assert "llvm.prefetch.p0" in texts  # (and the store's, "llvm.masked.store.v{lanes}f32.p0":)
    assert "llvm.masked.store.v" in texts and "f32.p0" in texts
    assert not [t for t in texts if "p0i8" in t or "p0f32" in t]


@pytest.mark.skipif(not NUMBA, reason="Numba is not installed here")
@pytest.mark.kernels
def test_where_numba_is_installed_every_kernel_gives_numpys_answer():
    """A kernel that gives another answer is left out, the trips keep NumPy's way, and every
    test that needs the kernels is skipped: where Numba is installed, none may be (a wrong
    tile's bound left every test of the kernels skipped and none failed)."""
    assert compiled.unloaded() == ""
    assert compiled.checked() == []


@needs_numba
def test_the_timed_shapes_dottings_and_panels_travel_in_the_paths_and_are_checked():
    """The tiles' shape, the 2 to 4 tokens' products and a question's panel chosen by timing:
    the paths line names them, a worker reads back only those this CPU's kernels were
    compiled for, and the trips' ways take them."""
    from engine import blocks
    shape, dotting, panel = compiled.shapes()[-1], compiled.dottings()[-1], \
        compiled.question_panels()[-1]
    paths = Paths("matmul", compiled=compiled.TRIED, shapes=((8, *shape),), dotting=dotting,
                  panel=panel)
    line = str(paths)
    assert compiled.shape_words(shape) in line and compiled.dotting_words(dotting) in line
    assert f"a question's attention in panels of {panel} notes" in line
    saved = paths.saved()
    assert blocks.readable(saved) and Paths(**saved) == paths
    for wrong in ({"shapes": [[8, 5, 6, 2, 1]]}, {"shapes": [list(shape)]}, {"dotting": [3, 1]},
                  {"panel": 7}, {"asking": 5}, {"asking": False}):  # (no such tiles here; a
        assert not blocks.readable({**saved, **wrong}), wrong  # shape without its count)
    assert str(Paths()) == str(Paths(asking=compiled.ASKING[0]))  # the default goes unsaid
    unasked = dataclasses.replace(paths, asking=compiled.ASKING[-1])
    assert f"one-token attention {compiled.asking_words(compiled.ASKING[-1])}" in str(unasked)
    assert blocks.readable(unasked.saved()) and Paths(**unasked.saved()) == unasked
    trip = ways(paths)(8)
    assert trip.panel == panel and trip.table.keywords["shape"] == shape
    assert ways(unasked)(1).asking == ways(unasked)(40).asking == compiled.ASKING[-1]
    users, notes = 3, 300
    q, k, v = (np.ones((model.TINY.width, users), np.float32) for _ in range(3))
    book = model.notebook(model.TINY, users, notes + 1)
    with pytest.raises(ValueError, match="no attention asking 5 rows ahead"):
        compiled.attention(model.TINY, q, k, v, [(book, 1)], 0, types.SimpleNamespace(asking=5))
    assert book["len"] == 0 and not book["k"].any()  # (refused before anything was written)
    assert trip.table.keywords["dotting"] == dotting
    with pytest.raises(ValueError, match="no shapes"):
        compiled.table(np.ones((7, 9), np.float32), np.ones((9, 5), np.float32),
                       shape=(16, 5, 3, 1))


@needs_numba
@pytest.mark.parametrize("n, d", [(5, 16), (512, 64), (37, 128), (9, 24)])
def test_a_heads_weighted_sum_is_numpys_whatever_its_width(n, d):
    """head_weighted(): a head's values weighed by its scores over their sum, in registers
    where the head is GPT-2's 64 numbers or the tiny model's 16, a number at a time where it is
    another (128, 24), asking for notes ahead or not: NumPy's answer; only that head's row of
    out written."""
    from engine.kernels import ASKING, head_weighted
    rng = np.random.default_rng(n + d)
    s = rng.uniform(0, 1, (3, n + 7)).astype(np.float32)  # (heads, room for whole vectors)
    values = rng.standard_normal((n + 1, d), dtype=np.float32)  # (room, head)
    want = s[1, :n] @ values[:n] / s[1, :n].sum(dtype=np.float32)
    for ahead in ASKING:
        out = np.full((3, d), 7, np.float32)
        head_weighted(s, 1, values, n, out, ahead)
        np.testing.assert_allclose(out[1], want, rtol=1e-4, atol=1e-5)
        assert (out[[0, 2]] == 7).all()


@needs_numba
@pytest.mark.parametrize("n, d", [(5, 64), (16, 64), (300, 64), (513, 64), (40, 16), (271, 24)])
def test_a_heads_scores_are_numpys_in_blocks_vectors_and_numbers(n, d):
    """head_scores(): a head's query against its first n keys (a key's numbers a column of
    keys (d, room)), in blocks of SCORE_VECTORS vectors of notes, vectors, and the notes past
    them one by one, asking for the rows ahead or not (compiled.ASKING names the same
    distances): NumPy's answer; only that head's row of s written, and none past n."""
    from engine.kernels import ASKING, head_scores
    assert ASKING == compiled.ASKING  # (the same numbers, where Numba need not load)
    rng = np.random.default_rng(n + d)
    q = rng.standard_normal((3, d), dtype=np.float32)  # (heads, d)
    keys = rng.standard_normal((d, n + 9), dtype=np.float32)  # (d, room)
    for ahead in ASKING:
        s = np.full((3, n + 9), 7, np.float32)
        head_scores(q, 1, keys, n, s, ahead)
        np.testing.assert_allclose(s[1, :n], q[1] @ keys[:, :n], rtol=1e-4, atol=1e-4)
        assert (s[[0, 2]] == 7).all() and (s[1, n:] == 7).all()


@needs_numba
@pytest.mark.parametrize("tokens", [1, 2, 8, 9, 40])
def test_the_norm_is_numpys_a_column_at_a_time_or_along_the_rows(tokens):
    """The compiled norm takes a few tokens' columns one at a time (kernels.NORMED), more
    along the rows: either way GPT-2's width normed as NumPy norms it, each column on its
    own (a column far from the others' scale keeps its own mean and spread)."""
    from engine import kernels
    rng = np.random.default_rng(tokens)
    x = rng.standard_normal((768, tokens), dtype=np.float32) * 3 + 1
    x[:, -1] = x[:, -1] * 100 - 50
    out = np.full_like(x, 7)
    kernels.norm(x, compiled.EPS, out)
    np.testing.assert_allclose(out, model.norm(x), rtol=1e-4, atol=1e-5)
    assert (tokens <= kernels.NORMED) == (tokens in (1, 2, 8))


@needs_numba
def test_a_table_laid_out_side_by_side_is_made_once_and_read_as_numpy_reads_the_table():
    """A table laid out a vector's rows side by side: panel by panel, each input's numbers for
    the panel's rows in one stretch, the rows past the table's 0; made once while the table
    lives and gone with it; the tiles and the 2 to 4 tokens' products that read it give
    NumPy's answers at every count, the table's rows not a multiple of the lanes."""
    import gc
    from engine import kernels, laid
    assert laid.LAID == kernels.LAID  # (the same number, where Numba need not load)
    assert laid.LAID_ASKED == kernels.LAID_ASKED and f"asking {kernels.ASKED_ON * 4 // 1024} KiB" \
        in compiled.dotting_words((kernels.LANES, laid.LAID_ASKED))
    lanes = cache.kernels()["LANES"]
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2 * lanes + 3, 11), dtype=np.float32)  # (rows, inputs)
    side = laid.side_by_side(w)
    assert side.shape == (3, 11 * lanes)
    padded = np.zeros((3 * lanes, 11), np.float32)
    padded[:w.shape[0]] = w
    assert np.array_equal(side.reshape(3, 11, lanes).transpose(0, 2, 1).reshape(-1, 11), padded)
    assert laid.side_by_side(w) is side
    shape = next(s for s in compiled.shapes() if s[3] == laid.LAID)
    dotting = next(d for d in compiled.dottings() if d[1] == laid.LAID)
    for n in (2, 3, 4, 5, lanes, lanes + 1, 2 * lanes + 3):
        x = rng.standard_normal((11, n), dtype=np.float32)
        got = compiled.table(w, x, shape=shape, dotting=dotting)
        assert got.shape == (w.shape[0], n) and np.allclose(got, w @ x, rtol=1e-4, atol=1e-5), n
        shared = compiled.table_shared(w, x, model.PLAIN.share, shape)
        assert np.allclose(shared, w @ x, rtol=1e-4, atol=1e-5), n
    key = id(w)
    del w
    gc.collect()
    assert key not in laid.LAID_OUT
    assert shape not in compiled.shapes(laid=False) and dotting not in compiled.dottings(False)


@needs_numba
def test_the_tables_are_laid_out_only_where_there_is_room_and_kept_only_where_taken():
    from engine import laid
    floors = model.floors(model.TINY)
    assert laid.room_to_lay_out(floors)
    assert not laid.room_to_lay_out([{"qkv": types.SimpleNamespace(nbytes=1 << 60)}])
    laid.lay_out(floors, True)
    assert all(id(w) in laid.LAID_OUT for floor in floors for w in floor.values())
    copies = [laid.held(w) for floor in floors for w in floor.values()]  # one stretch of memory,
    assert len({id(c.base) for c in copies}) == 1  # on a boundary of the large pages, in order
    assert copies[0].ctypes.data % laid.HUGE == 0
    assert [c.ctypes.data for c in copies] == sorted(c.ctypes.data for c in copies)
    for w, c in zip((w for floor in floors for w in floor.values()), copies):
        np.testing.assert_array_equal(c, laid.laid_out(w))
    laid.lay_out(floors, False)
    assert not laid.LAID_OUT
    assert Paths(dotting=(16, laid.LAID_ASKED)).lays_out() and not Paths(
        dotting=(4, 1)).lays_out()
    assert Paths(dotting=(16, laid.LAID)).lays_out() and Paths(
        shapes=((16, 16, 16, 1, laid.LAID),)).lays_out()
    assert not Paths(dotting=(4, 1), shapes=((16, 16, 12, 1, 1),)).lays_out()


@needs_numba
def test_four_tokens_products_read_x_as_it_is_or_padded_and_give_numpys_answer():
    """2 to 4 tokens' products of a laid-out table: 4 tokens' x read where it lies (float32, in
    one stretch), a view of other strides, float64 or fewer tokens copied and padded first;
    NumPy's answer each time, x untouched."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((19, 9), dtype=np.float32)  # (rows, inputs)
    wide = rng.standard_normal((9, 8), dtype=np.float32)
    laid_dottings = [d for d in compiled.dottings() if d[1] >= compiled.LAID]
    assert len(laid_dottings) == 2  # asking for lines ahead, and not
    for x in (wide[:, :4].copy(), wide[:, ::2], wide[:, :4].astype(np.float64), wide[:, :3]):
        for dotting in laid_dottings:
            before = x.copy()
            got = compiled.table(w, x, dotting=dotting)
            np.testing.assert_allclose(got, w @ x.astype(np.float32), rtol=1e-4, atol=1e-5)
            assert got.shape == (19, x.shape[1]) and (x == before).all()
