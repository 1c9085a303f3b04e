"""Beyond the post's rows: notebook depth, thread sweeps, GPT-2's four sizes, and predictions."""
import argparse
import contextlib
import dataclasses
import io
import itertools
import json
import os
import sys

import numpy as np
import pytest

import two_phases
from harness import post
from harness import flags, runner
from harness.experiments.registry import TOLD
from harness.experiments import depth
from harness.keeping import records
from engine import blocks, compiled, pool
from harness.measuring import bench, contests, tuning
from harness.predicting import model_files, predict
from conftest import in_process, script, sheet_of, sheets
from engine.blocks import ATTENTION
from harness.showing.printers import Sheet
from harness.keeping.records import col
import accounting
import model

GIVEN = ("--forklift", "20", "--workbench", "200")  # speeds given: none measured, none needed
MACHINE = {"cpu": "AMD EPYC", "os": "Linux", "python": "3.11", "numpy": "2.4", "blas": [],
           "env": {}, "date": "2026-01-02T03:04:05"}


@pytest.fixture(scope="module")
def small_run(quick_run):
    """GPT-2 small, quick, its paths the fastest here: the quick run the tests share (reading,
    typing for 1 and 4 users, the collision, and typing for 1 and 2 users at 0, 32 and 64 notes).
    -> (the process, its saved JSON)"""
    return quick_run[:2]


@pytest.fixture(scope="module")
def its_speeds(small_run, tmp_path_factory):
    """A machine_speed result holding the speeds the small run held its rows to, for --roofs."""
    path = tmp_path_factory.mktemp("its") / "speeds.json"
    path.write_text(json.dumps({"schema_version": 4, "script": "machine_speed", "records": [],
                                "sheets": {}, "machine": MACHINE,
                                "roofs": {k: small_run[1]["roofs"][k]
                                          for k in ("bytes_per_s", "flops_per_s")}}))
    return path


def blank_floors(built):
    """model.floors, but each table zeros of the very shape it would have (drawing GPT-2
    medium's 302M random numbers takes seconds, and no figure checked here depends on them);
    built: each Config asked for."""
    def floors(cfg, seed=0):
        built.append(cfg)
        w = cfg.width
        return [{"qkv": np.zeros((3 * w, w), np.float32), "out": np.zeros((w, w), np.float32),
                 "up": np.zeros((4 * w, w), np.float32), "down": np.zeros((w, 4 * w), np.float32)}
                for _ in range(cfg.layers)]
    return floors


@pytest.fixture(scope="module")
def medium_run(tmp_path_factory):
    """GPT-2 medium, quick, typing for 1 and 2 users, on the paths asked for: run in this
    process, its tables blank. -> (stdout, the saved JSON, the Configs whose tables were built)"""
    out, built = tmp_path_factory.mktemp("medium"), []
    printed, said = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "floors", blank_floors(built))
        patch.setattr(sys, "argv", ["two_phases.py"])
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
            code = two_phases.main(["--quick", "--runs", "1", "--model", "medium",
                                    "--experiments", "decode", "--users", "1", "2",
                                    "--attention", "einsum", "--blocks", "128", *GIVEN,
                                    "--threads", "1",  # beside other tests: no spinning
                                    "--out", str(out), "--label", "box"])
    assert code == 0, said.getvalue()
    data = json.loads((out / "box" / "two_phases.quick.json").read_text())
    return printed.getvalue(), data, built

# ---- GPT-2's four sizes

def test_the_accounting_of_each_size_matches_gpt2s_published_counts():
    # the 12-floor part, no embeddings: 85M, 302M, 708M and 1,475M numbers in the tables
    published = {"small": 85, "medium": 302, "large": 708, "xl": 1475}
    for name, size in model.SIZES.items():
        assert round(accounting.table_numbers(size) / 1e6) == published[name]
        assert size.width // size.heads == 64  # every head 64 wide


# the same math at a size a test can afford: each size's heads, 8 features each, on 2 floors
TINY = {name: model.gpt2(name, 2, 8 * s.heads, s.heads) for name, s in model.SIZES.items()}
TOL = {"rtol": 1e-5, "atol": 1e-5}


def tokens(size, t, seed=1):
    return np.random.default_rng(seed).standard_normal((size.width, t), dtype=np.float32)


