"""The flags every script shares and their checks, all before anything is measured: argparse
types that refuse a bad value in one line naming what is allowed, the shared parser, and the
results folder and the memory a run will need."""
import argparse
import math
import os
import re
import sys
import types

from harness.terminal import plain_streams, printable, quoted, warn
from harness.measuring import devices, host
from engine.blocks import ATTENTION
from harness.measuring import worker
from harness.measuring.worker import MOST_THREADS
from harness.measuring.speeds import Speeds
from harness.keeping import exports, results, schema
from harness.keeping.where import folder_of, other_kind, shipped, unwritable

MEMORY_MARGIN = 1.1, 0.25e9  # what a run may use: 90% of the available memory, less 250 MB
MOST_RUNS = 10_000  # beyond these a run never ends, or the threads swamp it (MOST_THREADS)
LONGEST_BUDGET = 86_400  # seconds (a day)


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help shows the script's whole description as written, with its examples, and each
    default, except where there is none to show."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            return action.help
        if isinstance(action.default, (list, tuple)):
            return f"{action.help} (default: {' '.join(map(str, action.default))})"
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag costs one line on stderr and exit code 2, never the usage dump."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class Counts(argparse.Action):
    """A list flag's values as one form from the parser on: each count once, smallest first, a
    tuple (--threads 2 1 2: (1, 2), a sweep's blocks in order)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, tuple(sorted(set(values))))


def whole(lo, hi, words=()):
    """An argparse type: a whole number in [lo, hi] (or one of `words`), with a message naming
    what is allowed."""
    def parse(text):
        if text in words:
            return text
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"must be {''.join(w + ', ' for w in words)}a whole number from {lo:,} to "
                f"{hi:,}, got {quoted(text)}")
        return value
    return parse



LABEL_MAX = 100  # characters: a folder name any file system takes
MOST_USERS = 1_000_000  # users, typers or chunk tokens: a prediction may go far; memory stops it
LONGEST = 1_000_000  # tokens of a question or a notebook: GPT-2 reads 1,024, a predicted model more


def finite(allowed, ok):
    """An argparse type: a finite number for which ok(number) holds; `allowed` says which, in
    the message."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {quoted(text)}")
        return value
    return parse


def speed(unit, low, high):
    """An argparse type: a speed in `unit`, from low to high."""
    return finite(f"a speed in {unit} from {low:g} to {high:g}", lambda v: low <= v <= high)


def folder(text):
    """An argparse type: a folder's path, which must not be empty."""
    if not text:
        raise argparse.ArgumentTypeError("must be a folder's path, got ''")
    return text


def reads(reader, what):
    """An argparse type: the file at a path, as reader(path) reads it; refused in one line
    saying why when reader raises ValueError."""
    def parse(path):
        try:
            return reader(path)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"must be {what}; {path!r} {e}") from None
    return parse


def checked(reader):
    """An argparse type: the text itself, once reader(text) takes it; refused in one line saying
    why when reader raises ValueError or OSError."""
    def parse(text):
        try:
            reader(text)
        except (ValueError, OSError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text
    return parse


def label(text):
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text) or len(text) > LABEL_MAX:
        raise argparse.ArgumentTypeError(
            f"must be up to {LABEL_MAX} letters, digits, '.', '_' or '-', starting with a "
            f"letter or digit (a folder name), got {quoted(text)}")
    return text


MARKDOWN = ("markdown", "md")  # what a user calls GitHub's Markdown tables


def tablefmt(text):
    from tabulate import tabulate_formats
    if text in MARKDOWN:
        return "github"
    if text not in tabulate_formats:
        raise argparse.ArgumentTypeError(f"must be a tabulate format such as plain, github, "
                                         f"simple or grid, got {quoted(text)}")
    return text


