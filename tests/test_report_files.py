"""report.md made from whatever its folder's saved files hold: any file the schema passes makes
a report (one the report still cannot be made with is left out, in one line, and the run is
saved), a stopped run is marked in it, and nothing a file says becomes markup there."""
import contextlib
import json
import os
import random
import shutil
import signal

import pytest

import cube_bug
from conftest import ROOT, compared, in_process, sheets
from harness import stopping
from harness.experiments.registry import TOLD
from harness.keeping import older, results, schema
from harness.showing import report

SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")
PICTURES = ["roofline.png", "decode.png", "dial.png", "depth.png"]  # each with its caption
TINY = ("--size", "300", "--matmul", "64", "--runs", "3")  # a full machine_speed run, in 2 s


def raw(script):
    """A shipped result's JSON, as its file holds it."""
    with open(os.path.join(SHIPPED, f"{script}.json"), encoding="utf-8") as f:
        return json.load(f)


def shipped():
    """The shipped runs as a load reads them, before the schema's check: {script: data}."""
    return {s: schema.cleaned(raw(s)) for s in results.SCRIPTS}


def before_verdicts(data):
    """A result as a version before runs saved their verdicts made it: judged as it is read."""
    data = json.loads(json.dumps(data))
    data["records"] = [r for r in data["records"] if r["experiment"] != "claims"]
    data["sheets"] = {t["name"]: {k: v for k, v in t.items() if k not in ("name", "threads")}
                      for t in data["sheets"]}  # (schema 6 kept them by name)
    return {**data, "schema_version": 6}


def made(runs, script, data):
    """report.md's text with data as script's run, once the schema passes it."""
    schema.check(data, script)
    runs = {s: older.upgrade(d) for s, d in {**runs, script: data}.items()}  # as loads read them
    return report.markdown(runs, PICTURES, TOLD)


def claims_record(data, figure, at=0):
    """The at-th verdict record of this figure."""
    return [r for r in data["records"] if r["experiment"] == "claims"
            and r["figure"] == figure][at]


def first(found, experiment):
    """The first record of an experiment."""
    return next(r for r in found if r["experiment"] == experiment)


# ---- one bad sibling file never throws a finished run away


NAMED = {  # the changes the probe found, each one a file the schema passes
    "a verdict of 1": ("machine_speed", lambda d: claims_record(d, "verdict").update(value=1)),
    "a numeric why": ("cube_bug", lambda d: claims_record(d, "why").update(value=1)),
    "a numeric tested": ("cube_bug", lambda d: claims_record(d, "tested").update(value=2.5)),
    "a verdict record without its claim": (  # its sheet gone, which says a verdict needs one
        "cube_bug", lambda d: [claims_record(d, "verdict").update(keys={}),
                               d["sheets"].remove(sheets(d)["claims"])]),
    "an older file's row keys as text, or none": ("old two_phases", lambda d: [
        first(d["records"], "prefill")["keys"].update(prompt="x"),
        first(d["records"], "dial")["keys"].update(chunk="x"),
        first(d["at_limits"], "dial")["keys"].clear()]),  # judged anew, once: a second or so
    "a sheet's labels of lists": (
        "two_phases", lambda d: sheets(d)["check"]["labels"][0]["keys"].update(row=[])),
    "a sheet without columns": ("two_phases", lambda d: sheets(d)["dial"].pop("columns")),
    "a stop saved as a word": ("cube_bug", lambda d: d.update(stopped="x")),
    "a stop saved as a list": ("cube_bug", lambda d: d.update(stopped=[2])),
}


@pytest.mark.parametrize("change", NAMED, ids=list(NAMED))
def test_a_file_the_schema_passes_makes_a_report(change):
    runs = shipped()
    base, edit = NAMED[change]
    script = base.split()[-1]
    data = before_verdicts(runs[script]) if base.startswith("old") else runs[script]
    edit(data)
    text = made(runs, script, data)  # the schema passes it, and the report is made
    assert f"## {report.md(report.SECTIONS[script])}" in text


def holders(data, at=()):
    """Every object and list of a result that holds something, as a path of keys: the records'
    per-sample lists aside (a change there the schema refuses, or is one more number)."""
    if isinstance(data, (dict, list)) and data:
        yield at
        for key, value in data.items() if isinstance(data, dict) else enumerate(data):
            if key not in ("samples", "rounds", "shares", "processes"):
                yield from holders(value, (*at, key))


@contextlib.contextmanager
def replaced(holder, key, new):
    """holder with its value at key replaced by new, put back after."""
    was, holder[key] = holder[key], new
    try:
        yield
    finally:
        holder[key] = was


