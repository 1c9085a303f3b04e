"""Part 4, predicted: any model's accounting, precisions, the machines at hand, the turning
points, the post's GPU claims, and the predicted roofline."""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil

import pytest

import accounting

import model
import two_phases
from harness import post
from harness.experiments.registry import TOLD
from harness.experiments import registry
from harness.judging import judge
from harness.keeping import records, results, schema
from harness.predicting import model_files, plans, predict, presets, turning
from harness.keeping.records import sig
from harness.measuring.speeds import Speeds
from conftest import in_process, one_line, script

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
TOY = model.Config("toy", layers=2, width=8, heads=4, kv_heads=2, ffn=12, gated=True, head=2,
                   family="")
LLAMA = model_files.config("llama-3-8b")


def test_a_small_llama_style_model_is_counted_as_worked_out_by_hand():
    # per floor: queries 8 x (4 x 2) = 64, keys and values 2 x 8 x (2 x 2) = 64, out (4 x 2) x 8
    # = 64, gate, up and down 3 x 8 x 12 = 288: 480 numbers, 960 for two floors
    assert accounting.table_numbers(TOY) == 960
    # a note: a key and a value of 2 heads x 2 numbers, on 2 floors, 4 bytes each
    assert accounting.note_bytes(TOY) == 2 * 2 * 2 * 2 * 4 == 64
    riders = [(3, 1)]  # one user with 3 notes types one token: it reads 4 notes
    tables, attention, elementwise = 2 * 960, 2 * 4 * 4 * 2 * 4, 2 * (12 * 8 + 10 * 12)
    assert accounting.trip_flops(TOY, riders) == tables + attention + elementwise == 2608
    assert accounting.bytes_read(TOY, riders) == 960 * 4 + 3 * 64 == 4032


def test_llama_3_8b_is_counted_as_published():
    # the tables, plus the two 128,256 x 4,096 embeddings and the 65 norms, are Meta's 8.03B
    assert accounting.table_numbers(LLAMA) == 6_979_321_856
    assert accounting.table_numbers(LLAMA) + 2 * 128_256 * 4096 + 65 * 4096 == 8_030_261_248
    # grouped-query attention: 8 key/value heads of 128 numbers keep a note, not 32 heads
    assert accounting.note_bytes(LLAMA) == 32 * 2 * 8 * 128 * 4
    assert (LLAMA.kv_heads, LLAMA.ffn, LLAMA.gated, LLAMA.context) == (8, 14336, True, 8192)


def test_gpt2_as_a_model_file_is_gpt2(tmp_path):
    path = tmp_path / "gpt2.json"  # Hugging Face's own names for GPT-2 small
    path.write_text(json.dumps({"n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": None,
                                "n_positions": 1024, "activation_function": "gelu_new"}))
    cfg, small = model_files.config(str(path)), model.SIZES["small"]
    riders = [(512, 1)] * 4 + [(0, 64)]
    assert accounting.costs(cfg, riders) == accounting.costs(small, riders)
    assert accounting.table_numbers(small) == 84_934_656 and accounting.note_bytes(small) == 73_728
    assert small.runnable and not cfg.gated and not LLAMA.runnable


@pytest.mark.parametrize("dtype,share", [("bfloat16", 2), ("float16", 2), ("fp8", 4),
                                         ("int8", 4), ("int8-weights", 4),
                                         ("int4-weights", 8)])
def test_precision_divides_the_bytes_and_leaves_the_math(dtype, share):
    for cfg in (model.SIZES["small"], LLAMA):
        notes = dtype if dtype in accounting.NOTE_DTYPES else "bfloat16"
        low = presets.Target("x", "x", None, dtype, notes).config(cfg)
        scales = 2 / 128 if dtype.endswith("-weights") else 0  # a 16-bit scale per 128
        assert accounting.table_bytes(low) == accounting.table_numbers(cfg) * (4 / share + scales)
        weighs = accounting.DTYPE_BYTES[notes]
        assert accounting.note_bytes(low) * 4 / weighs == accounting.note_bytes(cfg)
        riders = [(100, 1)] * 3
        assert accounting.trip_flops(low, riders) == accounting.trip_flops(cfg, riders)


def test_a_model_that_is_predicted_only_cannot_be_built():
    with pytest.raises(ValueError, match="predicted only"):
        model.floors(TOY)


