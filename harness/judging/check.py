"""Every timing held against what the machine's two limits allow: the check table (each row
against its limit) and the breakdown (where each row's time goes, and whose the excess is)."""
import dataclasses

from harness.terminal import plural, warn
from harness.keeping.records import EXCESS, KEYS, Layout, ROW, col, ms, timed
from harness.measuring.speeds import x_limit
import accounting

SUSPICIOUS = 2.0  # a row slower than this many times its limit: look for a bug, as the post did


@dataclasses.dataclass(frozen=True)
class Checked:
    """A measured row held against the limits, once: the row's time and its limit (a row of
    several trips, the chunks, is held to its slowest trip's), and its recorded trip's parts
    against theirs. parts: {part: seconds, "trip"}; alone: the Timing of the same table
    products alone; part_limits: {part: seconds}."""
    experiment: str
    label: str
    keys: dict  # the row's keys in its own sheet
    timing: object  # the row's Timing: its seconds are the figure held
    limit_s: float
    bound: str
    riders: list
    parts: dict
    alone: object
    part_limits: dict
    part_runs: dict = None  # {part: Timing} of every recording, where they were kept
    x: object = None  # its time over its limit, as a figure (speeds.x_limit: round by round)

    @property
    def seconds(self):
        return self.timing.seconds

    def excess(self):
        """Seconds above the limit, by whose they are: {who: seconds}. The tables' excess is
        split into the BLAS's (one call for the same products, against their limit) and ours
        (the rest); where the trip's own path beat one call (the compiled tiles), none of it is
        the BLAS's, which the trip did not wait on."""
        s, lim = self.parts, self.part_limits
        blas = max(0.0, self.alone.seconds - lim["tables"]) \
            if self.alone.seconds < s["tables"] else 0.0
        return {"the BLAS": blas, "our tables": s["tables"] - lim["tables"] - blas,
                "attention": s["attention"] - lim["attention"],
                "elementwise": s["elementwise"] - lim["elementwise"], "other": s["other"]}

    def most(self):
        who = self.excess()
        return max(who, key=who.get)


def held(cfg, checked, roofs, tables_alone):
    """Every checked row held to the limits: [Checked]. checked: [(experiment, Outcome)];
    tables_alone(n) times the table products of n tokens alone, once for each n."""
    alone = {n: tables_alone(n) for n in sorted({sum(t for _, t in r.recorded["riders"])
                                                 for _, r in checked})}
    return [hold(cfg, name, r, roofs, alone) for name, r in checked]


def hold(cfg, experiment, outcome, roofs, alone):
    """outcome: a row measured (its "time" figure, its steps' riders, its recorded trip);
    alone: {tokens: Timing} of the table products alone."""
    x, limit_s, bound = x_limit(cfg, outcome.row.steps, outcome.figures["time"], roofs)
    riders = outcome.recorded["riders"]
    return Checked(experiment, outcome.row.label, outcome.row.keys, outcome.figures["time"],
                   limit_s, bound, riders, outcome.recorded["parts"],
                   alone[sum(t for _, t in riders)],
                   accounting.part_limits(cfg, riders, roofs.bytes_per_s, roofs.flops_per_s),
                   outcome.recorded.get("runs"), x)


def suspect(h):
    """The part that holds the most excess, in a few words for a warning."""
    took = {p: s * 1e3 for p, s in h.parts.items()}
    alone, lim = h.alone.seconds * 1e3, h.part_limits
    tokens = sum(t for _, t in h.riders)
    return {
        "the BLAS": f"tables: {took['tables']:.1f} ms, one BLAS call for the same products takes "
                    f"{alone:.1f} ms ({alone / 1e3 / lim['tables']:.1f}x their limit): the BLAS's "
                    f"own path for {tokens} {plural(tokens, 'token')}",
        "our tables": f"tables: {took['tables']:.1f} ms, one BLAS call for the same products takes "
                      + (f"only {alone:.1f} ms: time lost around the products"
                         if alone < took["tables"] else
                         f"{alone:.1f} ms: the suite's own path, "
                         f"{h.parts['tables'] / lim['tables']:.1f}x their limit"),
        "attention": f"attention: {took['attention']:.1f} ms, "
                     f"{h.parts['attention'] / lim['attention']:.1f}x its limit: look at how "
                     f"the notebooks are read",
        "elementwise": f"elementwise: {took['elementwise']:.1f} ms against a limit of "
                       f"{lim['elementwise'] * 1e3:.1f} ms: look for a slow elementwise road "
                       f"(like h**3)",
        "other": f"other: {took['other']:.1f} ms outside every part (splits, Python)"}[h.most()]


