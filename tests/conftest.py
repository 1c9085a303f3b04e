"""Tests import the scripts from the repository root."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def quick_two_phases(tmp_path, *flags):
    """Run `two_phases.py --quick` as a user would; -> (the finished process, its saved JSON)."""
    import json
    import subprocess
    run = [sys.executable, os.path.join(ROOT, "two_phases.py"), "--quick", *flags,
           "--out", str(tmp_path), "--label", "box"]
    r = subprocess.run(run, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(tmp_path, "box", "two_phases.quick.json")) as f:
        return r, json.load(f)
