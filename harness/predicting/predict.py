"""The post's Part 4: which limit you will hit, for any model, machine, precision and batch,
before you run anything. A prediction runs nothing: every figure is a limit, max(bytes / the
forklift, FLOPs / the workbench), from the model's accounting and a machine's two speeds (named
in presets.json with their public sources, measured under results/, or given); a real engine
reaches some fraction of it.

    python two_phases.py --predict h100-sxm --dtype bfloat16
    python two_phases.py --predict h100-sxm rtx-4090:int4 post --model llama-3-8b
"""
import re

from harness.flags import check_folder, finite, whole
from harness.terminal import note, plural
from harness.measuring import devices
from harness.keeping import records
from harness.keeping.records import SIG, Layout, col
from harness.predicting import plans, presets, request
from harness.keeping.records import rate
from harness.predicting.model_files import config
from harness.predicting.fitting import MOST_DEVICES, fewest, fits, grid_sheet
from harness.predicting.presets import GIVEN, known, targets
from harness.predicting.parts import parts_sheet
from harness.predicting.turning import turning_sheet
from harness.showing import pictures, sheets
from harness.showing.printers import Picture, Saved, Sheet, at_scale, spaced
import accounting
import model
from harness.keeping import schema

ACTIVATIONS = ("float32", "bfloat16", "float16", "fp8", "int8")  # what the math may run at
MOST_RIDERS = 2_000_000  # (user, trip) pairs a prediction plans at most: a few seconds' work


# ---------------------------------------------------------------------------------------------
# the turning points: where each phase turns from the forklift to the workbench


def machines_sheet(aimed, settings, cfg):
    """The machines predicted for: their speeds at the precision asked, and the sources; the
    model's parameters, every one and those a token meets."""
    total, active = accounting.parameters(cfg)
    found = [{"name": t.name, "what": t.title, "precision": t.precision,
              "forklift": t.roofs.bytes_per_s / 1e9, "workbench": t.roofs.flops_per_s / 1e9,
              "balance": t.roofs.balance,
              "link": t.roofs.link_per_s / 1e9 if t.linked else None} for t in aimed]
    return Sheet(MACHINES, records.make(MACHINES, found, settings, predicted=True),
                 settings=f"their speeds as published (presets.json), measured, or given; "
                          f"{f'{cfg.family} {cfg.name}'.strip()}: {billions(total)} parameters"
                          + (f", {billions(active)} active a token" if active != total else ""),
                 note="sources:\n" + "\n".join(f"- {t.name}: {t.roofs.source}" for t in aimed))


MACHINES = Layout("machines", [col("name", "machine", "", "s", key=True),
                               col("what", "what", "", "s"),
                               col("precision", "precision", "", "s", key=True),
                               col("forklift", "forklift GB/s", "GB/s", SIG),
                               col("workbench", "workbench GFLOP/s", "GFLOP/s", SIG),
                               col("balance", "balance FLOPs/byte", "FLOPs/byte", SIG),
                               col("link", "link GB/s each way", "GB/s", SIG, empty="none")],
                  title="The machines predicted for")


def billions(n):
    """A parameter count as a reader says it: '8.03B', '124M'."""
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def words(args):
    """The line a prediction shows in place of a machine line."""
    aimed = targets(args)
    share = getattr(args, "efficiency", 1)
    what = "every figure is a limit" if share >= 1 else f"every figure at {share:g} of a limit"
    return (f"machine: PREDICTED, nothing was run: {what} | " + "; ".join(
        f"{t.name}{t.times}, {t.precision}: {rate(t.roofs.bytes_per_s, 'B/s')}, "
        f"{rate(t.roofs.flops_per_s, 'FLOP/s')}"
        + (f", linked at {rate(t.roofs.link_per_s, 'B/s')}" if t.devices > 1 else "")
        for t in aimed))


# ---------------------------------------------------------------------------------------------
# flags, and a prediction's items


