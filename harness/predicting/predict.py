"""The post's Part 4: which limit you will hit, for any model, machine, precision and batch,
before you run anything. A prediction runs nothing: every figure is a limit, max(bytes / the
forklift, FLOPs / the workbench), from the model's accounting and a machine's two speeds (named
in presets.json with their public sources, measured under results/, or given); a real engine
reaches some fraction of it.

    python two_phases.py --predict h100-sxm --dtype bfloat16
    python two_phases.py --predict h100-sxm rtx-4090:int4 post --model llama-3-8b
"""
import dataclasses
import functools
import re

from harness.flags import check_folder, whole
from harness.terminal import note
from harness.keeping import records
from harness.keeping.records import SIG, Layout, col, sig
from harness.predicting import plans
from harness.predicting.model_files import config
from harness.predicting.plans import gb, verdict
from harness.predicting.presets import GIVEN, known, target, targets
from harness.showing import pictures, sheets
from harness.showing.printers import Picture, Saved, Sheet, spaced
import model

BATCHES = (1, 4, 16, 64, 256, 1024)  # users on one trip, in the table of limits
MOST_DEVICES = 8  # the most devices a model is split over to fit: one server's
MOST = 10 ** 12  # the most tokens or users a turning point is looked for up to
MOST_RIDERS = 2_000_000  # (user, trip) pairs a prediction plans at most: a few seconds' work


# ---------------------------------------------------------------------------------------------
# the turning points: where each phase turns from the forklift to the workbench


def busy(cfg, riders, roofs):
    """The share of the time the workbench works on a trip at its limit: 1 when it binds."""
    work = model.trip_flops(cfg, riders) / roofs.flops_per_s
    return work / roofs.limit(cfg, riders)[0]


def first(holds, hi=MOST):
    """The smallest n in 1..hi where holds(n), holds being monotone; None where none does."""
    if not holds(hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid + 1, hi)
    return lo


def turning(cfg, roofs, notes, typers, question):
    """One machine's turning points and shares, as a sheet row. -> {figure: value}"""
    typing = functools.partial(model.typing_load, notes)  # users -> their trip's Load
    normal = roofs.limit(cfg, typing(typers))[0]
    at_once = roofs.limit(cfg, [(notes, 1)] * typers + [(0, question)])[0]
    return {"balance": roofs.balance,
            "reads turn": first(lambda p: busy(cfg, [(0, p)], roofs) >= 1),
            "types turn": first(lambda u: busy(cfg, typing(u), roofs) >= 1),
            "half bench": first(lambda u: busy(cfg, typing(u), roofs) >= 0.5),
            "one typer": 100 * busy(cfg, typing(1), roofs),
            "typing ceiling": 100 * busy(cfg, typing(MOST), roofs),
            "notes outweigh": model.table_bytes(cfg) / model.note_bytes(cfg),
            "freeze": at_once / normal}


def turning_sheet(cfg, aimed, args, settings):
    """The turning points of every machine asked for, and of the post's machine to compare."""
    post = [] if any(t.name == "post" for t in aimed) else [target("post", "float32", None,
                                                                   args.out)]
    found = [{"name": t.name + t.times, "precision": t.precision,
              **turning(t.config(cfg), t.roofs, args.notes, args.typers, args.question)}
             for t in [*aimed, *post]]
    return Sheet(TURNING, records.make(TURNING, found, settings, predicted=True),
                 settings=f"{cfg}; typers with {args.notes} notes each"
                          + ("; the post's machine to compare" if post else ""),
                 note=f"(predicted limits, nothing was run. balance: FLOPs per byte; reads turn "
                      f"at: the question length from which reading is workbench-bound; types "
                      f"turn at: the users typing together from which typing is; half bench "
                      f"at: the users for half the workbench's speed; one typer busy: how much of "
                      f"the workbench one typer uses; typing ceiling: the most any number of "
                      f"typers can use, their notes growing with them; notes outweigh at: the "
                      f"notes one user needs to weigh what the tables weigh; freeze: a "
                      f"{args.question:,}-token question read at once, against the "
                      f"{args.typers} typers' normal gap. A real engine reaches some fraction "
                      f"of each limit.)")


