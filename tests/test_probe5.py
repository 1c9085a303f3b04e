"""A fifth hostile probe's findings, each under its number: fresh clones, --quick and --predict
runs, crafted folders, files and environments."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import cube_bug
from conftest import ROOT, compared, in_process
from harness.keeping import results

SHIPPED = os.path.join(ROOT, "references", "amd-epyc-2c")


# ---- 1. a report.md the user edited is theirs: kept before the suite makes it anew


def test_1_an_edited_report_is_kept_when_the_first_run_of_a_script_replaces_it(tmp_path):
    box = tmp_path / "edit2"
    box.mkdir()
    for name in ("machine_speed.json", "machine_speed.txt", "report.md"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    with open(box / "report.md", "a") as f:
        f.write("my own line\n")
    argv = ("--tokens", "4", "--runs", "3", "--processes", "1", "--no-in-model", "--out",
            str(tmp_path), "--label", "edit2")
    r = in_process(cube_bug.main, *argv)
    assert r.returncode == 0, r.stderr
    (kept,) = (box / "history").glob("report.*")
    assert (kept / "report.md").read_text().endswith("my own line\n")
    assert "my own line" not in (box / "report.md").read_text() and str(kept) in r.stderr
    assert not results.edited(str(box / "report.md"))  # the suite's own, signed
    r = in_process(cube_bug.main, *argv)  # the report as the suite wrote it: nothing to keep
    assert r.returncode == 0 and len(list((box / "history").glob("report.*"))) == 1


def test_1_a_signed_report_is_the_suites_and_any_edit_unsigns_it(tmp_path):
    path = tmp_path / "report.md"
    path.write_text(results.signed("# a report\n\nits table\n"))
    assert not results.edited(str(path))
    path.write_text(path.read_text().replace("its table", "its table, edited"))
    assert results.edited(str(path))
    assert not results.edited(str(tmp_path / "none.md"))  # nothing there: nothing to keep


# ---- 2. an export that did not arrive whole fails the run


@pytest.mark.parametrize("argv", [
    ["compare.py", "post", "amd-epyc-2c", "--export", "csv"],
    ["machine_speed.py", "--quick", "--runs", "1", "--size", "300", "--matmul", "32",
     "--no-save", "--export", "csv"],
    ["two_phases.py", "--predict", "h100-sxm", "--no-save", "--export", "json"],
])
def test_2_an_export_cut_short_by_a_full_disk_exits_non_zero(argv):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, os.path.join(ROOT, argv[0]), *argv[1:]],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert r.returncode == 1 and "did not arrive whole" in r.stderr
    assert "Traceback" not in r.stderr


def test_2_tables_into_head_still_exit_zero(tmp_path):
    r = subprocess.run(f"{sys.executable} compare.py post amd-epyc-2c | head -1", shell=True,
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr


# ---- 3. a script started with stderr closed runs, says nothing, and saves


@pytest.mark.parametrize("argv", [
    ["machine_speed.py", "--quick", "--runs", "1", "--size", "300", "--matmul", "32"],
    ["two_phases.py", "--predict", "h100-sxm", "--no-save"],
    ["compare.py", "post", "amd-epyc-2c"],
])
def test_3_a_closed_stderr_is_no_crash(argv, tmp_path):
    out = ["--out", str(tmp_path)] if argv[0] == "machine_speed.py" else []
    r = subprocess.run(f"{sys.executable} {' '.join(argv + out)} 2>&-", shell=True, cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout
    assert not any(word in r.stdout for word in ("wall time", "saved ", "Traceback"))  # notes
    #   go nowhere, never into the tables
    if out:
        assert list(tmp_path.glob("*/machine_speed.quick.json"))  # saved, as ever


# ---- 6. stderr into a pipe that closes: the run saved, and says so by its exit


def test_6_stderr_into_a_closed_pipe_is_no_failure(tmp_path):
    r = subprocess.run(f"{sys.executable} machine_speed.py --quick --size 300 --matmul 32 "
                       f"--runs 3 --out {tmp_path} --label pipe2 2>&1 | head -2; "
                       f"exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash", cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and (tmp_path / "pipe2" / "machine_speed.quick.json").exists()
    if os.path.exists("/dev/full"):
        r = subprocess.run(f"{sys.executable} machine_speed.py --quick --size 300 --matmul 32 "
                           f"--runs 1 --out {tmp_path} --label full 2>/dev/full", shell=True,
                           cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0 and (tmp_path / "full" / "machine_speed.quick.json").exists()


# ---- 4. a model name whose file is no file is one line, never a recursion


@pytest.mark.parametrize("make", ["dangling link", "folder", "fifo"])
def test_4_a_model_under_models_that_is_no_file_is_one_line(make, tmp_path, monkeypatch):
    from harness.predicting import model_files
    import two_phases
    from conftest import one_line
    models = tmp_path / "models"
    shutil.copytree(model_files.MODELS, models)
    monkeypatch.setattr(model_files, "MODELS", str(models))
    name = "my-model"
    if make == "dangling link":
        (models / f"{name}.json").symlink_to(tmp_path / "gone.json")
    elif make == "folder":
        (models / f"{name}.json").mkdir()
    else:
        os.mkfifo(models / f"{name}.json")
    assert name not in model_files.shipped_models()
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", name, "--no-save")
    one_line(r, 2, "--model", name)
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", "/dev/zero",
                   "--no-save")
    one_line(r, 2, "--model", "not a regular file")


# ---- 5. the memory check reads the process's own limits too


def test_5_the_memory_check_holds_a_run_to_its_address_space_limit(monkeypatch):
    import resource
    import two_phases
    from conftest import one_line
    from harness.measuring import host
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda what: (3 * 2 ** 30, 3 * 2 ** 30)
                        if what == resource.RLIMIT_AS else real(what))
    have, why = host.memory_room()
    assert have < 3 * 2 ** 30 and "ulimit -v" in why
    r = in_process(two_phases.parse_args, "--experiments", "decode", "--users", "40", "--notes",
                   "1000", "--runs", "1", "--no-save")
    one_line(r, 2, "ulimit -v", "use a smaller")


def test_5_a_cgroup_limit_is_read_where_there_is_one(monkeypatch):
    from harness.measuring import host
    monkeypatch.setattr(host, "cgroup_left", lambda: 2 * 2 ** 30)
    monkeypatch.setattr(host, "address_space_left", lambda: None)
    assert host.memory_room() == (2 * 2 ** 30, "left under this process's cgroup memory limit "
                                                "(a container's)")


# ---- 7. history trims by the time each run recorded, whatever a copy did to the folders


def test_7_after_a_copy_history_keeps_the_newest_runs(tmp_path):
    import time
    from conftest import python  # noqa: F401  (the helpers' module)
    from harness.keeping import results as r
    history = tmp_path / "box" / "history"
    history.mkdir(parents=True)
    days = list(range(1, 12))
    for day in reversed(days):  # made newest first: a copy's order, which ctime would follow
        entry = history / f"cube_bug.2026-01-{day:02}T00-00-00"
        entry.mkdir()
        data = json.load(open(os.path.join(SHIPPED, "cube_bug.json")))
        data["machine"]["date"] = f"2026-01-{day:02}T00:00:00+00:00"
        (entry / "cube_bug.json").write_text(json.dumps(data))
        time.sleep(0.01)
    assert [os.path.basename(e)[9:19] for e in r.entries(str(history), "cube_bug")] == [
        f"2026-01-{day:02}" for day in days]  # oldest first, as the runs recorded
    r.trim(str(tmp_path / "box"), "cube_bug")
    assert sorted(os.listdir(history)) == [f"cube_bug.2026-01-{day:02}T00-00-00"
                                           for day in days[1:]]  # only the oldest went


# ---- 8. compare's verdict is the two runs', whatever else history keeps


def test_8_a_run_at_other_threads_in_history_changes_no_verdict(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    for name in ("machine_speed.json", "machine_speed.txt"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    before = compared("post", str(box))
    kept = box / "history" / "machine_speed.2026-01-01T00-00-00"
    kept.mkdir(parents=True)
    data = json.load(open(box / "machine_speed.json"))
    data["settings"]["threads"] = 1
    for record in data["records"]:
        record["settings"]["threads"] = 1
        if record.get("samples"):
            record["samples"] = [x / 2.07 for x in record["samples"]]
    (kept / "machine_speed.json").write_text(json.dumps(data))
    after = compared("post", str(box))
    assert before.returncode == after.returncode == 0 and after.stdout == before.stdout


# ---- 9. a speed compare refuses to compare is in no summary


def test_9_a_machine_speed_run_at_other_sizes_is_shown_and_compared_with_nothing(tmp_path):
    box = tmp_path / "box"
    box.mkdir()
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["settings"].update(size=2000, matmul=256)
    for record in data["records"]:
        record["settings"].update(size=2000, matmul=256)
    (box / "machine_speed.json").write_text(json.dumps(data))
    for name in ("two_phases.json", "two_phases.txt"):
        shutil.copy(os.path.join(SHIPPED, name), box / name)
    r = compared("post", str(box))
    assert r.returncode == 0 and "not compared: --size 2000 against 10000" in r.stdout
    assert "forklift: machine_speed, at --size 2000 --matmul 256" in r.stdout
    assert "(machine_speed's)" not in r.stdout  # the summary takes no speed it refused
    assert "the machine's speed moved" not in r.stdout


# ---- 10. --roofs is held to this run: its own figures, its machine, this run's threads


def roofs_file(tmp_path, change=None):
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.sweep.json")))
    if change:
        change(data)
    path = tmp_path / "machine_speed.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_10_a_roofs_file_changed_after_its_run_is_refused(tmp_path):
    import two_phases
    from conftest import one_line

    def faster(data):
        data["roofs @2"]["bytes_per_s"] = 2e12
    r = in_process(two_phases.parse_args, "--quick", "--no-save", "--roofs",
                   roofs_file(tmp_path, faster))
    one_line(r, 2, "--roofs", "changed after its run")


def test_10_a_sweeps_roofs_give_the_block_of_this_runs_threads(tmp_path, monkeypatch):
    import two_phases
    from harness.measuring import host
    monkeypatch.setattr(host, "cpu_model", lambda: "AMD EPYC")  # the file's own machine
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    path = roofs_file(tmp_path)
    args = two_phases.parse_args(["--quick", "--no-save", "--roofs", path, "--threads", "1"])
    assert args.roofs.bytes_per_s == pytest.approx(21.256161563754e9)  # the 1-thread block
    args = two_phases.parse_args(["--quick", "--no-save", "--roofs", path])
    assert args.roofs.bytes_per_s == pytest.approx(31.496058032745e9)  # the most threads'


def test_10_another_machines_roofs_are_said(tmp_path, monkeypatch):
    import two_phases
    from harness.measuring import host
    monkeypatch.setattr(host, "cpu_model", lambda: "Intel(R) Xeon(R) Processor")
    r = in_process(two_phases.parse_args, "--quick", "--no-save", "--roofs", roofs_file(tmp_path))
    assert r.returncode == 0 and "was measured on AMD EPYC with 2 cores, not on this machine" \
        in r.stderr


# ---- 11. a folder that holds another machine's runs is said, in the run and its report


def test_11_two_machines_in_one_folder_are_warned_of_and_reported_apart(tmp_path):
    box = tmp_path / "shared"
    box.mkdir()
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["machine"]["cpu"] = "Some Other CPU"
    (box / "machine_speed.json").write_text(json.dumps(data))
    shutil.copy(os.path.join(SHIPPED, "machine_speed.txt"), box / "machine_speed.txt")
    r = in_process(cube_bug.main, "--tokens", "4", "--runs", "3", "--processes", "1",
                   "--no-in-model", "--out", str(tmp_path), "--label", "shared")
    assert r.returncode == 0 and "holds machine_speed.py run on another machine" in r.stderr
    report = (box / "report.md").read_text()
    assert report.startswith("# Prefill vs Decode, rerun on 2 machines")
    assert "Some Other CPU" in report and "- `cube_bug.py`: machine: " in report


def test_11_a_gpu_runs_device_is_in_the_reports_machine_line():
    from harness.measuring import host
    from harness.showing import report
    data = json.load(open(os.path.join(SHIPPED, "machine_speed.json")))
    data["machine"]["device"] = {"device": "torch:cuda", "name": "NVIDIA H100 80GB HBM3",
                                 "library": "torch 2.13.0", "dtype": "float32", "tf32": "off"}
    assert "device torch:cuda: NVIDIA H100 80GB HBM3" in report.steady(host.line(
        data["machine"]))


# ---- 12. a figure recorded twice is refused, never read two ways


def test_12_a_record_twice_is_refused_by_the_schema(tmp_path):
    from harness.keeping import schema
    data = json.load(open(os.path.join(SHIPPED, "two_phases.json")))
    twice = next(r for r in data["records"] if r["experiment"] == "decode")
    data["records"].append({**twice, "value": twice["value"] * 10})
    with pytest.raises(ValueError, match="twice"):
        schema.check(data, "two_phases")
    box = tmp_path / "box"
    box.mkdir()
    (box / "two_phases.json").write_text(json.dumps(data))
    r = compared("post", str(box))
    assert "twice" in r.stderr and "left out" in r.stderr


# ---- 13. the smaller ones


def test_13_sizes_too_small_to_measure_are_refused_before_measuring():
    import machine_speed
    from conftest import one_line
    for flag, value in (("--size", "1"), ("--matmul", "1")):
        one_line(in_process(machine_speed.parse_args, flag, value, "--no-save"), 2, flag,
                 "from 256" if flag == "--size" else "from 16")


def test_13_the_run_records_the_threads_the_blas_ran(monkeypatch):
    from harness import runner
    from harness.measuring import host
    monkeypatch.setattr(host, "blas_info", lambda: [{"library": "openblas", "version": "0",
                                                     "threads": 64, "architecture": "x"}])
    from harness.terminal import kept
    with kept() as said:
        assert runner.threads_run(100, {"blas": []}) == 64
    assert said == ["--threads 100: the BLAS runs 64, the most it takes; the run records 64"]
    assert runner.threads_run(2, {"blas": []}) == 2


def test_13_a_cache_sized_forklift_backs_no_claim_and_compares_with_none():
    from conftest import made
    from harness.judging import judge, rules
    from harness.keeping.folders import read_from
    from harness.keeping.records import col
    found = made("machine_speed", [col("memory speed", "memory speed", "GB/s", ".1f"),
                                   col("math speed", "math speed", "GFLOP/s", ".1f"),
                                   col("read", "read", "MB", ".0f")],
                 [{"memory speed": 60.0, "math speed": 100.0, "read": 16.0}],
                 {"size": 2000, "cache_bytes": 32 * 2 ** 20})
    for c, here, verdict, why, _ in judge.verdicts(found, None, ("machine_speed",)):
        assert verdict == rules.UNKNOWN and "read the cache, not memory" in why, c.says
    assert read_from({"size": 2000, "cache_bytes": 32 * 2 ** 20}) == "cache"
    assert read_from({"size": 23000, "cache_bytes": 480 * 2 ** 20}) == "memory"
    assert read_from({"size": 10000}) == "memory"  # the post's, which recorded no cache


def test_13_a_prediction_into_a_measured_folder_is_refused(tmp_path):
    import two_phases
    from conftest import one_line
    box = tmp_path / "box"
    box.mkdir()
    shutil.copy(os.path.join(SHIPPED, "two_phases.json"), box / "two_phases.json")
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--out", str(tmp_path),
                   "--label", "box")
    one_line(r, 2, "--label", "holds a measured two_phases.json", "a folder of its own")


def test_13_a_models_short_context_is_the_models_fault_not_the_flags(tmp_path):
    import two_phases
    from conftest import one_line
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"layers": 2, "width": 64, "heads": 4, "context": 1}))
    r = in_process(two_phases.parse_args, "--predict", "h100-sxm", "--model", str(path),
                   "--no-save")
    one_line(r, 2, "--model", "reads at most 1 token (its context)")


def test_13_a_read_only_file_system_is_named_so(tmp_path, monkeypatch):
    (tmp_path / results.HISTORY).mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: type("V", (), {"f_flag": os.ST_RDONLY})())
    assert "is on a read-only file system" in results.refusal(str(tmp_path))


def test_13_a_cpu_name_of_400_characters_makes_a_folder_name_a_file_system_takes(monkeypatch):
    import types
    from harness import flags
    from harness.measuring import host
    monkeypatch.setattr(host, "cpu_model", lambda: "Very Long CPU " * 30)
    name = os.path.basename(flags.folder_of(types.SimpleNamespace(out="r", label=None,
                                                                 device="numpy")))
    assert len(name) <= 100 and name.startswith("very-long-") and "--" not in name


def test_13_a_multimodal_configs_language_model_is_read():
    from harness.predicting import model_files
    found = {"model_type": "llama4", "_name_or_path": "meta-llama/Llama-4-Scout-17B-16E",
             "text_config": {"num_hidden_layers": 48, "hidden_size": 5120,
                             "num_attention_heads": 40, "num_key_value_heads": 8,
                             "head_dim": 128, "intermediate_size": 8192, "hidden_act": "silu",
                             "num_local_experts": 16, "num_experts_per_tok": 1},
             "vision_config": {"num_hidden_layers": 34, "hidden_size": 1408}}
    cfg = model_files.shape(model_files.language_model(found), "config.json")
    assert (cfg.layers, cfg.width, cfg.kv_heads, cfg.experts, cfg.active) == (48, 5120, 8, 16, 1)
    assert cfg.name == "meta-llama/Llama-4-Scout-17B-16E"


def test_13_an_earlier_runs_pictures_go_to_history_with_it(tmp_path):
    data = json.load(open(os.path.join(SHIPPED, "two_phases.json")))
    data["pictures"] = ["roofline.png", "dial.png"]
    (tmp_path / "two_phases.json").write_text(json.dumps(data))
    for name in ("roofline.png", "dial.png"):
        (tmp_path / name).write_bytes(b"the earlier run's picture")
    again = {**data, "pictures": ["roofline.png"]}
    again["machine"] = {**data["machine"], "date": "2026-12-31T00:00:00+00:00"}
    assert results.save(str(tmp_path), {"two_phases.json": json.dumps(again),
                                        "two_phases.txt": "",
                                        "roofline.png": b"this run's".decode()},
                        "two_phases") == 0
    assert not (tmp_path / "dial.png").exists()  # it stands beside no result that drew it
    (entry,) = (tmp_path / "history").glob("two_phases.*")
    assert (entry / "dial.png").read_bytes() == b"the earlier run's picture"
    assert (entry / "roofline.png").read_bytes() == b"the earlier run's picture"


def test_13_text_figures_go_to_a_column_of_their_own():
    from harness.keeping import exports
    rows = exports.tidy("two_phases", {}, [
        {"experiment": "check", "keys": {"row": "1 user"}, "figure": "bound by", "unit": "",
         "statistic": "computed", "value": "forklift", "settings": {}},
        {"experiment": "check", "keys": {"row": "1 user"}, "figure": "x limit", "unit": "x",
         "statistic": "middle", "value": 1.5, "settings": {}}])
    assert [(r["value"], r["text"]) for r in rows] == [(None, "forklift"), (1.5, None)]