SLIVER = 0.05  # attention under this share of its trip: its distance from its tiny limit (a
#               1-token read's few notes) tells nothing, and is not printed


def held_figures(held):
    """The check's and the breakdown's figures of every held row: [(Layout, rows)]. A warning
    for each row far above its limit, but one other work disturbed (its table flags it: a
    disturbed figure is never the ground of a warning)."""
    for h in held:
        if h.seconds / h.limit_s > SUSPICIOUS and not h.timing.disturbed:
            warn(f"{h.experiment} {h.label} took {h.seconds / h.limit_s:.1f}x its limit "
                 f"({h.bound}-bound); {suspect(h)}")
    check = [{"experiment": h.experiment, KEYS: h.keys, "measured": ms(h.timing),
              "limit": h.limit_s * 1e3, "bound by": h.bound,
              "x limit": h.x} for h in held]
    parts = []
    for h in held:
        s, alone, who = h.parts, h.alone.seconds, h.excess()
        part = {p: timed(t.seconds * 1e3, t) for p, t in h.part_runs.items()} if h.part_runs \
            else {p: v * 1e3 for p, v in s.items()}  # each recording's, where they were kept
        parts.append({"experiment": h.experiment, KEYS: h.keys,
                      "trip": part["trip"], "tables": part["tables"],
                      "one call": timed(alone * 1e3, h.alone), "x one call": s["tables"] / alone,
                      "attention": part["attention"],
                      "attention x limit": s["attention"] / h.part_limits["attention"]
                      if s["attention"] >= SLIVER * s["trip"] else None,  # else: a sliver
                      "elementwise": part["elementwise"], "other": part["other"],
                      "most excess": f"{h.most()} {who[h.most()] * 1e3:+.1f} ms",
                      **{f"excess: {part}": max(s, 0) * 1e3 for part, s in who.items()}})
    return [(CHECK, check), (BREAKDOWN, parts)]


HELD_KEYS = [col("experiment", "experiment", "", "s", key=True),
             col(ROW, "row", "", "s", key=True)]  # a held row: its experiment, its name there
CHECK = Layout("check", [*HELD_KEYS, col("measured", "measured ms", "ms", ".1f"),
                         col("limit", "limit ms", "ms", ".1f"),
                         col("bound by", "bound by", "", "s"),
                         col("x limit", "x limit", "x", ".2f", compared=True, by_round=True)],
               title="Every row against the machine's limits")
BREAKDOWN = Layout("breakdown", [*HELD_KEYS, col("trip", "trip ms", "ms", ".1f", compared=True),
                                 col("tables", "tables ms", "ms", ".1f"),
                                 col("one call", "one call ms", "ms", ".1f"),
                                 col("x one call", "x one call", "x", ".2f"),
                                 col("attention", "attention ms", "ms", ".1f"),
                                 col("attention x limit", "attention x limit", "x", ".2f",
                                     empty="a sliver"),
                                 col("elementwise", "elementwise ms", "ms", ".1f"),
                                 col("other", "other ms", "ms", ".1f"),
                                 col("most excess", "most excess", "", "s")],
                   title="Where each row's time goes",
                   unprinted=tuple(col(f"excess: {part}", f"{part} excess ms", "ms over limit",
                                       ".1f") for part in EXCESS))


# ---- a GPU run against its datasheet: each row against the limits its preset's published speeds
# set (what --predict of that preset says), beside the check against the speeds measured here


def datasheet_figures(cfg, checked, preset):
    """Reading's and typing's rows against their limits at the preset's published speeds
    (checked: [(experiment, Outcome)], the two phases'; preset: presets.Target at the run's
    precision). -> [(Layout, rows)]"""
    rows = []
    for experiment, r in checked:
        limit_s, bound = max(preset.roofs.limit(cfg, riders) for riders in r.row.steps)
        t = r.figures["time"]
        rows.append({"experiment": experiment, KEYS: r.row.keys, "measured": ms(t),
                     "datasheet": limit_s * 1e3, "bound by": bound,
                     "x datasheet": timed(t.seconds / limit_s, t)})
    return [(DATASHEET, rows)]


DATASHEET = Layout("datasheet", [*HELD_KEYS, col("measured", "measured ms", "ms", ".2f"),
                                 col("datasheet", "datasheet limit ms", "ms", ".3f"),
                                 col("bound by", "bound by", "", "s"),
                                 col("x datasheet", "x datasheet", "x", ".2f")],
                   timed=("measured",), title="Against the datasheet: the same rows at the "
                                              "published limits")
