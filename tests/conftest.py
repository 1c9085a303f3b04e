"""Tests import the scripts from the repository root, and run them as a user would. Each test
process, and every script it starts, keeps the BLAS to one thread: the suite runs two test
processes on two cores, and each one's BLAS threads would spin on the other's core."""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import time
import types

import pytest
import threadpoolctl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ["OPENBLAS_NUM_THREADS"] = "1"  # the scripts the tests start (and NumPy, where it
threadpoolctl.threadpool_limits(1, user_api="blas")  # is not loaded yet); where it is: now


NUMBA = importlib.util.find_spec("numba") is not None
COMPILED = "SUITE_TESTS_KERNELS_COMPILED"  # the file the one compile of the kernels makes as
#   it ends (pytest_configure), shared by every test process and run through the environment


def pytest_configure(config):
    """Numba compiles the suite's kernels once, in the background, as the tests begin: in a
    fresh checkout each process that needs them would otherwise compile them itself (about 20 s
    each, on the cores the other tests need) until one had written Numba's cache. The tests
    that need the kernels wait for it (compiled_kernels()); the others go on meanwhile."""
    if hasattr(config, "workerinput"):  # a test process: the first process started it, and
        os.nice(5)  # it runs first wherever both want a core: the tests that wait for it
        return patch_kernels_to_wait()  # wait less, and the cores idle less meanwhile
    compile_the_suite()
    if not NUMBA or os.environ.get(COMPILED):
        return
    import tempfile
    os.environ[COMPILED] = done = os.path.join(tempfile.mkdtemp(prefix="kernels-"), "done")
    subprocess.Popen([sys.executable, "-c", "import sys\ntry:\n"  # the table products
                      "    from engine import compiled; compiled.available('tables')\n"
                      "finally:\n    open(sys.argv[1] + '.tables', 'w').close()\ntry:\n"
                      "    compiled.available()\n"  # (all a workbench needs), then the rest
                      "finally:\n    open(sys.argv[1], 'w').close()", done], cwd=ROOT,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    patch_kernels_to_wait()


def compile_the_suite():
    """The suite's modules compiled to bytecode once, before the test processes start: where
    PYTHONDONTWRITEBYTECODE is set (as on this project's machines) Python never keeps what it
    compiles, and each of the hundred-odd processes the tests start compiled the whole suite
    from source again (0.2 s of its 0.6 s start). Python reads bytecode even so; a module
    changed since is compiled afresh, as ever."""
    import compileall
    with contextlib.redirect_stdout(io.StringIO()):
        for folder in ("harness", "engine"):
            compileall.compile_dir(os.path.join(ROOT, folder), quiet=2)
        for name in ("model.py", "accounting.py", "two_phases.py", "machine_speed.py",
                     "cube_bug.py", "compare.py"):
            compileall.compile_file(os.path.join(ROOT, name), quiet=2)


def loads_kernels(name, flags):
    """Which of the compiled kernels `python <name> <flags>` loads: "all" for a run of
    two_phases.py that measures, where they are not switched off (--quick's default: off);
    "tables" for a full run of machine_speed.py (the tiles' workbench); else None."""
    asked = flags[flags.index("--compiled") + 1] if "--compiled" in flags else (
        "off" if "--quick" in flags else "auto")
    if "--help" in flags or "-h" in flags or asked != "auto":
        return None
    return {"two_phases.py": "all" if "--predict" not in flags else None,
            "machine_speed.py": "tables"}.get(name)


def compiled_kernels(part="all"):
    """Wait for the kernels' one compile (pytest_configure), where it runs: of part, "all" or
    "tables" (the table products' alone, which it compiles first: see compiled.why_not())."""
    done = os.environ.get(COMPILED)
    if done:
        wait_until(lambda: os.path.exists(done) or (
            part == "tables" and os.path.exists(done + ".tables")), 300, "the kernels' one compile")


def patch_kernels_to_wait():
    """This process loads the kernels from Numba's cache once their one compile has ended."""
    if os.environ.get(COMPILED):
        from engine import compiled
        loaded = compiled.loaded
        compiled.loaded = lambda part="all": compiled_kernels(part) or loaded(part)


@pytest.fixture
def small_is_tiny(monkeypatch):
    """GPT-2 small's name on the tiny model's shape: a run in this process measures the same
    rows, in milliseconds."""
    import dataclasses
    import model
    monkeypatch.setitem(model.SIZES, "small", dataclasses.replace(model.TINY, name="small"))


@pytest.fixture
def kernels():
    """The compiled kernels, loaded: the test is skipped where they cannot run here."""
    from engine import compiled
    if not compiled.available():
        pytest.skip("Numba does not run the kernels here")
    return compiled


def script(name, *flags, env=None, cwd=ROOT, timeout=300):
    """`python <name> <flags>` from the repository root: -> the finished process."""
    part = loads_kernels(name, flags)
    if part:
        compiled_kernels(part)
    return subprocess.run([sys.executable, os.path.join(ROOT, name), *flags], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


def compared(*argv):
    """compare.py with these arguments, in this process, as fast as a call: -> its exit code,
    stdout and stderr, as a finished process has them."""
    import compare
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = compare.main(list(argv))
        except SystemExit as e:  # argparse's own exit, as for a bad flag
            code = e.code
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def in_process(main, *argv):
    """A script's main (or parse_args) with these flags, in this process, as fast as a call: ->
    its exit code, stdout and stderr, as a finished process has them (for flags refused before
    anything runs, where a process's start would be most of the test's time)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
            code = 0 if not isinstance(code, int) else code  # parse_args: its namespace
        except SystemExit as e:
            code = e.code
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def python(code, env=None):
    """`python -c <code>` from the repository root: -> the finished process."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


def started(name, *flags):
    """`python <name> <flags>` started in the background, its output piped: -> the process."""
    part = loads_kernels(name, flags)
    if part:
        compiled_kernels(part)
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


QUICK_RUN = ("two_phases.py", "--quick", "--runs", "2", "--plot", "--label", "box")


@pytest.fixture(scope="session", autouse=True)
def own_temp_folder(tmp_path_factory):
    """This test process's own temp folder, for it and every run it starts: the machine-wide
    mark a run holds (another run of this suite measuring) lives there, so that the tests
    running beside each other (pytest -n) do not see each other's runs as such."""
    import tempfile
    folder = tmp_path_factory.mktemp("temp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def quick_run_started(own_temp_folder, tmp_path_factory, request):
    """The quick run of two_phases.py the tests share, started once in the background as the
    tests begin, where a test needs it, however many processes run them (pytest -n): the tests
    go on meanwhile (a test that asks for it by name only as it runs starts it then, through
    quick_run). -> the folder where it saves, and says how it ended"""
    if not any("quick_run" in item.fixturenames for item in request.session.items):
        return None
    return start_quick_run(tmp_path_factory)


def start_quick_run(tmp_path_factory):
    import fcntl
    shared = tmp_path_factory.getbasetemp()  # this session's: under pytest -n, a process's own,
    if os.environ.get("PYTEST_XDIST_WORKER"):  # within the session's, shared by every process
        shared = shared.parent
    with open(shared / "quick.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "quick").exists():
            (shared / "quick" / "box").mkdir(parents=True)
            (shared / "quick" / "box" / "roofline.png").write_bytes(b"the full run's picture")
            command = [sys.executable, os.path.join(ROOT, QUICK_RUN[0]), *QUICK_RUN[1:],
                       "--out", str(shared / "quick")]
            (shared / "quick-temp").mkdir()  # its own mark: no test's run sees it as busy
            run = '"$@" > "$0/stdout" 2> "$0/stderr"; echo $? > "$0/rc"'
            subprocess.Popen(["sh", "-c", run,
                              str(shared), *command], cwd=ROOT, start_new_session=True,
                             env=dict(os.environ, TMPDIR=str(shared / "quick-temp")))
    return shared


@pytest.fixture(scope="session")
def quick_run(quick_run_started, tmp_path_factory):
    """One quick run of two_phases.py as a user runs it, every experiment, --runs 2, the
    pictures drawn, into a folder where a full run's roofline picture already is: shared by the
    tests that read what such a run prints and saves. -> (the process, its saved JSON, the
    folder)"""
    shared = quick_run_started or start_quick_run(tmp_path_factory)
    wait_until(lambda: (shared / "rc").exists() and (shared / "rc").read_text().strip(), 300,
               "the shared quick run")
    r = types.SimpleNamespace(returncode=int((shared / "rc").read_text()),
                              stdout=(shared / "stdout").read_text(),
                              stderr=(shared / "stderr").read_text())
    assert r.returncode == 0, r.stderr
    with open(shared / "quick" / "box" / "two_phases.quick.json") as f:
        return r, json.load(f), shared / "quick" / "box"


def sheets(data):
    """{name: sheet} of a result's sheets as saved (schema 8's list, each naming itself; a run
    outside a sweep names each once), or of a shipped older one's mapping."""
    found = data["sheets"]
    return {t["name"]: t for t in found} if isinstance(found, list) else found


def made(name, columns, rows, settings=None, **layout):
    """The records of hand-made rows of figures, as an experiment of this layout makes them."""
    from harness.keeping import records
    return records.make(records.Layout(name, columns, **layout), rows, settings or {})


def sheet_of(name, columns, rows, ran=None, layout=None, **kw):
    """A printed sheet of hand-made rows, rendered from their records (ran: their settings)."""
    from harness.keeping import records
    from harness.showing import printers
    layout = records.Layout(name, columns, **(layout or {}))
    return printers.Sheet(layout, tuple(records.make(layout, rows, ran or {})), **kw)


def reported(folder):
    """The folder's report made anew from its saved full runs, as a run's save makes it."""
    from harness.keeping import results
    from harness.showing import report
    from harness.experiments.registry import TOLD
    runs = report.saved_runs(folder)
    results.replace_together(folder, {report.NAME: report.markdown(runs, os.listdir(folder),
                                                                   TOLD)})


def pytest_collection_modifyitems(items):
    """The tests that need the compiled kernels go after the others, and those that read the
    shared quick run last, so that the other tests keep every process busy while the kernels
    compile and the quick run runs, in the background."""
    def waits(item):
        params = getattr(getattr(item, "callspec", None), "params", {})
        compiled = "compiled" in params.values() or "kernels" in item.fixturenames \
            or item.get_closest_marker("kernels") is not None
        return any(f in item.fixturenames for f in ("quick_run", "small_run")), compiled
    items.sort(key=waits)


# ---- the shipped machine's results, and files made from them

EPYC = SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")  # the shipped machine
ESC = "\x1b[31mred\x1b]0;title\x07"  # a colour and a window title: what a file must not send


def reference(name):
    with open(os.path.join(EPYC, name + ".json")) as f:
        return json.load(f)


def planted_copy(folder, name, change):
    """A copy of the shipped machine with one file changed: -> the folder."""
    shutil.copytree(EPYC, folder)
    data = reference(name)
    change(data)
    (folder / f"{name}.json").write_text(json.dumps(data))
    return folder


def silent(fn, *args):
    """fn(*args) with stdout and stderr caught: -> (its value or exit code, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            value = fn(*args)
        except SystemExit as e:
            value = e.code
    return value, out.getvalue(), err.getvalue()
