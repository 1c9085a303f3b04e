"""The post's Part 4 whole: every number a step reads (the head among them at 16 bits under 8- and
4-bit tables, with their group scales), mixtures of experts, the precisions engines run, memory to
the byte, a model split over several GPUs and the link's two bounds, a trip's parts against its
whole, a whole request, and the presets users look for, each against a count by hand."""
import contextlib
import dataclasses
import io
import json
import re

import pytest

import accounting

import model
import two_phases
from conftest import in_process, one_line
from harness.keeping import records
from harness.keeping.records import sig
from harness.predicting import fitting, model_files, parts, plans, presets, request, turning

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
    assert accounting.table_numbers(cfg) == floors == 6_979_321_856
    assert accounting.head_numbers(cfg) == head + embedding == 2 * 525_336_576
    assert accounting.held_bytes(cfg) == (floors + head + embedding) * 2  # 16.06 GB in bfloat16
    one = [(0, 1)]  # one token, an empty notebook: the tables, the head, one embedding row
    assert accounting.bytes_read(cfg, one) == (floors + head + 4096) * 2
    assert accounting.limit(cfg, one, 3350e9, 989.5e12)[0] == pytest.approx(4.48e-3, abs=5e-6)
    assert accounting.costs(cfg, one)["head"] == ((head + 4096) * 2, 2 * head)
    assert accounting.table_flops(cfg, 1) == flops


def test_gpt2_predicted_counts_its_tied_head_once_and_the_run_model_counts_none():
    small, predicted = model.SIZES["small"], model_files.config("small")
    assert small.vocab == 0 and "head" not in accounting.costs(small, [(0, 1)])  # as the post
    assert predicted.vocab == 50257 and predicted.tied
    assert accounting.held_bytes(predicted) == (84_934_656 + 50257 * 768) * 4  # tied: one table
    head = accounting.costs(predicted, [(5, 3), (0, 1)])["head"]
    assert head == (50257 * 768 * 4, 2 * 50257 * 768 * 2)  # each user's last token's words
    assert not predicted.runnable and small.runnable


def test_seventy_b_in_bfloat16_needs_two_h100s_with_its_all_reduces_by_hand():
    floors, head, embedding, _ = by_hand(*LLAMA_70B)
    one, two = at("llama-3-70b"), at("llama-3-70b", devices=2)
    assert accounting.held_bytes(one) == (floors + head + embedding) * 2 > 80e9
    assert accounting.held_bytes(two) == accounting.held_bytes(one) / 2 < 80e9
    assert accounting.link_bytes(one, [(0, 7)]) == 0
    assert accounting.link_bytes(two, [(0, 7)]) == 80 * 2 * (7 * 8192 * 2) * 2 * 1 / 2
    four = at("llama-3-70b", devices=4)  # a ring of four sends 2 x 3/4 of each all-reduce
    assert accounting.link_bytes(four, [(0, 7)]) == 80 * 2 * (7 * 8192 * 2) * 2 * 3 / 4
    assert accounting.notes_share(two) == 0.5
    sixteen = at("llama-3-70b", devices=16)  # more devices than key/value heads: a head each,
    assert accounting.notes_share(sixteen) == 1 / 8  # kept where it is needed


def test_mixtral_reads_the_experts_its_tokens_are_routed_to_until_it_reads_them_all():
    floors, head, embedding, flops = by_hand(32, 4096, 32, 8, 128, 14336, 32000, 8, 2)
    cfg = at("mixtral-8x7b")
    assert (cfg.experts, cfg.active) == (8, 2)
    assert accounting.table_numbers(cfg) == floors and accounting.table_flops(cfg, 1) == flops
    assert accounting.held_bytes(cfg) == (floors + head + embedding) * 2  # 93.4 GB: every expert
    assert accounting.experts_read(cfg, 1) == pytest.approx(2)
    assert accounting.experts_read(cfg, 2) == pytest.approx(8 * (1 - (6 / 8) ** 2))
    assert accounting.experts_read(cfg, 10 ** 4) == pytest.approx(8)
    attention = 32 * 4096 * 128 * 80 + 32 * 4096 * 8
    expert = 32 * 3 * 4096 * 14336
    for tokens, read in ((1, 2), (10 ** 4, 8)):
        assert accounting.tables_read(cfg, tokens) == pytest.approx((attention + read * expert) * 2)
    dense = dataclasses.replace(cfg, experts=0, active=0)  # the same shape, one feed-forward
    roofs = presets.target("h100-sxm", "bfloat16", None, "results").roofs
    assert turning.turning(cfg, roofs, 512, 8, 1024)["reads turn"] > \
        turning.turning(dense, roofs, 512, 8, 1024)["reads turn"]  # more tables per token