def parser(doc, runs, prog, budget=None):
    """An argument parser with the flags every script shares; `runs` is the post's count;
    budget: the seconds a run may measure for, adding rounds for the claims that cannot be told
    yet (None: a script that adds none); prog: the script's file name, however it was started
    (its messages and its results' names)."""
    from tabulate import tabulate_formats
    from harness.measuring.processes import MOST_PROCESSES, PROCESSES
    p = Parser(prog=prog, description=(doc or "").strip(), formatter_class=_Help)  # (none
    #   under python -OO, which strips docstrings: --help then says the flags alone)
    g = p.add_argument_group("shared by every script")
    g.add_argument("--runs", type=whole(1, MOST_RUNS), default=runs, metavar="N",
                   help="rounds each row is measured in, at least: a round visits every row "
                        "once, in a shuffled order, after one warm-up visit in each process "
                        "that is not counted")
    g.add_argument("--processes", type=whole(1, MOST_PROCESSES), default=PROCESSES,
                   metavar="N", help="fresh worker processes each kind of rows is measured in, "
                                     "at least, one after another (more while --time-budget "
                                     "allows): a verdict's interval counts processes; 1: all in "
                                     "this process (--quick's)")
    if budget is not None:
        g.add_argument("--time-budget", type=finite(
            f"a number of seconds above 0 and at most {LONGEST_BUDGET:,}",
            lambda v: 0 < v <= LONGEST_BUDGET), default=budget, metavar="SECONDS",
            help="the seconds the measuring may take: past --processes, fresh processes are "
                 "added while the first ones' cost says they fit")
    g.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # a worker process:
    #                                                    its job on stdin, its result on stdout
    g.add_argument("--threads", nargs="+", type=whole(1, MOST_THREADS), default=None,
                   action=Counts, metavar="N",
                   help="BLAS threads (via threadpoolctl), at most this machine's logical CPUs; "
                        "several (--threads 1 2) sweep them: one block of tables each, saved as "
                        "<script>.sweep; default: the library's own choice")
    g.add_argument("--device", type=checked(devices.named), default="numpy", metavar="WHERE",
                   help="where the arrays live: numpy (the post's, this CPU), torch:cpu, "
                        "torch:cuda, torch:mps (an Apple GPU) or cupy:cuda; PyTorch and CuPy "
                        f"only when asked ({devices.INSTALL})")
    g.add_argument("--tf32", action="store_true",
                   help="let float32 products run in TF32 on an NVIDIA GPU (faster, coarser; "
                        "off by default, whatever TORCH_ALLOW_TF32_CUBLAS_OVERRIDE says); the "
                        "setting is on the machine line")
    g.add_argument("--oversubscribe", action="store_true",
                   help="let --threads exceed the logical CPUs (the threads then take turns)")
    g.add_argument("--quick", action="store_true",
                   help="small sizes, a smoke run of seconds, not minutes; saved apart from "
                        "full runs")
    g.add_argument("--tablefmt", type=tablefmt, default="plain", metavar="FMT",
                   help="plain is the post's layout, github (or markdown, md) is Markdown; any "
                        "tabulate format: "
                        + ", ".join(tabulate_formats))
    g.add_argument("--export", choices=exports.FORMATS, default=None,
                   help="write the figures to stdout as csv, json or jsonl instead: one row "
                        "per figure, numbers unrounded; what is saved is the same")
    g.add_argument("--spread", action="store_true",
                   help="a range column beside each timed figure: its slowest and fastest "
                        "counted run (the post's own layouts give way to tables)")
    g.add_argument("--out", type=folder, default=results.RESULTS, metavar="DIR",
                   help="folder for results, the same wherever the scripts are run from")
    g.add_argument("--label", type=label, default=None, metavar="NAME",
                   help="results subfolder; default: a slug of the CPU model and core count")
    g.add_argument("--no-save", action="store_true", help="print the tables, save nothing")
    return p


