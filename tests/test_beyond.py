"""Beyond the post's rows: notebook depth, thread sweeps, GPT-2's four sizes, and predictions."""
import json
import os

import numpy as np
import pytest

import two_phases
from harness import bench, cli, limits, pool
from conftest import quick_two_phases, script
from harness.paths import ATTENTION
from harness.printers import Sheet
import model

# ---- GPT-2's four sizes

def test_the_accounting_of_each_size_matches_gpt2s_published_counts():
    # the 12-floor part, no embeddings: 85M, 302M, 708M and 1,475M numbers in the tables
    published = {"small": 85, "medium": 302, "large": 708, "xl": 1475}
    for name, size in model.SIZES.items():
        assert round(model.table_numbers(size) / 1e6) == published[name]
        assert size.width // size.heads == 64  # every head 64 wide


# the same math at a size a test can afford: each size's heads, 8 features each, on 2 floors
TINY = {name: model.Config(name, 2, 8 * s.heads, s.heads) for name, s in model.SIZES.items()}
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


def test_a_medium_quick_run_follows_the_chosen_shape(tmp_path):
    r, data = quick_two_phases(tmp_path, "--runs", "1", "--model", "medium", "--experiments",
                               "decode")
    assert "GPT-2 medium (24 floors, width 1024)" in r.stdout
    decode = data["tables"]["decode"]
    mb = [row[-1] for row in decode["rows"]]
    medium = model.SIZES["medium"]
    assert mb == [pytest.approx(model.bytes_read(medium, [(64, 1)] * u) / 1e6) for u in (1, 4)]


def test_cube_bug_takes_the_floor_of_the_chosen_model():
    import cube_bug
    assert cube_bug.mlp("xl") == 6400 and cube_bug.mlp("small") == cube_bug.MLP == 3072


# ---- depth

def test_the_depth_rows_read_as_many_notes_as_they_say(tmp_path):
    r, data = quick_two_phases(tmp_path, "--runs", "1", "--experiments", "depth", "--depths", "0",
                               "40", "--users", "1", "3")
    t = data["tables"]["depth"]
    head = [c["header"] for c in t["columns"]]
    rows = [dict(zip(head, row)) for row in t["rows"]]
    assert [(row["users"], row["notes"]) for row in rows] == [(1, 0), (1, 40), (3, 0), (3, 40)]
    for row in rows:
        riders = [(row["notes"], 1)] * row["users"]
        fetched = model.bytes_read(model.SIZES["small"], riders)
        assert row["MB read"] == pytest.approx(fetched / 1e6)
        share = model.NOTE_BYTES * row["notes"] * row["users"] / fetched
        assert row["notes % of bytes"] == pytest.approx(100 * share)
        assert row["step ms"] > 0 and row["x limit"] > 0
    assert "the notes outweigh the tables: for 1 user" in r.stdout


def test_where_the_notes_outweigh_the_tables():
    small = model.SIZES["small"]  # tables: 340 MB, 4,608 notes of 72 KB
    rows = [[16, 0, 30.0], [16, 128, 40.0], [16, 512, 80.0], [1, 0, 15.0], [1, 512, 16.0]]
    said = limits.outweigh(rows, small)
    assert "for 1 user, never within GPT-2's 1,024 notes by the accounting, not up to 512 " \
           "measured" in said
    assert "for 16 users, from 288 notes each by the accounting, from about 320 measured" in said
    #                                                                   30 -> 60 ms: twice


# ---- thread sweeps

def test_a_sweep_sets_and_restores_the_blas_threads_and_says_each(tmp_path):
    from threadpoolctl import threadpool_info

    def blas():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    before, seen = blas(), []

    def body(args, facts):
        seen.append((args.threads, blas()))
        yield Sheet("demo", [("threads", "", "d")], [[args.threads]])
    p = cli.parser("demo\n", runs=1)
    args = cli.parse(p, ["--threads", "2", "1", "--out", str(tmp_path), "--label", "box"], {})
    assert cli.run("demo", args, body) == 0
    assert seen == [(1, [1] * len(before)), (2, [2] * len(before))] and blas() == before
    data = json.loads((tmp_path / "box" / "demo.sweep.json").read_text())
    assert data["tables"]["demo @1"]["rows"] == [[1]] and data["tables"]["demo @2"]["rows"] == [[2]]
    assert data["machine"]["sweep"] == [1, 2]
    assert "a sweep of 1, 2 threads" in (tmp_path / "box" / "demo.sweep.txt").read_text()
    assert not (tmp_path / "box" / "demo.json").exists()  # apart from a plain run


def test_compare_reads_a_sweep_beside_a_plain_run(tmp_path):
    for flags in (["--threads", "1", "2"], []):
        r = script("cube_bug.py", "--quick", "--runs", "2", *flags, "--out", str(tmp_path),
                   "--label", "box")
        assert r.returncode == 0, r.stderr
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
    r = script("two_phases.py", "--predict", *flags, "--out", str(tmp_path), "--label",
               "predicted")
    assert r.returncode == 0, r.stderr
    stem = "two_phases.quick" if "--quick" in flags else "two_phases"
    return r, json.loads((tmp_path / "predicted" / f"{stem}.json").read_text())


