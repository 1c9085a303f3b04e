"""The chunk-size dial: vLLM's chunked-prefill policy as a pure schedule, and its measured run."""

import pytest

import two_phases
from harness.experiments import collision
from harness.keeping import records
from harness.keeping.records import col
from conftest import made, sheets


@pytest.mark.parametrize("question,chunk", [(1024, 128), (100, 32), (7, 1), (50, 50), (50, 999)])
def test_chunks_cover_the_question_once_in_order(question, chunk):
    steps = collision.schedule(question, chunk)
    pieces = steps[:-1]
    assert [s.start for s in pieces] == list(range(0, question, chunk))
    assert [s.stop for s in pieces] == [s.start for s in pieces[1:]] + [question]
    assert all(s.stop - s.start <= chunk for s in pieces)
    assert steps[-1] == slice(question, question + 1)  # then the newcomer types its first word


def test_a_chunk_as_long_as_the_question_reads_it_in_one_step():
    for chunk in (1024, 2048):
        assert collision.schedule(1024, chunk) == [slice(0, 1024), slice(1024, 1025)]


def test_budget_and_chunk_spell_the_same_dial():
    by_budget = two_phases.parse_args(["--budget", "40", "72", "136", "--typers", "8"])
    by_chunk = two_phases.parse_args(["--chunk", "32", "64", "128", "--typers", "8"])
    assert by_budget.chunk == by_chunk.chunk == [32, 64, 128, 1024]  # and the question at once


def test_the_dial_is_normalized_once_when_parsed():
    args = two_phases.parse_args(["--chunk", "2000", "64", "64", "--question", "512"])
    assert args.chunk == [64, 512]


def test_every_step_puts_each_typer_one_note_further():
    steps = collision.schedule(5, 2)  # reads 2, 2, 1, then the newcomer types
    assert collision.riders_of(steps, 10, 2) == [
        [(10, 1), (10, 1), (0, 2)], [(11, 1), (11, 1), (2, 2)], [(12, 1), (12, 1), (4, 1)],
        [(13, 1), (13, 1), (5, 1)]]


TIMED = ("first word", "median gap", "worst gap", "worst x normal", "total")


def test_a_quick_measured_dial_fills_every_column(quick_run):
    r, data, _ = quick_run  # --runs 2
    assert "first word ms" in r.stdout and "worst x normal" in r.stdout
    found = data["records"]
    dial = records.rows(found, "dial")
    assert [dict(keys) for keys in dial] == [{"chunk": 16}, {"chunk": 32}, {"chunk": 64}]
    #                                        the quick dial, then all 64 at once
    assert [row["steps to read"] for row in dial.values()] == [4, 2, 1]
    for row in dial.values():
        assert row["first word"] > 0 and row["total"] > row["first word"]
        assert row["worst gap"] >= row["median gap"] > 0 and row["worst x normal"] > 0
    normal = records.find(found, "collision", "normal gap")
    for keys in dial:  # each figure of each chunk size: the 2 runs behind it, in its own unit
        chunk = dict(keys)["chunk"]
        for figure in TIMED:
            f = records.find(found, "dial", figure, chunk=chunk)
            assert f["statistic"] == "median" and f["runs"] == 2 and f["rounds"] == [0, 1]
            assert len(f["samples"]) == 2
            assert min(f["samples"]) <= f["value"] * (1 + 1e-9)
            assert max(f["samples"]) >= f["value"] * (1 - 1e-9)
        steps = records.find(found, "dial", "steps to read", chunk=chunk)
        assert steps["statistic"] == "computed" and steps["samples"] is None
        # worst x normal: in each run, that run's worst gap over that run's normal gap
        worst = records.find(found, "dial", "worst gap", chunk=chunk)["samples"]
        ratio = records.find(found, "dial", "worst x normal", chunk=chunk)["samples"]
        assert ratio == pytest.approx([w / n for w, n in zip(worst, normal["samples"])])
    assert len(normal["samples"]) == 2 and normal["unit"] == "ms"
    assert records.find(found, "collision", "all at once gap")["value"] == pytest.approx(
        records.find(found, "dial", "worst gap", chunk=64)["value"])  # the same run, twice shown
    # the post's third line: the dial's smallest chunk, where 128 is not on the dial
    assert records.find(found, "collision", "chunk")["value"] == 16
    assert records.find(found, "collision", "chunked worst gap")["value"] == pytest.approx(
        records.find(found, "dial", "worst gap", chunk=16)["value"])
    assert [c["header"] for c in sheets(data)["dial"]["columns"]] == [
        "chunk", "steps to read", "first word ms", "gap median ms", "worst gap ms",
        "worst x normal", "total ms"]


def test_the_posts_three_lines_say_what_their_figures_show():
    def line(normal, at_once, chunked):
        said = {"typers": 8, "question": 1024, "chunk": 128, "steps": 8,
                **dict(zip(collision.GAPS, (normal, at_once, chunked)))}
        return collision.lines(made("collision", [
            col(figure, figure, "", "g") for figure in said], [said])).splitlines()
    post = line(0.118, 4.723, 0.671)  # the post's own: 40x, and bumps of a seventh of it
    assert post[1].endswith("(one huge freeze)") and post[2].endswith("(8 small bumps, worst one)")
    fast = line(0.000200, 0.000220, 0.000210)  # a data-centre GPU's limits: hardly a freeze
    assert fast[1].endswith("(a freeze of 1.1x the normal gap)")
    assert fast[2].endswith("(8 bumps, worst one)")


def test_worst_x_normal_stands_on_the_runs_clean_in_both_gaps():
    """A run other work disturbed in the normal gap alone put the ratio (11: the worst gaps'
    middle of 10 and 12 over the one clean normal gap, 1) above both runs' own ratios (10 and
    6): the quick run's dial failed its check now and then on a busy machine."""
    from harness.experiments.collision import over
    from harness.measuring.timing import Timing
    worst = Timing((0.010, 0.012), "middle", (0.0, 0.0), rounds=(0, 1))
    normal = Timing((0.001, 0.002), "middle", (0.0, 0.9), rounds=(0, 1))
    ratio = over(worst, normal)
    samples = records.samples(ratio)[0]
    assert ratio.value == pytest.approx(10) and samples == pytest.approx([10, 6])
    clean = Timing((0.001, 0.002), "middle", (0.0, 0.0), rounds=(0, 1))
    assert over(worst, clean).value == pytest.approx(22 / 3)  # both clean: the middles' ratio