def add_flags(g):
    g.add_argument("--predict", nargs="*", action="extend", default=None, metavar="MACHINE",
                   help="run nothing: print every table at its limit on each machine named (of "
                        "presets.json, or a folder under --out holding machine_speed.json; "
                        "NAME:PRECISION for its own precision), or on --forklift and "
                        "--workbench, or --roofs; the first one's tables, every one's turning "
                        "points and roofline; any --model")
    g.add_argument("--dtype", choices=accounting.DTYPE_BYTES, default=None, metavar="PRECISION",
                   help="with --predict: a table number's precision, "
                        f"{', '.join(accounting.DTYPE_BYTES)}; the math runs at that precision's "
                        "speed (int8-weights' and int4-weights' at 16 bits: weights only); "
                        "default: a GPU's 16-bit tensor rate (bfloat16, or float16 where it "
                        "has none), any other machine's float32; a measured run computes "
                        "float32, or 16 bits on a GPU library's --device")
    g.add_argument("--note-dtype", choices=accounting.NOTE_DTYPES, default=None,
                   metavar="PRECISION",
                   help=f"with --predict: a note's precision, {', '.join(accounting.NOTE_DTYPES)}; "
                        "default: --dtype's, or 16 bits under 8- and 4-bit tables, as engines "
                        "keep them unless asked")
    g.add_argument("--act-dtype", choices=ACTIVATIONS, default=None, metavar="PRECISION",
                   help=f"with --predict: the activations' precision, which the math runs at, "
                        f"{', '.join(ACTIVATIONS)} (int4 weights with fp8 activations: "
                        f"--dtype int4-weights --act-dtype fp8); default: --dtype's (16 bits "
                        f"for weights only)")
    g.add_argument("--request", type=request.pair, default=None, metavar="PROMPT,OUTPUT",
                   help="with --predict: a whole request for each batch of --users, every "
                        "machine side by side: each user's PROMPT-token question read, then "
                        "OUTPUT tokens typed (the first word, each token after it, the total, "
                        "the tokens per second a user sees)")
    g.add_argument("--quantize-head", action="store_true",
                   help="with --predict: keep the LM head and the embedding at --dtype's 8 or 4 "
                        "bits too; by default they stay at 16 bits, as engines keep them")
    g.add_argument("--memory-utilization", type=finite(
        "a share of the memory above 0 and at most 1", lambda v: 0 < v <= 1),
                   default=presets.UTILIZATION, metavar="SHARE",
                   help="with --predict: the share of a GPU's memory an engine lets the model "
                        f"use, less {presets.RUNTIME_GIB[0]:g} GiB for its runtime "
                        f"({presets.RUNTIME_GIB[1]:g} GiB each when split); default "
                        f"{presets.UTILIZATION:g}, vLLM's gpu_memory_utilization; 1: the whole "
                        "memory, no reserve")
    g.add_argument("--efficiency", type=finite(
        "a share of each limit above 0 and at most 1", lambda v: 0 < v <= 1), default=1.0,
                   metavar="SHARE",
                   help="with --predict: the share of the forklift's, the workbench's and the "
                        "link's speed a real engine reaches (docs/predict.md gives measured "
                        "ranges); default 1, the limits themselves")
    g.add_argument("--gpus", type=whole(1, MOST_DEVICES), nargs="+", default=None, metavar="N",
                   help="with --predict: split the model over N of each GPU named (one N for "
                        "all, or one for each machine, in order), as tensor "
                        "parallelism does (each holds 1/N of the tables and of the notes, and "
                        "the devices add up their work over the published link); default: the "
                        f"fewest, up to {MOST_DEVICES}, whose memory holds the plan")