@pytest.mark.parametrize("fields,word", [({"layers": 2, "width": 8}, "'heads'"),
                                         ({"layers": 2, "width": 8, "heads": 4, "kv_heads": 3},
                                          "divide"),
                                         ({"layers": -1, "width": 8, "heads": 4}, "'layers'"),
                                         ({"layers": 2.5, "width": 8, "heads": 4}, "'layers'"),
                                         ({"layers": 2, "width": 8, "heads": 4, "gated": "yes"},
                                          "'gated'")])
def test_a_bad_model_file_says_what_is_wrong(tmp_path, fields, word):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=word):
        model_files.config(str(path))


def test_every_machine_at_hand_gives_a_source_for_each_figure():
    found = presets.known()
    assert {"h100-sxm", "a100-sxm", "rtx-4090", "m1-max", "post", "h200-sxm", "h100-pcie", "b200",
            "l40s", "a100-40gb", "m2-max", "m3-max", "m4-max", "epyc-9654"} <= set(found)
    assert all("memory" in e for n, e in found.items() if n != "post")  # the post gives none
    assert all("link" in e for e in found.values() if "data-centre GPU" in e["kind"])
    kinds = {entry["kind"] for entry in found.values()}
    assert any("data-centre GPU" in k for k in kinds) and any("consumer GPU" in k for k in kinds)
    assert any("CPU" in k for k in kinds)
    for name, entry in found.items():
        speed, source = entry["forklift"]
        assert speed > 0 and len(source) > 20, name
        assert "float32" in entry["workbench"], name
        for precision, (speed, source) in entry["workbench"].items():
            assert precision in accounting.DTYPE_BYTES and speed > 0 and len(source) > 20
            assert precision not in presets.WEIGHTS_ONLY  # their math is another's
        for figure in ("memory", "link"):  # where published: each with its source
            if figure in entry:
                assert entry[figure][0] > 0 and len(entry[figure][1]) > 20, (name, figure)
    assert found["post"]["forklift"][0] == 12.0 and found["post"]["workbench"]["float32"][0] \
        == 120.9  # the post's own machine_speed.py figures


def test_a_machine_is_taken_at_the_precision_asked(tmp_path):
    h100 = presets.target("h100-sxm", "bfloat16", None, str(tmp_path))
    assert h100.roofs.flops_per_s == 989.5e12 and h100.roofs.bytes_per_s == 3.35e12
    assert "1,979 teraFLOPS" in h100.roofs.source and "3.35 TB/s" in h100.roofs.source
    four = presets.target("rtx-4090:int4-weights", "float32", None, str(tmp_path))
    assert four.dtype == "int4-weights" and four.roofs.flops_per_s == 165.2e12  # 16-bit math
    assert four.note_dtype == "bfloat16"  # and 16-bit notes, as weight-only engines keep them
    eight = presets.target("h100-sxm:fp8", None, None, str(tmp_path))
    assert eight.roofs.flops_per_s == 1979e12 and eight.note_dtype == "bfloat16"  # engines'
    assert presets.target("h100-sxm:fp8", None, "fp8", str(tmp_path)).note_dtype == "fp8"  # asked
    with pytest.raises(ValueError, match="no fp8 math speed"):
        presets.target("a100-sxm:fp8", None, None, str(tmp_path))  # Ampere has none
    with pytest.raises(ValueError, match="did you mean h100-sxm"):
        presets.target("h100", "float32", None, str(tmp_path))
    with pytest.raises(ValueError, match="no bfloat16 math speed"):
        presets.target("post", "bfloat16", None, str(tmp_path))


def test_a_measured_machine_is_named_by_its_folder(tmp_path):
    import shutil
    shutil.copytree(results.REFERENCES + "/amd-epyc-2c", tmp_path / "mine")
    t = presets.target("mine", "float32", None, str(tmp_path))
    assert t.roofs.bytes_per_s > 0 and "measured" in t.title
    with pytest.raises(ValueError, match="float32"):
        presets.target("mine:int8", "float32", None, str(tmp_path))
    assert presets.target("intel-xeon-processor-2c", "float32", None, str(tmp_path)).roofs
    with pytest.raises(ValueError, match="no such machine"):  # never a path out of the folder
        presets.target("../" + tmp_path.name + "/mine", "float32", None, str(tmp_path))


