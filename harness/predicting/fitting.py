"""Whether a plan fits a machine's memory: what each row holds at once, the most typers that
fit, the fewest devices a model too big for one is split over, and the grid of which limit
typing hits at each batch and notebook depth (grey where it does not fit)."""

from harness.keeping import records
from harness.keeping.records import SIG, Layout, col, sig
from harness.predicting import plans, request
from harness.predicting.plans import GIB, gib, verdict
from harness.predicting.turning import MOST, busy, first
from harness.showing.printers import Sheet
import accounting

BATCHES = (1, 4, 16, 64, 256, 1024)  # users on one trip, in the grid


MOST_DEVICES = 8  # the most devices a model is split over to fit: one server's


def grid_sheet(cfg, aim, settings):
    """For one machine: the limit each typing trip hits, users down, each one's notes across
    (the notebook depth): the workbench, the forklift (and how busy the workbench is meanwhile),
    the link, or does not fit; and, under them, the most users that fit at each depth."""
    depths = [d for d in DEPTHS if d < cfg.context]
    rows = []
    for u in BATCHES:
        row = {"users": u}
        for d in depths:
            need, ride = typing_memory(cfg, d, u), accounting.typing_load(d, u)
            bound = aim.roofs.limit(cfg, ride)[1]
            row[f"{d} notes"] = (
                f"does not fit ({gib(need)} GiB)" if aim.room is not None and need > aim.room
                else bound if bound == "workbench"
                else f"{bound}, workbench {sig(100 * busy(cfg, ride, aim.roofs))}% busy")
        rows.append(row)
    if aim.room is not None:
        rows.append({"users": "most that fit", **{f"{d} notes": most_users(cfg, d, aim.room)
                                                 for d in depths}})
    layout = Layout("grid", [GRID_COLUMNS[0], *(GRID_COLUMNS[1 + DEPTHS.index(d)]
                                                for d in depths)],
                    title=f"Which limit typing hits on {aim.title}{aim.times}, {aim.precision}, "
                          f"predicted")
    return Sheet(layout, records.make(layout, rows, settings, predicted=True),
                 settings=f"{cfg}; each user types one token, with that many notes",
                 note="(each trip's limit: the workbench, the forklift and how busy the workbench "
                      "is meanwhile, or the link between devices; does not fit: the tables, "
                      "every user's notes and the trip's working space need more than the room "
                      "the model has" + (f" ({gib(aim.room)} GiB" + (" each" if aim.devices > 1
                                                                     else "")
                                         + (f", {aim.reserve}" if aim.reserve else "") + ")"
                                         if aim.room is not None
                                         else " (unknown here: every cell is a limit)")
                      + f"; most that fit: the most users who type together at that depth; "
                        f"{plans.GIB_WORDS})")


DEPTHS = (0, 1024, 4096, 16384, 65536, 131072)  # notes each typer keeps, in the grid (up to the
#                                                 model's context)


#                                                 model's context)
GRID_COLUMNS = [col("users", "users", "users", "s", key=True)] + [
    col(f"{d} notes", f"{d:,} notes", "", "s") for d in DEPTHS]


def typing_memory(cfg, notes, users):
    """What `users` typers with `notes` notes each hold on one device as they type: the tables,
    every user's notes (the new one among them) and the trip's working space."""
    kept = accounting.note_bytes(cfg) * accounting.notes_share(cfg) * users * (notes + 1)
    return accounting.held_bytes(cfg) + kept + accounting.typing_scratch_bytes(cfg, notes, users)


def most_users(cfg, notes, memory):
    """The most users typing together, `notes` notes each, that fit in memory: 0 if one does
    not."""
    over = first(lambda u: typing_memory(cfg, notes, u) > memory)
    return f"{MOST if over is None else over - 1:,}"


