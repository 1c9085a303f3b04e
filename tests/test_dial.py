"""The chunk-size dial: vLLM's chunked-prefill policy as a pure schedule, and its measured run."""

import pytest

import two_phases
from conftest import quick_two_phases


@pytest.mark.parametrize("typers,question,chunk", [(8, 1024, 128), (3, 100, 32), (1, 7, 1),
                                                   (2, 50, 50), (4, 50, 999)])
def test_chunks_cover_the_question_once_in_order(typers, question, chunk):
    steps = two_phases.schedule(typers, question, chunk)
    pieces = [(a, n) for step in steps[:-1] for u, a, n in step if u == typers]
    assert [a for a, _ in pieces] == list(range(0, question, chunk))
    assert sum(n for _, n in pieces) == question and all(n <= chunk for _, n in pieces)
    assert steps[-1][-1] == (typers, question, 1)  # then the newcomer types its next word


@pytest.mark.parametrize("typers,question,chunk", [(8, 1024, 128), (3, 100, 32), (5, 9, 2)])
def test_every_typer_gets_exactly_one_token_every_step(typers, question, chunk):
    for step in two_phases.schedule(typers, question, chunk):
        assert [(u, n) for u, _, n in step if u < typers] == [(u, 1) for u in range(typers)]
        assert sum(n for u, _, n in step if u == typers) <= chunk  # the budget's remainder


def test_a_chunk_as_long_as_the_question_reads_it_in_one_step():
    for chunk in (1024, 2048):
        steps = two_phases.schedule(8, 1024, chunk)
        assert len(steps) == 2 and steps[0][-1] == (8, 0, 1024)


def test_budget_and_chunk_spell_the_same_dial():
    by_budget = two_phases.parse_args(["--budget", "40", "72", "136", "--typers", "8"])
    by_chunk = two_phases.parse_args(["--chunk", "32", "64", "128", "--typers", "8"])
    assert by_budget.chunk == by_chunk.chunk == [32, 64, 128]
    for a, b in zip(by_budget.chunk, by_chunk.chunk):
        assert two_phases.schedule(8, 1024, a) == two_phases.schedule(8, 1024, b)


def test_step_shapes_follow_the_notebooks():
    steps = two_phases.schedule(2, 5, 2)  # reads 2, 2, 1, then the newcomer types
    assert two_phases.step_shapes(steps, 10, 2) == [
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
    assert len(table["steps_s"]) == 3 and len(table["steps_s"][0]) == 2  # every step, every run