@pytest.mark.parametrize("name", TINY)
def test_every_size_decodes_chunks_and_batches_as_one_pass(name):
    size = TINY[name]
    floors = model.floors(size, 0)
    x = tokens(size, 12)

    def trip(x, segments):
        return model.trip(size, floors, x, segments)
    whole = trip(x, [(model.notebook(size, 1, 12), 12)])
    typed, chunked = model.notebook(size, 1, 12), model.notebook(size, 1, 12)
    one = np.concatenate([trip(x[:, i:i + 1], [(typed, 1)]) for i in range(12)], 1)
    parts = np.concatenate([trip(x[:, a:a + 5], [(chunked, min(5, 12 - a))])
                            for a in range(0, 12, 5)], 1)
    np.testing.assert_allclose(one, whole, **TOL)
    np.testing.assert_allclose(parts, whole, **TOL)
    both = model.notebook(size, 2, 12)  # two users in one notebook, each as if alone
    together = trip(np.concatenate([x, tokens(size, 12, seed=2)], 1), [(both, 12)])
    alone = trip(tokens(size, 12, seed=2), [(model.notebook(size, 1, 12), 12)])
    np.testing.assert_allclose(together, np.concatenate([whole, alone], 1), **TOL)


def test_a_medium_quick_run_follows_the_chosen_shape(medium_run):
    stdout, data, built = medium_run
    assert built == [model.SIZES["medium"]]  # the tables the trips ran through: medium's
    assert "GPT-2 medium (24 floors, width 1024)" in stdout
    medium = model.SIZES["medium"]
    mb = {dict(keys)["users"]: row["bytes read"]
          for keys, row in records.rows(data["records"], "decode").items()}
    assert mb == {u: pytest.approx(accounting.bytes_read(medium, [(64, 1)] * u) / 1e6)
                  for u in (1, 2)}
    assert all(r["settings"]["model"] == "medium" for r in data["records"])


def test_cube_bug_takes_the_floor_of_the_chosen_model():
    import cube_bug
    assert cube_bug.mlp("xl") == 6400 and cube_bug.mlp("small") == cube_bug.MLP == 3072


# ---- depth

def test_the_depth_rows_read_as_many_notes_as_they_say(small_run):
    r, data = small_run
    depth = records.rows(data["records"], "depth")
    rows = [{**dict(keys), **figures} for keys, figures in depth.items()]
    assert [(row["users"], row["notes"]) for row in rows] == [
        (u, n) for u in (1, 2) for n in (0, 32, 64)]  # the quick depth: every pair, in order
    for row in rows:
        riders = [(row["notes"], 1)] * row["users"]
        fetched = accounting.bytes_read(model.SIZES["small"], riders)
        assert row["bytes read"] == pytest.approx(fetched / 1e6)
        share = accounting.NOTE_BYTES * row["notes"] * row["users"] / fetched
        assert row["notes share"] == pytest.approx(100 * share)
        assert row["step"] > 0 and row["x limit"] > 0 and row["tokens per second"] > 0
    headers = [c["header"] for c in sheets(data)["depth"]["columns"]]
    assert headers == ["users", "notes", "step ms", "tokens/s", "MB read", "notes % of bytes",
                       "x limit"]
    assert "the notes outweigh the tables (by the accounting; measured: where a step takes " \
           "twice its time with none): 1 user" in r.stdout


def test_where_the_notes_outweigh_the_tables():
    small = model.SIZES["small"]  # tables: 340 MB, 4,608 notes of 72 KB
    rows = [[16, 0, 30.0], [16, 128, 40.0], [16, 512, 80.0], [1, 0, 15.0], [1, 512, 16.0]]
    said = depth.outweigh(rows, small)
    assert "1 user: never within GPT-2's 1,024 notes, measured not up to 512" in said
    assert "16 users: from 288 notes each, measured about 320" in said
    #                                                                   30 -> 60 ms: twice


# ---- thread sweeps