def test_fp8_halves_bfloat16s_bytes_and_weight_only_int4_turns_where_a_hand_count_says():
    sixteen, eight = at("llama-3-8b"), at("llama-3-8b", "fp8")
    assert accounting.held_bytes(eight) * 2 == accounting.held_bytes(sixteen)
    assert accounting.note_bytes(eight) * 2 == accounting.note_bytes(sixteen)
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
    assert aim.devices == 4  # two leave 68.1 GiB each under an engine's reserve: too few
    room = 81559 * 2 ** 20 * 0.9 - 3.58 * 2 ** 30  # nvidia-smi's MiB; vLLM's 0.9 and runtime
    assert aim.room == pytest.approx(room, rel=1e-4)  # (79.65 GiB as presets.json rounds it)
    cfg = aim.config(model_files.config("llama-3-70b"))
    sheet = fitting.grid_sheet(cfg, aim, {})
    cells = {(r["keys"]["users"], r["figure"]): r["value"] for r in sheet.records}
    need = fitting.typing_memory(cfg, 4096, 1024)
    by_hand_need = accounting.held_bytes(cfg) + 1024 * 4097 * 80 * 2 * 2 * 128 * 2 + (
        accounting.trip_scratch_bytes(cfg, [(4096, 1)] * 1024))  # 2 of the 8 kv heads a device
    assert need == pytest.approx(by_hand_need)
    assert cells[(1024, "4096 notes")] == f"does not fit ({sig(need / 2 ** 30)} GiB)"
    assert cells[(1, "0 notes")].startswith("forklift, workbench ")  # and how busy it is
    most = int(cells[("most that fit", "1024 notes")].replace(",", ""))
    assert fitting.typing_memory(cfg, 1024, most) <= aim.room < fitting.typing_memory(
        cfg, 1024, most + 1)


def test_on_an_h100_with_no_precision_named_the_gpu_claims_follow_the_post():
    code, out = run("--predict", "h100-sxm", "--model", "llama-3-70b", "--no-save")
    assert code == 0
    assert "h100-sxm x4, bfloat16 tables/activations/notes" in out
    assert "does not fit" in out  # its grid's deep rows
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
                        "--no-save"), 2, "--model", "at most 'num_local_experts'")  # its own key
    with pytest.raises(ValueError, match="needs 'experts' and 'active'"):
        path.write_text(json.dumps({"layers": 2, "width": 8, "heads": 2, "experts": 4}))
        model_files.config(str(path))


def test_a_model_name_is_a_name_in_any_case_and_a_near_miss_is_named():
    assert model_files.config("Llama-3-8B") == model_files.config("llama-3-8b")
    with pytest.raises(ValueError, match="did you mean mixtral-8x7b"):
        model_files.config("mixtral-8x7")


# ---- Part 4's second pass: each fix against a count by hand

NOTE_8B = 32 * 2 * 8 * 128 * 2  # a Llama 3 8B token's notes in bfloat16: 131,072 bytes
NOTE_70B = 80 * 2 * 8 * 128 * 2  # 70B's: 327,680


def on(name, model_name, dtype="bfloat16", devices=1, quantize_head=False):
    """(the Config at a preset's precision, split over devices, and its Target)."""
    aim = dataclasses.replace(presets.target(f"{name}:{dtype}", None, None, "results"),
                              devices=devices, quantize_head=quantize_head)
    return aim.config(model_files.config(model_name)), aim


def test_the_head_stays_at_16_bits_under_int4_tables_with_their_group_scales_by_hand():
    floors, head, _, _ = by_hand(*LLAMA_8B)
    cfg, _ = on("h100-sxm", "llama-3-8b", "int4-weights")
    assert accounting.number_bytes("int4-weights") == 0.5 + 2 / 128  # a 16-bit scale per 128
    assert accounting.number_bytes("int8-weights") == 1 + 2 / 128
    assert accounting.number_bytes("fp8") == 1 and accounting.number_bytes("bfloat16") == 2
    one = [(512, 1)]  # one user typing with 512 notes (bfloat16 notes under weights only)
    by_hand_bytes = floors * (0.5 + 2 / 128) + (head + 4096) * 2 + 512 * NOTE_8B
    assert accounting.bytes_read(cfg, one) == pytest.approx(by_hand_bytes)  # 4.72 GB
    quantized, _ = on("h100-sxm", "llama-3-8b", "int4-weights", quantize_head=True)
    assert accounting.bytes_read(quantized, one) == pytest.approx(
        (floors + head + 4096) * (0.5 + 2 / 128) + 512 * NOTE_8B)  # 3.93 GB: the old reading
    assert accounting.held_bytes(cfg) == pytest.approx(floors * (0.5 + 2 / 128) + 2 * head * 2)
    assert accounting.costs(cfg, one)["tables"][0] == pytest.approx(floors * (0.5 + 2 / 128))