TURNING = Layout("turning points", [
    col("name", "machine", "", "s", key=True), col("precision", "precision", "", "s", key=True),
    col("balance", "balance", "FLOPs/byte", SIG),
    col("reads turn", "reads turn at", "tokens", SIG, compared=True, empty="never"),
    col("types turn", "types turn at", "users", SIG, compared=True, empty="never"),
    col("half bench", "half bench at", "users", SIG, empty="never"),
    col("one typer", "one typer busy %", "%", SIG, compared=True),
    col("typing ceiling", "typing ceiling %", "%", SIG),
    col("notes outweigh", "notes outweigh at", "notes", SIG),
    col("freeze", "freeze x normal", "x", SIG, compared=True)],
    title="Which limit you will hit: the turning points, predicted")


def grid_sheet(cfg, aim, settings):
    """For one machine: the limit each typing trip hits, users down, each one's notes across
    (the notebook depth): the workbench, the forklift (and how busy the workbench is meanwhile),
    the link, or does not fit; and, under them, the most users that fit at each depth."""
    depths = [d for d in DEPTHS if d < cfg.context]
    rows = []
    for u in BATCHES:
        row = {"users": u}
        for d in depths:
            need, ride = typing_memory(cfg, d, u), model.typing_load(d, u)
            bound = aim.roofs.limit(cfg, ride)[1]
            row[f"{d} notes"] = (
                f"does not fit ({gb(need)} GB)" if aim.memory and need > aim.memory[0]
                else bound if bound == "workbench"
                else f"{bound} {sig(100 * busy(cfg, ride, aim.roofs))}%")
        rows.append(row)
    if aim.memory:
        rows.append({"users": "most that fit", **{f"{d} notes": most_users(cfg, d, aim.memory[0])
                                                 for d in depths}})
    layout = Layout("grid", [GRID_COLUMNS[0], *(GRID_COLUMNS[1 + DEPTHS.index(d)]
                                                for d in depths)],
                    title=f"Which limit typing hits on {aim.title}{aim.times}, {aim.precision}, "
                          f"predicted")
    return Sheet(layout, records.make(layout, rows, settings, predicted=True),
                 settings=f"{cfg}; each user types one token, with that many notes",
                 note="(each trip's limit: the workbench, the forklift and how busy the workbench "
                      "is meanwhile, or the link between devices; does not fit: the tables, "
                      "every user's notes and the trip's working space need more than the "
                      "memory" + (f" ({gb(aim.memory[0])} GB" + (" each" if aim.devices > 1
                                                                    else "") + ")"
                                  if aim.memory else " (unknown here: every cell is a limit)")
                      + "; most that fit: the most users who type together at that depth)")


DEPTHS = (0, 1024, 4096, 16384, 65536, 131072)  # notes each typer keeps, in the grid (up to the
#                                                 model's context)
GRID_COLUMNS = [col("users", "users", "users", "s", key=True)] + [
    col(f"{d} notes", f"{d:,} notes", "", "s") for d in DEPTHS]


def typing_memory(cfg, notes, users):
    """What `users` typers with `notes` notes each hold on one device as they type: the tables,
    every user's notes (the new one among them) and the trip's working space."""
    kept = model.note_bytes(cfg) * model.notes_share(cfg) * users * (notes + 1)
    one, two = (model.trip_scratch_bytes(cfg, [(notes, 1)] * n) for n in (1, 2))
    working = one + (users - 1) * (two - one)  # the scores of one user at a time, and every
    #                                            user's activations
    return model.held_bytes(cfg) + kept + working


def most_users(cfg, notes, memory):
    """The most users typing together, `notes` notes each, that fit in memory: 0 if one does
    not."""
    over = first(lambda u: typing_memory(cfg, notes, u) > memory)
    return f"{MOST if over is None else over - 1:,}"