class Settings(types.SimpleNamespace):
    """A run's flags, made once from the command line (settled()) and frozen: each flag by its
    name, and `on`, the Device --device names, made once (its library imported once). A block
    of a thread sweep is replace(threads=n)."""

    def __setattr__(self, name, value):
        raise AttributeError(f"the run's settings are made once: {name} stays as parsed")

    __delattr__ = __setattr__

    def replace(self, **changes):
        """The same settings with these changed (the Device kept)."""
        return Settings(**{**vars(self), **changes})


def settled(args):
    """A script's flags, once checked, as its Settings (a Settings stays as it is)."""
    if isinstance(args, Settings):
        return args
    return Settings(**vars(args), on=devices.device(
        getattr(args, "device", "numpy"), getattr(args, "dtype", "float32"),
        getattr(args, "tf32", False)))


def add_device_flags(g):
    """What a model run on another library's device may change (its precision is --dtype's):
    whether its trips are replayed as CUDA graphs."""
    g.add_argument("--graphs", action="store_true",
                   help="replay each trip as a CUDA graph (--device torch:cuda): launching "
                        "its ~500 kernels costs the host one launch; the kernels still run, a "
                        "microsecond or two each, so a small model's typing stays above its "
                        "bytes' limit")


def add_check_flag(g):
    g.add_argument("--self-check", action="store_true",
                   help="check the device once, saving nothing: its facts, the forklift against "
                        "a plain read and a copy, the workbench at two sizes and precisions, the "
                        "model's answer in each precision against NumPy's, a CUDA graph against "
                        "the eager trip, a typing step and an empty trip against their limits; "
                        "PASS, FAIL or SKIP each (INFO where a figure has no rule)")


def check_device_flags(p, args):
    """Refuse, in one line, what the device named cannot do, or a device that is not here: its
    library is loaded only now, once every flag is read (the name alone was checked while
    parsing, with no library imported and no setting made), in the precision and TF32 asked."""
    library = args.device.partition(":")[0]
    if args.tf32 and library == "numpy":
        p.error("argument --tf32: TF32 is an NVIDIA GPU's: it needs --device torch:cuda or "
                "cupy:cuda (NumPy computes float32 as it is)")
    if getattr(args, "self_check", False) and getattr(args, "predict", None) is not None:
        p.error("argument --self-check: it checks a device, and a prediction runs nothing: "
                "leave out --predict")
    if getattr(args, "self_check", False) and library == "numpy":
        p.error("argument --self-check: it checks another library's device: --device "
                "torch:cuda, torch:mps, torch:cpu or cupy:cuda")
    if getattr(args, "graphs", False) and args.device != "torch:cuda":
        p.error(f"argument --graphs: CUDA graphs need --device torch:cuda, got {args.device}")
    if getattr(args, "predict", None) is not None and library != "numpy":
        p.error("argument --device: a prediction runs nothing, on no device; name the machine "
                "to predict with --predict")  # (before its library is looked for: not loaded)
    try:
        devices.device(args.device, getattr(args, "dtype", "float32"), args.tf32)
    except ValueError as e:
        p.error(f"argument --device: {e}")


_UNSET = object()  # a flag's value before parsing: still _UNSET after it, the flag was not given


PER_ITEM = ("gpus",)  # list flags whose values go one to each of another flag's items: kept
#                      as given, repeats and all (--gpus 2 1 2 1: one count for each machine)