def test_mixtral_in_fp8_keeps_its_head_at_16_bits_and_its_working_space_counts_two_experts():
    floors, head, embedding, _ = by_hand(32, 4096, 32, 8, 128, 14336, 32000, 8, 2)
    cfg, aim = on("h100-sxm", "mixtral-8x7b", "fp8")
    assert aim.precision == "fp8 tables/activations, bfloat16 notes/head"
    assert cfg.head_dtype == cfg.note_dtype == "bfloat16"  # as engines keep them unless asked
    assert accounting.held_bytes(cfg) == floors + (head + embedding) * 2  # fp8 floors, 16-bit head
    attention, expert = 32 * 4096 * 128 * 80 + 32 * 4096 * 8, 32 * 3 * 4096 * 14336
    one = [(0, 1)]
    assert accounting.bytes_read(cfg, one) == pytest.approx(
        attention + 2 * expert + (head + 4096) * 2)  # (its new note is written, not fetched)
    per_token = (32 + 2 * 8) * 128 + 2 * 14336 * 2 + 4096  # q, k, v; two experts' two; residual
    assert accounting.trip_scratch_bytes(cfg, [(0, 3)]) == (32 * 3 * 3 * 2 + 3 * per_token) * 2


def test_the_working_space_is_at_16_bits_and_the_most_typers_at_no_notes_is_a_hand_count():
    floors, head, embedding, _ = by_hand(*LLAMA_8B)
    cfg, aim = on("h100-sxm", "llama-3-8b")
    tables = (floors + head + embedding) * 2
    per_user = NOTE_8B + ((32 + 16) * 128 + 2 * 14336 + 4096) * 2  # its note, its activations
    one_user_scores = 32 * 1 * 1 * 2 * 2  # one user's scores and bias at a time
    room = 79.65 * 2 ** 30  # nvidia-smi's 81,559 MiB, the whole of it (no engine's reserve)
    assert aim.room == room
    most = int((room - tables - one_user_scores) // per_user)
    assert fitting.typing_memory(cfg, 0, most) <= room < fitting.typing_memory(cfg, 0, most + 1)
    sheet = fitting.grid_sheet(cfg, aim, {})
    cell = records.find(sheet.records, "grid", "0 notes", users="most that fit")["value"]
    assert int(cell.replace(",", "")) == most  # 332,526


def test_seventy_b_on_one_h200_fits_its_memory_but_not_an_engines_reserve_by_hand():
    args = two_phases.parse_args(["--predict", "h200-sxm", "--gpus", "1", "--model",
                                  "llama-3-70b", "--experiments", "decode", "--no-save"])
    cfg, _ = on("h200-sxm", "llama-3-70b")
    need = fitting.plan_bytes(cfg, args, {"decode": two_phases.EXPERIMENTS["decode"]})
    assert need["notes"] == 64 * 513 * NOTE_70B  # 64 typers' notes, no first notebook of 512
    floors, head, embedding, _ = by_hand(*LLAMA_70B)
    held = (floors + head + embedding) * 2
    assert accounting.held_bytes(cfg) == held == 141_104_775_168  # 131.4 GiB
    memory = 143771 * 2 ** 20  # nvidia-smi's MiB: 140.4 GiB (141 GB on the datasheet)
    whole, reserved = (presets.targets(args.replace(memory_utilization=u))[0] for u in (1, 0.9))
    assert whole.room == pytest.approx(memory, rel=1e-4)
    assert reserved.room == pytest.approx(memory * 0.9 - 1.79 * 2 ** 30, rel=1e-4)  # 124.6
    assert (memory - held) / 2 ** 30 == pytest.approx(9.0, abs=0.05)  # 9 GiB for the rest
    said = fitting.story(held, held + 2 ** 30, reserved)  # the tables and 1 GiB of notes
    assert said == ("does not fit (needs 132 of 125 GiB; the tables alone fit its whole 140 "
                    "GiB, with 8.99 GiB left, but not within the engine's reserve)")
    assert fitting.story(held, held + 2 ** 30, whole) == "fits"
    row = plans.Row({"users": 1}, "1 user", [[(512, 1)]])
    assert plans.fits(cfg, row, whole.room) == "fits"


def test_a_verdict_says_no_more_digits_than_tell_need_from_room():
    gib = 2 ** 30
    assert plans.verdict(152 * gib, 79.65 * gib) == "does not fit (needs 152 of 79.7 GiB)"
    assert plans.verdict(80 * gib, 80 * gib) == "on the edge (needs 80.0 of 80.0 GiB)"
    assert plans.verdict(131.4 * gib, 131.2 * gib) == "on the edge (needs 131 of 131 GiB)"
    assert plans.verdict(70 * gib, 80 * gib) == "fits"


def test_the_link_has_two_bounds_by_hand():
    cfg, aim = on("h100-sxm", "llama-3-70b", devices=4)
    read = [(0, 1024)]
    sent = 80 * 2 * (1024 * 8192 * 2) * 2 * 3 / 4  # two ring all-reduces a floor, 4 devices
    assert accounting.link_bytes(cfg, read) == sent
    work = max(accounting.bytes_read(cfg, read) / 3350e9,
               accounting.trip_flops(cfg, read) / 989.5e12)
    wait = 80 * 2 * 6e-6  # two all-reduces a floor, 6 us each, which no work hides
    overlapped, bound = aim.roofs.limit(cfg, read)
    assert (overlapped, bound) == (pytest.approx(work + wait), "workbench")  # 36.7 ms
    assert aim.roofs.serial(cfg, read) == pytest.approx(work + sent / 450e9 + wait)  # 45.7 ms
    assert overlapped * 1e3 == pytest.approx(36.7, abs=0.05)
    assert aim.roofs.serial(cfg, read) * 1e3 == pytest.approx(45.7, abs=0.05)
    small, l40s = on("l40s", "llama-3-8b", "fp8", devices=2)  # 8B in fp8 over 2 L40S
    assert l40s.roofs.serial(small, read) / l40s.roofs.limit(small, read)[0] == \
        pytest.approx((26.7 + 0.384) / (16.8 + 0.384), rel=0.01)  # 64 all-reduces' wait
    one, alone = on("h100-sxm", "llama-3-8b")
    assert alone.roofs.serial(one, read) == alone.roofs.limit(one, read)[0]  # no link: agree


def test_a_split_prediction_prints_the_serial_bound_beside_every_timed_figure(capsys):
    ran = in_process(two_phases.main, "--predict", "h100-sxm", "--model", "llama-3-70b",
                     "--no-save", "--no-plot")
    code, out = ran.returncode, ran.stdout
    assert code == 0
    for header in ("time link serial ms", "step link serial ms", "worst gap link serial ms",
                   "all at once gap link serial ms", "link serial ms"):
        assert header in out, header
    assert "the math speed (FLOP/s): the floors' tables' math only" in out
    alone = in_process(two_phases.main, "--predict", "h100-sxm", "--model", "llama-3-8b",
                       "--no-save", "--no-plot", "--experiments", "decode")
    assert alone.returncode == 0 and "link serial" not in alone.stdout  # one device: no link


def test_a_trips_parts_summed_stand_beside_its_whole_trip_limit_by_hand():
    cfg, aim = on("h100-sxm", "llama-3-8b")
    riders = [(513, 1)] * 8 + [(512, 512)]  # the chunk-512 step's second piece, 8 typers
    row = plans.Row({"chunk": 512}, "chunks of 512, worst", [[(512, 1)] * 8 + [(0, 512)],
                                                             riders])
    got = parts.parts_row(cfg, "collision", row, aim.roofs)
    costs = accounting.costs(cfg, riders)
    by_part = {p: max(b / 3350e9, f / 989.5e12) for p, (b, f) in costs.items()}
    whole = max(sum(b for b, _ in costs.values()) / 3350e9,
                sum(f for _, f in costs.values()) / 989.5e12)
    assert got["summed"] == pytest.approx(sum(by_part.values()) * 1e3)  # 7.86 ms
    assert got["trip"] == pytest.approx(whole * 1e3)  # 7.56 ms: fetching beside the math
    assert got["over"] == pytest.approx(sum(by_part.values()) / whole) and got["over"] > 1.03
    assert got["tables"] == pytest.approx(by_part["tables"] * 1e3)
    split, on_two = on("h100-sxm", "llama-3-8b", devices=2)
    two = parts.parts_row(split, "collision", row, on_two.roofs)
    assert two["link"] == pytest.approx((accounting.link_bytes(split, riders) / 450e9
                                         + 32 * 2 * 6e-6) * 1e3)  # its bytes, its latency
    assert two["serial"] == pytest.approx(on_two.roofs.serial(split, riders) * 1e3)


def test_a_whole_request_is_the_first_word_and_every_typing_step_by_hand():
    cfg, aim = on("h100-sxm", "llama-3-70b", devices=2)
    prompt, output, users = 1024, 256, 4
    got = request.predicted(cfg, aim.roofs, prompt, output, users)
    first = aim.roofs.limit(cfg, [(0, prompt)] * users)[0]
    steps = [aim.roofs.limit(cfg, [(prompt + i, 1)] * users)[0] for i in range(output - 1)]
    assert got["first"] == first
    assert got["typing"] == pytest.approx(steps, rel=1e-12)  # read off two steps: exact
    assert got["total"] == pytest.approx(first + sum(steps))
    serial = request.predicted(cfg, aim.roofs, prompt, output, users, serial=True)
    assert serial["total"] == pytest.approx(
        aim.roofs.serial(cfg, [(0, prompt)] * users)
        + sum(aim.roofs.serial(cfg, [(prompt + i, 1)] * users) for i in range(output - 1)))
    row = request.request_row(cfg, aim, prompt, output, users)
    assert row["user rate"] == pytest.approx(output / got["total"])
    assert row["all rate"] == pytest.approx(users * output / got["total"])
    assert row["per token"] == pytest.approx(sum(steps) / len(steps) * 1e3)
    need = request.memory_needed(cfg, prompt, output, users)
    assert need == pytest.approx(accounting.held_bytes(cfg) + users * (prompt + output - 1)
                                 * NOTE_70B / 2 + accounting.trip_scratch_bytes(
                                     cfg, [(0, prompt)] * users))


def test_the_request_table_sets_machines_side_by_side_and_bad_requests_are_one_line():
    ran = in_process(two_phases.main, "--predict", "h100-sxm", "h200-sxm:fp8", "--gpus", "2",
                     "--model", "llama-3-70b", "--request", "1024,256", "--users", "1", "8",
                     "--no-save", "--no-plot", "--experiments", "decode")
    assert ran.returncode == 0
    table = ran.stdout.split("A whole request, PREDICTED")[1].split("\n\n")[0]
    assert "h100-sxm x2  bfloat16 tables/" in table and "h200-sxm x2  fp8 tables/" in table
    assert "first word ms" in table and "tokens/s a user" in table
    for argv, word in ((["--predict", "h100-sxm", "--request", "1024"], "PROMPT,OUTPUT"),
                       (["--predict", "h100-sxm", "--request", "0,5"], "PROMPT,OUTPUT"),
                       (["--predict", "h100-sxm", "--request", "8000,500", "--model",
                         "llama-3-8b"], "8,192 tokens"),
                       (["--request", "10,10"], "--predict")):
        bad = in_process(two_phases.main, *argv, "--no-save")
        assert bad.returncode == 2 and bad.stdout == "" and word in bad.stderr, argv
        last = bad.stderr.strip().splitlines()[-1]
        assert last.startswith("two_phases.py: error: argument --request") or \
            last.startswith("two_phases.py: error: argument --model"), last


@pytest.mark.parametrize("name,memory,forklift,bf16,link,driver", [
    ("h100-nvl", 93.58, 3900, 835_500, 300, "NVIDIA H100 NVL"),  # GiB, as nvidia-smi reports
    ("h800", 79.65, 3350, 989_500, 200, "NVIDIA H800"),
    ("h200-nvl", 140.4, 4800, 835_500, 450, "NVIDIA H200 NVL"),
    ("gh200", 96, 4000, 989_500, 450, "NVIDIA GH200 480GB"),
    ("gh200-144gb", 144, 4900, 989_500, 450, "NVIDIA GH200 144G HBM3e"),
    ("mi325x", 256, 6000, 1_307_400, 448, "AMD Instinct MI325X")])
def test_the_presets_users_look_for_are_there_with_their_sources(name, memory, forklift, bf16,
                                                                 link, driver):
    entry = presets.known()[name]
    assert entry["memory"][0] == memory and entry["forklift"][0] == forklift
    assert entry["workbench"]["bfloat16"][0] == bf16 and entry["link"][0] == link
    assert entry["workbench"]["fp8"][0] == pytest.approx(2 * bf16, rel=1e-3)  # dense fp8:
    #                                                       twice the 16-bit rate, as rounded
    sources = [entry["memory"][1], entry["forklift"][1], entry["link"][1],
               *(s for _, s in entry["workbench"].values())]
    assert all("datasheet" in s or "data sheet" in s for s in sources)
    assert presets.preset_name({"name": driver}) == name


def test_gpus_gives_each_machine_its_own_count_repeats_and_all():
    args = two_phases.parse_args(["--predict", "h100-sxm", "h200-sxm", "h100-sxm:fp8",
                                  "h200-sxm:fp8", "--gpus", "2", "1", "2", "1", "--model",
                                  "llama-3-70b", "--no-save"])
    assert args.gpus == [2, 1, 2, 1] and args.devices == [2, 1, 2, 1]
    assert [t.devices for t in presets.targets(args)] == [2, 1, 2, 1]
    one = two_phases.parse_args(["--predict", "h100-sxm", "h200-sxm", "--gpus", "4", "--model",
                                 "llama-3-70b", "--no-save"])
    assert one.devices == [4, 4]  # one count for all
    bad = in_process(two_phases.main, "--predict", "h100-sxm", "h200-sxm", "--gpus", "2", "1",
                     "2", "--no-save")
    assert bad.returncode == 2 and "one for each of the 2 named" in bad.stderr


def test_weights_activations_and_notes_take_bit_widths_of_their_own():
    args = two_phases.parse_args(["--predict", "h100-sxm:int4-weights", "--act-dtype", "fp8",
                                  "--model", "llama-3-8b", "--no-save"])
    aim = presets.targets(args)[0]
    assert aim.roofs.flops_per_s == 1979e12  # the math at fp8's rate, not the 16-bit one
    assert aim.precision == "int4-weights tables, fp8 activations, bfloat16 notes/head"
    cfg = aim.config(model_files.config("llama-3-8b"))
    assert accounting.note_bytes(cfg) == 32 * 2 * 8 * 128 * 2  # notes at 16 bits unless asked
    assert accounting.activation_bytes(cfg) == 2  # kept and sent at 16 bits between products
    wide = dataclasses.replace(cfg, act_dtype="float32")
    assert accounting.link_bytes(dataclasses.replace(wide, devices=2), [(0, 3)]) == \
        32 * 2 * (3 * 4096 * 4) * 2 * 1 / 2  # float32 activations all-reduced at 4 bytes
    assert one_line_refusal(["--predict", "rtx-3090:int4-weights", "--act-dtype", "fp8"],
                            "no fp8 math speed (--act-dtype's)")
    assert one_line_refusal(["--act-dtype", "fp8"], "is for --predict")


def one_line_refusal(argv, words):
    bad = in_process(two_phases.main, *argv, "--no-save")
    return bad.returncode == 2 and bad.stdout == "" and words in bad.stderr.splitlines()[-1]


def test_a_links_speed_is_what_that_many_devices_use_and_a_bridge_joins_its_most():
    mesh = presets.target("mi325x", None, None, "results")
    assert [mesh.split(n).roofs.link_per_s / 1e9 for n in (2, 4, 8)] == [64, 192, 448]
    switch = presets.target("h100-sxm", None, None, "results")
    assert {switch.split(n).roofs.link_per_s / 1e9 for n in (2, 4, 8)} == {450}
    assert presets.target("h100-nvl", None, None, "results").most == 2
    assert one_line_refusal(["--predict", "h100-nvl", "--gpus", "4", "--model", "llama-3-70b"],
                            "joins at most 2")
    args = two_phases.parse_args(["--predict", "h200-nvl", "--model", "llama-3-70b",
                                  "--dtype", "float32", "--no-save"])
    assert args.devices == [4]  # 282 GB of float32 tables: four, which its bridge joins


def test_a_request_counts_in_what_fits_and_reading_turns_within_the_context():
    args = two_phases.parse_args(["--predict", "h100-sxm:fp8", "--model", "llama-3-70b",
                                  "--request", "4096,512", "--no-save"])
    assert args.devices == [4]  # the 64 users' request needs more than one or two hold
    cfg, aim = on("h100-sxm", "llama-3-70b", "fp8", devices=4)
    need = fitting.plan_bytes(cfg, args, {"decode": two_phases.EXPERIMENTS["decode"]})
    assert need["notes"] == pytest.approx(64 * (4096 + 512 - 1) * 80 * 2 * 8 * 128 * 2 / 4)
    from harness.predicting import turning
    h800, roofs = on("h800", "llama-3-70b", devices=8)
    assert turning.turning(h800, roofs.roofs, 512, 8, 1024)["reads turn"] is None  # the link
    #                                       binds every question of its 8,192-token context
    assert one_line_refusal(["--predict", "h100-sxm", "--dtype", "int8", "--act-dtype", "fp8"],
                            "argument --act-dtype: fp8 with h100-sxm's int8 tables")


def test_seventy_b_in_fp8_on_one_h200_holds_half_the_typers_with_16_bit_notes_by_hand():
    args = two_phases.parse_args(["--predict", "h200-sxm:fp8", "--model", "llama-3-70b",
                                  "--gpus", "1", "--no-save"])
    aim = presets.targets(args)[0]
    cfg = aim.config(model_files.config("llama-3-70b"))
    assert cfg.note_dtype == "bfloat16"  # as engines keep them unless asked (vLLM's "auto")
    floors, head, embedding, _ = by_hand(*LLAMA_70B)
    tables = floors + (head + embedding) * 2  # fp8 floors, a 16-bit head and embedding
    per_user = 2049 * 80 * 2 * 8 * 128 * 2  # 2,048 notes and the new one, 16 bits each
    room = 143771 * 2 ** 20 * 0.9 - 1.79 * 2 ** 30  # 124.6 GiB: vLLM's 0.9, less its runtime
    assert aim.room == pytest.approx(room, rel=1e-4)
    users = int((room - tables) // per_user)  # 91, less the working space's share
    most = int(fitting.most_users(cfg, 2048, aim.room).replace(",", ""))
    assert most in (users - 1, users) and most == 90
    fp8 = dataclasses.replace(cfg, note_dtype="fp8")  # asked for: twice as many
    assert int(fitting.most_users(fp8, 2048, aim.room).replace(",", "")) == 181


def test_seventy_b_typing_on_eight_h100s_waits_out_its_all_reduces_by_hand():
    args = two_phases.parse_args(["--predict", "h100-sxm", "--model", "llama-3-70b", "--gpus",
                                  "8", "--no-save"])
    aim = presets.targets(args)[0]
    cfg = aim.config(model_files.config("llama-3-70b"))
    floors, head, embedding, _ = by_hand(*LLAMA_70B)
    ride = [(512, 1)]
    fetched = ((floors + head) * 2 + 8192 * 2 + 512 * NOTE_70B) / 8  # 1 kv head a device
    assert accounting.bytes_read(cfg, ride) == pytest.approx(fetched)
    wait = 80 * 2 * 6e-6  # 160 all-reduces of a few kB: latency, not bandwidth
    step, bound = aim.roofs.limit(cfg, ride)
    assert step == pytest.approx(fetched / 3350e9 + wait) and bound == "forklift"
    assert step * 1e3 == pytest.approx(6.15, abs=0.01)  # 5.19 ms of bytes, +18% of waiting
    two = presets.targets(args.replace(devices=[2]))[0]
    half = two.roofs.limit(two.config(model_files.config("llama-3-70b")), ride)[0]
    assert half / step < 4  # eight devices are not four times two: scaling is not linear


DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3's config.json, the keys a step's reading depends on
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "max_position_embeddings": 163840, "vocab_size": 129280,
    "tie_word_embeddings": False, "hidden_act": "silu"}
QWEN_MOE = {  # Qwen/Qwen1.5-MoE-A2.7B's (a Qwen2-MoE): a shared expert beside 60 routed ones
    "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
    "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
    "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "max_position_embeddings": 8192, "vocab_size": 151936, "tie_word_embeddings": False,
    "hidden_act": "silu", "sliding_window": 32768, "use_sliding_window": False}


def config_of(tmp_path, fields, name="model"):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(fields))
    return model_files.config(str(path))


