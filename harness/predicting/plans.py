"""Rows planned, then measured or predicted into records. An experiment declares its rows (what
rides each trip), how it measures them and the sheets it prints; a prediction and the memory a
run needs are read off the same rows, with no model built."""
import dataclasses
import statistics

from harness.terminal import plural
from harness.measuring import timing
from harness.keeping import records
from harness.keeping.records import SIG, col, rate, sig
import accounting


@dataclasses.dataclass(frozen=True)
class Row:
    """One planned row: its keys in its sheet ({"prompt": 256}), its name in the check table,
    and what rides each of its trips, one list of riders ((notes before, new tokens) per user)
    per step."""
    keys: dict
    label: str
    steps: list

    @property
    def key(self):
        """The keys' values, in order: (256,)."""
        return tuple(self.keys.values())


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A row measured or predicted: its figures, each a Timing ("time" is the one held to its
    limit), and, when measured, its recorded trip ({"riders", "parts"})."""
    row: Row
    figures: dict
    recorded: dict = None


@dataclasses.dataclass(frozen=True)
class Processes:
    """A kind of worker process an experiment's rows are measured in (processes.Kind, once the
    rows are planned), and which of its rows: kind, its name ("" the first, in every run);
    which(row) -> bool (None: every row); least, its processes at least (None: --processes);
    extra, measured in the time the other kinds leave, most processes of it at most (None:
    while the time holds). Experiments that name a kind alike share its processes."""
    kind: str = ""
    which: object = None
    least: int = None
    extra: bool = False
    most: int = None


FIRST = Processes()  # every run's first kind: every row a claim pairs round by round
EXTRA = Processes("reading and typing", extra=True)  # the time left: reading and typing alone


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment, declared whole in its module of harness/experiments/, which two_phases.py
    finds there (experiments/registry.py): every stage reads this record, none names it.
    As parameters -> instances -> records -> printers: plan(args) -> [Row];
    trials(Bench, args, rows) -> a rounds.Trial per row, in order, named by trial_name (what a
    round visits); figures(Config, args, outcomes, roofs) -> [(Layout, rows of figures)], which
    become its records; sheets(records, Config, args) -> [Sheet], rendered from them.
    name: as --experiments names it; flags(group): its own flags, their defaults the post's;
    quick: its flags' --quick values ({flag's dest: value}); settle(parser, args): its flags
    made one form, or refused in one line (parser.error); lengths(args) -> [(flag, the tokens a
    notebook must hold)]; riders(args) -> {the flags that set them: (user, trip) pairs
    planned}, counted before a plan is made; processes: the kinds of worker process its rows
    are measured in; empty: the empty trip's trial (experiments/launches.py) its trials measure
    beside its rows on a GPU library's device; phase: "reading" or "typing" where its rows are
    one of the post's two phases on the run's model (the roofline's points, a GPU's datasheet,
    compare.py's closing lines); model(Config) -> the model its rows run on where not the run's
    (none: the run's); picture: its Drawing; settings: the flags its records keep,
    beyond records.SETTINGS; checked: its rows are held to their limits in the check table and
    the breakdown (their trials record a trip part by part)."""
    plan: object
    trials: object
    figures: object
    sheets: object
    checked: bool = True
    name: str = ""
    flags: object = None
    quick: dict = dataclasses.field(default_factory=dict)
    settle: object = None
    lengths: object = None
    riders: object = None
    processes: tuple = (FIRST,)
    empty: str = ""
    phase: str = ""
    model: object = None
    picture: object = None
    settings: tuple = ()


def trial_name(experiment, row):
    """The name a round knows a planned row by: 'prefill 256 tokens'."""
    return f"{experiment} {row.label}"


def recorded_step(cfg, row):
    """Which step of a row the breakdown records: the one the accounting says is slowest (the
    most FLOPs, then the most bytes), the last of equals."""
    costs = [(accounting.trip_flops(cfg, riders), accounting.bytes_read(cfg, riders))
             for riders in row.steps]
    return max(range(len(costs)), key=lambda i: (costs[i], i))


def timings(row, runs, stat="middle", what=""):
    """A row's figures from its Runs, the seconds of each step of every run: a one-trip row's
    time; a schedule's (the dial's) time to first word, the typers' median and worst gap, and
    total."""
    if len(row.steps) == 1:
        return {"time": timing.taken([r[0] for r in runs.steps], stat, what, runs)}

    def of(figure, words, said=True):  # a schedule's runs are warned about once
        return timing.taken([figure(r) for r in runs.steps], stat, f"{what}: {words}", runs,
                            said)
    return {"ttft": of(lambda s: sum(s[:-1]), "time to first word", said=False),
            "gap median": of(statistics.median, "typers' median gap"),
            "time": of(max, "typers' worst gap"), "total": of(sum, "total time")}


