"""The shipped examples a newcomer opens are what this version makes of their own records: each
report.md made again from its folder's saved runs is the one shipped, and the README quotes
their printed output, line for line."""
import os
import re

import pytest

from conftest import ROOT
from harness.experiments.registry import TOLD
from harness.keeping import results
from harness.showing import report

REFERENCES = os.path.join(ROOT, "references")
EXAMPLES = sorted(d for d in os.listdir(REFERENCES)
                  if os.path.isfile(os.path.join(REFERENCES, d, report.NAME)))
QUOTED = "amd-epyc-2c"  # the example the README quotes


def remade(folder):
    """The folder's report as this version makes it from the folder's saved runs."""
    return report.markdown(report.saved_runs(folder), os.listdir(folder), TOLD)


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_shipped_report_is_what_this_version_makes_of_its_records(example):
    folder = os.path.join(REFERENCES, example)
    with open(os.path.join(folder, report.NAME), encoding="utf-8") as f:
        shipped = f.read()
    assert shipped == remade(folder), (
        f"references/{example}/report.md is not what this version makes of its records: make "
        f"it again (report.markdown of its saved runs)")
    assert not results.edited(os.path.join(folder, report.NAME))


def test_an_edited_example_is_caught(tmp_path):
    import shutil
    folder = tmp_path / QUOTED
    shutil.copytree(os.path.join(REFERENCES, QUOTED), folder)
    text = (folder / report.NAME).read_text(encoding="utf-8")
    (folder / report.NAME).write_text(text.replace("holds", "holds, surely", 1),
                                      encoding="utf-8")
    assert (folder / report.NAME).read_text(encoding="utf-8") != remade(str(folder))
    assert results.edited(str(folder / report.NAME))


def test_the_readme_quotes_the_shipped_examples_output():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    printed = ""
    for name in ("machine_speed.txt", "two_phases.txt", "cube_bug.txt"):
        with open(os.path.join(REFERENCES, QUOTED, name), encoding="utf-8") as f:
            printed += f.read()
    blocks = re.findall(r"```text\n(.*?)```", readme, flags=re.S)
    assert blocks
    for block in blocks:
        for line in block.splitlines():
            assert line in printed, line