def parse(p, argv, quick):
    """Parse the flags and check, before anything is measured, what can be checked: --quick
    takes the small sizes in `quick` for every flag not given; a list flag keeps each value
    once; --threads and the folder that results will go to."""
    plain_streams()  # --help too
    quick = {"processes": 1, **quick}
    words, job = list(sys.argv[1:] if argv is None else argv), None
    if "--worker" in words:  # a worker process: its settings are its job's, never its own words
        if words != ["--worker"]:
            p.error("argument --worker: a worker process takes its settings from its job on "
                    "stdin, nothing else on its command line")
        try:
            job = worker.job_given()
        except ValueError as e:  # one line, nothing measured
            p.error(f"argument --worker: {e}")
        words = [*job.argv, "--worker"]
    args = p.parse_args(words, namespace=argparse.Namespace(**{name: _UNSET for name in quick}))
    args.argv = list(job.argv) if job else words  # as a worker process is given them
    args.job = job
    args.given = {name for name in quick if getattr(args, name) is not _UNSET}  # typed
    for name, value in quick.items():
        if getattr(args, name) is _UNSET:
            setattr(args, name, value if args.quick else p.get_default(name))
    for action in p._actions:  # each value once, in the order given
        value = getattr(args, action.dest, None)
        if action.nargs == "+" and isinstance(value, list) and action.dest not in PER_ITEM:
            setattr(args, action.dest, list(dict.fromkeys(value)))
    cpus = usable_cpus()
    if args.threads and max(args.threads) > cpus:
        if not args.oversubscribe:
            p.error(f"argument --threads: must be at most {cpus}, the logical CPUs this run may "
                    f"use, got {max(args.threads)} (add --oversubscribe to run more anyway)")
        warn(f"--threads {max(args.threads)} on {cpus} logical CPUs: the threads take turns")
    check_device_flags(p, args)
    if getattr(args, "predict", None) is None and not args.worker:  # a prediction's folder is
        check_folder(p, args)  #                     named later; a worker process saves nothing
    return args


