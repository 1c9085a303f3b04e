"""Where a predicted trip's time goes, as the measured breakdown says where a measured one's
went: each part of the trip (the tables, attention, the elementwise work, the LM head and, split
over devices, the link) at its own limit, their sum, and the whole trip's limit, which is not
their sum: the forklift and the workbench work at once, so a trip's limit is the slower of all
its fetching and all its math, max(sum of bytes / forklift, sum of FLOPs / workbench)."""
from harness.keeping import records
from harness.keeping.records import KEYS, ROW, SIG, Layout, col
from harness.predicting import plans
from harness.showing.printers import Sheet
import accounting

def split(cfg, riders, roofs):
    """{part: seconds} of one trip, each part on its own at the machine's speeds, the link's
    sends among them on a model split over devices."""
    parts = accounting.part_limits(cfg, riders, roofs.bytes_per_s, roofs.flops_per_s)
    if cfg.devices > 1:
        parts["link"] = (accounting.link_bytes(cfg, riders) / roofs.link_per_s
                         + accounting.link_wait(cfg, roofs.link_latency_s))
    return parts


def parts_row(cfg, name, row, roofs):
    """A planned row's recorded trip (its slowest, as the measured breakdown records), part by
    part at the limits: {figure: value}."""
    riders = row.steps[plans.recorded_step(cfg, row)]
    parts = split(cfg, riders, roofs)
    whole, bound = roofs.limit(cfg, riders)
    summed = sum(parts.values())
    return {"of": name, KEYS: dict(row.keys), **{p: s * 1e3 for p, s in parts.items()},
            "summed": summed * 1e3, "trip": whole * 1e3,
            "serial": roofs.serial(cfg, riders) * 1e3 if cfg.devices > 1 else None,
            "over": summed / whole, "bound": bound}


def parts_sheet(cfg, experiments, args, roofs, settings, title):
    """The predicted breakdown of every checked experiment's row (those the check and the
    breakdown hold to their limits: reading, typing, the collision) on one machine."""
    planned = [(name, row) for name, e in experiments.items() if e.checked
               for row in e.plan(args)]
    rows = [parts_row(cfg, name, row, roofs) for name, row in planned]
    labels = {tuple({"of": name, **row.keys}.items()): row.label for name, row in planned}
    columns = [c for c in PARTS.columns if c.figure not in ("head", "link", "serial")
               or (c.figure == "head" and cfg.vocab) or (c.figure != "head" and cfg.devices > 1)]
    layout = Layout(PARTS.name, columns, title=PARTS.title)
    return Sheet(layout, records.make(layout, rows, settings, predicted=True), labels=labels,
                 settings=f"{cfg}; on {title}", note=(
                     "(predicted: each part's limit on its own, max(its bytes / forklift, its "
                     "FLOPs / workbench)" + (", the link its bytes / the link" if cfg.devices > 1
                                             else "")
                     + "; parts summed: as if each waited for the one before; trip: the whole "
                       "trip's limit, every part's fetching and math overlapped, the limit every "
                       "other table uses" + (", the link's sends hidden behind the work; link "
                                             "serial: the sends after it" if cfg.devices > 1
                                             else "")
                     + "; summed x trip: how far apart the two readings are; a collision row: "
                       "its slowest step)"))


PARTS = Layout("predicted parts", [
    col("of", "experiment", "", "s", key=True), col(ROW, "row", "", "s", key=True),
    col("tables", "tables ms", "ms", SIG),
    col("attention", "attention ms", "ms", SIG), col("elementwise", "elementwise ms", "ms", SIG),
    col("head", "head ms", "ms", SIG), col("link", "link ms", "ms", SIG),
    col("summed", "parts summed ms", "ms", SIG), col("trip", "trip ms", "ms", SIG),
    col("serial", "link serial ms", "ms", SIG), col("over", "summed x trip", "x", SIG),
    col("bound", "bound by", "", "s")],
    title="Where each trip's time goes, PREDICTED")
