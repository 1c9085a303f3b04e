"""An experiment is one module of harness/experiments/ and nothing else: dropped into a copy of
the suite with no other file changed, a toy experiment is offered by two_phases.py (its name and
its flag in --help), runs with --quick, is saved, and its table is in the report and in
compare.py's."""
import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT, compared as compare_here
from harness.experiments import registry

TOY = '''"""A toy experiment: one user's question of --toy-tokens tokens read in one trip."""
from harness import flags
from harness.experiments import SEED
from harness.keeping.records import Layout, col, ms
from harness.measuring import bench as b
from harness.predicting.plans import Experiment, Row, trial_name
from harness.showing.printers import sheet

NAME, PLACE = "toy", 99


def add_flags(g):
    g.add_argument("--toy-tokens", type=flags.whole(1, 1024), default=8, metavar="T",
                   help="toy: the question's tokens")


def plan(args):
    return [Row({"tokens": args.toy_tokens}, f"{args.toy_tokens} tokens",
                [[(0, args.toy_tokens)]])]


def trials(bench, args, rows):
    for row in rows:
        (t,) = row.key
        yield b.trial(bench, trial_name(NAME, row), b.tokens(bench.cfg, t, SEED, bench.on),
                      [(b.book(bench, 1, t), t)], recorded=False)


def figures(cfg, args, outcomes, roofs):
    return [(TABLE, [{"tokens": r.row.key[0], "time": ms(r.figures["time"])} for r in outcomes])]


def sheets(found, cfg, args):
    return [sheet(TABLE, found)]


TABLE = Layout("toy", [col("tokens", "tokens", "tokens", "d", key=True),
                       col("time", "time ms", "ms", ".2f", compared=True)],
               timed=("time",), title="A toy: one question read")
EXPERIMENT = Experiment(plan, trials, figures, sheets, checked=False, name=NAME, flags=add_flags,
                        quick={"toy_tokens": 4},
                        lengths=lambda args: [("--toy-tokens", args.toy_tokens)],
                        riders=lambda args: {"--toy-tokens": 1})
'''
KEPT = ("harness", "engine", "models", "references")  # the suite's folders a run reads


def copy_with_a_toy(tmp_path):
    tree = tmp_path / "suite"
    for name in os.listdir(ROOT):
        source = os.path.join(ROOT, name)
        if name in KEPT:
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif name.endswith((".py", ".json", ".txt", ".toml")) and os.path.isfile(source):
            tree.mkdir(exist_ok=True)
            shutil.copy(source, tree / name)
    (tree / "harness" / "experiments" / "toy.py").write_text(TOY)
    return tree


def run(tree, *argv):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, *argv], cwd=tree, capture_output=True, text=True,
                          timeout=300, env=env)


def test_the_registry_finds_every_experiment_in_the_posts_order_and_its_claims():
    assert list(registry.EXPERIMENTS) == ["prefill", "decode", "collision", "depth", "wide",
                                          "generate"]
    assert all(name == e.name for name, e in registry.EXPERIMENTS.items())
    assert [m.PLACE for m in registry.MODULES] == sorted(m.PLACE for m in registry.MODULES)
    assert len({c.says for c in registry.CLAIMS}) == len(registry.CLAIMS)  # each claim once
    assert [d.name for d in registry.DRAWINGS] == ["roofline.png", "decode.png", "dial.png",
                                                   "depth.png", "grid.png"]


def test_a_new_experiment_is_one_module(tmp_path):
    tree, out = copy_with_a_toy(tmp_path), tmp_path / "out"
    helped = run(tree, "two_phases.py", "--help")
    assert helped.returncode == 0 and "--toy-tokens T" in helped.stdout
    assert "generate, toy" in " ".join(helped.stdout.split())  # offered in --experiments
    quick = run(tree, "two_phases.py", "--quick", "--experiments", "toy", "--forklift", "50",
                "--workbench", "500", "--attention", "einsum", "--blocks", "off", "--out",
                str(out), "--label", "q")
    assert quick.returncode == 0, quick.stderr
    assert "A toy: one question read\ntokens  time ms\n     4" in quick.stdout
    with open(out / "q" / "two_phases.quick.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert {r["keys"]["tokens"] for r in saved["records"] if r["experiment"] == "toy"} == {4}
    full = run(tree, "two_phases.py", "--experiments", "toy", "--toy-tokens", "3", "--processes",
               "1", "--time-budget", "1", "--forklift", "50", "--workbench", "500", "--compiled",
               "off", "--attention", "einsum", "--blocks", "off", "--no-plot", "--out", str(out),
               "--label", "a")  # a full run: its report
    assert full.returncode == 0, full.stderr
    report = (out / "a" / "report.md").read_text(encoding="utf-8")
    assert "### A toy: one question read" in report and "| 3 |" in report
    compared = compare_here("post", str(out / "a"))  # (compare reads records: no module)
    assert compared.returncode == 0, compared.stderr
    assert "A toy: one question read" in compared.stdout
    assert "tokens 3: time ms" in compared.stdout