def test_deepseek_v3s_latent_attention_shared_expert_and_dense_floors_by_hand(tmp_path):
    cfg = config_of(tmp_path, DEEPSEEK_V3)
    attention = (7168 * 1536 + 1536 * 128 * 192  # queries, through their compression
                 + 7168 * (512 + 64) + 512 * 128 * (128 + 128)  # the notes' and their expansion
                 + 128 * 128 * 7168)  # out
    dense = 3 * 3 * 7168 * 18432  # the first three floors' feed-forwards
    mixed = 58 * (256 * 3 * 7168 * 2048 + 3 * 7168 * 2048 + 7168 * 256)  # experts, shared, router
    assert accounting.table_numbers(cfg) == 61 * attention + dense + mixed
    total = accounting.table_numbers(cfg) + accounting.head_numbers(cfg)
    assert total / 1e9 == pytest.approx(671.0, abs=0.1)  # DeepSeek's 671B (the MTP module aside)
    assert (cfg.dense, cfg.shared, cfg.latent, cfg.rope) == (3, 2048, 512, 64)
    notes = dataclasses.replace(cfg, note_dtype="bfloat16")
    assert accounting.note_bytes(notes) == 61 * (512 + 64) * 2  # 70 KB a token, not 128 full heads'
    assert accounting.notes_share(dataclasses.replace(cfg, devices=8)) == 1  # every head reads them
    one = [(1000, 1)]
    assert accounting.attention_flops(cfg, one) == 61 * 2 * 128 * (2 * 512 + 64) * 1001
    assert accounting.table_flops(cfg, 1) == 2 * (61 * attention + dense + 58 * (
        8 * 3 * 7168 * 2048 + 3 * 7168 * 2048 + 7168 * 256))  # 8 experts and the shared one