def test_any_value_changed_to_one_the_schema_passes_still_makes_a_report():
    runs = shipped()
    places = [(s, d, list(holders(d))) for s, d in runs.items()]
    rng, kept, failed = random.Random(54), 0, []
    for _ in range(300):  # a holder, then one of its values: each field as likely as its file's
        script, data, paths = rng.choice(places)  # others, whatever the file's size
        holder = data
        for key in rng.choice(paths):
            holder = holder[key]
        key = rng.choice(list(holder) if isinstance(holder, dict) else range(len(holder)))
        new = rng.choice([1, "x", None, [], {}])
        with replaced(holder, key, new):
            try:
                schema.check(data, script)
            except ValueError:
                continue  # refused whole: left out with its line (test_probe's test_5)
            kept += 1
            try:
                made(runs, script, data)
            except Exception as e:
                failed.append((script, key, new, repr(e)))
    assert kept > 100 and not failed, failed


@pytest.mark.kernels  # the tiles' workbench
def test_a_run_is_saved_and_a_sibling_its_report_trips_on_left_out_in_one_line(tmp_path,
                                                                                monkeypatch):
    import machine_speed
    box = tmp_path / "box"
    box.mkdir()
    cube = json.load(open(os.path.join(SHIPPED, "cube_bug.json")))
    claims_record(cube, "verdict").update(value=1)  # exited 1 with an AttributeError
    (box / "cube_bug.json").write_text(json.dumps(cube))
    shutil.copy(os.path.join(SHIPPED, "two_phases.json"), box / "two_phases.json")
    real = report.section

    def section(sheet, name, found, titled=True):  # a reader's bug that only this file meets
        if name == "prefill":
            raise TypeError("a reader's bug")
        return real(sheet, name, found, titled)
    monkeypatch.setattr(report, "section", section)
    r = in_process(machine_speed.main, *TINY, "--processes", "1", "--out", str(tmp_path),
                   "--label", "box")
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if "two_phases.json" in line] == [
        "warning: the report leaves out two_phases.json: the report cannot be made with it "
        "(TypeError)"]
    assert schema.load(str(box / "machine_speed.json"), "machine_speed")  # saved
    text = (box / "report.md").read_text()
    assert f"## {report.md(report.SECTIONS['cube_bug'])}" in text  # its verdict of 1 shown
    assert report.md(report.SECTIONS["two_phases"]) not in text


@pytest.mark.kernels  # the tiles' workbench
def test_a_sibling_the_schema_refuses_is_said_once(tmp_path):
    """Read twice in a run (the check for another machine, then the report), said once."""
    import machine_speed
    box = tmp_path / "box"
    box.mkdir()
    (box / "cube_bug.json").write_text('{"schema_version": 7}')
    r = in_process(machine_speed.main, *TINY, "--processes", "1", "--out", str(tmp_path),
                   "--label", "box")
    assert r.returncode == 0, r.stderr
    assert len([line for line in r.stderr.splitlines() if "cube_bug.json" in line]) == 1, \
        r.stderr


# ---- a stopped run is marked in the report: see test_rounds.py


def test_a_stop_is_said_in_the_signals_words_whatever_a_file_saved():
    assert [stopping.cut_short_words(v).removesuffix(" while adding processes")
            for v in (signal.SIGINT, 15, 1, 99, True, "a worker died", [2])] == [
        "interrupted", "terminated", "hung up", "stopped", "stopped", "a worker died", "stopped"]


# ---- nothing a file says becomes markup in the report


HOSTILE = ("[x](http://e.com) ![i](http://e.com/i.png) </details> <script>alert(1)</script> "
           "a | b `code` *em* _em_ \n\n</details>\n# heading")