def speeds(gbs, gflops):
    return Speeds(gbs * 1e9, gflops * 1e9, "test")


def test_each_turning_point_is_the_first_where_the_workbench_binds():
    roofs, cfg = speeds(2039, 312_000), dataclasses_replace(LLAMA, "bfloat16")  # an A100
    found = turning.turning(cfg, roofs, 512, 8, 1024)
    bound = [accounting.limit(cfg, [(0, p)], roofs.bytes_per_s, roofs.flops_per_s)[1]
             for p in (found["reads turn"] - 1, found["reads turn"])]
    assert bound == ["forklift", "workbench"]
    u = found["types turn"]
    bound = [accounting.limit(cfg, [(512, 1)] * n, roofs.bytes_per_s, roofs.flops_per_s)[1]
             for n in (u - 1, u)]
    assert bound == ["forklift", "workbench"]
    typed = accounting.typing_load(512, 5)
    assert accounting.costs(cfg, typed) == accounting.costs(cfg, [(512, 1)] * 5)
    assert found["notes outweigh"] == accounting.table_bytes(cfg) / accounting.note_bytes(cfg)
    assert 0 < found["one typer"] < 1 and found["half bench"] < u


def dataclasses_replace(cfg, dtype):
    return presets.Target("x", "x", None, dtype, dtype).config(cfg)


def turned(cfg, *machines, notes=512):
    """The turning points sheet's records for these machines ((name, Speeds)), first first, in
    bfloat16; the post's machine is added to compare."""
    args = argparse.Namespace(notes=notes, typers=8, question=1024, out="results")
    aimed = [presets.Target(n, n, s, "bfloat16", "bfloat16") for n, s in machines]
    return list(turning.turning_sheet(cfg, aimed, args, {}).records)


def judged(found):
    return {c.says: v for c, _, v, *_ in judge.verdicts(found, None, ("two_phases",),
                                                          {"predict": ["x"]}, claims=TOLD.claims)}


GPU = [  # each GPU claim: a machine (and model) where it holds, then one where it does not
    ("On a GPU the problem is the same", (LLAMA, speeds(3350, 989_500)),
     (LLAMA, speeds(12, 121))),
    ("On a GPU, reading a long question", (LLAMA, speeds(3350, 989_500)),
     (LLAMA, speeds(1, 10_000_000))),
    ("Typing for one user leaves", (LLAMA, speeds(3350, 989_500)), (LLAMA, speeds(12, 121))),
    ("Batching is the only way", (LLAMA, speeds(3350, 989_500)),  # 10x, 1.7x: notes outweigh
     (model.TINY, speeds(3350, 989_500))),                           # a tiny model's tables
    ("Reading a long question at once is one huge", (LLAMA, speeds(3350, 989_500)),
     (model.TINY, speeds(3350, 989_500), 1023))]  # judged at the post's machine's limits


@pytest.mark.parametrize("start,holds,fails", GPU, ids=[s for s, *_ in GPU])
def test_each_gpu_claim_holds_or_not_by_prediction(start, holds, fails):
    says = next(c.says for c in registry.CLAIMS if c.predicted and c.says.startswith(start))
    for case, verdict in ((holds, "predicted: holds"), (fails, "predicted: does not hold")):
        notes = {"notes": case[2]} if len(case) > 2 else {}
        assert judged(turned(case[0], ("a", case[1]), **notes))[says] == verdict, case


def test_every_gpu_claim_is_tried_both_ways_and_judged_on_predictions_only():
    gpu = {c.says for c in registry.CLAIMS if c.predicted}
    assert gpu == {next(c for c in gpu if c.startswith(s)) for s, *_ in GPU}
    measured = {c.says for c, *_ in judge.verdicts([], None, ("two_phases",), {},
                                                   claims=TOLD.claims)}
    assert not gpu & measured


def run(*flags):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = two_phases.main(list(flags))
    return code, out.getvalue(), err.getvalue()


