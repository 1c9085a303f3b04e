"""Where a run's results go: the folder a run saves into (folder_of: --out/--label, or the
machine measured), and whether it may: not the shipped references (shipped), not a folder of the
other kind of results (other_kind), nor one whose files cannot be made (unwritable)."""
import contextlib
import os
import secrets

from harness.measuring import devices, host
from harness.keeping import held, results


def other_kind(folder, predicting):
    """The results of the other kind the folder holds (results.other_kind), or ''."""
    try:
        with held.opened(folder) as d:
            return results.other_kind(d, predicting)
    except OSError:
        return ""  # no folder yet, or one the save's own checks refuse


def shipped(path):
    """Whether path is the shipped references/ folder or inside it, wherever links lead."""
    real, references = os.path.realpath(path), os.path.realpath(results.REFERENCES)
    return real == references or real.startswith(references.rstrip(os.sep) + os.sep)


def folder_of(args):
    """Where a run's results go: --out/--label, or --out/<the machine measured>: this CPU's model
    and cores (amd-epyc-2c), or, on another library's device, the device and the library that ran
    there, and its precision, graphs and TF32 where not the default
    (nvidia-h100-80gb-hbm3-3f2a-torch-cuda-bfloat16-graphs, the GPU's UUID's last four; amd-epyc-
    2c-torch-cpu): each GPU is its own machine, and neither PyTorch's run on this CPU nor a
    bfloat16 run replaces another's."""
    if args.label:
        return os.path.join(args.out, args.label)
    cpu = host.machine_id({"cpu": host.quietly(host.cpu_model, "unknown CPU"),
                           "cores": host.quietly(os.cpu_count)})
    name = getattr(args, "device", "numpy")
    if name == "numpy":
        return os.path.join(args.out, cpu)
    on = getattr(args, "on", None) or devices.device(name)
    facts = on.facts() if on.gpu else {}
    uuid = str(facts.get("uuid") or "").replace("-", "")  # two GPUs of one name: two folders
    where = host.slug(facts["name"]) + (f"-{uuid[-4:].lower()}" if uuid else "") if on.gpu \
        else cpu
    setting = "".join(f"-{word}" for word, on_ in (
        (getattr(args, "dtype", None) or "float32", (getattr(args, "dtype", None) or "float32")
         != "float32"), ("graphs", getattr(args, "graphs", False)),
        ("tf32", getattr(args, "tf32", False))) if on_)  # each setting a run of its own
    return os.path.join(args.out, f"{where}-{name.replace(':', '-')}{setting}")


def unwritable(folder, names=()):
    """Why the files `names` cannot be saved into folder, in a few words, or None. Tries it: makes
    the missing folders and a new file in the last, then removes everything it made. Refused too:
    a name (or the lock) that is there but not a regular file (a link, say), and what
    results.refusal names (history/ that is a link, a journal naming other files)."""
    path, made = os.path.abspath(folder), []
    try:
        missing, head = [], path
        while not os.path.lexists(head):
            head, name = os.path.split(head)
            missing.append(name)
        for name in reversed(missing):
            head = os.path.join(head, name)
            os.mkdir(head)
            made.append(head)
        if os.path.islink(path) or not os.path.isdir(path):
            return f"{path} is a link or not a folder: a run writes only into a folder of its own"
        for name in [results.LOCK, *names]:
            there = os.path.join(path, name)
            if os.path.islink(there):
                return f"{there} is a link, not a file"
            if os.path.lexists(there) and not os.path.isfile(there):
                return f"{there} is not a file"
        problem = results.refusal(path, names)
        if problem:
            return problem
        probe = os.path.join(path, results.TEMP + "probe-" + secrets.token_hex(8))
        os.close(os.open(probe, results.NEW, 0o600))  # a leftover probe is no matter: unique
        os.unlink(probe)
    except OSError as e:
        return f"{e.filename or path}: {e.strerror or e}"
    finally:
        for made_folder in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(made_folder)
    return None
