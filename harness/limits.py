"""Every timing held against what the machine's two limits allow: the speeds through a run, the
check table (each row against its limit) and the breakdown (where each row's time goes)."""
import dataclasses

import model
from harness import cli, plan, records, schema
from harness import speeds as machine_speeds
from harness.speeds import Speeds
from harness.printers import Layout, col, sheet
from harness.records import EXCESS, KEYS, ROW, Measured, ms, timed
from harness.terminal import plural, warn

SUSPICIOUS = 2.0  # a row slower than this many times its limit: look for a bug, as the post did
DRIFT = 0.10  # the speeds at the end of a run differ from the start by more: say so


def speeds(args, measure):
    """The forklift and workbench speeds: measured now by measure(size, matmul, runs) -> (Speeds,
    ...) at machine_speed's own sizes (same run, same noise), from --roofs, or given as
    --forklift and --workbench."""
    if args.roofs:
        return args.roofs
    if args.forklift:
        return Speeds(args.forklift * 1e9, args.workbench * 1e9, "given on the command line")
    return measure(**machine_speeds.sizes(args.quick), runs=args.runs)[0]


def add_flags(g):
    """The flags that give the speeds instead of measuring them."""
    given = g.add_mutually_exclusive_group()
    given.add_argument("--roofs", default=None, metavar="FILE",
                       type=cli.reads(schema.read_roofs, "a machine_speed.py results file"),
                       help="take the forklift and workbench speeds from a saved "
                            "machine_speed.json instead of measuring them in this run")
    given.add_argument("--forklift", type=cli.speed("GB/s", 0.001, 1e6), default=None,
                       metavar="GB/S",
                       help="the memory speed to hold the rows to (or to predict with), "
                            "with --workbench, instead of measuring it")
    g.add_argument("--workbench", type=cli.speed("GFLOP/s", 0.001, 1e9), default=None,
                   metavar="GFLOP/S", help="the math speed, with --forklift")


def check_flags(p, args):
    """Refuse, in one line, speeds given by halves."""
    if (args.forklift is None) != (args.workbench is None):
        p.error(f"argument {'--workbench' if args.forklift else '--forklift'}: --forklift and "
                f"--workbench go together")


def through_the_run(start, end):
    """The speeds measured at the start and at the end of a run, and the limit's: the faster of
    each, since the machine showed in this very run that it can go that fast. A warning says
    when they moved by more than DRIFT: rows measured in between may be held to a speed the
    machine did not have just then."""
    for key, name, unit in (("bytes_per_s", "forklift", "GB/s"),
                            ("flops_per_s", "workbench", "GFLOP/s")):
        a, b = getattr(start, key), getattr(end, key)
        if abs(b / a - 1) > DRIFT:
            warn(f"the {name} moved by {b / a - 1:+.0%} during the run ({a / 1e9:.1f} "
                 f"to {b / 1e9:.1f} {unit}): the machine's speed changed under the "
                 f"measurements; every row is held to the faster speed")
    return Speeds(max(start.bytes_per_s, end.bytes_per_s), max(start.flops_per_s, end.flops_per_s),
                  f"{start.source} at the start ({start.bytes_per_s / 1e9:.1f} GB/s, "
                  f"{start.flops_per_s / 1e9:.1f} GFLOP/s) and at the end "
                  f"({end.bytes_per_s / 1e9:.1f} GB/s, {end.flops_per_s / 1e9:.1f} "
                  f"GFLOP/s): the faster of each", Speeds(start.bytes_per_s, start.flops_per_s),
                  Speeds(end.bytes_per_s, end.flops_per_s))


@dataclasses.dataclass(frozen=True)
class Held:
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

    @property
    def seconds(self):
        return self.timing.seconds

    def excess(self):
        """Seconds above the limit, by whose they are: {who: seconds}. The tables' excess is
        split into the BLAS's (one call for the same products, against their limit, but never
        more than the tables took) and ours (the rest)."""
        s, lim = self.parts, self.part_limits
        alone = min(self.alone.seconds, s["tables"])  # where our path beats one call: its own
        return {"the BLAS": alone - lim["tables"], "our tables": s["tables"] - alone,
                "attention": s["attention"] - lim["attention"],
                "elementwise": s["elementwise"] - lim["elementwise"], "other": s["other"]}

    def most(self):
        who = self.excess()
        return max(who, key=who.get)


def through(args, start, measure):
    """The speeds every row is held to: the faster of those measured at the start and the end of
    the run (see through_the_run), or the speeds given."""
    return start if args.roofs or args.forklift else through_the_run(start, speeds(args, measure))