def test_a_gpu_prediction_prints_the_tables_turning_points_and_claims(tmp_path):
    with pytest.raises(SystemExit) as refused:  # the post's machine has no bfloat16 figure
        run("--predict", "h100-sxm", "post", "--dtype", "bfloat16", "--no-save")
    assert refused.value.code == 2
    code, out, err = run("--predict", "h100-sxm", "a100-sxm", "post:float32", "--dtype",
                         "bfloat16", "--model", "llama-3-8b", "--out", str(tmp_path),
                         "--no-plot")
    assert code == 0, err
    assert out.startswith("machine: PREDICTED, nothing was run: every figure is a limit | "
                          "h100-sxm, bfloat16 tables/activations/notes: 3.35 TB/s, 990 "
                          "TFLOP/s; a100-sxm, bfloat16 tables/")
    for title in ("Phase 1, reading (prefill), PREDICTED", "Which limit typing hits on NVIDIA "
                  "H100", "Which limit you will hit: the turning points, predicted",
                  "The post's claims about a GPU, predicted for h100-sxm"):
        assert title in out, title
    assert out.count("predicted: holds") >= 3 and "Llama 3 8B (32 floors" in out
    folder = tmp_path / "predicted-llama-3-8b-h100-sxm-bfloat16-and-2-more"
    found = schema.load(str(folder / "two_phases.json"), "two_phases")["records"]  # whole
    L, W, H, KV, D, F, V = 32, 4096, 32, 8, 128, 14336, 128256  # Llama 3 8B, by hand
    tables, head = L * (W * D * (2 * H + 2 * KV) + 3 * W * F), V * W  # and its head
    fetched = lambda u: (tables + head + u * W) * 2 + u * 512 * L * 2 * KV * D * 2  # noqa: E731
    math = lambda u: (2 * (tables + head) + L * 4 * H * D * 513  # noqa: E731
                      + L * (12 * W + 10 * F)) * u  # norms and adds; SiLU and the gate
    half = next(u for u in range(1, 10 ** 4) if math(u) / 989.5e12 >= fetched(u) / 3.35e12 / 2)
    assert records.find(found, "turning points", "half bench", name="h100-sxm")["value"] == half
    with pytest.raises(records.Missing):  # never: no figure, "never" printed
        records.find(found, "turning points", "types turn", name="h100-sxm")
    assert "never" in out
    rows = records.rows(found, "turning points")
    assert [dict(k)["name"] for k in rows] == ["h100-sxm", "a100-sxm", "post"]
    h100 = records.find(found, "turning points", "reads turn", name="h100-sxm")["value"]
    cfg = dataclasses_replace(LLAMA, "bfloat16")
    assert h100 == turning.first(lambda p: accounting.limit(cfg, [(0, p)], 3350e9, 989.5e12)[1]
                                 == "workbench")
    assert "(predicted: every figure is its trip's limit" in out and "0.000" not in out


def test_three_significant_digits():
    assert [sig(v) for v in (887932, 0.00633841, 0.101415, 99.96, 1, 1.0, 295.2)] == [
        "888,000", "0.00634", "0.101", "100", "1", "1.00", "295"]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_predicted_roofline_holds_every_machine_and_says_predicted():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from harness.showing import pictures
    args = two_phases.parse_args(["--predict", "h100-sxm:bfloat16", "post", "--no-save"])
    aimed = presets.targets(args)
    data = predict.roofline(model.SIZES["small"], aimed, two_phases.EXPERIMENTS, args)
    fig = pictures.figure(plt, pictures.roofline_figure, data, "GPT-2 small", pictures.PREDICTED)
    ax = fig.axes[0]
    try:
        assert ax.get_title().startswith("PREDICTED: The roofline")
        assert pictures.PREDICTED in [t.get_text() for t in ax.texts]
        roofs = [line for line in ax.get_lines() if "FLOP/s" in str(line.get_label())]
        assert len(roofs) == 2 and all(max(line.get_ydata()) == pytest.approx(t.roofs.flops_per_s
                                                                              / 1e9)
                                       for line, t in zip(roofs, aimed))
        drawn = [tuple(p) for c in ax.collections for p in c.get_offsets()]
        assert len(drawn) == 2 * (len(post.PROMPTS) + len(post.USERS))
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert all(x0 < x < x1 and y0 < y < y1 for x, y in drawn)  # every point in sight
        labels = [t for t in ax.texts if t.get_text().endswith(("token", "tokens", "user",
                                                               "users"))]
        first = data["machines"][0]["points"]  # the first machine's rows labelled; the
        assert sorted(t.get_text() for t in labels) == sorted(p[1] for p in first)  # others'
        assert all(t.xy in [(p[2], p[3] / 1e9) for p in first]  # lie in the same order on
                   for t in labels)  # their roofs (every machine's labels collided)
        assert "rows labelled on h100-sxm's roof" in ax.get_legend().get_title().get_text()
    finally:
        plt.close(fig)


