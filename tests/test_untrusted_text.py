"""What a results file or folder says never steers anything: no escape reaches the terminal, no
note becomes markup in the report, no folder name becomes a formula in a spreadsheet's cell."""
import copy
import json
import re
import shutil

import pytest

from conftest import EPYC, ESC, compared, planted_copy, reference
from harness.experiments.registry import TOLD
from harness.keeping.exports import for_csv
from harness.keeping import older, results, schema
from harness.showing import report


def test_escapes_in_a_results_file_never_reach_the_terminal(tmp_path):
    def dirty(data):
        data["machine"]["cpu"] = ESC
        data["machine"]["date"] = "2026-01-01" + ESC
        data["records"][0]["keys"] = {"prompt": ESC}
    folder = planted_copy(tmp_path / "box", "machine_speed", dirty)
    r = compared(str(folder), "--export", "csv")
    assert r.returncode == 0 and "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout
    roofs = schema.read_roofs(str(folder / "machine_speed.json"))
    assert "\x1b" not in roofs.source  # the date in the sources note
    bad = reference("two_phases")
    bad["records"][0].update(experiment=ESC, value="fast")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError) as refused:
        schema.load(str(tmp_path / "bad.json"), "two_phases")
    assert "\x1b" not in str(refused.value) and "red" in str(refused.value)
    (folder / results.JOURNAL).write_text(json.dumps({"cube_bug" + ESC: ".tmp-x"}))
    (folder / ".tmp-x").write_text("{}")
    _, note = results.as_saved(str(folder))
    assert note is not None and "\x1b" not in note  # a planted journal's entry name


def test_a_note_makes_no_markup_in_the_report():
    cmarkgfm = pytest.importorskip("cmarkgfm")
    data = reference("two_phases")

    def rendered(note):
        changed = copy.deepcopy(data)
        changed["sheets"][0]["note"] = note
        text = report.markdown({"two_phases": older.upgrade(schema.cleaned(changed))}, [], TOLD)
        return cmarkgfm.github_flavored_markdown_to_html(text)
    plain = rendered("a plain note")
    hostile = rendered("~~~\n===\n| a | b |\n| - | - |\n1. one\n---\n    code\n> quoted\n"
                       "see https://evil.example and www.evil.example ~~gone~~ <b>x</b>")
    for tag in ("<pre", "<h1", "<h2", "<h3", "<table", "<ol", "<ul", "<hr", "<a ", "<del",
                "<b>", "<blockquote", "<code"):
        assert hostile.count(tag) == plain.count(tag), tag  # the note made none of its own
    assert "see https://evil.example and www.evil.example ~~gone~~ &lt;b&gt;x&lt;/b&gt;" in \
        hostile  # shown character for character
    assert hostile.index("evil.example") < hostile.index("Appendix")  # the rest still follows


@pytest.mark.parametrize("text", ["__init__", "___x___", "a run on __main__'s pool",
                                  "write to evil@example.com", "mailto:x@example.com",
                                  "xmpp:x@example.org", "_only_ *this* **that**"])
def test_underscores_and_addresses_make_no_markup_as_github_renders_them(text):
    """GitHub's own parser (cmark-gfm) undid the escaping: __init__ escaped to one backslash
    before each outer underscore rendered as _<em>init</em>_, ___x___ bold, and an e-mail
    address, mailto: or xmpp: became a link; in report.md and compare.py --tablefmt github
    alike. Both escapes, inline and in a table's cell: no emphasis, no link, the text as it
    was."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from harness.showing.escaping import JOIN, for_cell, for_markdown
    for made in (for_markdown(text), f"| a |\n| - |\n| {for_cell(text)} |"):
        html = cmarkgfm.github_flavored_markdown_to_html(made)
        for tag in ("<em", "<strong", "<a "):
            assert tag not in html, (text, html)
        body = html.partition("<td>")[2].partition("</td>")[0] if "<td>" in html else html
        shown = re.sub(r"<[^>]+>", "", body).replace(JOIN, "").strip()
        assert shown.replace("&#39;", "'") == text, (text, html)


def test_a_folder_named_as_a_formula_makes_no_formula_in_a_csv_cell(tmp_path):
    folder = tmp_path / "=HYPERLINK(\"http://evil.example\",\"click\")"
    shutil.copytree(EPYC, folder)
    r = compared(str(folder), "--export", "csv")
    assert r.returncode == 0
    cells = [c for line in r.stdout.splitlines()[1:] for c in line.split(",")]
    assert not any(c.lstrip('"').startswith(("=", "+", "@")) for c in cells)
    assert for_csv("=1+1") == "'=1+1" and for_csv("-3") == "'-3" and for_csv(-3) == -3