def fits(cfg, aimed, args, settings, experiments):
    """Whether the plan fits each machine's memory: what each device needs (its share of the
    tables, of the fullest row's notes, of the working space of its biggest trip), what it has,
    and the fewest devices that hold it, each its share, as tensor parallelism splits them."""
    rows = []
    for t in aimed:
        need = plan_bytes(t.config(cfg), args, experiments)
        total = sum(need.values())
        row = {"name": t.name, "precision": t.precision, "devices": t.devices,
               **{k: v / 1e9 for k, v in need.items()}, "needs": total / 1e9}
        if t.memory:
            least = fewest(cfg, t, args, experiments)
            row.update(has=t.memory[0] / 1e9, fits=verdict(total, t.memory[0]),
                       least=least or f"more than {MOST_DEVICES}")
        rows.append(row)
    return Sheet(FITS, records.make(FITS, rows, settings, predicted=True),
                 settings=f"{cfg}; the most the plan holds at once, on each device", note=(
                     "(needs: the tables at their precision, the head and the embedding among "
                     "them, and, for the planned row that holds the most, every user's notes at "
                     "their longest and its biggest trip's working space, each device its share "
                     "(tensor parallel: the tables split, the notes split by key/value heads); "
                     "fewest: the fewest such devices that hold it; memory as published: "
                     + "; ".join(f"{t.name} {t.memory[1]}" for t in aimed if t.memory) + ")"))


FITS = Layout("fits", [col("name", "machine", "", "s", key=True),
                       col("precision", "precision", "", "s", key=True),
                       col("devices", "devices", "devices", "d", key=True),
                       col("tables", "tables GB", "GB", SIG), col("notes", "notes GB", "GB", SIG),
                       col("working", "working GB", "GB", SIG),
                       col("needs", "needs GB", "GB", SIG), col("has", "has GB", "GB", SIG,
                                                                empty="unknown"),
                       col("fits", "fits", "", "s", empty="unknown"),
                       col("least", "fewest devices", "devices", "s", empty="unknown")],
              title="Does it fit: the memory the plan holds at once, predicted")


def plan_bytes(cfg, args, experiments):
    """{"tables", "notes", "working"} in bytes that the plan's experiments ({name: Experiment})
    hold at most at once on one device, as a measured run's memory check counts them
    (plans.held)."""
    notes, working = max((plans.held(cfg, e.plan(args)) for e in experiments.values()), key=sum)
    return {"tables": model.held_bytes(cfg), "notes": notes, "working": working}


def fewest(cfg, aim, args, experiments):
    """The fewest devices of this machine, 1 to MOST_DEVICES splitting the heads evenly, whose
    memory holds the plan, each its share; None where none does (or the machine's memory is
    unknown, or more than one of it has no published link)."""
    for n in range(1, MOST_DEVICES + 1):
        if n > 1 and (not aim.linked or cfg.heads % n):
            continue
        c = dataclasses.replace(aim, devices=n).config(cfg)
        if aim.memory and sum(plan_bytes(c, args, experiments).values()) <= aim.memory[0]:
            return n
    return None


def machines_sheet(aimed, settings):
    """The machines predicted for: their speeds at the precision asked, and the sources."""
    found = [{"name": t.name, "what": t.title, "precision": t.precision,
              "forklift": t.roofs.bytes_per_s / 1e9, "workbench": t.roofs.flops_per_s / 1e9,
              "balance": t.roofs.balance,
              "link": t.roofs.link_per_s / 1e9 if t.linked else None} for t in aimed]
    return Sheet(MACHINES, records.make(MACHINES, found, settings, predicted=True),
                 settings="their speeds as published (presets.json), measured, or given",
                 note="sources:\n" + "\n".join(f"- {t.name}: {t.roofs.source}" for t in aimed))


MACHINES = Layout("machines", [col("name", "machine", "", "s", key=True),
                               col("what", "what", "", "s"),
                               col("precision", "precision", "", "s", key=True),
                               col("forklift", "forklift GB/s", "GB/s", SIG),
                               col("workbench", "workbench GFLOP/s", "GFLOP/s", SIG),
                               col("balance", "balance FLOPs/byte", "FLOPs/byte", SIG),
                               col("link", "link GB/s each way", "GB/s", SIG, empty="none")],
                  title="The machines predicted for")


