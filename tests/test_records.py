"""Records are the data: renaming every printed header and row changes no record, no claim,
no picture point, no compared figure and no export; a figure and its samples never part."""
import dataclasses
import json

import pytest

import compare
import cube_bug
import machine_speed
import two_phases
from harness import model_run
from harness.experiments.registry import TOLD
from harness.experiments import collision, decode, depth, launches, prefill, summary
from harness.experiments import registry
from harness.judging import check, judge
from harness.keeping import exports, records
from harness.measuring import speeds, timing
from harness.predicting import fitting, parts, plans, predict, request, turning
from harness.showing import pictures, sheets
from harness.keeping.records import Layout, col
from conftest import made

PREDICT = ["--predict", "--forklift", "12", "--workbench", "121", "--label", "p", "--no-plot"]
SCRIPTS = (two_phases, model_run, prefill, decode, launches, collision, summary, depth,
           machine_speed, cube_bug, check, sheets, predict, plans, fitting, turning, parts,
           request)


def renamed(monkeypatch):
    """Every layout of every script and module: each header becomes 'renamed N'; and every
    planned row of two_phases' experiments: its name becomes 'row N'. -> how many renamed"""
    n = 0
    for module in SCRIPTS:
        for name, value in list(vars(module).items()):
            columns = value.columns if isinstance(value, Layout) else value
            if isinstance(columns, list) and columns and all(hasattr(c, "header")
                                                             for c in columns):
                new = []
                for c in columns:
                    n += 1
                    new.append(dataclasses.replace(c, header=f"renamed {n}"))
                monkeypatch.setattr(module, name, dataclasses.replace(value, columns=new)
                                    if isinstance(value, Layout) else new)
    for name, e in list(two_phases.EXPERIMENTS.items()):
        def planned(args, plan=e.plan):
            rows = plan(args)
            return [dataclasses.replace(r, label=f"row {i}") for i, r in enumerate(rows)]
        monkeypatch.setitem(two_phases.EXPERIMENTS, name, dataclasses.replace(e, plan=planned))
        n += 1
    return n


def predicted(tmp_path, name):
    """A prediction saved, read back: deterministic, so two runs give the same records."""
    assert two_phases.main([*PREDICT, "--out", str(tmp_path / name)]) == 0
    return json.loads((tmp_path / name / "p" / "two_phases.json").read_text())


def readers(data):
    """Everything the readers take from a result: claims, picture points, compared figures."""
    found, roofs = data["records"], speeds.read(data["roofs"])
    judged = [(c.says, here, verdict) for c, here, verdict, *_ in
              judge.verdicts(found, roofs, ("two_phases",), data["settings"], claims=TOLD.claims)]
    points = {e: pictures.rows_of(found, e) for e in ("dial", "decode", "depth")}
    roofline = [(m["name"], [[p[0], *p[2:]] for p in m["points"]])  # each point, but its name
                for m in data["roofline"]["machines"]]
    machine = {"two_phases": data}
    compared = {s[0]: compare.values_of(machine, s)[0] for s in compare.sections([machine])}
    exported = exports.run("csv", "two_phases", data["machine"], found, "predicted")
    return judged, points, roofline, compared, exported


def test_renaming_every_header_changes_no_record_claim_picture_or_comparison(tmp_path,
                                                                             monkeypatch):
    before = predicted(tmp_path, "before")
    assert renamed(monkeypatch) > 30
    after = predicted(tmp_path, "after")
    headers = [c["header"] for s in after["sheets"] for c in s["columns"]]
    assert all(h.startswith("renamed") for h in headers)  # the renaming reached every sheet
    assert "row 1" in json.dumps(after["roofline"])  # and every row's name
    assert after["records"] == before["records"]
    assert readers(after) == readers(before)
    assert len(readers(after)[0]) == len([c for c in registry.CLAIMS if c.predicted])


def test_a_figure_keeps_its_samples_whatever_the_columns_order():
    t = timing.Timing((0.010, 0.012, 0.011))
    row = {"users": 4, "step": records.timed(11.0, t), "rate": records.timed(4 / 0.011, t, -1)}
    columns = [col("users", "users", "users", "d", key=True),
               col("step", "step ms", "ms", ".1f"), col("rate", "tokens/s", "tokens/s", ".1f")]
    one = made("decode", columns, [row])
    other = made("decode", columns[::-1], [row])
    by = {r["figure"]: r for r in one}
    assert {r["figure"]: r for r in other} == by
    assert by["step"]["samples"] == pytest.approx([10.0, 12.0, 11.0])
    assert by["rate"]["samples"] == pytest.approx([400.0, 4 / 0.012, 4 / 0.011])
    assert by["step"]["keys"] == {"users": 4} and by["step"]["statistic"] == "median"


def test_a_missing_figure_is_not_measured_and_a_key_needs_its_value():
    found = made("decode", [col("users", "u", "users", "d", key=True),
                            col("step", "s", "ms", ".1f")], [{"users": 1, "step": 5.0}])
    assert records.find(found, "decode", "step", users=1)["value"] == 5.0
    with pytest.raises(records.Missing):
        records.find(found, "decode", "step", users=2)
    with pytest.raises(records.Missing):
        records.find(found, "prefill", "step")


def test_a_prediction_is_its_own_kind_of_record(tmp_path):
    data = predicted(tmp_path, "p")
    assert data["records"] and all(r["predicted"] and r["statistic"] in ("limit", "computed")
                                   for r in data["records"])
    assert all(r["settings"]["predict"] == ["given"] for r in data["records"])
