"""two_phases.py holds every timing against the machine's two limits."""
import json

import pytest

import model
import two_phases
from conftest import quick_two_phases

ROOFS = {"bytes_per_s": 10e9, "flops_per_s": 100e9, "source": "given"}
ONE_USER = [[(512, 1)]]  # 377.5 MB: a 37.7 ms limit at 10 GB/s


def report():
    return {"tables": {}, "text": [], "settings": {"model_threads": 2, "runs": 3},
            "tablefmt": "plain", "suffix": ""}


def parts(riders=((512, 1),), tables=0.034, alone=0.034, attention=0.004, elementwise=0.001,
          other=0.0005):
    """A recorded trip's breakdown, as where_time_goes() gives it (seconds)."""
    s = {"tables": tables, "attention": attention, "elementwise": elementwise, "other": other}
    return {"riders": list(riders), "parts": {**s, "trip": sum(s.values())},
            "alone": {"seconds": alone, "samples": [alone] * 3}}


def test_check_rows_hold_measured_against_limit(capsys):
    r = report()
    limit = model.bytes_read([(512, 1)]) / 10e9
    two_phases.check(r, [("decode", "1 user", 1.5 * limit, ONE_USER, parts())], ROOFS)
    row = r["tables"]["check"]["rows"][0]
    assert row[:2] == ["decode", "1 user"] and row[4] == "forklift"
    assert row[3] == pytest.approx(limit * 1e3) and row[5] == pytest.approx(1.5)
    assert [c["header"] for c in r["tables"]["check"]["columns"]] == [
        "experiment", "row", "measured ms", "limit ms", "bound by", "x limit"]
    assert "warning" not in capsys.readouterr().err  # 1.5x: no flag


@pytest.mark.parametrize("breakdown,says", [
    (parts(tables=0.080, alone=0.078), "the same products alone take 78.0 ms (2.3x their limit)"),
    (parts(tables=0.080, alone=0.036), "tables: 80.0 ms, the same products alone take only 36.0"),
    (parts(attention=0.050), "attention: 50.0 ms, 13.2x its limit"),
    (parts(elementwise=0.040), "elementwise: 40.0 ms against a limit of 0.0 ms"),
    (parts(other=0.045), "other: 45.0 ms outside every part")],
    ids=["the BLAS", "our tables", "attention", "elementwise", "other"])
def test_a_row_over_twice_its_limit_is_flagged_naming_its_slowest_part(capsys, breakdown, says):
    limit = model.bytes_read([(512, 1)]) / 10e9  # tables 34.0 ms, notes 3.8 ms at 10 GB/s
    two_phases.check(report(), [("decode", "1 user", 2.5 * limit, ONE_USER, breakdown)], ROOFS)
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "decode 1 user took 2.5x its limit" in err and says in err
    assert "2.50" in out and "warning" not in out


def test_the_breakdown_splits_each_row_into_its_parts(capsys):
    r = report()
    b = parts(tables=0.040, alone=0.036, attention=0.0076)  # notes: 512 x 72 KB at 10 GB/s
    two_phases.breakdown(r, [("decode", "1 user", 0.06, ONE_USER, b)], ROOFS)
    t = r["tables"]["breakdown"]
    row = dict(zip([c["header"] for c in t["columns"]], t["rows"][0]))
    assert row["tables ms"] == pytest.approx(40.0) and row["alone ms"] == pytest.approx(36.0)
    assert row["x alone"] == pytest.approx(40 / 36)
    assert row["x limit"] == pytest.approx(0.0076 / (512 * model.NOTE_BYTES / 10e9))
    assert row["trip ms"] == pytest.approx(1e3 * sum(b["parts"][p] for p in model.PARTS))
    assert row["most excess"] == "our tables +4.0 ms"  # the BLAS: 36.0 - 34.0 = 2.0 ms
    assert t["parts"][0]["alone"] == [0.036] * 3  # the samples behind the figures are kept
    assert "middle of 3 runs" in capsys.readouterr().out


def test_a_row_of_several_trips_is_held_to_its_slowest_trip():
    r = report()
    trips = [[(512, 1)], [(0, 256)]]  # a decode step, then a step with a 256-token chunk
    two_phases.check(r, [("collision", "chunks", 1.0, trips, parts())], ROOFS)
    slowest = max(model.limit(t, 10e9, 100e9)[0] for t in trips)
    assert r["tables"]["check"]["rows"][0][3] == pytest.approx(slowest * 1e3)


def test_roofs_file_is_read_and_named(tmp_path):
    path = tmp_path / "machine_speed.json"
    path.write_text(json.dumps({"machine": {"date": "2026-01-02T03:04:05"},
                                "roofs": {"bytes_per_s": 20.5e9, "flops_per_s": 140e9}}))
    roofs = two_phases.roofs_file(str(path))
    assert roofs["bytes_per_s"] == 20.5e9 and roofs["flops_per_s"] == 140e9
    assert str(path) in roofs["source"] and "2026-01-02" in roofs["source"]


def test_a_quick_run_saves_the_check_table(tmp_path):
    r, data = quick_two_phases(tmp_path, "--runs", "1", "--experiments", "decode")
    assert "x limit" in r.stdout and "bound by" in r.stdout
    rows = data["tables"]["check"]["rows"]
    assert [row[1] for row in rows] == ["1 user", "4 users"]
    assert all(row[2] > 0 and row[3] > 0 and row[5] > 0 for row in rows)
    assert data["roofs"]["bytes_per_s"] > 0
    assert "where" not in r.stdout and "most excess" in r.stdout  # the breakdown follows
    t = data["tables"]["breakdown"]
    head = [c["header"] for c in t["columns"]]
    parts = [dict(zip(head, row)) for row in t["rows"]]
    assert [p["row"] for p in parts] == ["1 user", "4 users"]  # one per check row
    for p in parts:
        assert p["trip ms"] == pytest.approx(sum(p[f"{k} ms"] for k in model.PARTS))
        assert p["tables ms"] > 0 and p["alone ms"] > 0 and p["attention ms"] > 0
    assert data["schema_version"] == 2


# ---- the limits hold through the run

START = {"bytes_per_s": 20e9, "flops_per_s": 200e9, "source": "measured (best of 5)"}


def test_the_limits_use_the_faster_speed_of_the_start_and_the_end(capsys):
    end = {"bytes_per_s": 21e9, "flops_per_s": 190e9, "source": "measured (best of 5)"}
    roofs = two_phases.through_the_run(START, end)
    assert roofs["bytes_per_s"] == 21e9 and roofs["flops_per_s"] == 200e9
    assert roofs["start"] == {"bytes_per_s": 20e9, "flops_per_s": 200e9}
    assert "at the start (20.0 GB/s, 200.0 GFLOP/s) and at the end (21.0 GB/s" in roofs["source"]
    assert capsys.readouterr().err == ""  # 5% either way: no warning


def test_speeds_that_moved_during_the_run_are_named(capsys):
    end = {"bytes_per_s": 15e9, "flops_per_s": 205e9, "source": "measured (best of 5)"}
    two_phases.through_the_run(START, end)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the forklift moved by -25% during the run" in err


def test_a_quick_run_says_both_speeds_under_its_check_table(tmp_path):
    r, data = quick_two_phases(tmp_path, "--runs", "1", "--experiments", "decode")
    line = next(s for s in r.stdout.splitlines() if s.startswith("(limit = "))
    assert "at the start (" in line and "at the end (" in line
    assert set(data["roofs"]["start"]) == set(data["roofs"]["end"]) == {"bytes_per_s",
                                                                        "flops_per_s"}