def test_a_qwen2_moes_shared_expert_is_counted_by_hand(tmp_path):
    cfg = config_of(tmp_path, QWEN_MOE)
    per_floor = (2048 * 128 * (2 * 16 + 2 * 16) + 60 * 3 * 2048 * 1408 + 2048 * 60
                 + 3 * 2048 * 5632)
    assert accounting.table_numbers(cfg) == 24 * per_floor
    total = accounting.table_numbers(cfg) + accounting.head_numbers(cfg)
    assert total / 1e9 == pytest.approx(14.3, abs=0.05)  # Qwen's 14.3B (biases aside)
    assert accounting.tables_read(cfg, 1) == pytest.approx(24 * 4 * (  # one token: 4 experts, and
        2048 * 128 * 64 + 2048 * 60 + 4 * 3 * 2048 * 1408 + 3 * 2048 * 5632))  # the shared one


@pytest.mark.parametrize("change,key", [
    ({"sliding_window": 4096}, "'sliding_window'"),
    ({"layer_types": ["sliding_attention", "full_attention"] * 12}, "'layer_types'"),
    ({"interleave_moe_layer_step": 2}, "'interleave_moe_layer_step'"),
    ({"hidden_size": 100, "num_attention_heads": 3, "num_key_value_heads": 3},
     "'hidden_size' (100) must divide by 'num_attention_heads' (3)"),  # the file's own keys
    ({"layer_types": "full_attention"}, "'layer_types' must list each"),
    ({"sliding_window": "x"}, "'sliding_window' must be a whole number"),
    ({"vocab_size": "151936"}, "'vocab_size' must be a whole number from 1 to 10,000,000, got "
                               '"151936"'),
    ({"kv_lora_rank": 512}, "'qk_rope_head_dim'")])