def check_flags(p, args, experiments):
    """Refuse, in one line, what a measured run cannot do (another model or precision) and what
    a prediction cannot (threads); for a prediction, resolve its machines now and name its
    folder after them. -> whether the run is a prediction"""
    if args.predict is None:
        library = args.device.partition(":")[0]
        for flag, value, ok in (("--model", args.model, args.model in model.SIZES),
                                ("--note-dtype", args.note_dtype, args.note_dtype is None),
                                ("--gpus", f"--gpus {' '.join(map(str, args.gpus or []))}",
                                 args.gpus is None),
                                ("--quantize-head", "--quantize-head", not args.quantize_head),
                                ("--act-dtype", args.act_dtype, args.act_dtype is None),
                                ("--memory-utilization", "--memory-utilization",
                                 args.memory_utilization == presets.UTILIZATION),
                                ("--efficiency", "--efficiency", args.efficiency == 1),
                                ("--request", "a whole request", args.request is None)):
            if not ok:
                p.error(f"argument {flag}: {value} is for --predict (a measured run is GPT-2 "
                        f"({', '.join(model.SIZES)}) in float32, the model the post built)")
        runs_in = devices.DTYPES[library]
        if args.dtype not in (None, *runs_in):
            p.error(f"argument --dtype: a measured run on {args.device} computes "
                    f"{' or '.join(runs_in)}, got {args.dtype}" + (
                        "; 16 bits need --device torch:cuda, torch:mps or torch:cpu, and "
                        "other precisions are for --predict" if library == "numpy" else
                        "; other precisions are for --predict"))
        args.dtype = args.dtype or "float32"  # what a measured run's records say it ran in
        return False
    if args.threads:
        p.error("argument --threads: a prediction runs nothing, on no threads; leave it out")
    if args.device != "numpy":
        p.error("argument --device: a prediction runs nothing, on no device; name the machine "
                "to predict with --predict")
    given = [GIVEN] if args.roofs or args.forklift else []
    args.predict = given + [n for n in args.predict if n != GIVEN]
    if not args.predict:
        p.error("argument --predict: name a machine (" + ", ".join(known()) + ") or give the "
                "speeds: --forklift and --workbench, or --roofs FILE")
    try:
        aimed = list({(t.name, t.dtype, t.note_dtype): t for t in targets(args)}.values())
    except presets.Unpaired as e:
        p.error(f"argument --act-dtype: {e}")
    except (ValueError, OSError) as e:
        p.error(f"argument --predict: {e}")
    for t in aimed:  # speeds whose figures could not be saved and read back: none run
        for key, (low, high, what, unit) in schema.SPEEDS.items():
            speed, name = getattr(t.roofs, key), "the given" if t.name == GIVEN else t.name + "'s"
            if not low <= speed <= high:
                p.error(f"argument --efficiency: {name} {what} taken at {args.efficiency:g} "
                        f"of itself is {speed / 1e9:.3g} {unit}: it must be from "
                        f"{low / 1e9:g} to {high / 1e9:g}" if args.efficiency < 1 else
                        f"argument --predict: {name} {what}, {speed / 1e9:.3g} {unit}, "
                        f"must be from {low / 1e9:g} to {high / 1e9:g}")
    for t in aimed:  # an engine's share that leaves the model nothing is no prediction
        if t.memory and t.utilization < 1 and t.memory[0] * t.utilization \
                <= presets.RUNTIME_GIB[1] * presets.GIB:
            least = presets.RUNTIME_GIB[1] * presets.GIB / t.memory[0]
            p.error(f"argument --memory-utilization: {t.utilization:g} of {t.name}'s "
                    f"{t.memory[0] / presets.GIB:,.3g} GiB leaves nothing once the engine's "
                    f"runtime takes its {presets.RUNTIME_GIB[1]:g} GiB; give more than "
                    f"{least:.2g}")
    if args.memory_utilization != presets.UTILIZATION and not any(
            presets.a_gpu(t.name) for t in aimed):  # (a GPU's 1 is the whole of its memory)
        note(f"--memory-utilization: {', '.join(t.name for t in aimed)} "
             f"{'is' if len(aimed) == 1 else 'are'} no GPU, whose memory an engine shares: "
             f"the whole memory is taken")
    if args.quantize_head and all(accounting.DTYPE_BYTES[t.dtype] >= 2 for t in aimed):
        note("--quantize-head: the tables are 16 bits or wider, so the head and the embedding "
             "are kept at their precision already; it changes nothing here")
    bare = {n for n in args.predict if ":" not in n}  # named with no precision of its own
    args.predict = [t.name if t.name == GIVEN else f"{t.name}:{t.dtype}" for t in aimed]  # once
    served = [f"{t.name} at {t.dtype}" for t in aimed if t.dtype != "float32" and t.name in bare] \
        if args.dtype is None else []  # none named: each at the precision it serves models in
    args.dtype = args.dtype or aimed[0].dtype
    cfg = config(args.model)
    if args.gpus is not None and len(args.gpus) not in (1, len(aimed)):
        p.error(f"argument --gpus: one N for every machine, or one for each of the "
                f"{len(aimed)} named, in order; got {len(args.gpus)} counts")
    gpus = (args.gpus or [None]) * (len(aimed) if not args.gpus or len(args.gpus) == 1 else 1)
    args.devices = [split(p, args, cfg, t, experiments, n) for t, n in zip(aimed, gpus)]
    if args.label is None:
        args.label = label(cfg, aimed)
    check_folder(p, args)
    if served:
        note(f"--predict: no --dtype named, so {', '.join(served)}: "
             + (f"the math at --act-dtype's {args.act_dtype}" if args.act_dtype else
                "a GPU's 16-bit tensor rate, as GPUs serve models")
             + "; --dtype float32 for their float32 rate")
    return True


