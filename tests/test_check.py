"""two_phases.py holds every timing against the machine's two limits."""
import dataclasses
import json
import statistics

import numpy as np
import pytest

from harness.judging import check
from harness.keeping import records, results, schema
from harness.showing import printers, sheets
from harness.predicting.plans import Outcome, Row
from harness.measuring.speeds import Speeds
from harness.measuring import bench, speeds, timing
from harness.measuring.timing import Timing
import accounting
import model
from conftest import sheets as saved_sheets

SMALL = model.SIZES["small"]
ROOFS = Speeds(10e9, 100e9, "given")
ONE_USER = [[(512, 1)]]  # 377.5 MB: a 37.7 ms limit at 10 GB/s


def parts(riders=((512, 1),), tables=0.034, alone=0.034, attention=0.004, elementwise=0.001,
          other=0.0005):
    """A recorded trip (seconds), as bench.record_trip() gives it, and the same table products
    alone: -> (recorded, {tokens: Timing})."""
    s = {"tables": tables, "attention": attention, "elementwise": elementwise, "other": other}
    return ({"riders": list(riders), "parts": {**s, "trip": sum(s.values())}},
            {sum(t for _, t in riders): Timing((alone,) * 3, "best")})


def held(seconds, steps=ONE_USER, breakdown=None, experiment="decode", label="1 user",
         keys=None):
    recorded, alone = breakdown or parts()
    record = Outcome(Row(keys or {"users": 1}, label, steps), {"time": Timing((seconds,))},
                    recorded)
    return check.hold(SMALL, experiment, record, ROOFS, alone)


def printed(rows, which=0, words="", runs=3):
    """The check sheet (which=0) or the breakdown (1) of held rows, rendered from their records
    as a run makes them, its figures by name, and its printed lines."""
    found = records.from_rows(check.held_figures(rows), {})
    sheet = sheets.check_sheets(found, rows, ROOFS, words, runs)[which]
    figures = {r["figure"]: r["value"] for r in sheet.records}
    return sheet, figures, printers.render(sheet).splitlines()


def test_check_rows_hold_measured_against_limit(capsys):
    limit = accounting.bytes_read(SMALL, [(512, 1)]) / 10e9
    sheet, row, lines = printed([held(1.5 * limit)], words="GPT-2 small on 2 threads")
    assert row["bound by"] == "forklift"
    assert row["limit"] == pytest.approx(limit * 1e3) and row["x limit"] == pytest.approx(1.5)
    assert row["measured"] == pytest.approx(1.5 * limit * 1e3)
    assert [c.header for c in sheet.columns] == [
        "experiment", "row", "measured ms", "limit ms", "bound by", "x limit"]
    assert sheet.cells()[0][:2] == ["decode", "1 user"]  # the row's name, as its sheet says it
    # its records name the row by its experiment and its own keys, never by its printed name
    found = sheet.records
    assert {r["figure"] for r in found} == {"measured", "limit", "bound by", "x limit"}
    assert all(r["keys"] == {"experiment": "decode", "users": 1} for r in found)
    assert records.find(found, "check", "x limit", experiment="decode", users=1)["value"] == \
        pytest.approx(1.5)
    assert lines[0] == "Every row against the machine's limits: GPT-2 small on 2 threads"
    assert lines[-1].startswith("(limit = max(bytes / 10.0 GB/s, FLOPs / 100.0 GFLOP/s)")
    assert "warning" not in capsys.readouterr().err  # 1.5x: no flag


@pytest.mark.parametrize("breakdown,says", [
    (parts(tables=0.080, alone=0.078),
     "one BLAS call for the same products takes 78.0 ms (2.3x their limit)"),
    (parts(tables=0.080, alone=0.036),
     "tables: 80.0 ms, one BLAS call for the same products takes only 36.0"),
    (parts(tables=0.080, alone=0.095),
     "tables: 80.0 ms, one BLAS call for the same products takes 95.0 ms: the suite's own "
     "path, 2.4x their limit"),
    (parts(attention=0.050), "attention: 50.0 ms, 13.2x its limit"),
    (parts(elementwise=0.040), "elementwise: 40.0 ms against a limit of 0.0 ms"),
    (parts(other=0.045), "other: 45.0 ms outside every part")],
    ids=["the BLAS", "our tables", "our tiles", "attention", "elementwise", "other"])