def test_a_config_it_cannot_describe_is_refused_in_one_line_naming_its_key(tmp_path, change,
                                                                           key):
    path = tmp_path / "model.json"  # (a sliding window in use: Qwen's is switched off)
    path.write_text(json.dumps({**QWEN_MOE, **change, "use_sliding_window": "sliding_window"
                                in change}))
    with pytest.raises(ValueError, match=re.escape(key)):
        model_files.config(str(path))
    assert one_line_refusal(["--predict", "h100-sxm", "--model", str(path)], key)


def test_efficiency_takes_a_share_of_every_speed_and_the_words_say_so():
    full, share = (presets.targets(two_phases.parse_args(
        ["--predict", "h100-sxm", "--gpus", "2", "--model", "llama-3-70b", "--no-save",
         *extra]))[0] for extra in ([], ["--efficiency", "0.7"]))
    assert share.roofs.bytes_per_s == pytest.approx(0.7 * 3350e9)
    assert share.roofs.flops_per_s == pytest.approx(0.7 * 989.5e12)
    assert share.roofs.link_per_s == pytest.approx(0.7 * 450e9)
    assert share.roofs.link_latency_s == full.roofs.link_latency_s == 6e-6  # a wait, not a speed
    ran = in_process(two_phases.main, "--predict", "h100-sxm", "--model", "llama-3-8b",
                     "--efficiency", "0.7", "--no-save", "--no-plot", "--experiments", "decode")
    assert ran.returncode == 0
    assert ran.stdout.startswith("machine: PREDICTED, nothing was run: every figure at 0.7 of "
                                 "a limit | h100-sxm, bfloat16 tables/activations/notes: 2.35 "
                                 "TB/s, 693 TFLOP/s")
    assert one_line_refusal(["--predict", "h100-sxm", "--efficiency", "1.5"], "at most 1")
    assert one_line_refusal(["--efficiency", "0.5", "--quick"], "is for --predict")


