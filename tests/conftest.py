"""Tests import the scripts from the repository root, and run them as a user would."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def script(name, *flags, env=None, cwd=ROOT, timeout=300):
    """`python <name> <flags>` from the repository root: -> the finished process."""
    return subprocess.run([sys.executable, os.path.join(ROOT, name), *flags], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


def python(code, env=None):
    """`python -c <code>` from the repository root: -> the finished process."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


def started(name, *flags):
    """`python <name> <flags>` started in the background, its output piped: -> the process."""
    return subprocess.Popen([sys.executable, os.path.join(ROOT, name), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def one_line(r, code, *words):
    """The process said one line on stderr, with these words, and no traceback."""
    assert r.returncode == code, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def wait_until(condition, seconds=60, what="the condition"):
    """Poll condition() until it holds; fail the test if it does not within `seconds`."""
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, f"waited {seconds} s for {what}"
        time.sleep(0.02)


def quick_two_phases(tmp_path, *flags):
    """Run `two_phases.py --quick` as a user would; -> (the finished process, its saved JSON)."""
    r = script("two_phases.py", "--quick", *flags, "--out", str(tmp_path), "--label", "box")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(tmp_path, "box", "two_phases.quick.json")) as f:
        return r, json.load(f)
