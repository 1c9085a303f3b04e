"""The post's Part 4 whole: every number a step reads (the head among them), mixtures of experts,
the precisions engines run, memory, and a model split over several GPUs, each against a count by
hand."""
import contextlib
import dataclasses
import io
import json

import pytest

import model
import two_phases
from conftest import in_process, one_line
from harness.predicting import fitting, model_files, presets, turning

LLAMA_8B = (32, 4096, 32, 8, 128, 14336, 128256)  # layers, width, heads, kv heads, head, ffn,
#                                                    words: meta-llama/Meta-Llama-3-8B
LLAMA_70B = (80, 8192, 64, 8, 128, 28672, 128256)


def by_hand(layers, width, heads, kv, head, ffn, vocab, experts=0, active=0):
    """A Llama-style model's numbers by hand: (floors' tables, head, embedding, a token's
    table FLOPs) with SwiGLU's three tables and, in a mixture, a router per floor."""
    attention = width * head * (2 * heads + 2 * kv)
    ffns = 3 * width * ffn
    floors = layers * (attention + max(experts, 1) * ffns + width * experts)
    flops = 2 * layers * (attention + max(active, 1) * ffns + width * experts)
    return floors, vocab * width, vocab * width, flops


def at(name, dtype="bfloat16", devices=1):
    cfg = model_files.config(name)
    return dataclasses.replace(cfg, dtype=dtype, note_dtype=dtype, devices=devices)


def test_llama_3_8b_counts_its_head_and_typing_is_bound_where_a_hand_count_says():
    floors, head, embedding, flops = by_hand(*LLAMA_8B)
    cfg = at("llama-3-8b")
    assert model.table_numbers(cfg) == floors == 6_979_321_856
    assert model.head_numbers(cfg) == head + embedding == 2 * 525_336_576
    assert model.held_bytes(cfg) == (floors + head + embedding) * 2  # 16.06 GB in bfloat16
    one = [(0, 1)]  # one token, an empty notebook: the tables, the head, one embedding row
    assert model.bytes_read(cfg, one) == (floors + head + 4096) * 2
    assert model.limit(cfg, one, 3350e9, 989.5e12)[0] == pytest.approx(4.48e-3, abs=5e-6)
    assert model.costs(cfg, one)["head"] == ((head + 4096) * 2, 2 * head)
    assert model.table_flops(cfg, 1) == flops


def test_gpt2_predicted_counts_its_tied_head_once_and_the_run_model_counts_none():
    small, predicted = model.SIZES["small"], model_files.config("small")
    assert small.vocab == 0 and "head" not in model.costs(small, [(0, 1)])  # as the post
    assert predicted.vocab == 50257 and predicted.tied
    assert model.held_bytes(predicted) == (84_934_656 + 50257 * 768) * 4  # tied: one table
    head = model.costs(predicted, [(5, 3), (0, 1)])["head"]
    assert head == (50257 * 768 * 4, 2 * 50257 * 768 * 2)  # each user's last token's words
    assert not predicted.runnable and small.runnable


def test_seventy_b_in_bfloat16_needs_two_h100s_with_its_all_reduces_by_hand():
    floors, head, embedding, _ = by_hand(*LLAMA_70B)
    one, two = at("llama-3-70b"), at("llama-3-70b", devices=2)
    assert model.held_bytes(one) == (floors + head + embedding) * 2 > 80e9
    assert model.held_bytes(two) == model.held_bytes(one) / 2 < 80e9
    assert model.link_bytes(one, [(0, 7)]) == 0
    assert model.link_bytes(two, [(0, 7)]) == 80 * 2 * (7 * 8192 * 2) * 2 * 1 / 2
    four = at("llama-3-70b", devices=4)  # a ring of four sends 2 x 3/4 of each all-reduce
    assert model.link_bytes(four, [(0, 7)]) == 80 * 2 * (7 * 8192 * 2) * 2 * 3 / 4
    assert model.notes_share(two) == 0.5 and model.notes_share(at("llama-3-70b", devices=16)) \
        == 1 / 8  # more devices than key/value heads: a head each, kept where it is needed


def test_mixtral_reads_the_experts_its_tokens_are_routed_to_until_it_reads_them_all():
    floors, head, embedding, flops = by_hand(32, 4096, 32, 8, 128, 14336, 32000, 8, 2)
    cfg = at("mixtral-8x7b")
    assert (cfg.experts, cfg.active) == (8, 2)
    assert model.table_numbers(cfg) == floors and model.table_flops(cfg, 1) == flops
    assert model.held_bytes(cfg) == (floors + head + embedding) * 2  # 93.4 GB: every expert
    assert model.experts_read(cfg, 1) == pytest.approx(2)
    assert model.experts_read(cfg, 2) == pytest.approx(8 * (1 - (6 / 8) ** 2))
    assert model.experts_read(cfg, 10 ** 4) == pytest.approx(8)
    attention = 32 * 4096 * 128 * 80 + 32 * 4096 * 8
    expert = 32 * 3 * 4096 * 14336
    for tokens, read in ((1, 2), (10 ** 4, 8)):
        assert model.tables_read(cfg, tokens) == pytest.approx((attention + read * expert) * 2)
    dense = dataclasses.replace(cfg, experts=0, active=0)  # the same shape, one feed-forward
    roofs = presets.target("h100-sxm", "bfloat16", None, "results").roofs
    assert turning.turning(cfg, roofs, 512, 8, 1024)["reads turn"] > \
        turning.turning(dense, roofs, 512, 8, 1024)["reads turn"]  # more tables per token