def test_a_row_over_twice_its_limit_is_flagged_naming_its_slowest_part(capsys, breakdown, says):
    limit = accounting.bytes_read(SMALL, [(512, 1)]) / 10e9  # tables 34.0, notes 3.8 ms at 10 GB/s
    _, row, _ = printed([held(2.5 * limit, breakdown=breakdown)])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "decode 1 user took 2.5x its limit" in err and says in err
    assert row["x limit"] == pytest.approx(2.5)


def test_a_row_other_work_disturbed_is_never_the_ground_of_a_warning(capsys):
    limit = accounting.bytes_read(SMALL, [(512, 1)]) / 10e9
    far = held(2.5 * limit)
    disturbed = dataclasses.replace(far, timing=dataclasses.replace(far.timing, disturbed=True))
    printed([disturbed])
    assert "warning" not in capsys.readouterr().err  # (its table flags it instead)
    printed([far])
    assert "took 2.5x its limit" in capsys.readouterr().err


def test_the_breakdown_splits_each_row_into_its_parts():
    b = parts(tables=0.040, alone=0.036, attention=0.0076)  # notes: 512 x 72 KB at 10 GB/s
    sheet, row, lines = printed([held(0.06, breakdown=b)], 1, "GPT-2 small")
    assert row["tables"] == pytest.approx(40.0) and row["one call"] == pytest.approx(36.0)
    assert row["x one call"] == pytest.approx(40 / 36)
    assert row["attention x limit"] == pytest.approx(0.0076 / (512 * accounting.NOTE_BYTES / 10e9))
    assert row["trip"] == pytest.approx(1e3 * sum(b[0]["parts"][p] for p in bench.PARTS))
    assert row["most excess"] == "our tables +4.0 ms"  # the BLAS: 36.0 - 34.0 = 2.0 ms
    faster = parts(tables=0.040, alone=0.050, attention=0.0076)  # our path beat one call:
    _, row, _ = printed([held(0.06, breakdown=faster)], 1, "GPT-2 small")  # none of its excess
    assert row["most excess"] == "our tables +6.0 ms"  # is the BLAS's, which it did not wait on
    one_call = records.find(sheet.records, "breakdown", "one call", users=1)
    assert one_call["statistic"] == "best" and one_call["samples"] == pytest.approx([36.0] * 3)
    assert [c.header for c in sheet.columns][2:5] == ["trip ms", "tables ms", "one call ms"]
    assert "once in each of 3 processes" in lines[-1]
    assert lines[0].startswith("Where each row's time goes")


def test_a_row_of_several_trips_is_held_to_its_slowest_trip():
    trips = [[(512, 1)], [(0, 256)]]  # a decode step, then a step with a 256-token chunk
    h = held(1.0, steps=trips, experiment="collision", label="chunks", keys={"chunk": 256})
    slowest = max(accounting.limit(SMALL, t, 10e9, 100e9)[0] for t in trips)
    assert h.limit_s == pytest.approx(slowest) and h.bound == "workbench"


@pytest.mark.parametrize("layout", [{"schema_version": 3, "tables": {}},
                                    {"schema_version": 4, "records": [], "sheets": {}}],
                         ids=["schema 3", "schema 4"])
def test_roofs_file_is_read_and_named(tmp_path, layout):
    path = tmp_path / "machine_speed.json"
    machine = {"cpu": "AMD EPYC", "os": "Linux", "python": "3.11", "numpy": "2.4", "blas": [],
               "env": {}, "date": "2026-01-02T03:04:05"}
    path.write_text(json.dumps({**layout, "script": "machine_speed", "machine": machine,
                                "roofs": {"bytes_per_s": 20.5e9, "flops_per_s": 140e9}}))
    roofs = schema.read_roofs(str(path))
    assert roofs.bytes_per_s == 20.5e9 and roofs.flops_per_s == 140e9
    assert str(path) in roofs.source and "2026-01-02" in roofs.source