@pytest.mark.parametrize("fields,word", [({"layers": 2, "width": 4, "heads": 100}, "at most"),
                                         ({"layers": 2, "width": 8, "heads": 4,
                                           "num_local_experts": 8}, "mixture of experts")])
def test_a_model_the_accounting_cannot_count_is_refused(tmp_path, fields, word):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=word):
        model_files.config(str(path))


def test_a_model_file_too_deep_or_with_a_strange_name_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"layers": 2, "x": ' + "[" * 30000 + "]" * 30000 + "}")
    with pytest.raises(ValueError, match="not JSON"):
        model_files.config(str(deep))
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"name": "\x1b[31mRED\nline", "layers": 2, "width": 8,
                               "heads": 4}))
    cfg = model_files.config(str(odd))
    assert "\n" not in str(cfg) and "\x1b" not in str(cfg)
    args = two_phases.parse_args(["--predict", "post", "--model", str(odd), "--out",
                                  str(tmp_path)])
    assert args.label == "predicted-31mred-line-post-float32"


def test_each_prediction_has_a_folder_of_its_own(tmp_path):
    def folder(*flags):
        return two_phases.parse_args(["--predict", *flags, "--out", str(tmp_path)]).label
    labels = [folder("rtx-4090"), folder("rtx-4090", "--dtype", "float16"),
              folder("rtx-4090", "--dtype", "float16", "--note-dtype", "int8"),
              folder("rtx-4090", "a100-sxm"), folder("rtx-4090", "--model", "llama-3-8b")]
    assert len(set(labels)) == len(labels)
    args = two_phases.parse_args(["--predict", "h100-sxm", "--predict", "h100-sxm:float32", "l4",
                                  "--no-save"])
    assert args.predict == ["h100-sxm:bfloat16", "h100-sxm:float32", "l4:bfloat16"]  # each
    #   machine and precision once, all kept; a GPU with no precision named at its 16-bit rate


@pytest.mark.parametrize("flags,flag", [
    (["--typers", "1000000", "--chunk", "2", "--notes", "1"], "--typers"),
    (["--model", "tiny.json"], "--prompts")])
