"""compare.py's Markdown tables (--tablefmt github, its markdown, pipe) as GitHub renders them:
a folder's name, a claim's words, a row's keys and a figure's name from a results file are
shown as they are, never as a table's edge, a link or HTML."""
import html as entities
import json
import os
import re
import shutil

import pytest

from conftest import ROOT, compared

EPYC = os.path.join(ROOT, "references", "amd-epyc-2c")
FOLDER = "a|b <b>bold [x](e.com)"  # a folder's name: no "/" in it
CLAIM = "a | b <i>c</i> `d`"
ROW, FIGURE = "1 | <s>one</s>", "step | <u>x</u>"


def html(text):
    """Markdown as GitHub's own parser renders it, raw HTML let through."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


def tables(page):
    """[[[a row's cells, as text]]] of each table of a rendered page."""
    return [[[entities.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in
              re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
             for row in re.findall(r"<tr>.*?</tr>", table, re.S)]
            for table in re.findall(r"<table>.*?</table>", page, re.S)]


def hostile_folder(tmp_path):
    """The shipped machine in a folder named with Markdown, one of its claims' words too (every
    record of that claim), and a row's keys and a figure's name of one compared record."""
    folder = tmp_path / FOLDER
    shutil.copytree(EPYC, folder)
    data = json.loads((folder / "two_phases.json").read_text())
    claim = next(r["keys"]["claim"] for r in data["records"] if r["experiment"] == "claims")
    for r in data["records"]:
        if r["experiment"] == "claims" and r["keys"]["claim"] == claim:
            r["keys"]["claim"] = CLAIM
    decode = [r for r in data["records"] if r["experiment"] == "decode" and r["compared"]]
    decode[0]["keys"]["users"] = ROW  # a row's key as text, as an older file may hold it
    decode[1]["figure"] = FIGURE  # a figure no sheet declares: shown by its name
    (folder / "two_phases.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize("fmt", ["github", "markdown", "pipe"])
def test_every_section_is_a_table_of_its_columns_whatever_a_folder_or_claim_says(tmp_path,
                                                                                   fmt):
    r = compared("post", str(hostile_folder(tmp_path)), "--tablefmt", fmt)
    assert r.returncode == 0, r.stderr
    page = html(r.stdout)
    delimiters = [line for line in r.stdout.splitlines() if re.fullmatch(r"\|[-:|]+\|", line)]
    found = tables(page)
    assert len(found) == len(delimiters) > 3  # every section a table
    for rows in found:
        assert len({len(row) for row in rows}) == 1, rows[0]  # each row as wide as its header
    headers = [rows[0] for rows in found]
    assert ["figure", "unit", "post", FOLDER, f"{FOLDER} vs post"] in headers  # a section's
    assert ["limit", "unit", "post", FOLDER] in headers  # the limits'
    claims = next(rows for rows in found if rows[0] == ["the post says", "post", FOLDER])
    assert CLAIM in [row[0] for row in claims]
    cells = [row[0] for rows in found for row in rows]
    assert any(c.startswith(f"{ROW}: ") for c in cells)  # a row named by its text key
    assert any(c.endswith(f": {FIGURE}") for c in cells)  # a figure by its name
    for tag in ("<b>", "<i>", "<s>", "<u>", "<a ", "<code>"):
        assert tag not in page, tag  # nothing a file or folder says becomes markup
    assert f"{FOLDER}: machine: " in entities.unescape(page)  # its machine line, as text


def test_the_plain_layout_shows_names_as_they_are(tmp_path):
    r = compared("post", str(hostile_folder(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert all(text in r.stdout for text in (f"{FOLDER}: machine: ", CLAIM, ROW, FIGURE))


@pytest.mark.parametrize("fmt", ["html", "unsafehtml"])
def test_an_html_layout_makes_no_markup_of_what_a_folder_or_file_says(tmp_path, fmt):
    r = compared("post", str(hostile_folder(tmp_path)), "--tablefmt", fmt)
    assert r.returncode == 0, r.stderr
    for tag in ("<b>", "<i>", "<s>", "<u>"):
        assert tag not in r.stdout, tag  # the folder's name, the claim, the row and figure
    assert entities.escape("<b>bold") in r.stdout