def test_a_sweep_sets_and_restores_the_blas_threads_and_says_each(tmp_path):
    from threadpoolctl import threadpool_info

    def blas():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    before, seen = blas(), []

    def body(args, facts):
        seen.append((args.threads, blas()))
        yield sheet_of("demo", [col("threads", "threads", "", "d")], [{"threads": args.threads}],
                       records.settings_of(args))
    p = flags.parser("demo\n", runs=1, prog="demo.py")
    args = flags.parse(p, ["--threads", "2", "1", "--out", str(tmp_path), "--label", "box"], {})
    assert runner.run("demo", args, body) == 0
    assert seen == [(1, [1] * len(before)), (2, [2] * len(before))] and blas() == before
    data = json.loads((tmp_path / "box" / "demo.sweep.json").read_text())
    assert [(t["name"], t["threads"]) for t in data["sheets"]] == [("demo", 1), ("demo", 2)]
    assert [t["printed"].split() for t in data["sheets"]] == [  # each block's sheet, its count
        ["threads", "1"], ["threads", "2"]]                    # a field, never in its name
    assert [(r["experiment"], r["value"], r["settings"]["threads"]) for r in data["records"]] == [
        ("demo", 1, 1), ("demo", 2, 2)]  # one record a block, its threads in its settings
    assert data["machine"]["sweep"] == [1, 2]
    assert "a sweep of 1, 2 threads" in (tmp_path / "box" / "demo.sweep.txt").read_text()
    assert not (tmp_path / "box" / "demo.json").exists()  # apart from a plain run


def test_compare_reads_a_sweep_beside_a_plain_run(tmp_path, monkeypatch):
    import cube_bug
    monkeypatch.setattr(sys, "argv", ["cube_bug.py"])
    for threads in (["--threads", "1", "2"], []):  # in this process: the same run, sooner
        assert cube_bug.main(["--quick", "--runs", "2", *threads, "--out", str(tmp_path),
                              "--label", "box"]) == 0
    os.rename(tmp_path / "box" / "cube_bug.quick.json", tmp_path / "box" / "cube_bug.json")
    os.rename(tmp_path / "box" / "cube_bug.sweep.quick.json",
              tmp_path / "box" / "cube_bug.sweep.json")
    r = script("compare.py", str(tmp_path / "box"))
    assert r.returncode == 0, r.stderr
    for label in ("mixed (real): h**3 ms", "mixed (real) @ 1 thread: h**3 ms",
                  "mixed (real) @ 2 threads: h**3 ms"):
        assert any(line.startswith(label) for line in r.stdout.splitlines()), label


# ---- predictions

def predicted(tmp_path, *flags):
    r = script("two_phases.py", "--predict", "--no-plot", *flags, "--out", str(tmp_path), "--label",
               "predicted")
    assert r.returncode == 0, r.stderr
    stem = "two_phases.quick" if "--quick" in flags else "two_phases"
    return r, json.loads((tmp_path / "predicted" / f"{stem}.json").read_text())


def test_a_prediction_is_the_accounting_of_each_row(tmp_path):
    r, data = predicted(tmp_path, "--model", "xl", "--forklift", "3350", "--workbench", "989000",
                        "--no-plot")
    assert r.stdout.startswith("machine: PREDICTED, nothing was run: every figure is a limit | "
                               "given, float32 tables/activations/notes: 3.35 TB/s, 989 "
                               "TFLOP/s\n")
    assert r.stdout.count("(predicted: every figure is its trip's limit") == 1  # said once,
    assert r.stdout.count("(predicted, every figure a limit, as under the first table") == 4
    xl, found = model_files.config("xl"), data["records"]  # predicted with its head
    assert xl.vocab == 50257 and xl.tied
    for p in post.PROMPTS:
        assert records.find(found, "prefill", "time", prompt=p)["value"] == pytest.approx(
            accounting.limit(xl, [(0, p)], 3350e9, 989000e9)[0] * 1e3)
    for u in post.USERS:
        assert records.find(found, "decode", "step", users=u)["value"] == pytest.approx(
            accounting.limit(xl, [(512, 1)] * u, 3350e9, 989000e9)[0] * 1e3)
    assert len(records.rows(found, "prefill")) == len(post.PROMPTS)
    assert all(r["predicted"] and r["statistic"] in ("limit", "computed") for r in found)
    assert all(r["samples"] is None or len(r["samples"]) == 1 for r in found)  # one "run"
    assert data["predicted"].startswith("machine: PREDICTED")


def test_a_prediction_builds_no_model():
    args = two_phases.parse_args(["--predict", "--model", "xl", "--forklift", "3350",
                                  "--workbench", "989000", "--no-save"])
    real, model.floors = model.floors, None  # calling it would fail
    try:
        sheets = [s.name for s in predict.items(args, two_phases.EXPERIMENTS, TOLD)
                  if isinstance(s, Sheet)]
    finally:
        model.floors = real
    assert sheets == ["machines", "fits", "prefill", "decode", "collision", "dial", "depth",
                      "predicted parts", "grid", "turning points", "claims"]