def test_a_prediction_too_big_or_beyond_the_models_context_is_refused(tmp_path, flags, flag,
                                                                     capsys):
    (tmp_path / "tiny.json").write_text(json.dumps({"layers": 2, "width": 8, "heads": 4,
                                                    "context": 64}))
    flags = [str(tmp_path / f) if f.endswith(".json") else f for f in flags]
    with pytest.raises(SystemExit) as stopped:
        two_phases.parse_args(["--predict", "post", *flags, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and len(err.splitlines()) == 1 and flag in err
    assert not (tmp_path / "out").exists()


def test_a_predicted_model_reads_as_far_as_its_own_context():
    args = two_phases.parse_args(["--predict", "h100-sxm", "--model", "llama-3-8b", "--prompts",
                                  "8192", "--question", "4096", "--notes", "2048", "--dtype",
                                  "float32", "--no-save"])
    found = next(s for s in predict.items(args, two_phases.EXPERIMENTS, TOLD)
                 if getattr(s, "name", "") == "prefill").records
    assert records.find(found, "prefill", "time", prompt=8192)["value"] == pytest.approx(
        accounting.limit(LLAMA, [(0, 8192)], 3350e9, 67e12)[0] * 1e3)


def test_a_prediction_never_saves_through_a_link(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "predicted-small-h100-sxm-bfloat16").symlink_to(elsewhere)
    with pytest.raises(SystemExit) as stopped:
        two_phases.parse_args(["--predict", "h100-sxm", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "is a link" in err and len(err.splitlines()) == 1
    assert not any(elsewhere.iterdir())


def test_float16_is_each_machines_own_rate_and_a_precision_given_is_not_asked_for_again():
    xeon = presets.target("xeon-8480", "float16", None, "results")
    assert xeon.roofs.flops_per_s == 14_336e9  # AVX-512 FP16, not AMX's bfloat16 rate
    assert "AVX-512 FP16" in xeon.roofs.source
    m1 = presets.target("m1-max", "float16", None, "results")
    assert m1.roofs.flops_per_s == presets.target("m1-max", "float32", None,
                                                   "results").roofs.flops_per_s
    with pytest.raises(ValueError) as given:
        presets.target("ryzen-7950x:bfloat16", None, None, "results")
    assert "no bfloat16 math speed" in str(given.value) and "PRECISION" not in str(given.value)


def test_a_gpu_with_no_precision_named_is_predicted_at_its_16_bit_rate_and_its_claims_hold(
        capsys):
    args = two_phases.parse_args(["--predict", "h100-sxm", "post", "--no-save"])
    assert args.predict == ["h100-sxm:bfloat16", "post:float32"] and args.dtype == "bfloat16"
    assert "no --dtype named, so h100-sxm at bfloat16" in capsys.readouterr().err
    sheet = next(s for s in predict.items(args, two_phases.EXPERIMENTS, TOLD)
                 if getattr(s, "name", "") == "claims")
    assert {r["value"] for r in sheet.records if r["figure"] == "verdict"} == {"predicted: holds"}
    assert all(r["predicted"] for r in sheet.records)  # a prediction's verdicts are its kind
    measured = two_phases.parse_args(["--no-save", "--quick"])
    assert measured.dtype == "float32"  # what a measured run's records say it ran in


def test_seventy_b_does_not_fit_one_h100_and_is_predicted_on_the_fewest_that_hold_it(capsys):
    seventy = model_files.config("llama-3-70b")
    held = (accounting.table_numbers(seventy) + 2 * 128256 * 8192) * 2  # tables, head, embedding
    assert held == 141_104_775_168  # 70.55 billion numbers in bfloat16
    one = two_phases.parse_args(["--predict", "h100-sxm", "post", "--model", "llama-3-70b",
                                 "--gpus", "1", "--no-save"])
    sheet = next(s for s in predict.items(one, two_phases.EXPERIMENTS, TOLD)
                 if getattr(s, "name", "") == "fits")
    h100 = {r["figure"]: r["value"] for r in sheet.records if r["keys"]["name"] == "h100-sxm"}
    gib, room = 2 ** 30, 79.65 * 0.9 - 1.79  # nvidia-smi's 81,559 MiB; vLLM's reserve
    assert h100["tables"] == pytest.approx(held / gib) and h100["has"] == 79.65
    assert h100["room"] == pytest.approx(room)
    assert h100["fits"] == f"does not fit (needs {sig(h100['needs'])} of {sig(room)} GiB)"
    assert h100["least"] == 4 and {r["keys"]["devices"] for r in sheet.records} == {1}
    post = {r["figure"] for r in sheet.records if r["keys"]["name"] == "post"}
    assert "fits" not in post  # its memory is not published: unknown, never a guess
    rows = [s for s in predict.items(one, two_phases.EXPERIMENTS, TOLD)
            if getattr(s, "name", "") == "decode"][0].records
    assert {r["value"] for r in rows if r["figure"] == "memory"} == {
        f"does not fit (needs {plans.gib(n)} of {sig(room)} GiB)" for n in [
            held + sum(plans.bytes_held(dataclasses_replace(seventy, "bfloat16"), [row],
                                        copies=False))
            for row in two_phases.EXPERIMENTS["decode"].plan(one)]}  # every row marked, its
    #                                                          own need beside it
    reserved = two_phases.parse_args(["--predict", "h100-sxm", "--model", "llama-3-70b",
                                      "--no-save"])
    assert reserved.devices == [4]  # two leave 68.1 GiB each: the tables' 65.7 and 5.0 of notes
    said = next(s for s in predict.items(reserved, two_phases.EXPERIMENTS, TOLD)
                if getattr(s, "name", "") == "fits").note
    assert "h100-sxm: split over 4 of it, the fewest that hold the plan" in said  # on stdout
    auto = two_phases.parse_args(["--predict", "h100-sxm", "--model", "llama-3-70b",
                                  "--memory-utilization", "1", "--no-save"])
    assert auto.devices == [2]  # the whole memory, no engine's reserve: two hold it
    items = list(predict.items(auto, two_phases.EXPERIMENTS, TOLD))
    fits = next(s for s in items if getattr(s, "name", "") == "fits")
    assert {r["value"] for r in fits.records if r["figure"] == "fits"} == {"fits"}
    split = presets.targets(auto)[0].config(seventy)
    assert accounting.held_bytes(split) == held / 2 and split.devices == 2
    decode = next(s for s in items if getattr(s, "name", "") == "decode").records
    step = records.find(decode, "decode", "step", users=1)["value"] / 1e3
    ride = [(512, 1)]  # two all-reduces a floor of 8,192 bfloat16 numbers, half of it sent
    assert accounting.link_bytes(split, ride) == 80 * 2 * 8192 * 2 * 2 * (2 - 1) / 2
    fetched = held / 2 + 80 * 2 * 4 * 128 * 2 * 512  # half the tables, half of the 8 kv heads
    assert accounting.bytes_read(split, ride) == fetched - 2 * 128256 * 8192 / 2 + 8192 * 2 / 2
    #        the embedding is held, not read: only the new token's row
    assert step == pytest.approx(max(accounting.bytes_read(split, ride) / 3350e9,
                                     accounting.link_bytes(split, ride) / 450e9) + 80 * 2 * 6e-6)


    small = two_phases.parse_args(["--predict", "rtx-4090", "--no-save"])
    fits = next(s for s in predict.items(small, two_phases.EXPERIMENTS, TOLD)
                if getattr(s, "name", "") == "fits")
    assert {r["value"] for r in fits.records if r["figure"] == "fits"} == {"fits"}


# ---- model files and configs


@pytest.mark.parametrize("make", ["dangling link", "folder", "fifo"])
def test_a_model_under_models_that_is_no_file_is_one_line(make, tmp_path, monkeypatch):
    from harness.predicting import model_files
    import two_phases
    from conftest import one_line
    models = tmp_path / "models"
    shutil.copytree(model_files.MODELS, models)
    monkeypatch.setattr(model_files, "MODELS", str(models))
    name = "my-model"
    if make == "dangling link":
        (models / f"{name}.json").symlink_to(tmp_path / "gone.json")
    elif make == "folder":
        (models / f"{name}.json").mkdir()
    else:
        os.mkfifo(models / f"{name}.json")
    assert name not in model_files.shipped_models()
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", name, "--no-save")
    one_line(r, 2, "--model", name)
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", "/dev/zero",
                   "--no-save")
    one_line(r, 2, "--model", "not a regular file")


def test_a_models_short_context_is_the_models_fault_not_the_flags(tmp_path):
    import two_phases
    from conftest import one_line
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"layers": 2, "width": 64, "heads": 4, "context": 1}))
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", str(path),
                   "--no-save")
    one_line(r, 2, "--model", "reads at most 1 token (its context)")