def split(p, args, cfg, aim, experiments, gpus=None):
    """How many of a machine the model is split over: `gpus` (its --gpus) where it has a link
    (one device without), or the fewest that hold the plan (the fits table says why: fitting.
    split_words), one where none does."""
    if gpus is not None:
        if gpus > 1 and not aim.linked:
            p.error(f"argument --gpus: {aim.name} has no published link between devices, so "
                    f"it predicts on one; leave --gpus out, or name a GPU with one")
        if aim.most and gpus > aim.most:
            p.error(f"argument --gpus: {aim.name}'s link joins at most {aim.most} of it (past "
                    f"that they talk over PCIe); give {aim.most} or fewer")
        if cfg.heads % gpus:
            p.error(f"argument --gpus: tensor parallelism splits {cfg.name}'s {cfg.heads} heads "
                    f"evenly, so N must divide {cfg.heads}; got {gpus}")
        return gpus
    n = fewest(cfg, aim, args, experiments)
    return 1 if n is None else n


def context(args):
    """The most tokens a notebook holds, notes and new ones together: GPT-2's 1,024 in a measured
    run, its model's own context in a prediction."""
    return (config(args.model) if args.predict is not None else model.SIZES["small"]).context


def check_range(p, args, lengths):
    """Refuse, in one line, a question or notebook longer than the model reads (context()).
    lengths: [(flag, the tokens a notebook must hold)], each experiment's."""
    cfg = config(args.model) if args.predict is not None else model.SIZES["small"]
    asked = getattr(args, "request", None)
    for flag, need in (*lengths, ("--request", sum(asked) - 1 if asked else 0)):
        if need <= cfg.context or (flag == "--request" and args.predict is None):
            continue  # (a request without --predict is refused by check_flags)
        tokens = f"{cfg.context:,} {plural(cfg.context, 'token')}"
        if args.predict is not None and flag != "--request" \
                and flag[2:] not in getattr(args, "given", {flag[2:]}):
            p.error(f"argument --model: {cfg} reads at most {tokens} (its context), fewer than "
                    f"the post's experiment needs ({need:,} for {flag}); give a smaller {flag}, "
                    f"or a model of a longer context")
        p.error(f"argument {flag}: {cfg} reads at most {tokens}, notes and new ones together; "
                f"this needs {need:,}" + ("" if args.predict is not None else
                                          " (a prediction's model may read more: --predict "
                                          "--model)"))
    return cfg.context