def at_limits(cfg, rows, roofs, serial=False):
    """Each row with every trip at its limit on the given speeds: one "run" of limits. serial:
    at the other bound of a model split over devices, the link's sends after each trip's work
    (Speeds.serial), not hidden behind it."""
    bound = roofs.serial if serial else (lambda c, riders: roofs.limit(c, riders)[0])
    return [Outcome(row, timings(row, timing.Runs([[bound(cfg, riders) for riders in row.steps]],
                                                  [None]), "limit"))
            for row in rows]


def memory_bytes(cfg, rows):
    """The most memory an experiment's rows hold at once, beyond the tables."""
    return sum(bytes_held(cfg, rows))


def bytes_held(cfg, rows, copies=True):
    """What an experiment's rows hold at once beyond the tables, in bytes: (the notes: the
    fullest row's notebooks and, where copies (a measured run, whose typers copy their first
    notes from one notebook read once), that first notebook, one per depth they start at; the
    working space: the scratch of that row's biggest trip), for the row holding the most. A
    served batch (a prediction) keeps no such copy: copies=False."""
    note = accounting.note_bytes(cfg) * accounting.notes_share(cfg)  # one token's, on one device
    firsts = sum({n for row in rows for n, _ in row.steps[0]}) if copies else 0
    notes, working = max(((note * sum(n + t for n, t in row.steps[-1]),
                           max(accounting.trip_scratch_bytes(cfg, riders) for riders in row.steps))
                          for row in rows), key=sum, default=(0, 0))  # (no rows: nothing)
    return note * firsts + notes, working


def limit_words(cfg, roofs, args):
    """How every predicted figure is a limit, in words, said under the first table."""
    linked = cfg.devices > 1
    return (f"predicted: every figure is its trip's limit, max(bytes / "
            f"{rate(roofs.bytes_per_s, 'B/s')}, FLOPs / {rate(roofs.flops_per_s, 'FLOP/s')}"
            + (f", link bytes / {rate(roofs.link_per_s, 'B/s')}) + the all-reduces' latency, "
               f"{cfg.layers * accounting.ALL_REDUCES} x {sig(roofs.link_latency_s * 1e6)} us: the "
               f"link's sends hidden behind the work, its latency not; {SERIAL} columns: the "
               f"other bound, max(bytes, FLOPs) + link bytes + latency, each send after the "
               f"work it follows; the bytes read and the math speed are each device's, of "
            f"{cfg.devices}" if linked else ")")
            + f"; nothing was run: {engine_words(args)}")


def limit_sheets(cfg, experiments, args, roofs, settings, room=None):
    """Each experiment's records and sheets with every trip of every planned row at its limit:
    [(records, [Sheet])]. room: the bytes the model may hold on one device (Target.room, None
    where unknown): each row says whether it fits there, its time never alone."""
    linked = cfg.devices > 1
    out, said = [], False  # the long note under the first table only
    for e in experiments:
        rows = e.plan(args)
        if not rows:  # (one that plans nothing here: the wide model's typing, off a GPU)
            continue
        fitting = {tuple(row.keys.items()): fits(cfg, row, room) for row in rows}
        serial = e.figures(cfg, args, at_limits(cfg, rows, roofs, serial=True), roofs) \
            if linked else None
        made = []
        for i, (layout, found) in enumerate(e.figures(cfg, args, at_limits(cfg, rows, roofs),
                                                      roofs)):
            sent = [{} for _ in found] if not linked else [
                {f"{f} {SERIAL}": r[f] for f in layout.timed if f in r} for r in serial[i][1]]
            made.append((predicted_layout(layout, linked), [
                {**r, **after, "memory": fitting.get(tuple((k, r[k]) for k in row_keys(layout)))}
                for r, after in zip(found, sent)]))
        found = records.from_rows(made, settings, predicted=True)
        printed = []
        for sheet in e.sheets(found, cfg, args):
            layout = predicted_layout(sheet.layout, linked)
            head = ("predicted, every figure a limit, as under the first table" if said
                    else limit_words(cfg, roofs, args))
            note = ("(" + head + ("" if room is not None else "; the machine's memory is "
                                  "unknown, so whether a row fits is too")
                    + (TABLES_ONLY if any(c.figure == "math speed" for c in sheet.columns)
                       else "") + ")")
            printed.append(dataclasses.replace(sheet, text=None, note=note,
                                               layout=dataclasses.replace(
                layout, timed=(), title=f"{sheet.title}, PREDICTED",
                columns=[c if c.fmt in ("d", "s") else dataclasses.replace(c, fmt=SIG)
                         for c in layout.columns])))
            said = True
        out.append((found, printed))
    return out


SERIAL = "link serial"  # a predicted figure with the link's sends after the work (split models)
TABLES_ONLY = ("; the math speed (FLOP/s): the floors' tables' math only, not attention's, the "
               "norms' or the LM head's, which the limit counts too")