def test_fp8_halves_bfloat16s_bytes_and_weight_only_int4_turns_where_a_hand_count_says():
    sixteen, eight = at("llama-3-8b"), at("llama-3-8b", "fp8")
    assert model.held_bytes(eight) * 2 == model.held_bytes(sixteen)
    assert model.note_bytes(eight) * 2 == model.note_bytes(sixteen)
    four = presets.target("h100-sxm:int4-weights", None, None, "results")
    cfg = four.config(model_files.config("llama-3-8b"))
    assert four.roofs.flops_per_s == 989.5e12  # the math at 16 bits
    floors, head, _, flops = by_hand(*LLAMA_8B)

    def bound(p):  # reading p tokens by hand: 4-bit tables with a 16-bit scale per 128
        fetched = floors * (0.5 + 2 / 128) + (head + p * 4096) * 2  # the head, p embedding
        #                                                             rows: 16 bits
        math = (flops * p + 32 * 4 * 32 * 128 * p * (p + 1) // 2 + 2 * head
                + 32 * (12 * 4096 + 10 * 14336) * p)
        return math / 989.5e12 >= fetched / 3350e9
    turns = next(p for p in range(1, 10 ** 4) if bound(p))
    assert turning.turning(cfg, four.roofs, 512, 8, 1024)["reads turn"] == turns
    assert turns < turning.turning(at("llama-3-8b"), four.roofs, 512, 8, 1024)["reads turn"] / 3


def test_a_grid_cell_that_does_not_fit_says_so_with_its_need():
    args = two_phases.parse_args(["--predict", "h100-sxm", "--model", "llama-3-70b",
                                  "--no-save"])
    aim = presets.targets(args)[0]
    assert aim.devices == 2
    cfg = aim.config(model_files.config("llama-3-70b"))
    sheet = fitting.grid_sheet(cfg, aim, {})
    cells = {(r["keys"]["users"], r["figure"]): r["value"] for r in sheet.records}
    need = fitting.typing_memory(cfg, 4096, 1024)
    by_hand_need = model.held_bytes(cfg) + 1024 * 4097 * 80 * 2 * 4 * 128 * 2 + (
        model.trip_scratch_bytes(cfg, [(4096, 1)] * 1024))
    assert need == pytest.approx(by_hand_need)
    assert cells[(1024, "4096 notes")] == f"does not fit ({need / 1e9:,.0f} GB)"
    assert cells[(1, "0 notes")].startswith("forklift")
    most = int(cells[("most that fit", "1024 notes")].replace(",", ""))
    assert fitting.typing_memory(cfg, 1024, most) <= 80e9 < fitting.typing_memory(
        cfg, 1024, most + 1)


def test_on_an_h100_with_no_precision_named_the_gpu_claims_follow_the_post():
    code, out = run("--predict", "h100-sxm", "--model", "llama-3-70b", "--no-save")
    assert code == 0
    assert "h100-sxm x2 (bfloat16)" in out and "does not fit" in out  # its grid's deep rows
    claims = [line for line in out.splitlines() if line.startswith("predicted:")]
    assert len(claims) == 5 and all(line.startswith("predicted: holds") for line in claims)


def run(*flags):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = two_phases.main(list(flags))
    return code, out.getvalue()


@pytest.mark.parametrize("flags,words", [
    (["--predict", "h100-sxm", "--gpus", "0"], "--gpus"),
    (["--predict", "h100-sxm", "--gpus", "9"], "--gpus"),
    (["--predict", "h100-sxm", "--model", "llama-3-70b", "--gpus", "3"], "divide 64"),
    (["--predict", "post", "--gpus", "2"], "no published link"),
    (["--gpus", "2"], "--predict"),
    (["--predict", "h100-sxm", "--note-dtype", "int4-weights"], "--note-dtype"),
    (["--predict", "a100-sxm:fp8"], "no fp8 math speed"),
    (["--notes", "0"], "--predict")])
def test_a_bad_flag_of_part_4_is_one_line(flags, words):
    one_line(in_process(two_phases.parse_args, *flags, "--no-save"), 2, words)


def test_a_mixture_with_more_experts_a_token_than_experts_is_one_line(tmp_path):
    path = tmp_path / "moe.json"
    path.write_text(json.dumps({"layers": 2, "width": 8, "heads": 2, "num_local_experts": 4,
                                "num_experts_per_tok": 5}))
    one_line(in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", str(path),
                        "--no-save"), 2, "--model", "at most 'experts'")
    with pytest.raises(ValueError, match="needs 'experts' and 'active'"):
        path.write_text(json.dumps({"layers": 2, "width": 8, "heads": 2, "experts": 4}))
        model_files.config(str(path))


def test_a_model_name_is_a_name_in_any_case_and_a_near_miss_is_named():
    assert model_files.config("Llama-3-8B") == model_files.config("llama-3-8b")
    with pytest.raises(ValueError, match="did you mean mixtral-8x7b"):
        model_files.config("mixtral-8x7")
