"""The turning points of a machine: where each phase turns from the forklift to the
workbench (how many tokens a read needs, how many typers a step), how busy one typer keeps the
workbench, and how long a long question freezes the typers; for the post's GPU claims."""
import functools

from harness.keeping import records
from harness.keeping.records import SIG, Layout, col
from harness.predicting import plans
from harness.predicting.presets import target
from harness.showing.printers import Sheet
import accounting


MOST = 10 ** 12  # the most tokens or users a turning point is looked for up to


def busy(cfg, riders, roofs):
    """The share of the time the workbench works on a trip at its limit: 1 when it binds."""
    work = accounting.trip_flops(cfg, riders) / roofs.flops_per_s
    return work / roofs.limit(cfg, riders)[0]


def bound(cfg, riders, roofs):
    """Whether the workbench binds the trip: its math the slowest job, past the link's
    sends and wait (a trip split over devices also waits out its all-reduces: accounting.limit)."""
    return roofs.limit(cfg, riders)[1] == "workbench"


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
    typing = functools.partial(accounting.typing_load, notes)  # users -> their trip's Load
    normal = roofs.limit(cfg, typing(typers))[0]
    at_once = roofs.limit(cfg, [(notes, 1)] * typers + [(0, question)])[0]
    return {"balance": roofs.balance,
            "reads turn": first(lambda p: bound(cfg, [(0, p)], roofs), cfg.context),
            "types turn": first(lambda u: bound(cfg, typing(u), roofs)),
            "half bench": first(lambda u: busy(cfg, typing(u), roofs) >= 0.5),
            "one typer": 100 * busy(cfg, typing(1), roofs),
            "typing ceiling": 100 * busy(cfg, typing(MOST), roofs),
            "notes outweigh": accounting.table_bytes(cfg) / accounting.note_bytes(cfg),
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
                      f"at: the question length, within the model's context, from which reading "
                      f"is workbench-bound (never: the forklift, or the link, binds every "
                      f"question it can read); types "
                      f"turn at: the users typing together from which typing is; half bench "
                      f"at: the users for half the workbench's speed; one typer busy: how much of "
                      f"the workbench one typer uses; typing ceiling: the most any number of "
                      f"typers can use, their notes growing with them; notes outweigh at: the "
                      f"notes one user needs to weigh what the tables weigh; freeze: a "
                      f"{args.question:,}-token question read at once, against the "
                      f"{args.typers} typers' normal gap; {plans.engine_words(args)})")


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