def test_a_prediction_for_this_machine_equals_its_check_tables_limits(tmp_path, small_run,
                                                                    its_speeds):
    _, measured = small_run
    _, guess = predicted(tmp_path, "--quick", "--roofs", str(its_speeds), "--experiments",
                         "prefill", "decode")
    checked = [r for r in measured["records"] if r["experiment"] == "check"
               and r["figure"] == "limit" and r["keys"]["experiment"] in ("prefill", "decode")]
    assert [r["keys"] for r in checked] == [
        {"experiment": "prefill", "prompt": p} for p in (1, 16, 64)] + [
        {"experiment": "decode", "users": u} for u in (1, 4)]
    ran, headed = model.SIZES["small"], model_files.config("small")
    assert headed == dataclasses.replace(ran, vocab=50257)  # a prediction counts the LM head
    bw, fl = (measured["roofs"][k] for k in ("bytes_per_s", "flops_per_s"))
    for r in checked:  # each check row's limit and the prediction of the same row: one
        keys = {k: v for k, v in r["keys"].items() if k != "experiment"}  # accounting, the
        figure = {"prefill": "time", "decode": "step"}[r["keys"]["experiment"]]  # head apart
        riders = [(0, keys["prompt"])] if "prompt" in keys else \
            [(measured["settings"]["notes"], 1)] * keys["users"]
        assert r["value"] == pytest.approx(accounting.limit(ran, riders, bw, fl)[0] * 1e3)
        assert records.find(guess["records"], r["keys"]["experiment"], figure, **keys)["value"] \
            == pytest.approx(accounting.limit(headed, riders, bw, fl)[0] * 1e3)
    predicted_rows = [keys for name in ("prefill", "decode")
                      for keys in records.rows(guess["records"], name)]
    assert len(predicted_rows) == len(checked)


BAD = [(["--depths", "1024"], "--depths"), (["--depths", "-1"], "--depths"),
       (["--prompts", "2000"], "--prompts"), (["--predict", "post", "--question", "1025"],
                                               "--question"),
       (["--model", "huge"], "--model"), (["--predict"], "--predict"),
       (["--predict", "--forklift", "0", "--workbench", "5"], "--forklift"),
       (["--predict", "--forklift", "-3", "--workbench", "5"], "--forklift"),
       (["--predict", "--forklift", "nan", "--workbench", "5"], "--forklift"),
       (["--predict", "--forklift", "3350"], "--workbench"),
       (["--forklift", "10", "--workbench", "100", "--roofs", "x.json"], "--roofs"),
       (["--threads", "0"], "--threads"),
       (["--model", "xl", "--users", "1000"], "--model"),  # 48 floors of notebooks: too much
       (["--predict", "h10"], "--predict"), (["--predict", "post:bfloat16"], "--predict"),
       (["--predict", "h100-sxm:int3"], "--predict"), (["--dtype", "bfloat16"], "--dtype"),
       (["--model", "llama-3-8b"], "--model"), (["--predict", "post", "--threads", "1"],
                                                "--threads"),
       (["--predict", "post", "--model", "nowhere.json"], "--model"),
       (["--threads", "1", "2", "--plot"], "--plot")]


