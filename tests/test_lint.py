"""The code keeps the house's habits: the linter's rules (pyproject.toml's [tool.ruff]: unused and
undefined names, pycodestyle's errors, lines of at most 100 characters) hold in every file."""
import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -r requirements-test.txt)")
def test_the_linter_finds_nothing():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