def test_a_share_that_leaves_the_model_nothing_and_a_self_check_of_a_prediction_are_refused():
    assert one_line_refusal(["--predict", "h100-sxm", "--memory-utilization", "1e-9"],
                            "leaves nothing once the engine's runtime takes its 3.58 GiB")
    assert one_line_refusal(["--predict", "h100-sxm", "--self-check"], "leave out --predict")
    assert one_line_refusal(["--efficiency", "0.5"], "--efficiency is for --predict")


def test_a_column_of_large_figures_and_its_twin_shown_coarser_and_a_unit_inside_a_header_too():
    from harness.keeping.records import SIG, Layout, col
    from harness.showing import printers
    layout = Layout("t", [col("k", "k", "", "d", key=True), col("a", "total ms", "ms", SIG),
                          col("a link serial", "total link serial ms", "ms", SIG),
                          col("c", "ms/token", "ms", SIG), col("d", "GB read", "GB", SIG)])
    rows = [{"k": 1, "a": 3_770.0, "a link serial": 3_780.0, "c": 14.5, "d": 70.0},
            {"k": 2, "a": 18_910.0, "a link serial": 9_390.0, "c": 17_000.0, "d": 72.0}]
    sheet = printers.Sheet(layout, tuple(records.make(layout, rows, {}, predicted=True)))
    shown = {c.figure: c.header for c in printers.at_scale(sheet).columns}
    assert shown == {"k": "k", "a": "total s", "a link serial": "total link serial s",
                     "c": "ms/token", "d": "GB read"}  # the twin follows its total; 14.5
    #                                                    would read 0.0145 s
    assert printers.cell(3_770.0, printers.at_scale(sheet).columns[1]) == "3.77"
    assert printers.coarser("ms/token", "ms") == "s/token"  # a unit inside a header, too


def test_a_request_and_the_fit_grid_count_the_working_space_alike():
    """--request read every user's whole question in one trip's working space: 90 users of
    Llama 3 70B (fp8) at 2,000 tokens 'did not fit' one H200 where the grid said they do (its
    81st user already over). Engines read questions in steps of a few thousand tokens: both now
    count that, and agree."""
    from harness.predicting import fitting, model_files, presets, request
    aim = presets.target("h200-sxm", "fp8", None, "results")
    cfg = aim.config(model_files.config("llama-3-70b"))
    assert request.request_row(cfg, aim, 2000, 1, 90)["memory"].startswith("fits")
    assert int(fitting.most_users(cfg, 2000, aim.room).replace(",", "")) >= 90
    one_trip = accounting.trip_scratch_bytes(cfg, [(0, 2000)] * 90)  # as it was counted
    assert request.bytes_held(cfg, 2000, 1, 90)[1] < one_trip / 10