def predicted_layout(layout, linked):
    """A layout as a prediction prints it: with, for a model split over devices, each timed
    figure at the link's serial bound beside it, and a last column saying whether the row fits."""
    layout = with_memory(layout)
    if not linked or any(c.figure.endswith(SERIAL) for c in layout.columns):
        return layout
    columns = []
    for c in layout.columns:
        columns.append(c)
        if c.figure in layout.timed:
            columns.append(col(f"{c.figure} {SERIAL}", c.header.replace(" ms", "") + " "
                               + SERIAL + " ms", c.unit, c.fmt))
    return dataclasses.replace(layout, columns=columns)


def fits(cfg, row, room):
    """'fits', or 'does not fit (needs X of Y GiB)': the tables, and what the row holds at
    once, on one device, against the room the model has there (Target.room); None where the
    memory is unknown."""
    if room is None:
        return None
    return verdict(accounting.held_bytes(cfg) + sum(bytes_held(cfg, [row], copies=False)), room)


def verdict(need, room):
    """'fits', 'does not fit (needs X of Y GiB)', or, where three digits cannot tell need from
    room (more than the memory's and the engine's figures carry), 'on the edge (needs X of Y
    GiB)'."""
    shown = [gib(need), gib(room)]
    said = f"needs {shown[0]} of {shown[1]} GiB"
    if shown[0] == shown[1]:
        return f"on the edge ({said})"
    return "fits" if need <= room else f"does not fit ({said})"


def engine_words(args):
    """What a prediction's limits are, said once: the datasheets' own, or a share of them
    (--efficiency)."""
    share = getattr(args, "efficiency", None) or 1
    if share < 1:
        return (f"every speed taken at {share:g} of its figure (--efficiency), as a real "
                f"engine reaches")
    return ("a real engine reaches a share of each limit, which --efficiency takes "
            "(docs/predict.md gives the ranges)")


def gib(n):
    """Bytes in GiB as a prediction shows memory: three significant digits."""
    return sig(n / GIB)


GIB = 2 ** 30
GIB_WORDS = ("GiB: 2^30 bytes, as devices report memory (nvidia-smi's MiB / 1,024; a GiB is "
             "1.074 GB)")


def row_keys(layout):
    """The figures that key a layout's rows."""
    return [c.figure for c in layout.columns if c.key and c.figure != records.ROW]


def with_memory(layout):
    """The layout with a last column saying whether each row fits (once)."""
    if any(c.figure == "memory" for c in layout.columns):
        return layout
    return dataclasses.replace(layout, columns=[*layout.columns, *MEMORY])


MEMORY = [col("memory", "memory", "", "s", empty="")]  # a predicted row: fits, or does not


def at_the_limits(cfg, args, experiments, roofs, also=()):
    """The records a perfect implementation would give on this machine: every planned row of
    these experiments ({name: Experiment}) with each trip at its limit on these speeds, and the
    figures each of `also` makes of them ({name: [Outcome]} -> [(Layout, rows)])."""
    done = {name: at_limits(cfg, e.plan(args), roofs) for name, e in experiments.items()}
    return records.from_rows([*(made for name, e in experiments.items()
                                for made in e.figures(cfg, args, done[name], roofs)),
                              *(made for more in also for made in more(done))], {},
                             predicted=True)


def roofline(cfg, outcomes, roofs):
    """The roofline picture's data: the speeds, and each row of outcomes ([(experiment,
    Outcome)], reading's and typing's) at its arithmetic intensity (FLOPs per byte) and speed
    (FLOP/s), and whether other work disturbed its time (no verdict rests on it)."""
    points = []
    for experiment, r in outcomes:
        riders, t = r.row.steps[0], r.figures["time"]
        flops = accounting.trip_flops(cfg, riders)
        points.append([experiment, r.row.label, flops / accounting.bytes_read(cfg, riders),
                       flops / t.seconds, bool(getattr(t, "disturbed", False))])
    return {**roofs.saved(), "points": points}


def weights(cfg, plans, roofs):
    """Each planned row's expected share of a run's time, row by row: the limits of its trips
    (each at least a millisecond, for what every trip costs), once for each run."""
    return [sum(max(accounting.limit(cfg, riders, roofs.bytes_per_s, roofs.flops_per_s)[0], 1e-3)
                for riders in row.steps) for rows in plans for row in rows]


def peak_bytes(cfg, plans, speeds_bytes):
    """The most a run holds at once: the tables, the speeds' tables and every experiment's rows
    (plans: [[Row]]) at once, as a round visits them all."""
    held_by = [bytes_held(cfg, rows) for rows in plans if rows]
    return (accounting.held_bytes(cfg) + speeds_bytes + sum(notes for notes, _ in held_by)
            + max([working for _, working in held_by] or [0]))  # one trip at a time


def words(cfg, threads):
    """The settings every sheet of the model states: '<model>, float32, 2 threads', as it ran
    (a 16-bit run's model says its precision itself); a prediction, which runs nothing, says
    its model and precision."""
    if not threads:
        return str(cfg)
    return (f"{cfg}{', float32' if cfg.dtype == 'float32' else ''}, {threads} "
            f"{plural(threads, 'thread')}")