def fits(cfg, aimed, args, settings, experiments):
    """Whether the plan fits each machine's memory: what each device needs (its share of the
    tables, of the fullest row's notes, of the working space of its biggest trip), what it has,
    the room an engine leaves the model there, and the fewest devices that hold it, each its
    share, as tensor parallelism splits them; and, under it, why a machine was split."""
    rows = []
    for t in aimed:
        need = plan_bytes(t.config(cfg), args, experiments)
        total = sum(need.values())
        row = {"name": t.name, "precision": t.precision, "devices": t.devices,
               **{k: v / GIB for k, v in need.items()}, "needs": total / GIB}
        if t.memory:
            least = fewest(cfg, t, args, experiments)
            row.update(has=t.memory[0] / GIB, room=t.room / GIB,
                       fits=story(need["tables"], total, t),
                       least=least or f"more than {min(MOST_DEVICES, t.most or MOST_DEVICES)}"
                       + (" (its link joins that many)" if t.most and t.most < MOST_DEVICES
                          else ""))
        rows.append(row)
    split = [said for t in aimed if (said := split_words(cfg, t, args, experiments))]
    reserves = dict.fromkeys(f"{t.name}{t.times} {t.reserve}" for t in aimed if t.reserve)
    return Sheet(FITS, records.make(FITS, rows, settings, predicted=True),
                 settings=f"{cfg}; the most the plan holds at once, on each device",
                 note="\n".join([
                     *split, "(needs: the tables at their precision, the head and the embedding "
                     "among them, and, for the planned row that holds the most" + (
                         " (--request's biggest batch among them, at its end)"
                         if getattr(args, "request", None) else "")
                     + ", every user's notes at "
                     "their longest and its biggest trip's working space, each device its share "
                     "(tensor parallel: the tables split, the notes split by key/value heads); "
                     "room: what an engine leaves the model of the memory ("
                     + ("; ".join(reserves) + "; --memory-utilization 1 for the whole memory"
                        if reserves else "the whole memory, none held back") + "); fewest: the "
                     "fewest such "
                     f"devices that hold it; {plans.GIB_WORDS}; memory as the device reports it: "
                     + "; ".join(dict.fromkeys(f"{t.name} {t.memory[1]}" for t in aimed
                                               if t.memory)) + ")"]))


def story(tables, need, aim):
    """The verdict for one machine, and where the reserve decides it, what the tables alone
    leave: 'does not fit (needs X of Y GiB; the tables alone fit its whole Z GiB, with W
    left, but not within the engine's reserve)'."""
    said = verdict(need, aim.room)
    if said == "fits":
        return said
    if tables <= aim.room:
        return f"{said[:-1]}; the tables alone fit, with {gib(aim.room - tables)} GiB left)"
    if tables <= aim.memory[0]:
        return (f"{said[:-1]}; the tables alone fit its whole {gib(aim.memory[0])} GiB, with "
                f"{gib(aim.memory[0] - tables)} GiB left, but not within the engine's reserve)")
    return said


def split_words(cfg, aim, args, experiments):
    """Why a machine was split over several without --gpus, in a line: '' where it was not."""
    if getattr(args, "gpus", None) or aim.devices < 2 or not aim.memory:
        return ""
    one = aim.split(1)
    need = sum(plan_bytes(one.config(cfg), args, experiments).values())
    return (f"{aim.name}: split over {aim.devices} of it, the fewest that hold the plan: one "
            f"alone would need {gib(need)} GiB and has room for {gib(one.room)} (--gpus N for "
            f"another count)")


FITS = Layout("fits", [col("name", "machine", "", "s", key=True),
                       col("precision", "precision", "", "s", key=True),
                       col("devices", "devices", "devices", "d", key=True),
                       col("tables", "tables GiB", "GiB", SIG),
                       col("notes", "notes GiB", "GiB", SIG),
                       col("working", "working GiB", "GiB", SIG),
                       col("needs", "needs GiB", "GiB", SIG),
                       col("has", "has GiB", "GiB", SIG, empty="unknown"),
                       col("room", "room GiB", "GiB", SIG, empty="unknown"),
                       col("fits", "fits", "", "s", empty="unknown"),
                       col("least", "fewest devices", "devices", "s", empty="unknown")],
              title="Does it fit: the memory the plan holds at once, predicted")


def plan_bytes(cfg, args, experiments):
    """{"tables", "notes", "working"} in bytes that the plan's experiments ({name: Experiment})
    and its --request (the most --users at the request's end) hold at most at once on one
    device, served: every user's notes, with no first notebook copied (plans.bytes_held)."""
    held = [plans.bytes_held(cfg, e.plan(args), copies=False) for e in experiments.values()]
    if getattr(args, "request", None):  # the biggest batch's whole request, at its end
        held.append(request.bytes_held(cfg, *args.request, max(args.users)))
    notes, working = max(held, key=sum)
    return {"tables": accounting.held_bytes(cfg), "notes": notes, "working": working}


def fewest(cfg, aim, args, experiments):
    """The fewest devices of this machine, 1 to MOST_DEVICES splitting the heads evenly, whose
    memory holds the plan, each its share; None where none does (or the machine's memory is
    unknown, or more than one of it has no published link)."""
    for n in range(1, MOST_DEVICES + 1):
        if n > 1 and (not aim.linked or cfg.heads % n or n > (aim.most or n)):
            continue
        split = aim.split(n)
        if split.room is not None and sum(plan_bytes(split.config(cfg), args, experiments)
                                          .values()) <= split.room:
            return n
    return None