def usable_cpus():
    """The logical CPUs this process may run on: its affinity where the system says (taskset, a
    container's cpuset), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


SYSTEM = ("/dev", "/proc", "/sys", "/etc", "/bin", "/sbin", "/usr", "/boot", "/lib", "/lib64",
          "/run", "/var/run")  # the system's own folders: never a results folder's home


def check_folder(p, args):
    """Refuse, in one line, a results folder a run must not or cannot save into: the shipped
    references, a link, or one where its files cannot be made."""
    if args.no_save:
        return
    real = os.path.realpath(args.out)
    if real == os.sep or any(real == s or real.startswith(s + os.sep) for s in SYSTEM):
        p.error(f"argument --out: {args.out} is {'the root' if real == os.sep else 'a system'} "
                f"folder; save into a folder of your own (the default is {results.RESULTS})")
    if shipped(folder_of(args)):
        p.error(f"argument --out: {results.REFERENCES} holds the shipped reference results, "
                f"which no run replaces; save elsewhere (the default is {results.RESULTS})")
    stem = os.path.splitext(p.prog)[0] + (".sweep" if args.threads and len(args.threads) > 1
                                           else "") + (".quick" if args.quick else "")
    problem = unwritable(folder_of(args), [stem + ".json", stem + ".txt", *(
        [results.REPORT] if not args.quick else [])])  # (a full run's save makes report.md too)
    if problem:
        p.error(f"argument --out: results cannot be saved to {folder_of(args)}: {problem} "
                f"(choose another --out or --label, or --no-save)")
    try:  # held from now on: a link swapped in for it while the run measures changes nothing
        args.held_out = results.hold(args.out)
    except OSError as e:
        p.error(f"argument --out: {args.out} cannot be opened ({e.strerror or e})")
    other = other_kind(folder_of(args), bool(getattr(args, "predict", None)))
    if other:
        p.error(f"argument --label: {folder_of(args)} holds {other}; a "
                f"{'prediction' if getattr(args, 'predict', None) else 'measured run'} goes to "
                f"a folder of its own (choose another --label, or leave it out)")


def need_memory(p, need_bytes, what, flag, device="numpy", host_bytes=None):
    """Exit with one line (code 2) if need_bytes, with a margin, is more than the machine has
    available, or, on a GPU, more than the GPU holds; where the run's arrays live on a GPU, the
    host is asked for host_bytes only (what it makes before they are copied there)."""
    on_host = need_bytes if host_bytes is None else host_bytes
    have, why = host.memory_room()
    if have is not None and on_host * MEMORY_MARGIN[0] + MEMORY_MARGIN[1] > have:
        p.error(f"{what}: about {on_host / 1e9:.1f} GB, and a margin for the rest of the "
                f"machine, but only {have / 1e9:.1f} GB is {why}; use a smaller {flag}")
    on = devices.device(device)
    holds = (on.facts() or {}).get("memory_bytes") if on.gpu else None
    if holds and need_bytes * MEMORY_MARGIN[0] + MEMORY_MARGIN[1] > holds:
        p.error(f"{what}: about {need_bytes / 1e9:.1f} GB, and a margin, but {device} holds "
                f"{holds / 1e9:.1f} GB; use a smaller {flag}")


# ---- the speeds a run holds its rows to, where the flags give them instead of the rounds
# measuring them: from a saved machine_speed result (--roofs), or given (--forklift, --workbench)


def given_speeds(args):
    """The speeds the flags give, or None where they give none."""
    if args.roofs:
        return args.roofs
    if args.forklift:
        return Speeds(args.forklift * 1e9, args.workbench * 1e9, "given on the command line")
    return None


def add_speed_flags(g):
    """The flags that give the speeds instead of measuring them."""
    given = g.add_mutually_exclusive_group()
    given.add_argument("--roofs", default=None, metavar="FILE",
                       type=reads(schema.read_roofs, "a machine_speed.py results file"),
                       help="take the forklift and workbench speeds from a saved "
                            "machine_speed.json instead of measuring them in this run")
    given.add_argument("--forklift", type=speed("GB/s", 0.001, 1e6), default=None,
                       metavar="GB/S",
                       help="the memory speed to hold the rows to (or to predict with), "
                            "with --workbench, instead of measuring it")
    g.add_argument("--workbench", type=speed("GFLOP/s", 0.001, 1e9), default=None,
                   metavar="GFLOP/S", help="the math speed, with --forklift")


def check_speed_flags(p, args):
    """Refuse, in one line, speeds given by halves; take a --roofs sweep's block of this run's
    threads; and say when a --roofs file was measured on another machine than this one."""
    if (args.forklift is None) != (args.workbench is None):
        p.error(f"argument {'--workbench' if args.forklift else '--forklift'}: --forklift and "
                f"--workbench go together")
    if not args.roofs or not args.roofs.origin:
        return
    path, cpu, cores, block = args.roofs.origin
    if args.threads and len(args.threads) == 1 and block and block != args.threads[0]:
        args.roofs = schema.read_roofs(path, threads=args.threads[0])  # read once already
    here = host.quietly(host.cpu_model, "unknown CPU"), host.quietly(os.cpu_count)
    if not args.worker and getattr(args, "predict", None) is None and (cpu, cores) != here:
        warn(f"--roofs {path} was measured on {printable(cpu)} with {cores} cores, not on this "
             f"machine ({here[0]}, {here[1]} cores): every row here is held to that machine's "
             f"speeds")


# ---- the paths a trip takes, where a flag forces one instead of timing the candidates


def add_path_flags(g):
    """The flags that force a path instead of timing the candidates (measuring/tuning.py)."""
    g.add_argument("--attention", choices=("auto", *ATTENTION), default="auto",
                   help="how one query reads its notes: the fastest on this machine, timed at "
                        "the start, or the one given")
    g.add_argument("--compiled", choices=("auto", "off"), default="auto",
                   help="trips of up to 64 tokens, table products of up to 256, and a "
                        "question's attention, on compiled kernels (Numba's): auto (where they "
                        "beat NumPy's way here, both timed at the start; --quick: off) or off")
    g.add_argument("--blocks", type=whole(1, 4096, words=("auto", "off")), default="auto",
                   metavar="{auto,off,N}",
                   help="table products for 2 to 16 tokens: auto (the blocks fastest here, "
                        "timed at the start), off (unblocked), or blocks of N rows (1 to 4,096)")