def refused(flags, out, capsys, monkeypatch):
    """`python two_phases.py <flags>` refused, run in this process: -> (code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["two_phases.py"])
    with pytest.raises(SystemExit) as stopped:
        two_phases.main([*flags, "--out", str(out)])
    out_, err = capsys.readouterr()
    return stopped.value.code, out_, err


@pytest.mark.parametrize("flags,flag", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_values_are_one_line_exit_2_and_nothing_saved(tmp_path, flags, flag, capsys,
                                                          monkeypatch):
    code, out, err = refused(flags, tmp_path, capsys, monkeypatch)
    assert code == 2 and out == "" and err.startswith("two_phases.py: error: ")
    assert len(err.splitlines()) == 1 and flag in err, err
    assert not any(tmp_path.iterdir())


# ---- the paths a trip takes where the fastest way depends on the CPU

def test_the_paths_are_chosen_here_recorded_and_can_be_forced(small_run, medium_run):
    r, data = small_run
    chosen = data["paths"]
    assert chosen["attention"] in ATTENTION and set(chosen["timed"]) >= {"attention"}
    assert [n for n, *_ in chosen["blocks"]] == [2, 2, 4, 4, 8, 8, 16, 16]  # 2 tables' widths
    assert {w for _, w, *_ in chosen["blocks"]} == {768, 3072}
    line = next(s for s in r.stdout.splitlines() if s.startswith("paths: "))
    assert f"attention by {chosen['attention']}" in line
    assert line.endswith("(the fastest here, timed at the start)")
    assert {record["settings"]["paths"] for record in data["records"]} == {
        line[len("paths: "):line.rindex(" (")]}  # every figure keeps the paths it took
    stdout, data, _ = medium_run  # forced, on medium's tables: 1024 and 4096 inputs wide
    assert data["paths"]["attention"] == "einsum" and data["paths"]["timed"] == {}
    assert {(rows, depth) for _, _, rows, depth in data["paths"]["blocks"]} == {(128, None)}
    assert ("paths: attention by einsum; table blocks at 2, 4, 8, 16 tokens (rows, or rows x "
            "inputs at a time): tables of 1024 inputs 128, 128, 128, 128; of 4096 inputs 128, "
            "128, 128, 128 (as asked)\n") in stdout


def test_a_path_asked_for_and_a_path_timed_each_say_so():
    cfg = model.TINY
    tiny = bench.Bench(cfg, model.floors(cfg), pool.workers(2), runs=1)
    chosen, saved = tuning.with_paths(tiny, "matmul", "auto")
    assert chosen.paths.attention == "matmul"
    line = tuning.paths_line(saved, argparse.Namespace(attention="matmul", blocks="auto",
                                                       compiled="off"))
    assert line.startswith("paths: attention by matmul;")
    assert line.endswith("(attention as asked; blocks the fastest here, timed at the start)")
    assert saved["timed"] and "attention" not in saved["timed"]


def test_a_count_neither_way_won_is_timed_again_once_and_judged_on_every_try(monkeypatch):
    """Two tries of six that other work slowed leave a way twice as fast undecided; six more
    settle it. A count already decided is not timed again; two ways as fast are timed twice
    as often at most, and keep NumPy's way; a way slowed in a third of its tries, undecided
    after twelve, wins by the middle of its tries."""
    calls = {}
    tries = {"slowed": iter([1, 1, 1, 1, 5, 5] + [1] * 20),
             "middle": itertools.cycle([1, 1, 4])}

    def fn(way, n):
        def timed():
            calls[way, n] = calls.get((way, n), 0) + 1
            if n in tries and way == "compiled":
                return next(tries[n])
            return {"fast": 1 if way == "compiled" else 2, "tie": 3}.get(n, 2)
        return timed
    monkeypatch.setattr(contests, "sample", lambda f: f())
    monkeypatch.setattr(contests, "bridge", lambda f, rest: None)
    ways = {way: {n: fn(way, n) for n in ("slowed", "fast", "tie", "middle")}
            for way in ("numpy", "compiled")}
    timed = contests.alternately(ways, rest=0)
    rounds = contests.TRIAL_TRIPS + 1  # (the first warms up)
    assert len(timed["slowed"]["compiled"]) == 2 * contests.TRIAL_TRIPS  # six, then six more
    assert calls["compiled", "fast"] == rounds and calls["compiled", "tie"] == rounds + 6
    assert contests.won(timed) == ("slowed", "fast", "middle")  # the tie: NumPy's
    assert contests.undecided(timed["middle"]) and len(timed["middle"]["compiled"]) == 12
    assert contests.wins(timed["slowed"]) >= contests.WIN > contests.wins(
        {w: t[:contests.TRIAL_TRIPS] for w, t in timed["slowed"].items()})  # (not from six)


def test_compiled_kernels_are_timed_against_numpys_way_and_taken_only_where_they_win(
        kernels, monkeypatch):
    monkeypatch.setattr(contests, "BRIDGE_S", 0.01)  # (the ways' turns, not how long they rest)
    cfg = model.TINY
    tiny = bench.Bench(cfg, model.floors(cfg), pool.workers(2), runs=1)
    chosen, saved = tuning.with_paths(tiny, "matmul", "off", "auto")
    trips = {k: v for k, v in saved["timed"].items() if k.startswith("typing trips of")}
    assert list(trips) == [f"typing trips of {n} {'token' if n == 1 else 'tokens'}"
                           for n in compiled.TRIED]
    products = [saved["timed"][f"table products of {n} tokens"] for n in compiled.TABLES]
    pieces = [saved["timed"][f"the norm, GELU and attention of typing trips of {n} tokens"]
              for n in compiled.TILED]
    questions = [saved["timed"][f"the attention of a question of {n} tokens"]
                 for n in compiled.READS]
    wide = [saved["timed"][f"the norm and GELU of a trip of {n} tokens"] for n in compiled.LONG]
    for counts, timed, key in ((compiled.TRIED, trips.values(), "compiled"),
                               (compiled.TABLES, products, "tiled"),
                               (compiled.TILED, pieces, "pieces"),
                               (compiled.READS, questions, "reading"),
                               (compiled.LONG, wide, "elementwise")):
        assert all(set(t) == {"compiled", "numpy"} for t in timed)  # each way's best, saved
        assert getattr(chosen.paths, key) == saved[key]  # whichever won, on this machine
        assert set(saved[key]) <= set(counts)  # (the rule itself: the test above)
    streams = saved["timed"]["one-token products"]  # each way's best
    assert set(streams) == {"8 rows at a time", "1 row at a time",
                            "from the tables laid side by side"}
    assert saved["streams"] in compiled.STREAMS
    assert chosen.paths.streams == saved["streams"]
    line = tuning.paths_line(saved, argparse.Namespace(attention="matmul", blocks="off",
                                                       compiled="auto"))
    assert ("one-token products 1 row at a time" in line) == (saved["streams"] == 1)
    assert line.endswith("(attention as asked; blocks as asked; compiled the fastest here, "
                         "timed at the start)")
    assert ("compiled kernels for trips of" in line) == bool(chosen.paths.compiled)
    assert ("compiled tiles for the table products" in line) == bool(chosen.paths.tiled)
    assert ("the compiled norm, GELU and one-token attention" in line) == bool(
        chosen.paths.pieces)
    assert ("read in the compiled tiles" in line) == bool(chosen.paths.reading)
    assert ("the compiled norm and GELU in trips of" in line) == bool(chosen.paths.elementwise)
    assert str(blocks.Paths(tiled=(64,))).endswith(
        "compiled tiles for the table products of trips of 33 to 64 tokens")  # 64's, not 32's
    assert bench.group(dataclasses.replace(tiny, paths=blocks.Paths(compiled=(1,))), [1]) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux")
def test_freed_memory_stays_for_the_next_trips_arrays():
    """A block past glibc's own ceiling for keeping freed memory (32 MB), freed and made again:
    its pages come back without the system faulting them in anew."""
    import resource
    if not bench.keep_freed_memory():
        pytest.skip("the C library here is not glibc's")
    size = 40 << 20  # bytes, under bench.KEPT
    np.ones(size // 4, np.float32)  # made, touched and freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    again = np.ones(size // 4, np.float32)
    faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert again.sum() == size // 4 and faulted < 50  # (not one a page: a few, Python's own)


@pytest.mark.parametrize("flags,flag", [(["--attention", "fast"], "--attention"),
                                        (["--blocks", "0"], "--blocks"),
                                        (["--blocks", "some"], "--blocks")])
def test_an_unknown_path_is_one_line(tmp_path, flags, flag, capsys, monkeypatch):
    code, _, err = refused(["--quick", *flags], tmp_path, capsys, monkeypatch)
    assert code == 2 and len(err.splitlines()) == 1 and flag in err
    assert not any(tmp_path.iterdir())


def test_a_whole_decode_types_n_tokens_in_a_row_for_1_and_16_users(tmp_path, small_is_tiny):
    """--generate N (llama-bench's -n): N steps in a row, each notebook a note longer after
    each, tokens per second over the whole run; none unless asked."""
    import json
    r = in_process(two_phases.main, "--quick", "--experiments", "generate", "--generate", "4",
                   "--notes", "8", "--runs", "1", "--forklift", "50", "--workbench", "400",
                   "--attention", "einsum", "--blocks", "off", "--out", str(tmp_path),
                   "--label", "g")  # (the rows alone, once)
    assert r.returncode == 0, r.stderr
    assert "Beyond the post: a whole decode, tokens in a row" in r.stdout
    data = json.load(open(tmp_path / "g" / "two_phases.quick.json"))
    rows = records.rows(data["records"], "generate")
    assert sorted(dict(k)["users"] for k in rows) == [1, 16]
    for keys, f in rows.items():
        users = dict(keys)["users"]
        assert f["tokens per second"] == pytest.approx(users * 4 / (f["total"] / 1e3), rel=1e-9)
    plain = two_phases.parse_args(["--quick"])
    assert two_phases.EXPERIMENTS["generate"].plan(plain) == []  # off unless asked
