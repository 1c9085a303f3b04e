"""report.md as a code-hosting site renders it: a real table for every sheet, notes as text,
each script's section dated with its command, the claims as a table, a glossary, and only the
pictures its own run drew; the pictures hold every point, each label beside its own."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT, sheets
from harness.experiments.registry import TOLD
from harness.keeping import older, results, schema
from harness.showing import gfm, report

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")
NOTES = ("runs per", "spread slowest/fastest", "(predicted", "sources:")  # text under a table


def shipped():
    return {s: schema.load(os.path.join(SHIPPED, f"{s}.json"), s) for s in results.SCRIPTS}


def rendered(text):
    """The report parsed as CommonMark with GitHub's tables: [(kind, text)] of its headings,
    table cells, paragraphs and images, in order."""
    from markdown_it import MarkdownIt
    tokens, out = MarkdownIt("commonmark").enable("table").parse(text), []
    for i, t in enumerate(tokens):
        if t.type in ("heading_open", "th_open", "td_open", "paragraph_open"):
            kind = {"heading_open": t.tag, "th_open": "cell", "td_open": "cell",
                    "paragraph_open": "text"}[t.type]
            out.append((kind, "".join(c.content for c in tokens[i + 1].children or ()
                                      if c.type in ("text", "code_inline"))))
        elif t.type == "table_open":
            out.append(("table", ""))
        if t.type == "inline":
            out += [("image", c.attrs["src"]) for c in t.children or () if c.type == "image"]
    return out


def test_every_sheet_is_a_table_and_no_note_sits_inside_one(quick_run):
    _, quick, _ = quick_run
    runs = {**shipped(), "two_phases": older.upgrade({**quick, "quick": False})}
    seen = rendered(report.markdown(runs, [], TOLD))
    titles = [t.get("title") or n for data in runs.values() for n, t in sheets(data).items()
              if n != "claims"]
    for title in titles:  # each sheet: its heading (or its section's, which says the same),
        #                   then (past its settings) a table
        at = seen.index(("h3", title)) if ("h3", title) in seen else next(
            i for i, (k, t) in enumerate(seen) if k == "h2" and report.repeats(title, t))
        following = [k for k, _ in seen[at + 1:]]
        assert "table" in following and following.index("table") <= 1, title
    assert [k for k, _ in seen].count("table") >= len(titles) + 2  # and the glossary, the claims
    #                                                     (a sheet too wide for the page: two)
    cells = [text for kind, text in seen if kind == "cell"]
    assert not [c for c in cells if any(n in c for n in NOTES)]
    assert any(k == "text" and ("runs per" in t or "rounds per" in t)
               for k, t in seen)  # each note is text below
    for word in ("KV cache", "prefill", "decode", "forward pass", "layer", "TTFT"):
        assert any(word in c for c in cells), word  # the glossary


def test_each_script_says_when_it_ran_and_how(tmp_path):
    runs = shipped()
    text = report.markdown(runs, [], TOLD)
    for script, data in runs.items():
        when = data["machine"]["date"][:16].replace("T", " ")
        assert f"- `{script}.py`, run {when} UTC" in text  # in the appendix
        if data.get("made"):
            assert f"`{data['made']['command']}`" in text


def test_the_claims_are_a_table_and_their_rules_a_list():
    seen = rendered(report.markdown(shipped(), [], TOLD))
    cells = [t for k, t in seen if k == "cell"]
    assert cells[cells.index("verdict"):][:4] == ["verdict", "the post says", "the post", "here"]
    assert all(len(c) < 300 for c in cells)  # a claim's row can be scanned ...
    assert all(c.count(", edge ") <= 1 and not c.endswith("...") for c in cells)  # ... each
    #   judged-by cell says its figure, interval and edge once, and whole
    text = report.markdown(shipped(), [], TOLD)
    assert ("- **Batching 16 users gives about 3.7x the tokens per second**: 16 users typing "
            "together give within 2x either way of the tokens per second") in text


def test_a_partial_rerun_links_only_the_pictures_it_drew():
    runs = shipped()
    names = ["roofline.png", "dial.png", "decode.png", "depth.png"]  # in the folder, from before
    runs["two_phases"]["pictures"] = ["roofline.png"]  # this run drew the roofline only
    images = [v for k, v in rendered(report.markdown(runs, names, TOLD)) if k == "image"]
    assert images == ["roofline.png"]
    del runs["two_phases"]["pictures"]  # an older run says nothing: what is there
    images = [v for k, v in rendered(report.markdown(runs, names, TOLD)) if k == "image"]
    assert sorted(images) == sorted(names)


def test_the_readme_says_each_posts_word_in_engineering_terms():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    for post, term in report.GLOSSARY:
        assert f"| {post} | {term} |" in text, post


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_roofline_shows_a_point_far_below_its_roof_with_its_label_beside_it():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from harness.showing import pictures
    points = [["prefill", "1 token", 0.5, 1e6], ["prefill", "16 tokens", 8.0, 50e9],
              ["decode", "1 user", 0.5, 5e9], ["decode", "64 users", 8.2, 52e9]]
    fig = pictures.figure(plt, pictures.roofline_figure,
                          {"bytes_per_s": 20e9, "flops_per_s": 140e9, "points": points}, "test")
    ax = fig.axes[0]
    try:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert all(x0 < p[2] < x1 and y0 < p[3] / 1e9 < y1 for p in points)
        labels = {t.get_text(): t for t in ax.texts if t.get_text() in {p[1] for p in points}}
        assert len(labels) == len(points)
        for p in points:
            label = labels[p[1]]
            assert label.xy == (p[2], p[3] / 1e9)  # anchored at its own point ...
            assert max(map(abs, label.xyann)) <= 30  # ... and drawn beside it, in points
        assert not fig.texts  # no stamp: the report says when the run was made
    finally:
        plt.close(fig)


def test_text_from_a_result_shows_as_it_is_never_as_markup():
    from markdown_it import MarkdownIt
    runs = shipped()
    runs["two_phases"]["machine"]["cpu"] = "<b>x</b> [link](http://e) *bold* a|b"
    html = MarkdownIt("commonmark").enable("table").render(report.markdown(runs, [], TOLD))
    assert "h**3 is about 2x slower" in html and "<strong>3" not in html  # the claims' own
    assert "&lt;b&gt;x&lt;/b&gt; [link](http://e) *bold* a|b" in html and "<a href" not in html


def test_progress_says_the_row_the_time_so_far_and_what_is_left(monkeypatch):
    from harness import terminal
    terminal.steps([1.0, 1.0, 2.0])  # the rows' expected shares: their limits
    start = terminal._steps["start"]
    assert terminal.where(start + 5) == "row 1 of 3, 0:05 in: "  # no estimate before a row ends
    terminal.step()
    assert terminal.where(start + 30) == "row 2 of 3, 0:30 in, about 1:30 left: "
    terminal.step()
    terminal.step()
    assert terminal.where(start + 90) == ""  # the rows are done: the checks need no count
    terminal.steps(())


def test_progress_reaches_a_log_a_line_every_few_seconds(tmp_path):
    """Where stderr is a file, progress is a plain line: the first at once, then at most every
    LOG_EVERY_S seconds, each a whole line (no terminal's carriage returns)."""
    log = tmp_path / "err.log"
    with open(log, "w") as err:
        done = subprocess.run([sys.executable, os.path.join(ROOT, "cube_bug.py"), "--quick",
                               "--no-save"], stdout=subprocess.DEVNULL, stderr=err, timeout=120)
    assert done.returncode == 0
    lines = log.read_text().splitlines()
    assert lines[0].startswith("0:00 in: warming up") and "\r" not in log.read_text()


def test_progress_in_a_log_is_throttled_and_an_empty_line_is_never_written(monkeypatch, capsys):
    from harness import terminal
    clock = iter([100.0, 101.0, 104.0, 106.0, 111.5])
    monkeypatch.setattr(terminal.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(terminal, "_logged", {"at": None})
    for message in ("one", "", "two", "three", "four", "five"):
        terminal.progress(message)  # (capsys's stderr is no terminal)
    assert capsys.readouterr().err.splitlines() == ["one", "four", "five"]


def github(text):
    """The report as GitHub renders it (its own parser, cmark-gfm): [(kind, text, cells)] of
    each heading, paragraph, image and table, in order; a table's cells as rows of text."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from html.parser import HTMLParser
    html = cmarkgfm.github_flavored_markdown_to_html(text)

    class Blocks(HTMLParser):
        def __init__(self):
            super().__init__()
            self.out, self.text, self.rows, self.open = [], "", None, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.rows = []
            elif tag == "tr" and self.rows is not None:
                self.rows.append([])
            elif tag in ("td", "th", "h1", "h2", "h3", "h4", "p", "em"):
                self.open, self.text = tag, ""
            elif tag == "img":
                self.out.append(("img", dict(attrs)["src"], None))

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.rows is not None:
                self.rows[-1].append(self.text)
            elif tag == "table":
                self.out.append(("table", "", self.rows))
                self.rows = None
            elif tag in ("h1", "h2", "h3", "h4", "p", "em") and self.rows is None:
                self.out.append((tag, self.text, None))

        def handle_data(self, data):
            self.text += data
    blocks = Blocks()
    blocks.feed(html)
    return blocks.out


def test_a_full_runs_report_as_github_shows_it(quick_run):
    _, quick, _ = quick_run
    runs = {**shipped(), "two_phases": older.upgrade({**quick, "quick": False})}
    names = ["roofline.png", "dial.png", "decode.png", "depth.png"]
    runs["two_phases"]["pictures"] = names
    seen = github(report.markdown(runs, names, TOLD))
    tables = [i for i, b in enumerate(seen) if b[0] == "table"]
    first = seen[tables[0]][2]
    assert first[0][0] == "verdict" and not any(b[0] == "h3" for b in seen[:tables[0]])
    assert sum(len(b[1]) for b in seen[:tables[0]]) < 1200  # the verdicts on the first screen
    for row in first[1:]:  # every claim's cell says something, its verdict marked
        assert all(c.strip() for c in row) and "(no figure)" not in row
        assert row[0].split("\u00a0")[0] in ("✅", "❌", "❓", "➖")
    for i in tables:  # no table wider than GitHub's column
        rows = seen[i][2]
        width = sum(gfm.widths(rows[0], rows[1:]))
        assert width <= gfm.PAGE or rows[0][0] == "verdict", rows[0]  # claims wrap their words
    for at, (kind, src, _) in enumerate(seen):  # each picture under its own table, captioned
        if kind == "img":
            heading = next(b[1] for b in reversed(seen[:at]) if b[0] == "h3")
            sheet = TOLD.drawing(src).under
            assert heading == sheets(runs["two_phases"])[sheet]["title"], src
            caption = next(b for b in seen[at + 1:] if b[0] in ("em", "h3", "table"))
            assert caption[0] == "em" and caption[1].startswith(TOLD.drawing(src).title), src
    headers = [c for i in tables for c in seen[i][2][0]]
    assert "h*h*h ms" in headers and "h**3 ms" in headers  # the cube's headers as written
    cells = [c for i in tables for r in seen[i][2][1:] for c in r]
    assert "4891" not in " ".join(cells)


# ---- what a newcomer reads first: headings, the verdicts, the captions (GitHub's own parser)


def test_headings_are_text_and_say_a_thing_once():
    cmarkgfm = pytest.importorskip("cmarkgfm")
    runs = shipped()
    text = report.markdown(runs, [], TOLD)
    html = cmarkgfm.github_flavored_markdown_to_html(text)
    assert "<h2>The slow road: h**3 against h*h*h</h2>" in html  # no italic middle h
    seen = github(text)
    heads = [(k, t) for k, t, _ in seen if k in ("h2", "h3")]
    for (k, t), (k2, t2) in zip(heads, heads[1:]):
        assert not (k == "h2" and k2 == "h3" and report.repeats(t2, t)), (t, t2)
    tables = [i for i, b in enumerate(seen) if b[0] == "table"]
    for i, j in zip(tables, tables[1:]):  # a table split for the page's width: its heading
        between = [b for b in seen[i + 1:j] if b[0] in ("h2", "h3", "h4", "p", "em", "img")]
        assert between, seen[j][2][0]


def test_each_claims_row_says_what_it_was_judged_by_on_one_line():
    seen = github(report.markdown(shipped(), [], TOLD))
    claims = next(b[2] for b in seen if b[0] == "table" and b[2][0][0] == "verdict")
    header = claims[0]
    assert header[:5] == ["verdict", "the post says", "the post", "here", "judged by"]
    for row in claims[1:]:
        assert " " not in row[0]  # non-breaking spaces: the verdict on one line
        assert row[4].strip(), row  # the figure, its interval and the edge, or the reason
    under = next(r for r in claims if r[1] == "One typing user uses under 4% of the workbench")
    assert "edge 10.0%" in under[4]  # the rule it holds by, beside the post's 4%
    said = next(t for k, t, _ in seen if k == "p" and t.endswith("."))
    verdicts = [r[0].split("\u00a0", 1)[1] for r in claims[1:]]
    findings = [v for r, v in zip(claims[1:], verdicts) if not any(
        c.says == r[1] and c.basis != "timings" for c in TOLD.claims)]
    assert said.startswith(f"{findings.count('holds')} of {len(findings)} findings hold")
    assert f"{len(verdicts) - len(findings)} more follow from the accounting" in said


def test_a_caption_says_what_its_picture_shows():
    from harness.experiments import collision, depth
    from conftest import made
    from harness.keeping.records import col
    keys = [col("users", "users", "users", "d", key=True), col("notes", "notes", "", "d",
                                                                   key=True)]
    rising = made("depth", [*keys, col("step", "step", "ms", ".1f")],
                  [{"users": 1, "notes": n, "step": s} for n, s in ((0, 21), (256, 22))]
                  + [{"users": 16, "notes": n, "step": s} for n, s in ((0, 40), (256, 60))])
    assert "each line rises" in depth.look(rising)
    hooked = made("depth", [*keys, col("step", "step", "ms", ".1f")],
                  [{"users": 1, "notes": n, "step": s}
                   for n, s in ((0, 21), (128, 16), (256, 23), (512, 20))])
    words = depth.look(hooked)
    assert "each line rises" not in words and "1 user: 21, 16, 23, 20 ms" in words
    dial = made("dial", [col("chunk", "chunk", "tokens", "d", key=True),
                         col("first word", "TTFT", "ms", ".0f"),
                         col("worst gap", "worst gap", "ms", ".0f")],
                [{"chunk": c, "first word": f, "worst gap": g}
                 for c, f, g in ((32, 2700, 90), (128, 1000, 170), (1024, 1100, 890))])
    words = collision.look(dial)
    assert "soonest at chunks of 128 (1,000 ms), not at the biggest" in words


@pytest.mark.skipif(not importlib.util.find_spec("matplotlib"), reason="no matplotlib")
def test_a_log_axis_reads_as_plain_numbers():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from harness.showing import pictures
    points = [["prefill", "1 token", 0.5, 5e9], ["prefill", "256 tokens", 60.0, 200e9]]
    fig = pictures.figure(plt, pictures.roofline_figure,
                          {"bytes_per_s": 20e9, "flops_per_s": 140e9, "points": points}, "test")
    try:
        fig.canvas.draw()
        ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()
                 + fig.axes[0].get_yticklabels() if t.get_text()]
        assert ticks and not any("^" in t or "e+" in t for t in ticks), ticks
    finally:
        plt.close(fig)


# ---- figures in words


def test_text_figures_go_to_a_column_of_their_own():
    from harness.keeping import exports
    rows = exports.tidy("two_phases", {}, [
        {"experiment": "check", "keys": {"row": "1 user"}, "figure": "bound by", "unit": "",
         "statistic": "computed", "value": "forklift", "settings": {}},
        {"experiment": "check", "keys": {"row": "1 user"}, "figure": "x limit", "unit": "x",
         "statistic": "middle", "value": 1.5, "settings": {}}])
    assert [(r["value"], r["text"]) for r in rows] == [(None, "forklift"), (1.5, None)]


def test_a_speed_that_moved_between_the_scripts_is_said_beside_the_speeds_table():
    """machine_speed's forklift and two_phases' rounds' apart beyond both their intervals: one
    line says both, with their intervals, and that each script is held to its own; a speed
    measured alike by both says nothing."""
    def run(experiment, forklift, workbench):
        made = []
        for figure, v in (("memory speed", forklift), ("math speed", workbench)):
            samples = [v * (1 + 0.01 * i) for i in (-2, -1, 0, 1, 2, 0)]
            made.append({"experiment": experiment, "keys": {}, "figure": figure, "unit": "",
                         "statistic": "median", "value": v, "samples": samples,
                         "rounds": list(range(6)), "processes": [0, 0, 1, 1, 2, 2],
                         "shares": None, "predicted": False})
        return {"records": made}
    runs = {"machine_speed": run("machine_speed", 11.1, 119.0),
            "two_phases": run("speeds", 30.2, 121.0)}
    (line, _) = report.moved(runs)
    assert line.startswith("> **The forklift moved between the scripts:** 11.1 GB/s (")
    assert "30.2 (" in line and "2.72x apart" in line and "held to its own run's" in line
    assert report.moved({**runs, "two_phases": run("speeds", 11.2, 120.0)}) == []