def test_a_prediction_is_the_accounting_of_each_row(tmp_path):
    r, data = predicted(tmp_path, "--model", "xl", "--forklift", "3350", "--workbench", "989000")
    assert r.stdout.startswith("machine: none, predicted for a forklift of 3,350.0 GB/s and a "
                               "workbench of 989,000.0 GFLOP/s (balance 295.2")
    assert r.stdout.count("(predicted: every figure is its trip's limit") == 5
    xl = model.SIZES["xl"]
    for p, row in zip(two_phases.PROMPTS, data["tables"]["prefill"]["rows"]):
        assert row[1] == pytest.approx(model.limit(xl, [(0, p)], 3350e9, 989000e9)[0] * 1e3)
    for u, row in zip(two_phases.USERS, data["tables"]["decode"]["rows"]):
        assert row[1] == pytest.approx(model.limit(xl, [(512, 1)] * u, 3350e9, 989000e9)[0]
                                       * 1e3)
    assert data["predicted"].startswith("machine: none, predicted")


def test_a_prediction_builds_no_model():
    args = two_phases.parse_args(["--predict", "--model", "xl", "--forklift", "3350",
                                  "--workbench", "989000", "--no-save"])
    real, model.floors = model.floors, None  # calling it would fail
    try:
        sheets = [s.name for s in two_phases.predict(args, {}) if isinstance(s, Sheet)]
    finally:
        model.floors = real
    assert sheets == ["prefill", "decode", "collision", "dial", "depth"]


def test_a_prediction_for_this_machine_equals_its_check_tables_limits(tmp_path):
    speeds = tmp_path / "speeds.json"
    machine = {"cpu": "AMD EPYC", "os": "Linux", "python": "3.11", "numpy": "2.4", "blas": [],
               "env": {}, "date": "2026-01-02T03:04:05"}
    speeds.write_text(json.dumps({"schema_version": 3, "script": "machine_speed", "tables": {},
                                  "machine": machine,
                                  "roofs": {"bytes_per_s": 25e9, "flops_per_s": 150e9}}))
    _, measured = quick_two_phases(tmp_path, "--runs", "1", "--roofs", str(speeds),
                                   "--experiments", "prefill", "decode")
    _, guess = predicted(tmp_path, "--quick", "--roofs", str(speeds), "--experiments", "prefill",
                         "decode")
    limits = [row[3] for row in measured["tables"]["check"]["rows"]]
    times = [row[1] for name in ("prefill", "decode") for row in guess["tables"][name]["rows"]]
    assert times == pytest.approx(limits)


BAD = [(["--depths", "1024"], "--depths"), (["--depths", "-1"], "--depths"),
       (["--model", "huge"], "--model"), (["--predict"], "--predict"),
       (["--predict", "--forklift", "0", "--workbench", "5"], "--forklift"),
       (["--predict", "--forklift", "-3", "--workbench", "5"], "--forklift"),
       (["--predict", "--forklift", "nan", "--workbench", "5"], "--forklift"),
       (["--predict", "--forklift", "3350"], "--workbench"),
       (["--forklift", "10", "--workbench", "100", "--roofs", "x.json"], "--roofs"),
       (["--threads", "0"], "--threads"),
       (["--model", "xl", "--users", "1000"], "--model"),  # 48 floors of notebooks: too much
       (["--predict", "--plot", "--forklift", "1", "--workbench", "1"], "--plot"),
       (["--threads", "1", "2", "--plot"], "--plot")]


@pytest.mark.parametrize("flags,flag", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_values_are_one_line_exit_2_and_nothing_saved(tmp_path, flags, flag):
    r = script("two_phases.py", *flags, "--out", str(tmp_path))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and flag in r.stderr, r.stderr
    assert not any(tmp_path.iterdir())


# ---- the paths a trip takes where the fastest way depends on the CPU

def test_the_paths_are_chosen_here_recorded_and_can_be_forced(tmp_path):
    r, data = quick_two_phases(tmp_path, "--runs", "1", "--experiments", "decode")
    chosen = data["paths"]
    assert chosen["attention"] in ATTENTION and set(chosen["timed"]) >= {"attention"}
    assert [n for n, *_ in chosen["blocks"]] == [2, 2, 4, 4, 8, 8, 16, 16]  # 2 tables' widths
    assert {w for _, w, *_ in chosen["blocks"]} == {768, 3072}
    line = next(s for s in r.stdout.splitlines() if s.startswith("paths: "))
    assert f"attention by {chosen['attention']}" in line
    assert line.endswith("(the fastest here, timed at the start)")
    r, data = quick_two_phases(tmp_path, "--runs", "1", "--experiments", "decode",
                               "--attention", "einsum", "--blocks", "128")
    assert data["paths"]["attention"] == "einsum" and data["paths"]["timed"] == {}
    assert {(rows, depth) for _, _, rows, depth in data["paths"]["blocks"]} == {(128, None)}
    assert ("paths: attention by einsum; table blocks at 2, 4, 8, 16 tokens (rows, or rows x "
            "inputs at a time): tables of 768 inputs 128, 128, 128, 128; of 3072 inputs 128, 128, "
            "128, 128 (as asked)\n") in r.stdout


def test_a_path_asked_for_and_a_path_timed_each_say_so():
    cfg = model.TINY
    tiny = bench.Bench(cfg, model.floors(cfg), pool.workers(2), runs=1)
    chosen, said = bench.with_paths(tiny, "matmul", "auto")
    assert chosen.paths.attention == "matmul"
    assert said[0].startswith("paths: attention by matmul;")
    assert said[0].endswith("(attention as asked; blocks the fastest here, timed at the start)")
    assert said[1].value["timed"] and "attention" not in said[1].value["timed"]


@pytest.mark.parametrize("flags,flag", [(["--attention", "fast"], "--attention"),
                                        (["--blocks", "0"], "--blocks"),
                                        (["--blocks", "some"], "--blocks")])
def test_an_unknown_path_is_one_line(tmp_path, flags, flag):
    r = script("two_phases.py", "--quick", *flags, "--out", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and flag in r.stderr
    assert not any(tmp_path.iterdir())