def at_the_limits(cfg, args, experiments, roofs):
    """The records a perfect implementation would give on this machine: every planned row of
    these experiments ({name: Experiment}) with each trip at its limit on these speeds."""
    done = {name: plan.predicted(cfg, e.plan(args), roofs) for name, e in experiments.items()}
    return records.from_rows([*(made for name, e in experiments.items()
                                for made in e.figures(cfg, args, done[name], roofs)),
                              *summary(done)], {}, predicted=True)


def held(cfg, checked, roofs, tables_alone):
    """Every checked row held to the limits: [Held]. checked: [(experiment, Outcome)];
    tables_alone(n) times the table products of n tokens alone, once for each n."""
    alone = {n: tables_alone(n) for n in sorted({sum(t for _, t in r.recorded["riders"])
                                                 for _, r in checked})}
    return [hold(cfg, name, r, roofs, alone) for name, r in checked]


def hold(cfg, experiment, outcome, roofs, alone):
    """outcome: a row measured (its "time" figure, its steps' riders, its recorded trip);
    alone: {tokens: Timing} of the table products alone."""
    bw, fl = roofs.bytes_per_s, roofs.flops_per_s
    limit_s, bound = max(model.limit(cfg, riders, bw, fl) for riders in outcome.row.steps)
    riders = outcome.recorded["riders"]
    return Held(experiment, outcome.row.label, outcome.row.keys, outcome.figures["time"], limit_s,
                bound,
                riders, outcome.recorded["parts"], alone[sum(t for _, t in riders)],
                model.part_limits(cfg, riders, bw, fl))


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
                      f"only {alone:.1f} ms: time lost around the products",
        "attention": f"attention: {took['attention']:.1f} ms, "
                     f"{h.parts['attention'] / lim['attention']:.1f}x its limit: look at how "
                     f"the notebooks are read",
        "elementwise": f"elementwise: {took['elementwise']:.1f} ms against a limit of "
                       f"{lim['elementwise'] * 1e3:.1f} ms: look for a slow elementwise road "
                       f"(like h**3)",
        "other": f"other: {took['other']:.1f} ms outside every part (splits, Python)"}[h.most()]


def held_figures(held):
    """The check's and the breakdown's figures of every held row: [(Layout, rows)]. A warning
    for each row far above its limit."""
    for h in held:
        if h.seconds / h.limit_s > SUSPICIOUS:
            warn(f"{h.experiment} {h.label} took {h.seconds / h.limit_s:.1f}x its limit "
                 f"({h.bound}-bound); {suspect(h)}")
    check = [{"experiment": h.experiment, KEYS: h.keys, "measured": ms(h.timing),
              "limit": h.limit_s * 1e3, "bound by": h.bound,
              "x limit": timed(h.seconds / h.limit_s, h.timing)} for h in held]
    parts = []
    for h in held:
        s, alone, who = h.parts, h.alone.seconds, h.excess()
        parts.append({"experiment": h.experiment, KEYS: h.keys,
                      "trip": s["trip"] * 1e3, "tables": s["tables"] * 1e3,
                      "one call": timed(alone * 1e3, h.alone), "x one call": s["tables"] / alone,
                      "attention": s["attention"] * 1e3,
                      "attention x limit": s["attention"] / h.part_limits["attention"],
                      "elementwise": s["elementwise"] * 1e3, "other": s["other"] * 1e3,
                      "most excess": f"{h.most()} {who[h.most()] * 1e3:+.1f} ms",
                      **{f"excess: {part}": max(s, 0) * 1e3 for part, s in who.items()}})
    return [(CHECK, check), (BREAKDOWN, parts)]


def held_sheets(found, held, roofs, words, runs):
    """The check sheet (each row's measured time against its limit, and which limit binds) and
    the breakdown (each part's milliseconds, the tables against the same products alone,
    attention against its own limit, and whose excess is largest), from their records; each
    row named as its experiment's sheet names it. words: the model and threads."""
    labels = {tuple({"experiment": h.experiment, **h.keys}.items()): h.label for h in held}
    return [sheet(CHECK, found, settings=words, labels=labels,
                  note=f"(limit = max(bytes / {roofs.bytes_per_s / 1e9:.1f} GB/s, FLOPs / "
                       f"{roofs.flops_per_s / 1e9:.1f} GFLOP/s); speeds {roofs.source})"),
            sheet(BREAKDOWN, found, settings=words, labels=labels,
                  note=f"(one recorded trip per row, the middle of {runs} {plural(runs, 'run')} "
                       f"apart from the timed ones; one call: the trip's table products, one BLAS "
                       f"call each on the BLAS's own threads, outside the model, best of {runs}; "
                       f"x one call: the tables' time against it, under 1 where the suite's path "
                       f"beats the library's; attention x limit: attention's against its limit)")]


