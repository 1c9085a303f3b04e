"""The chunk-size dial: vLLM's chunked-prefill policy as a pure schedule, and its measured run."""

import pytest

import two_phases
from conftest import quick_two_phases


@pytest.mark.parametrize("question,chunk", [(1024, 128), (100, 32), (7, 1), (50, 50), (50, 999)])
def test_chunks_cover_the_question_once_in_order(question, chunk):
    steps = two_phases.schedule(question, chunk)
    pieces = steps[:-1]
    assert [s.start for s in pieces] == list(range(0, question, chunk))
    assert [s.stop for s in pieces] == [s.start for s in pieces[1:]] + [question]
    assert all(s.stop - s.start <= chunk for s in pieces)
    assert steps[-1] == slice(question, question + 1)  # then the newcomer types its first word


def test_a_chunk_as_long_as_the_question_reads_it_in_one_step():
    for chunk in (1024, 2048):
        assert two_phases.schedule(1024, chunk) == [slice(0, 1024), slice(1024, 1025)]


def test_budget_and_chunk_spell_the_same_dial():
    by_budget = two_phases.parse_args(["--budget", "40", "72", "136", "--typers", "8"])
    by_chunk = two_phases.parse_args(["--chunk", "32", "64", "128", "--typers", "8"])
    assert by_budget.chunk == by_chunk.chunk == [32, 64, 128, 1024]  # and the question at once


def test_the_dial_is_normalized_once_when_parsed():
    args = two_phases.parse_args(["--chunk", "2000", "64", "64", "--question", "512"])
    assert args.chunk == [64, 512]


def test_every_step_puts_each_typer_one_note_further():
    steps = two_phases.schedule(5, 2)  # reads 2, 2, 1, then the newcomer types
    assert two_phases.riders_of(steps, 10, 2) == [
        [(10, 1), (10, 1), (0, 2)], [(11, 1), (11, 1), (2, 2)], [(12, 1), (12, 1), (4, 1)],
        [(13, 1), (13, 1), (5, 1)]]


def test_a_quick_measured_dial_fills_every_column(tmp_path):
    r, data = quick_two_phases(tmp_path, "--runs", "2", "--experiments", "collision")
    assert "TTFT ms" in r.stdout and "worst x normal" in r.stdout
    table = data["tables"]["dial"]
    head = [c["header"] for c in table["columns"]]
    rows = [dict(zip(head, row)) for row in table["rows"]]
    assert [row["chunk"] for row in rows] == [16, 32, 64]  # quick dial, then all 64 at once
    assert [row["steps to read"] for row in rows] == [4, 2, 1]
    for row in rows:
        assert row["TTFT ms"] > 0 and row["total ms"] > row["TTFT ms"]
        assert row["worst gap ms"] >= row["gap median ms"] > 0 and row["worst x normal"] > 0
    for figures in table["samples_s"]:  # each figure of each chunk size: the runs behind it
        assert {h: [p for p, _ in parts] for h, parts in figures.items()} == {
            "TTFT ms": [1], "gap median ms": [1], "worst gap ms": [1],
            "worst x normal": [1, -1], "total ms": [1]}
        assert all(len(samples) == 2 for parts in figures.values() for _, samples in parts)