def html(text):
    """The report as GitHub's own parser renders it, raw HTML let through (as GitHub lets its
    folds through): what markup the report's text makes."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


def tables(page):
    """[[row's cell count]] of each table of a rendered page."""
    import re
    return [[len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", t, re.S)]
            for t in re.findall(r"<table>.*?</table>", page, re.S)]


def with_text(words, tmp_path):
    """report.md's text, its machine_speed run's busy words and every field of its verdicts
    (the tally's verdicts, each claim, its rule and its why) saying `words`."""
    data = raw("machine_speed")
    data["machine"]["busy"] = [words]
    claims = list(dict.fromkeys(r["keys"]["claim"] for r in data["records"]
                                if r["experiment"] == "claims"))
    for r in data["records"]:
        if r["experiment"] == "claims":
            r["keys"] = {"claim": f"{words} claim {claims.index(r['keys']['claim'])}"}
            r["value"] = f"{words} {r['figure']}"
    (tmp_path / "machine_speed.json").write_text(json.dumps(data))
    runs = {s: schema.load(os.path.join(SHIPPED, f"{s}.json"), s) for s in results.SCRIPTS}
    runs["machine_speed"] = schema.load(str(tmp_path / "machine_speed.json"), "machine_speed")
    return report.markdown(runs, [], TOLD)


def test_text_from_a_sibling_file_makes_no_link_image_html_or_broken_fold(tmp_path):
    plain, hostile = (html(with_text(words, tmp_path)) for words in ("plain words", HOSTILE))
    assert "Busy:" in hostile and "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile  # as text
    for tag in ("<a ", "<img", "<script", "<h1>", "<code>", "<em>", "<details>", "</details>",
                "<table>", "<tr>", "<li>"):
        assert hostile.count(tag) == plain.count(tag), tag  # none of the file's own
    assert tables(hostile) == tables(plain)  # every row, each cell in its column
    assert hostile.index("&lt;/details&gt;") < hostile.index("Appendix")


@pytest.mark.parametrize("text", [
    "plain words", "a line\nand the next", 'a "quote" \\ and / slash', "tab\there", "bell\x07",
    "esc\x1b[31mred", "del\x7f", "bidi\u202eevil", "zero\u200bwidth", "caf\u00e9", "\ud7ff",
    "private\ue000", "nul\x00", "cr\r", "form\x0c", "emoji \U0001f600"])
def test_a_file_read_fast_is_cleaned_as_a_file_read_slowly(text):
    """A result whose JSON text holds printable ASCII alone, and no escape but a line's end, a
    quote, a backslash or a slash, skips the cleaning: for every text, either way gives what
    cleaning the whole would."""
    for as_json in (json.dumps({"k" + text: [text, 1.5]}),
                    json.dumps({"k" + text: [text, 1.5]}, ensure_ascii=False)):
        try:
            data = json.loads(as_json)
        except json.JSONDecodeError:  # a raw control character JSON refuses
            continue
        fast = data if schema.plain(as_json) else schema.cleaned(data)
        assert fast == schema.cleaned(data)


# ---- a report the user edited, and folders of several machines


def test_an_edited_report_is_kept_when_the_first_run_of_a_script_replaces_it(tmp_path):
    box = tmp_path / "edit2"
    box.mkdir()
    for name in ("machine_speed.json", "machine_speed.txt", "report.md"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    with open(box / "report.md", "a") as f:
        f.write("my own line\n")
    argv = ("--tokens", "4", "--runs", "3", "--processes", "1", "--no-in-model", "--out",
            str(tmp_path), "--label", "edit2")
    r = in_process(cube_bug.main, *argv)
    assert r.returncode == 0, r.stderr
    (kept,) = (box / "history").glob("report.*")
    assert (kept / "report.md").read_text().endswith("my own line\n")
    assert "my own line" not in (box / "report.md").read_text() and str(kept) in r.stderr
    assert not results.edited(str(box / "report.md"))  # the suite's own, signed
    r = in_process(cube_bug.main, *argv)  # the report as the suite wrote it: nothing to keep
    assert r.returncode == 0 and len(list((box / "history").glob("report.*"))) == 1


def test_a_signed_report_is_the_suites_and_any_edit_unsigns_it(tmp_path):
    path = tmp_path / "report.md"
    path.write_text(results.signed("# a report\n\nits table\n"))
    assert not results.edited(str(path))
    path.write_text(path.read_text().replace("its table", "its table, edited"))
    assert results.edited(str(path))
    assert not results.edited(str(tmp_path / "none.md"))  # nothing there: nothing to keep


def test_two_machines_in_one_folder_are_warned_of_and_reported_apart(tmp_path):
    box = tmp_path / "shared"
    box.mkdir()
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["machine"]["cpu"] = "Some Other CPU"
    (box / "machine_speed.json").write_text(json.dumps(data))
    shutil.copy(os.path.join(SHIPPED, "machine_speed.txt"), box / "machine_speed.txt")
    r = in_process(cube_bug.main, "--tokens", "4", "--runs", "3", "--processes", "1",
                   "--no-in-model", "--out", str(tmp_path), "--label", "shared")
    assert r.returncode == 0 and "holds machine_speed.py run on another machine" in r.stderr
    report = (box / "report.md").read_text()
    assert report.startswith("# Prefill vs Decode, rerun on 2 machines")
    assert "Some Other CPU" in report and "- `cube_bug.py`: machine: " in report


def test_a_gpu_runs_device_is_in_the_reports_machine_line():
    from harness.measuring import host
    from harness.showing import report
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["machine"]["device"] = {"device": "torch:cuda", "name": "NVIDIA H100 80GB HBM3",
                                 "library": "torch 2.13.0", "dtype": "float32", "tf32": "off"}
    assert "device torch:cuda: NVIDIA H100 80GB HBM3" in report.steady(host.line(
        data["machine"]))


def test_a_record_twice_is_refused_by_the_schema(tmp_path):
    from harness.keeping import schema
    data = json.load(open(os.path.join(SHIPPED, "two_phases.json")))
    twice = next(r for r in data["records"] if r["experiment"] == "decode")
    data["records"].append({**twice, "value": twice["value"] * 10})
    with pytest.raises(ValueError, match="twice"):
        schema.check(data, "two_phases")
    box = tmp_path / "box"
    box.mkdir()
    (box / "two_phases.json").write_text(json.dumps(data))
    r = compared("post", str(box))
    assert "twice" in r.stderr and "left out" in r.stderr
