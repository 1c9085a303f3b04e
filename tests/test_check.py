"""two_phases.py holds every timing against the machine's two limits."""
import json

import pytest

import model
import two_phases
from conftest import quick_two_phases

ROOFS = {"bytes_per_s": 10e9, "flops_per_s": 100e9, "source": "given"}
ONE_USER = [[(512, 1)]]  # 377.5 MB: a 37.7 ms limit at 10 GB/s


def report():
    return {"tables": {}, "text": [], "settings": {"model_threads": 2}, "tablefmt": "plain"}


def test_check_rows_hold_measured_against_limit(capsys):
    r = report()
    limit = model.bytes_read([(512, 1)]) / 10e9
    two_phases.check(r, [("decode", "1 user", 1.5 * limit, ONE_USER)], ROOFS)
    row = r["tables"]["check"]["rows"][0]
    assert row[:2] == ["decode", "1 user"] and row[4] == "forklift"
    assert row[3] == pytest.approx(limit * 1e3) and row[5] == pytest.approx(1.5)
    assert [c["header"] for c in r["tables"]["check"]["columns"]] == [
        "experiment", "row", "measured ms", "limit ms", "bound by", "x limit"]
    assert "warning" not in capsys.readouterr().err  # 1.5x: no flag


def test_a_row_over_twice_its_limit_is_flagged_on_stderr(capsys):
    limit = model.bytes_read([(512, 1)]) / 10e9
    two_phases.check(report(), [("decode", "1 user", 2.5 * limit, ONE_USER)], ROOFS)
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "decode 1 user took 2.5x its limit" in err
    assert "h**3" in err and "BLAS" in err
    assert "2.50" in out and "warning" not in out


def test_a_row_of_several_trips_is_held_to_its_slowest_trip():
    r = report()
    trips = [[(512, 1)], [(0, 256)]]  # a decode step, then a step with a 256-token chunk
    two_phases.check(r, [("collision", "chunks", 1.0, trips)], ROOFS)
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