def words(args):
    """The line a prediction shows in place of a machine line."""
    aimed = targets(args)
    return ("machine: none: PREDICTED limits, nothing was run; a real engine reaches some "
            "fraction of them | " + "; ".join(
                f"{t.name}{t.times} ({t.precision}): {sig(t.roofs.bytes_per_s / 1e9)} GB/s, "
                f"{sig(t.roofs.flops_per_s / 1e9)} GFLOP/s"
                + (f", linked at {sig(t.roofs.link_per_s / 1e9)} GB/s" if t.devices > 1 else "")
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
    g.add_argument("--dtype", choices=model.DTYPE_BYTES, default=None, metavar="PRECISION",
                   help="with --predict: a table number's precision, "
                        f"{', '.join(model.DTYPE_BYTES)}; the math runs at that precision's "
                        "speed (int8-weights' and int4-weights' at 16 bits: weights only); "
                        "default: a GPU's 16-bit tensor rate "
                        "(bfloat16), any other machine's float32; a measured run is float32")
    g.add_argument("--note-dtype", choices=model.NOTE_DTYPES, default=None, metavar="PRECISION",
                   help=f"with --predict: a note's precision, {', '.join(model.NOTE_DTYPES)}; "
                        "default: --dtype's (16 bits for weights only)")
    g.add_argument("--gpus", type=whole(1, MOST_DEVICES), default=None, metavar="N",
                   help="with --predict: split the model over N of each GPU named, as tensor "
                        "parallelism does (each holds 1/N of the tables and of the notes, and "
                        "the devices add up their work over the published link); default: the "
                        f"fewest, up to {MOST_DEVICES}, whose memory holds the plan")


def check_flags(p, args, experiments):
    """Refuse, in one line, what a measured run cannot do (another model or precision) and what
    a prediction cannot (threads); for a prediction, resolve its machines now and name its
    folder after them. -> whether the run is a prediction"""
    if args.predict is None:
        for flag, value, ok in (("--model", args.model, args.model in model.SIZES),
                                ("--dtype", args.dtype, args.dtype in (None, "float32")),
                                ("--note-dtype", args.note_dtype, args.note_dtype is None),
                                ("--gpus", args.gpus, args.gpus is None)):
            if not ok:
                p.error(f"argument {flag}: a measured run is GPT-2 ({', '.join(model.SIZES)}) "
                        f"in float32, the model the post built; {value} is for --predict")
        args.dtype = "float32"  # what a measured run's records say it ran in
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
    except (ValueError, OSError) as e:
        p.error(f"argument --predict: {e}")
    args.predict = [t.name if t.name == GIVEN else f"{t.name}:{t.dtype}" for t in aimed]  # once
    served = [f"{t.name} at {t.dtype}" for t in aimed if t.dtype != "float32"] \
        if args.dtype is None else []  # none named: each at the precision it serves models in
    args.dtype = args.dtype or aimed[0].dtype
    cfg = config(args.model)
    args.devices = [split(p, args, cfg, t, experiments) for t in aimed]
    if args.label is None:
        args.label = label(cfg, aimed)
    check_folder(p, args)
    if served:
        note(f"--predict: no --dtype named, so {', '.join(served)}: a GPU's 16-bit tensor rate, "
             f"as GPUs serve models; --dtype float32 for their float32 rate")
    return True


def split(p, args, cfg, aim, experiments):
    """How many of a machine the model is split over: --gpus where it has a link (one device
    without), or the fewest that hold the plan (said on stderr when more than one)."""
    if args.gpus is not None:
        if args.gpus > 1 and not aim.linked:
            p.error(f"argument --gpus: {aim.name} has no published link between devices, so "
                    f"it predicts on one; leave --gpus out, or name a GPU with one")
        if cfg.heads % args.gpus:
            p.error(f"argument --gpus: tensor parallelism splits {cfg.name}'s {cfg.heads} heads "
                    f"evenly, so N must divide {cfg.heads}; got {args.gpus}")
        return args.gpus
    need = sum(plan_bytes(aim.config(cfg), args, experiments).values())
    if not aim.memory or need <= aim.memory[0]:
        return 1
    n = fewest(cfg, aim, args, experiments)
    if n is None:
        note(f"--predict {aim.name}: {cfg.name} does not fit (needs {gb(need)} of "
             f"{gb(aim.memory[0])} GB), nor split over up to {MOST_DEVICES} of it: predicted "
             f"on one, marked as not fitting")
        return 1
    note(f"--predict {aim.name}: {cfg.name} does not fit one (needs {gb(need)} of "
         f"{gb(aim.memory[0])} GB); {n} of it hold it, so predicted split over {n} (tensor "
         f"parallel; --gpus N for another count)")
    return n


def check_range(p, args):
    """Refuse, in one line, a question or notebook longer than the model reads: GPT-2's 1,024
    tokens in a measured run, its model's own context in a prediction. -> that context"""
    cfg = config(args.model) if args.predict is not None else model.SIZES["small"]
    for flag, need in (("--prompts", max(args.prompts)), ("--question", args.question),
                       ("--notes", args.notes + 1), ("--depths", max(args.depths) + 1)):
        if need > cfg.context:
            p.error(f"argument {flag}: {cfg} reads at most {cfg.context:,} tokens, notes and "
                    f"new ones together; this needs {need:,}"
                    + ("" if args.predict is not None else " (a prediction's model may read "
                       "more: --predict --model)"))
    return cfg.context


def riders(args):
    """How many (user, trip) pairs the experiments' plans hold, counted before they are made:
    {the flags that set them: how many}."""
    steps = sum(-(-args.question // c) + 1 for c in args.chunk)
    made = {"--prompts": len(args.prompts) * ("prefill" in args.experiments),
            "--users": sum(args.users) * ("decode" in args.experiments),
            "--typers, --question and --chunk": (args.typers + 1) * (steps + 1) * (
                "collision" in args.experiments),
            "--users, at every --depths": sum(args.depth_users) * len(args.depths) * (
                "depth" in args.experiments)}
    return made


def check_riders(p, args):
    """Refuse, in one line naming the flags that plan the most, a plan too big to make: checked
    before any row is made, for a measured run as for a prediction."""
    made = riders(args)
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


def items(args, experiments):
    """A prediction's items: the machines, every planned row of the experiments ({name:
    Experiment}) at its limit on the first machine, the limit each batch hits there, every
    machine's turning points and the speeds; then, from the records, the post's claims about
    a GPU judged on the first machine, and the pictures."""
    base, aimed = config(args.model), targets(args)
    cfg, first_roofs = aimed[0].config(base), aimed[0].roofs
    settings = records.settings_of(args)
    yield Saved("predicted", words(args))
    yield from spaced([machines_sheet(aimed, settings), fits(base, aimed, args, settings,
                                                             experiments)])
    found = []
    for made, printed in plans.predict(cfg, experiments.values(), args.replace(threads=None),
                                       first_roofs, settings, aimed[0].memory):
        found += made
        yield from spaced(printed)
    more = [grid_sheet(cfg, aimed[0], settings),
            turning_sheet(base, aimed, args, settings)]
    found += [r for sheet in more for r in sheet.records]
    yield from spaced(more)
    drawn = roofline(base, aimed, experiments, args)
    yield from (Saved("roofs", first_roofs.saved()), Saved("roofline", drawn))
    yield sheets.claims(found, None, ("two_phases",), args)
    if args.plot:
        yield from (Picture(name, draw) for name, draw in pictures.files(
            found, drawn, f"{cfg} on {aimed[0].title}" + (
                f"; the roofline adds {', '.join(t.label for t in aimed[1:])}" if aimed[1:]
                else ""), args.quick, predicted=True).items())


def roofline(cfg, aimed, experiments, args):
    """Each machine's roofs, and the planned reading and typing rows at their limits on it."""
    machines = []
    for t in aimed:
        c = t.config(cfg)
        done = [(name, o) for name in ("prefill", "decode") if name in experiments
                for o in plans.predicted(c, experiments[name].plan(args), t.roofs)]
        machines.append({"name": t.label, **plans.roofline(c, done, t.roofs)})
    return {"predicted": True, "machines": machines}