def test_a_multimodal_configs_language_model_is_read():
    from harness.predicting import model_files
    found = {"model_type": "llama4", "_name_or_path": "meta-llama/Llama-4-Scout-17B-16E",
             "text_config": {"num_hidden_layers": 48, "hidden_size": 5120,
                             "num_attention_heads": 40, "num_key_value_heads": 8,
                             "head_dim": 128, "intermediate_size": 8192, "hidden_act": "silu",
                             "num_local_experts": 16, "num_experts_per_tok": 1,
                             "max_position_embeddings": 10485760, "vocab_size": 202048},
             "vision_config": {"num_hidden_layers": 34, "hidden_size": 1408}}
    cfg = model_files.shape(model_files.language_model(found), "config.json")
    assert (cfg.layers, cfg.width, cfg.kv_heads, cfg.experts, cfg.active) == (48, 5120, 8, 16, 1)
    assert cfg.name == "meta-llama/Llama-4-Scout-17B-16E"


@pytest.mark.parametrize("fields, kv_heads", [
    ({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
      "num_hidden_layers": 32, "multi_query": True, "max_position_embeddings": 2048,
      "vocab_size": 65024}, 1),
    ({"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
      "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": True,
      "max_position_embeddings": 2048, "vocab_size": 65024}, 8),
    ({"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40,
      "multi_query": True, "n_positions": 8192, "vocab_size": 49152}, 1)])
def test_multi_query_and_falcons_key_value_heads_are_modelled(tmp_path, fields, kv_heads):
    """Falcon-7B's and StarCoder's one key/value head (multi_query), Falcon-40B's 8
    (num_kv_heads): they were read as one for every query head, the notes 16-71x too many."""
    from harness.predicting import model_files
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    assert model_files.config(str(path)).kv_heads == kv_heads