def test_a_quick_run_saves_the_check_table(quick_run):
    r, data, _ = quick_run
    assert "x limit" in r.stdout and "bound by" in r.stdout
    found = [x for x in data["records"] if x["keys"].get("experiment", "decode") == "decode"]
    #        decode's rows, and the check and breakdown rows of decode
    check = records.rows(found, "check")
    assert [dict(keys) for keys in check] == [
        {"experiment": "decode", "users": 1}, {"experiment": "decode", "users": 4}]
    for figures in check.values():
        assert figures["measured"] > 0 and figures["limit"] > 0 and figures["x limit"] > 0
        assert figures["bound by"] in ("forklift", "workbench")
    for u in (1, 4):  # each round's time over that round's limit, their middle: never the
        x = records.find(found, "check", "x limit", users=u)  # ratio of two middles, which a
        rounds = x["samples"]  # machine of two states puts in different ones
        assert x["value"] == pytest.approx(statistics.median(rounds)) and len(rounds) > 1
        assert x["rounds"] == records.find(found, "check", "measured", users=u)["rounds"]
    for u in (1, 4):  # the check holds the very figure the decode sheet shows
        assert records.find(found, "check", "measured", users=u)["value"] == pytest.approx(
            records.find(found, "decode", "step", users=u)["value"])
    assert data["roofs"]["bytes_per_s"] > 0
    assert "most excess" in r.stdout  # the breakdown follows
    parts = records.rows(found, "breakdown")
    assert [dict(keys)["users"] for keys in parts] == [1, 4]  # one per check row
    for p in parts.values():
        assert p["trip"] == pytest.approx(sum(p[k] for k in bench.PARTS))
        assert p["tables"] > 0 and p["one call"] > 0 and p["attention"] > 0
        assert isinstance(p["most excess"], str)
    assert data["schema_version"] == results.SCHEMA_VERSION
    assert [c["header"] for c in saved_sheets(data)["check"]["columns"]] == [
        "experiment", "row", "measured ms", "limit ms", "bound by", "x limit"]
    assert saved_sheets(data)["check"]["printed"] in r.stdout


# ---- the limits: the speeds measured in every round, each round's ceiling


def test_a_quick_run_holds_its_rows_to_the_middle_of_every_rounds_ceilings(quick_run):
    r, data, _ = quick_run
    line = next(s for s in r.stdout.splitlines() if s.startswith("(limit = "))
    assert "measured beside the rows in every round: the middle of the rounds' ceilings" in line
    speeds = records.rows(data["records"], "speeds")
    ((_, figures),) = speeds.items()  # one row: the forklift and the workbench of the rounds
    assert data["roofs"]["bytes_per_s"] == pytest.approx(figures["memory speed"] * 1e9)
    assert data["roofs"]["flops_per_s"] == pytest.approx(figures["math speed"] * 1e9)
    fork = records.find(data["records"], "speeds", "memory speed")
    clean = [v for v, share in zip(fork["samples"], fork["shares"])  # the middle of the rounds'
             if not timing.disturbed(share)] or fork["samples"]  # that other work left alone
    assert fork["statistic"] == "median"  # the middle round's time, as a speed
    assert fork["value"] == pytest.approx(1 / np.median(1 / np.array(clean)))
    assert sorted(fork["rounds"]) == [0, 1] and fork["trials"] == ["speeds forklift"]
    reads = [records.find(data["records"], "speeds", f)["samples"]
             for f in ("matrix-vector read", "streaming read")]
    assert fork["samples"] == pytest.approx(np.maximum(*reads))  # each round, the faster read


def test_depth_holds_its_rows_to_the_same_speeds_as_the_check(quick_run):
    _, data, _ = quick_run
    roofs, cfg = data["roofs"], model.SIZES["small"]  # the best of the rounds' speeds
    depth = records.rows(data["records"], "depth")
    assert depth
    for keys, f in depth.items():
        k = dict(keys)
        limit_s, _ = accounting.limit(cfg, [(k["notes"], 1)] * k["users"], roofs["bytes_per_s"],
                                 roofs["flops_per_s"])
        assert f["x limit"] == pytest.approx(f["step"] / 1e3 / limit_s)


def test_a_rows_recordings_know_their_processes_so_a_verdict_on_them_counts_processes():
    from harness import model_run
    from harness.predicting.plans import Row
    parts = {"trip": 1.0, "tables": 0.6, "attention": 0.3, "elementwise": 0.05, "other": 0.05}
    row = Row({"users": 64}, "64 users", [[(512, 1)] * 64])
    made = model_run.recorded(model.TINY, row, "decode 64 users",
                               [[7, parts], [0, parts], [3, {**parts, "trip": 1.2}]],
                               {0: 0, 3: 2, 7: 5})
    assert made["runs"]["trip"].processes == (0, 2, 5)  # one recording in each process
    assert made["runs"]["trip"].rounds == (0, 3, 7) and made["parts"]["trip"] == 1.0