CHECK = Layout("check", [col("experiment", "experiment", "", "s", key=True),
                         col(ROW, "row", "", "s", key=True),
                         col("measured", "measured ms", "ms", ".1f"),
                         col("limit", "limit ms", "ms", ".1f"), col("bound by", "bound by", "", "s"),
                         col("x limit", "x limit", "x", ".2f", compared=True)],
               title="Every row against the machine's limits")
BREAKDOWN = Layout("breakdown", [col("experiment", "experiment", "", "s", key=True),
                                 col(ROW, "row", "", "s", key=True),
                                 col("trip", "trip ms", "ms", ".1f", compared=True),
                                 col("tables", "tables ms", "ms", ".1f"),
                                 col("one call", "one call ms", "ms", ".1f"),
                                 col("x one call", "x one call", "x", ".2f"),
                                 col("attention", "attention ms", "ms", ".1f"),
                                 col("attention x limit", "attention x limit", "x", ".2f"),
                                 col("elementwise", "elementwise ms", "ms", ".1f"),
                                 col("other", "other ms", "ms", ".1f"),
                                 col("most excess", "most excess", "", "s")],
                   title="Where each row's time goes",
                   unprinted=tuple(col(f"excess: {part}", f"{part} excess ms", "ms over limit",
                                       ".1f") for part in EXCESS))


def summary(outcomes):
    """The post's closing comparison, from this run: the best reading cost per token against
    one user's typing step. -> [(Layout, rows)], none without both."""
    reads = [(r.row.key[0], r.figures["time"]) for r in outcomes.get("prefill", [])]
    one = [r.figures["time"] for r in outcomes.get("decode", []) if r.row.key == (1,)]
    if not reads or not one:
        return []
    p, read = min(reads, key=lambda pt: pt[1].seconds / pt[0])
    reading_ms, typing_ms = read.seconds * 1e3 / p, one[0].seconds * 1e3
    return [(SUMMARY, [{"reading per token": timed(reading_ms, read), "at prompt": p,
                        "typing per token": timed(typing_ms, one[0]),
                        "times cheaper": Measured(typing_ms / reading_ms,
                                                  ((1, one[0]), (-1, read)))}])]


def summary_sheets(found):
    """The closing comparison in the post's words, from its records; none where not run."""
    said = {r["figure"]: r["value"] for r in records.of(found, SUMMARY.name)}
    if not said:
        return []
    return [sheet(SUMMARY, found, text=(
        f"reading costs {said['reading per token']:.2f} ms per token (at {said['at prompt']} "
        f"tokens) and typing {said['typing per token']:.1f} ms (one user), so reading is about "
        f"{said['typing per token'] / said['reading per token']:.0f} times cheaper per token"))]


def outweigh(rows, cfg):
    """Where the notes outweigh the tables, for each user count: predicted, where the notes
    weigh as much as the tables; measured, where a step takes twice its time with no notes.
    rows: [(users, notes, step seconds)]."""
    words, tables, note_bytes = [], model.table_bytes(cfg), model.note_bytes(cfg)
    for u in sorted({row[0] for row in rows}):
        steps = sorted((row[1], row[2]) for row in rows if row[0] == u)
        predicted = tables / (u * note_bytes)
        said = (f"from {predicted:,.0f} notes each" if predicted < cfg.context
                else f"never within {cfg.family or 'the model'}'s {cfg.context:,} notes")
        measured = next((a + (b - a) * (2 * steps[0][1] - ta) / (tb - ta)
                         for (a, ta), (b, tb) in zip(steps, steps[1:])
                         if ta < 2 * steps[0][1] <= tb), None) if steps[0][0] == 0 else None
        found = f"from about {measured:,.0f}" if measured is not None else \
            f"not up to {steps[-1][0]:,}" if steps[0][0] == 0 else "unknown without depth 0"
        words.append(f"for {u} {plural(u, 'user')}, {said} by the accounting, {found} measured "
                     f"(where a step takes twice its time with no notes)")
    return "the notes outweigh the tables: " + "; ".join(words)


SUMMARY = Layout("summary", [col("reading per token", "reading ms/token", "ms", ".2f"),
                             col("at prompt", "at prompt", "tokens", "d"),
                             col("typing per token", "typing ms/token", "ms", ".1f"),
                             col("times cheaper", "times cheaper", "x", ".1f", compared=True)],
                 title="Reading against typing, per token")