def test_a_hugging_face_config_without_a_context_or_with_a_strange_multi_query_is_refused(
        tmp_path):
    from harness.predicting import model_files
    falcon = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
              "num_hidden_layers": 32, "multi_query": True, "vocab_size": 65024}  # (Falcon's
    path = tmp_path / "config.json"  # own names no context: it fell back to GPT-2's 1,024)
    path.write_text(json.dumps(falcon))
    with pytest.raises(ValueError, match="no context length: give 'context'"):
        model_files.config(str(path))
    path.write_text(json.dumps({**falcon, "n_positions": 2048, "multi_query": "yes"}))
    with pytest.raises(ValueError, match="'multi_query' must be true or false"):
        model_files.config(str(path))


@pytest.mark.parametrize("flags, says", [
    (("--predict", "--forklift", "0.001", "--workbench", "0.001", "--efficiency", "0.5"),
     "argument --efficiency: the given memory speed taken at 0.5 of itself is 0.0005 GB/s"),
    (("--predict", "h100-sxm", "--efficiency", "1e-7"),
     "argument --efficiency: h100-sxm's memory speed taken at 1e-07 of itself")])
def test_speeds_that_could_not_be_saved_are_refused_before_anything_is_printed(tmp_path, flags,
                                                                               says):
    """They printed whole tables of inf and 5e-324, then failed at save ("would not read
    back")."""
    r = script("two_phases.py", *flags, "--out", str(tmp_path))
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and not list(tmp_path.iterdir())


def test_a_gpus_whole_memory_is_no_note_that_it_is_no_gpu(tmp_path):
    r = script("two_phases.py", "--predict", "h100-sxm", "--memory-utilization", "1",
               "--no-save")
    assert r.returncode == 0 and "no GPU" not in r.stderr, r.stderr
    r = script("two_phases.py", "--predict", "--forklift", "50", "--workbench", "400",
               "--memory-utilization", "0.5", "--no-save")
    assert "given is no GPU" in r.stderr  # the given speeds: no memory an engine shares


LLAMA_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "hidden_act": "silu", "max_position_embeddings": 8192, "vocab_size": 128256,
            "tie_word_embeddings": False}


@pytest.mark.parametrize("missing, key", [("vocab_size", "'vocab_size'"),
                                          ("intermediate_size", "'intermediate_size'")])
def test_a_config_missing_what_a_prediction_needs_is_refused_naming_the_key(tmp_path, missing,
                                                                            key):
    """Without vocab_size the embedding and the LM head were dropped (7% of an 8B step's
    bytes), without intermediate_size a SwiGLU took GPT-2's 4 x width (16.5 GiB of tables, not
    15.0): both exit 0 with a wrong prediction. Now one line, exit 2."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in LLAMA_8B.items() if k != missing}))
    r = in_process(two_phases.main, "--predict", "h100-sxm", "--model", str(path), "--no-save")
    one_line(r, 2, "--model", key)
    path.write_text(json.dumps(LLAMA_8B))  # whole, it predicts
    assert in_process(two_phases.main, "--predict", "h100-sxm", "--model", str(path),
                      "--no-save").returncode == 0


def test_a_prediction_says_the_models_parameters_every_one_and_a_tokens():
    """As the models' cards count them: Llama 3 8B's 8.03B; Mixtral's 46.7B, 12.9B a token;
    GPT-2 small's 124M (its position embeddings and norms aside)."""
    from harness.predicting import model_files
    llama, mixtral = (accounting.parameters(model_files.config(n))
                      for n in ("llama-3-8b", "mixtral-8x7b"))
    assert llama[0] == llama[1] == pytest.approx(8.03e9, rel=0.005)
    assert mixtral == (pytest.approx(46.7e9, rel=0.005), pytest.approx(12.9e9, rel=0.005))
    assert accounting.parameters(model_files.config("small"))[0] == pytest.approx(124e6, rel=0.01)
    r = in_process(two_phases.main, "--predict", "h100-sxm", "--model", "mixtral-8x7b",
                   "--no-save")
    assert "Mixtral 8x7B: 46.7B parameters, 12.9B active a token" in r.stdout