def test_the_forklift_of_a_round_is_its_faster_read_with_that_reads_conditions():
    from harness.measuring import speeds
    mv = timing.Runs([[1.0], [2.0], [3.0]], [0.0, 0.5, 0.5], 1, False, (0, 1, 2), (0, 1, 2))
    stream = timing.Runs([[2.0], [1.0], [2.0]], [0.5, 0.0, 0.0], 1, False, (0, 1, 2),
                         (0, 1, 2))
    seconds, _, _, runs = speeds.faster(mv, stream)
    assert seconds == [1.0, 1.0, 2.0] and runs.others == [0.0, 0.0, 0.0]  # the read kept's
    assert not runs.disturbed and runs.again == 2  # (the slower read's disturbed try: moot)
    seconds, _, _, runs = speeds.faster(mv, dataclasses.replace(stream, others=[0.5] * 3))
    assert runs.others == [0.0, 0.5, 0.5] and runs.disturbed  # one clean round of three
    laid = timing.Runs([[0.5], [3.0]], [0.0, 0.0], 0, False, (0, 1), (2, 0))  # (rounds 2, 0)
    seconds, _, _, runs = speeds.faster(mv, stream, laid)  # the rounds all three were read in
    assert seconds == [1.0, 0.5] and runs.rounds == (0, 2) and runs.again == 2


def test_on_a_machine_of_two_states_x_limit_is_the_middle_of_its_rounds_not_of_each_timing():
    """A row's time and the forklift's read, each round measured moments apart: the memory fast
    in rounds 0 to 2 (the read 1.0 s) and slow after (1.4 s), the row slow from round 2 (the
    state moved between the read and the row in round 2). Each timing's middle falls in
    another state (7.9 over 1.0); the middle of each round's own ratio is the row's distance
    from its limit in either state (5.6 over 1.0, 7.9 over 1.4)."""
    row = Timing((5.6, 5.6, 7.9, 7.9, 7.9), rounds=(0, 1, 2, 3, 4))
    read = Timing((1.0, 1.0, 1.0, 1.4, 1.4), rounds=(0, 1, 2, 3, 4))
    x = records.Measured(row.seconds / read.seconds, ((1, row), (-1, read)))
    layout = records.Layout("check", [records.col("x limit", "x limit", "x", ".2f",
                                                  by_round=True)])
    (made,) = records.make(layout, [{"x limit": x}], {})
    assert x.value == pytest.approx(7.9)  # the ratio of the middles: the two states mixed
    assert made["samples"] == pytest.approx([5.6, 5.6, 7.9, 7.9 / 1.4, 7.9 / 1.4])
    assert made["value"] == pytest.approx(7.9 / 1.4) and made["statistic"] == "median"


def test_a_row_near_the_balance_is_held_each_round_to_whichever_job_bound_it_that_round():
    """The forklift slow in rounds 0 to 2 (its read of the row's bytes 2.0 s, more than the
    workbench's 1.5 s for the row's math) and fast after (1.0 s): in the fast rounds the math
    bounds the row, and a row at 1.5x its limit in every round reads 1.5 in each, where held to
    the middle's bound alone (the forklift) its fast rounds read 2.25."""
    steps = ONE_USER
    moved, flops = accounting.bytes_read(SMALL, steps[0]), accounting.trip_flops(SMALL, steps[0])
    read = Timing((2.0, 2.0, 2.0, 1.0, 1.0), rounds=(0, 1, 2, 3, 4))
    bench_ = Timing((1.5,) * 5, rounds=(0, 1, 2, 3, 4))
    row = Timing((3.0, 3.0, 3.0, 2.25, 2.25), rounds=(0, 1, 2, 3, 4))
    roofs = Speeds(moved / read.seconds, flops / bench_.seconds, "measured",
                   timings={"forklift": (read, moved), "workbench": (bench_, flops)})
    x, limit_s, bound = speeds.x_limit(SMALL, steps, row, roofs)
    assert bound == "forklift" and limit_s == pytest.approx(2.0) and x.value == pytest.approx(1.5)
    layout = records.Layout("check", [records.col("x limit", "x limit", "x", ".2f",
                                                  by_round=True)])
    (made,) = records.make(layout, [{"x limit": x}], {})
    assert made["samples"] == pytest.approx([1.5] * 5) and made["rounds"] == [0, 1, 2, 3, 4]
    slower = Timing((3.0, 3.0, 3.0, 1.5, 1.5), rounds=(0, 1, 2, 3, 4))  # at the limit when fast
    (made,) = records.make(layout, [{"x limit": speeds.x_limit(SMALL, steps, slower, roofs)[0]}],
                           {})
    assert made["samples"] == pytest.approx([1.5, 1.5, 1.5, 1.0, 1.0])