def check_riders(p, args, made):
    """Refuse, in one line naming the flags that plan the most, a plan too big to make: checked
    before any row is made, for a measured run as for a prediction. made: {the flags that set
    them: the (user, trip) pairs the experiments' plans hold}, counted before they are made."""
    if sum(made.values()) > MOST_RIDERS:
        most = max(made, key=made.get)
        p.error(f"argument {most.split(',')[0]}: these experiments plan {sum(made.values()):,} "
                f"users' trips, more than {MOST_RIDERS:,}, {made[most]:,} of them from {most}; "
                f"use smaller values")


def label(cfg, aimed):
    """The folder a prediction saves in: its model, its first machine and precision, and how
    many more, in letters, digits and '-' only."""
    first, name = aimed[0], re.sub(r"[^a-z0-9]+", "-", cfg.name.lower()).strip("-")[:24]
    notes = f"-{first.note_dtype}-notes" if first.note_dtype != first.dtype else ""
    more = f"-and-{len(aimed) - 1}-more" if len(aimed) > 1 else ""
    return f"predicted-{name or 'model'}-{first.name[:40]}-{first.dtype}{notes}{more}"


def items(args, experiments, told):
    """A prediction's items: the machines, every planned row of the experiments ({name:
    Experiment}) at its limit on the first machine, the limit each batch hits there, every
    machine's turning points and the speeds; then, from the records, the post's claims about
    a GPU judged on the first machine, and the pictures (told: experiments/registry.py)."""
    base, aimed = config(args.model), targets(args)
    cfg, first_roofs = aimed[0].config(base), aimed[0].roofs
    settings = records.settings_of(args)
    yield Saved("predicted", words(args))
    yield from spaced([at_scale(machines_sheet(aimed, settings, base)),
                       fits(base, aimed, args, settings, experiments)])
    found = []
    if args.request:
        asked = request.request_sheet(base, aimed, args, settings)
        found += asked.records
        yield from spaced([at_scale(asked)])
    for made, printed in plans.limit_sheets(cfg, experiments.values(), args.replace(threads=None),
                                       first_roofs, settings, aimed[0].room):
        found += made
        yield from spaced(at_scale(sheet) for sheet in printed)
    more = [parts_sheet(cfg, experiments, args, first_roofs, settings,
                        f"{aimed[0].title}{aimed[0].times}, {aimed[0].precision}"),
            grid_sheet(cfg, aimed[0], settings),
            turning_sheet(base, aimed, args, settings)]
    found += [r for sheet in more for r in sheet.records]
    yield from spaced(at_scale(sheet) for sheet in more)
    drawn = roofline(base, aimed, experiments, args)
    yield from (Saved("roofs", first_roofs.saved()), Saved("roofline", drawn))
    yield sheets.claims(found, None, ("two_phases",), args, told=told)
    if args.plot:
        yield from (Picture(name, draw) for name, draw in pictures.files(
            found, drawn, f"{cfg} on {aimed[0].title}{aimed[0].times}, {aimed[0].precision}",
            args.quick, told.drawings, predicted=True).items())  # (the roofline's legend names
    #                                                         every machine on it)


def roofline(cfg, aimed, experiments, args):
    """Each machine's roofs, and the planned reading and typing rows at their limits on it."""
    machines = []
    for t in aimed:
        c = t.config(cfg)
        done = [(name, o) for name, e in experiments.items() if e.phase
                for o in plans.at_limits(c, e.plan(args), t.roofs)]
        machines.append({"name": t.label, **plans.roofline(c, done, t.roofs)})
    return {"predicted": True, "machines": machines}
