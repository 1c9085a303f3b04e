"""The worker processes that measure the rounds, as a sixth hostile probe found them (issue 54,
each test under its number there): a worker killed, a worker printing on its stdout, a worker
whose run was killed, Ctrl-C while workers start and measure, a job made by hand. Each starts
as few and as small processes as it can; the ones that watch processes come and go read
Linux's /proc."""
import io
import json
import os
import signal
import subprocess
import sys

import pytest

from harness import stopping
from harness.measuring import processes, worker
from conftest import ROOT, in_process, one_line, wait_until

LINUX = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads Linux's /proc")
CUBE = [os.path.join(ROOT, "cube_bug.py"), "--no-in-model", "--tokens", "4"]  # a tiny worker
JOB = {"argv": CUBE[1:], "rounds": [0], "threads": 1, "again": 0, "repeat": {},
       "bridge_s": 0.0}  # one round, as a smoke run's, the run's words in it


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # gone meanwhile
        return b""


def workers_of(pid):
    """The worker processes a process has started and still has, oldest first (Linux)."""
    children = read(f"/proc/{pid}/task/{pid}/children").split()
    return sorted(int(c) for c in children if b"--worker" in read(f"/proc/{int(c)}/cmdline"))


def past_its_first_lines(pid):
    """Whether a worker has run its script's first lines (stopping.stop_quietly), and is now
    loading the rest: NumPy is in its memory."""
    return b"numpy" in read(f"/proc/{pid}/maps")


def alive(pid):
    stat = read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


# ---- 3. a worker killed once rows were measured throws nothing away


def killed_from(first, tmp_path, monkeypatch):
    """machine_speed.main in this process, its workers in it too (as fast as a call), until the
    `first`-th: that one and each after it killed by SIGKILL as it starts, as the OOM killer
    does. -> the finished run"""
    import machine_speed
    real, spawn = machine_speed.measure_here, processes.spawn
    (tmp_path / "die.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")

    def worker(script, job):
        if job.process >= first:
            return spawn(str(tmp_path / "die.py"), job)  # a real process, really killed
        return real(machine_speed.parse_args(list(job.argv)).replace(threads=job.threads), job)
    monkeypatch.setattr(processes, "spawn", worker)
    return in_process(machine_speed.main, "--size", "300", "--matmul", "64", "--runs", "3",
                      "--time-budget", "5", "--out", str(tmp_path), "--label", "box")


def test_3_a_worker_killed_after_the_first_process_keeps_its_rounds_marked(tmp_path,
                                                                            monkeypatch):
    r = killed_from(1, tmp_path, monkeypatch)
    died = "a worker process died (exit -9, killed by signal SIGKILL)"
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    said = [line for line in r.stderr.splitlines() if died in line]
    assert said == [f"{died}: the processes measured before are saved, marked"], r.stderr
    assert "nothing saved" not in r.stderr and "saved " in r.stderr
    saved = json.loads((tmp_path / "box" / "machine_speed.json").read_text())
    assert saved["stopped"] == died  # the mark, as a stop's
    assert f"STOPPED: {died}" in (tmp_path / "box" / "machine_speed.txt").read_text()


def test_3_a_worker_killed_before_every_row_was_measured_saves_nothing(tmp_path, monkeypatch):
    r = killed_from(0, tmp_path, monkeypatch)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines()[-1] == ("error: a worker process died (exit -9, killed by "
                                         "signal SIGKILL): nothing saved, earlier results "
                                         "untouched")
    assert not (tmp_path / "box").exists()


# ---- 5. what a worker prints on its stdout is no part of its result


def test_5_stray_lines_on_a_workers_stdout_go_to_stderr(tmp_path, monkeypatch, capsys):
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nprint('a line from sitecustomize')\n"
        "sys.stdout.write('and one without its end'); sys.stdout.flush()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # every Python the run starts prints
    result = processes.spawn(CUBE[0], worker.Job(**JOB))
    assert len(result["visits"]) == 6  # each case's two ways ...
    assert all(len(v) == 1 for v in result["visits"].values())  # ... in one round
    assert capsys.readouterr().err.splitlines()[-2:] == ["a line from sitecustomize",
                                                         "and one without its end"]


# ---- 6. a worker ends with its run, and never says a broken pipe


@LINUX
def test_6_a_worker_ends_when_its_run_is_killed():
    job = {**JOB, "rounds": list(range(1000))}  # minutes of rounds
    code = (f"from harness.measuring import processes, worker\n"
            f"processes.spawn({CUBE[0]!r}, worker.Job(**{job}))\n")
    run = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    worker = []

    def loading():
        worker[:] = worker or workers_of(run.pid)
        return bool(worker) and past_its_first_lines(worker[0])
    try:
        wait_until(loading, 60, "the worker")
        run.kill()  # as the OOM killer kills the run
        _, err = run.communicate(timeout=30)  # its stderr ends as the worker's does
        wait_until(lambda: not alive(worker[0]), 10, "the worker to end")
        assert "Traceback" not in err and "BrokenPipe" not in err, err
    finally:
        if worker and alive(worker[0]):
            os.kill(worker[0], signal.SIGKILL)


def test_6_a_worker_sees_its_run_gone_between_visits_where_the_kernel_does_not_say():
    code = ("import os, sys, time\nfrom harness import stopping\n"
            "ready, told = os.pipe()\n"
            "if os.fork() == 0:  # the worker: its parent, the run, exits once it is set\n"
            "    sys.platform = 'elsewhere'  # no prctl: its visits alone see the run gone\n"
            "    stopping.worker()\n"
            "    os.write(told, b'set')\n"
            "    for _ in range(3000):\n"
            "        stopping.check()\n"
            "        time.sleep(0.01)\n"
            "    print('still measuring, 30 s after its run ended', flush=True)\n"
            "else:\n"
            "    os.read(ready, 3)\n"
            "    os._exit(0)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)  # its stdout ends as the worker's does
    assert r.stdout == "" and r.stderr == ""


def test_6_a_worker_whose_result_cannot_be_read_ends_without_a_traceback():
    worker = subprocess.Popen([sys.executable, CUBE[0], "--worker"], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    worker.stdout.close()  # its run is gone: nothing reads its result
    _, err = worker.communicate(json.dumps(JOB), timeout=60)
    said = [line for line in err.splitlines() if not line.startswith(("warming up", "round "))]
    assert worker.returncode == 1 and said == [], err  # its progress, and nothing more


# ---- 7. Ctrl-C while workers start or measure: the run alone speaks, once


@LINUX
@pytest.mark.parametrize("nth,says", [
    (1, "interrupted: nothing saved, earlier results untouched"),
    (3, "interrupted while adding processes: the processes measured before are saved, marked")])
def test_7_ctrl_c_as_a_worker_starts_is_one_line(tmp_path, nth, says):
    run = subprocess.Popen([sys.executable, *CUBE, "--runs", "2", "--processes", "2",
                            "--time-budget", "60", "--out", str(tmp_path), "--label", "box"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)  # its own process group, as a terminal's job
    seen = []

    def nth_worker_loading():
        seen.extend(w for w in workers_of(run.pid) if w not in seen)
        return len(seen) >= nth and past_its_first_lines(seen[nth - 1])
    try:
        wait_until(nth_worker_loading, 60, f"worker {nth}")
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130 and "Traceback" not in err, err
    assert [line for line in err.splitlines() if "interrupted" in line] == [says], err
    if nth == 1:
        assert not (tmp_path / "box").exists()
    else:
        assert "nothing saved" not in err and "saved " in err
        assert json.loads((tmp_path / "box" / "cube_bug.json").read_text())["stopped"] == 2


@pytest.mark.kernels  # the tiles' workbench
def test_7_a_sweep_stopped_while_adding_processes_ends_there_and_says_so(tmp_path, monkeypatch):
    import machine_speed
    real, asked = machine_speed.measure_here, []

    def spawn(script, job):  # a worker in this process, as fast as a call
        asked.append(job.threads)
        if job.process >= 3:  # the processes the budget added: a Ctrl-C arrives
            raise stopping.Stopped(signal.SIGINT)
        args = machine_speed.parse_args(list(job.argv))
        return real(args.replace(threads=job.threads), job)
    monkeypatch.setattr(processes, "spawn", spawn)
    r = in_process(machine_speed.main, "--size", "300", "--matmul", "64", "--runs", "3",
                   "--threads", "1", "2", "--time-budget", "5", "--out", str(tmp_path),
                   "--label", "box")
    assert r.returncode == 130 and "interrupted while adding processes" in r.stderr, r.stderr
    assert set(asked) == {1}  # the next thread count is not measured after a stop
    saved = json.loads((tmp_path / "box" / "machine_speed.sweep.json").read_text())
    assert [b["threads"] for b in saved["blocks"]] == [1]  # the block measured, and where it
    assert saved["blocks"][0]["stopped"] == signal.SIGINT  # stopped


# ---- 11. a job made by hand is checked field by field


@pytest.mark.parametrize("job,field", [
    ({"rounds": ["x"]}, "'rounds'"), ({"rounds": [True]}, "'rounds'"),
    ({"rounds": [0], "threads": "abc"}, "'threads'"), ({"threads": 2}, "'rounds'"),
    ({"rounds": [0]}, "'threads'"), ({"rounds": [0], "threads": None}, "'threads'"),
    ({"rounds": [0], "paths": {"attention": "nope"}}, "'paths'"),
    ({"rounds": [0], "paths": {"blocks": [["a", 1]]}}, "'paths'"),
    ({"rounds": [0], "paths": {"streams": 3}}, "'paths'"),
    ({"rounds": [0], "repeat": {"t": 0.5}}, "'repeat'"),
    ({"rounds": [0], "start": float("nan")}, "'start'"),
    ({"rounds": [0], "again": -1}, "'again'"), ({"rounds": [0], "more": 1}, "'more'"),
    ({"rounds": [0], "threads": 10 ** 23}, "'threads'"),  # past what a C int holds
    ({"rounds": [0], "threads": 2, "repeat": {"t": 10 ** 9}}, "'repeat'"),  # a round for ever
    ({"rounds": [0], "threads": 2, "again": 10 ** 9}, "'again'"),
    ([0], "JSON on stdin")])
def test_11_each_field_of_a_job_is_checked(job, field):
    assert field in worker.not_a_job(job)


def test_11_a_job_as_a_run_makes_it_passes():
    paths = {"attention": "einsum", "cube": "product", "blocks": [[2, 768, 512, None]],
             "compiled": [1], "tiled": []}
    assert worker.not_a_job({**JOB, "threads": 2, "paths": paths, "trials": ["a"],
                             "record": True, "alone": False, "process": 1, "processes": 3,
                             "kind": "k", "start": 1.5, "left_s": None}) == ""


@pytest.mark.parametrize("job,says", [('{"rounds": ["x"]}', "its job's"),
                                      ('{"rounds": [0], "threads": "abc"}', "its job's"),
                                      ("[" * 100_000 + "]" * 100_000, "JSON on stdin")],
                         ids=["rounds", "threads", "nested deeper than JSON reads"])
def test_11_a_hand_made_job_is_exit_2_without_a_traceback(job, says, monkeypatch):
    import cube_bug
    monkeypatch.setattr(sys, "stdin", io.StringIO(job))  # as `echo JOB | python cube_bug.py`
    r = in_process(cube_bug.main, "--worker")
    one_line(r, 2, "argument --worker", says)
    assert r.stdout == ""


def test_a_worker_whose_run_is_gone_before_it_starts_ends_at_once():
    """A run killed between its worker's start and the worker's ask to end with it left the
    worker to another parent, which it took for its run: orphans lived on for seconds. The run
    gives its pid; a worker whose parent is another ends at once, without a word."""
    import subprocess
    import sys
    from harness import stopping
    env = {**os.environ, stopping.RUN: "999999999"}  # (no process's pid: gone)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "cube_bug.py"), "--worker"],
                       input="{}", capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == stopping.ORPHANED and r.stdout == "" and r.stderr == ""


# ---- a worker takes its settings from its job, never from its command line


def test_a_job_goes_to_a_worker_and_back_as_the_same_frozen_record(monkeypatch):
    job = worker.Job((3, 4), threads=2, argv=("--tokens", "4"), trials=("a",), kind="k",
                     process=1, processes=3, start=1.5, repeat={"a": 2}, paths=None)
    assert worker.not_a_job(json.loads(job.sent())) == ""
    monkeypatch.setattr(sys, "stdin", io.StringIO(job.sent()))
    assert worker.job_given() == job
    with pytest.raises(AttributeError):
        job.threads = 1  # frozen: what a worker was asked is what it measures


def test_a_worker_with_words_on_its_command_line_is_refused_in_one_line(monkeypatch):
    import cube_bug
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(JOB)))
    r = in_process(cube_bug.main, "--tokens", "4", "--worker")
    one_line(r, 2, "argument --worker", "nothing else on its command line")
    assert r.stdout == ""


def test_a_bad_setting_in_a_jobs_words_is_the_flags_own_line(monkeypatch):
    import cube_bug
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({**JOB, "argv": ["--tokens", "-3"]})))
    r = in_process(cube_bug.main, "--worker")
    one_line(r, 2, "argument --tokens")
    assert r.stdout == ""
