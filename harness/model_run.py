"""A run of the model's experiments, whichever a script names: every planned row and the
machine's two speeds measured in rounds, spread over worker processes (each builds the model and
visits the rows); then the records, from which the sheets, the check, the claims and the
pictures. experiments: {name: plans.Experiment}, in the order they print (two_phases.EXPERIMENTS);
it is read at each call, never copied."""
import dataclasses
import functools
import time

from engine import pool
from engine.blocks import Paths
from harness import flags
from harness.experiments import launches, summary
from harness.experiments.registry import DRAWINGS, TOLD
from harness.judging import check, intervals, judge
from harness.keeping import records
from harness.keeping.records import Layout, col
from harness.measuring import bench as b, devices, processes, rounds, speeds, timing, tuning
from harness.predicting import plans, presets, turning
from harness.predicting.plans import Outcome, timings, trial_name
from harness.showing import pictures, printers, sheets
from harness.showing.printers import Picture, Saved, sheet
from harness.terminal import note, plural, progress
import engine.compiled
import engine.laid
import accounting
import model


def run(experiments, script):
    """runner.run's experiment(args, facts) for a run of these experiments (their rows measured
    by `python script ... --worker`): each row's rounds (in as many fresh processes of each kind
    as --time-budget holds), then every sheet from the records: each experiment's, the speeds,
    the check and breakdown against them, the claims; then the pictures."""
    def experiment(args, facts):
        cfg = config(args)
        planned = {n: e for n, e in experiments.items() if n in args.experiments}
        rows = {n: e.plan(args) for n, e in planned.items()}
        began = time.monotonic()  # (the kernels' load in the budget, as in the worker it was in)
        if args.compiled == "auto" and args.on.numpy:  # the kernels loaded here first
            engine.compiled.available()  # (compiled, on a first run): the first worker's start,
        #                                  which plans the rest, is then every one's
        done = processes.measured(args, script, worker(experiments), kinds(args, planned, rows),
                               began=began,
                               record=True, alone=True)
        made = assessed(cfg, args, planned, rows, done)
        yield from printed(cfg, args, facts, planned, made, done)
    return experiment


def worker(experiments):
    """What a worker process of these experiments measures: measure_here(experiments, ...)."""
    return functools.partial(measure_here, experiments)


def config(args):
    """The model a run measures: GPT-2 of --model, in --dtype's precision (float32 but on a GPU
    library's device), tables and notes alike."""
    return dataclasses.replace(model.SIZES[args.model], dtype=args.dtype, note_dtype=args.dtype)


def kinds(args, experiments, rows):
    """The kinds of worker process a run's rows are measured in, as each experiment's processes
    say, each with the speed trials (and, on a GPU library's device, an experiment's empty trip
    beside its rows): the kinds that measure a claim's rows first, an extra kind after them,
    those of fewest processes first, and only where it leaves out some of the first kind's rows.
    Every row a claim uses shares its processes (its claims pair rows round by round, and the
    rows' start is shared: the tables, the typers' first question, the speeds' tables)."""
    made = {}  # {kind's name: (Processes, [trial names])}
    for name, e in experiments.items():
        for k in e.processes:
            names = [trial_name(name, r) for r in rows.get(name, ())
                     if k.which is None or k.which(r)]
            empty = (e.empty,) if e.empty and names and not args.on.numpy else ()
            if names:
                made.setdefault(k.kind, (k, []))[1].extend((*names, *empty))
    out = []
    for k, names in sorted(made.values(), key=lambda kn: (kn[0].extra, kn[0].most is None)):
        trials = (*speed_names(args), *names)
        if not (k.extra and out and set(trials) == set(out[0].trials)):
            out.append(processes.Kind(k.kind, trials, k.least, k.extra, k.most))
    return out


SPEEDS_PREFIX = "speeds "  # the speed trials' names in a run of the model's rows


def speed_trials(args, on, paths):
    """The forklift's two reads and the workbench as a round visits them (the tiles' in the
    shape the paths take for speeds.CHUNK tokens), at machine_speed's own sizes; none where the
    flags give the speeds."""
    if flags.given_speeds(args):
        return []
    size = speeds.sizes(args.quick, on)
    return speeds.trials(size["size"], size["matmul"], on, args.threads, SPEEDS_PREFIX,
                         on.dtype, args.quick, args.compiled != "off",
                         paths.shape(speeds.CHUNK))


def speed_names(args):
    """The speed trials' names, none where the flags give the speeds."""
    return () if flags.given_speeds(args) else tuple(
        SPEEDS_PREFIX + n for n in speeds.names(args.on, args.quick, args.compiled != "off"))


ANSWER = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}  # the most a device's answer may
#   differ from NumPy's float32, over its largest number: a few times what 4 tokens through
#   GPT-2 small differ by on PyTorch's CPU (5e-7, 0.2%, 1.5%); TF32 (--tf32) takes 1e-2
ANSWER_TOKENS = 4  # a short question, then one token typed after it ...
LONG_ANSWER = 128  # ... and a long question: the answer checked on reading and typing alike


def answered(bench, seed):
    """Check the device's model against NumPy's float32, along the path the run times (a CUDA
    graph's replay where it takes one): a short question read, one token typed after it, and a
    long question read, both sides from the same numbers (the device's tables and tokens, as
    rounded to its precision); raise devices.WrongAnswer, in one line, where they differ by more
    than the precision allows (ANSWER): a GPU whose library computes wrongly times nothing.
    -> how far apart they are, the most of the three"""
    cfg, on = bench.cfg, bench.on
    plain = dataclasses.replace(cfg, dtype="float32", note_dtype="float32")
    host = [{k: on.to_numpy(t) for k, t in f.items()} for f in bench.floors]
    short, long = (b.book(bench, 1, ANSWER_TOKENS + 1), b.book(bench, 1, LONG_ANSWER))
    mine = {id(short): model.notebook(plain, 1, ANSWER_TOKENS + 1),
            id(long): model.notebook(plain, 1, LONG_ANSWER)}
    most, worst = tolerance(on), (0.0, "")
    for what, n, book in ((f"a {ANSWER_TOKENS}-token question", ANSWER_TOKENS, short),
                          ("a token typed after it", 1, short),
                          (f"a {LONG_ANSWER}-token question", LONG_ANSWER, long)):
        x = b.tokens(cfg, n, seed + n, on)
        want = model.trip(plain, host, on.to_numpy(x), [(mine[id(book)], n)])
        got = on.to_numpy(b.trip_of(bench, x, [(book, n)])())
        off = float(abs(got - want).max() / abs(want).max())
        if not off <= most:  # (a NaN too)
            raise devices.WrongAnswer(
                f"its model's answer differs from NumPy's float32 by {off:.2g} of its largest "
                f"number on {what}, more than {on.dtype}'s {most:g}: its library computes "
                f"wrongly here; nothing was timed")
        worst = max(worst, (off, what))
    return worst[0]


def tolerance(on):
    """The most a device's answer may differ from NumPy's at its precision (ANSWER)."""
    return 1e-2 if on.tf32 and on.dtype == "float32" else ANSWER[on.dtype]


def measure_here(experiments, args, job):
    """A worker's part of the rounds, in this process: the model's tables (random weights), the
    paths chosen (or taken from the job), every wanted row's trial made, the job's rounds, and
    (where asked) the table products alone; the trips' freed memory kept in the process (see
    bench.keep_freed_memory). -> the result rounds.run() and the job describe"""
    began, cfg, on = time.perf_counter(), config(args), args.on
    b.keep_freed_memory()
    progress("making the tables (random weights)")
    bench = b.Bench(cfg, on.tables(model.floors(cfg, args.seed)),
                    pool.workers(args.threads) if on.numpy else None, args.runs,
                    again=job.again, on=on, graphs=args.graphs)
    if not on.numpy and job.process == 0:  # once a run, before anything is timed
        answered(bench, args.seed)
    try:
        chosen = None
        if on.numpy and job.paths:
            bench = dataclasses.replace(bench, paths=Paths(**job.paths))
        elif on.numpy:
            bench, chosen = tuning.with_paths(bench, args.attention, args.blocks,
                                              args.compiled)
        if on.numpy and bench.paths.lays_out():  # (before anything is timed)
            engine.laid.lay_out(bench.floors, True)
        wanted = job.trials
        trials = [t for t in speed_trials(args, on, bench.paths)
                  if wanted is None or t.name in wanted]
        checked = []
        for name, e in experiments.items():
            rows = [r for r in e.plan(args) if name in args.experiments
                    and (wanted is None or trial_name(name, r) in wanted)]
            if rows:
                trials += list(e.trials(bench, args, rows))
                checked += [r for r in rows if e.checked]
        setup_s = time.perf_counter() - began
        result = rounds.run(trials, job)
        if job.alone:  # the table products alone: a share of the token counts each
            counts = sorted({sum(t for _, t in r.steps[plans.recorded_step(cfg, r)])
                             for r in checked})
            began = time.perf_counter()
            result["alone"] = {n: b.tables_alone(bench, n, job.again)
                               for n in counts[job.process::job.processes]}
            result["alone_s"] = time.perf_counter() - began
        return {**result, "paths": bench.paths.saved(), "chosen": chosen, "setup_s": setup_s}
    finally:
        if bench.pool:
            bench.pool["helpers"].shutdown()


@dataclasses.dataclass(frozen=True)
class Made:
    """What a run's measurements make: its records (found), the speeds every row is held to,
    the rows held against them, their outcomes, and the rows at this machine's limits."""
    found: list
    held_to: object
    held: list
    outcomes: dict
    ideal: list
    points: dict


def outcomes_of(cfg, planned, rows, done):
    """{experiment: [Outcome]}: each row's figures from its rounds, and, where it is checked,
    its recorded trip: the riders of the step recorded, the middle recording's parts, and each
    part's seconds in every recording (a Timing, for the breakdown's records)."""
    out = {}
    for name, e in planned.items():
        out[name] = []
        for row in rows[name]:
            trial = trial_name(name, row)
            runs = done.runs(trial)
            out[name].append(Outcome(row, timings(row, runs, what=trial), recorded(
                cfg, row, trial, done.recorded.get(trial), done.process_of) if e.checked
                else None))
    return out


def recorded(cfg, row, trial, found, process_of=None):
    """A row's recorded trips as the check and breakdown read them, each with the process it
    was recorded in (process_of: {round: process}); None where none was."""
    if not found:
        return None
    found = sorted(found, key=lambda rp: rp[0])
    middle = sorted((parts for _, parts in found), key=lambda p: p["trip"])[(len(found) - 1) // 2]
    where = tuple((process_of or {}).get(r, 0) for r, _ in found)
    return {"riders": row.steps[plans.recorded_step(cfg, row)], "parts": middle,
            "runs": {part: timing.Timing(tuple(p[part] for _, p in found),
                                         rounds=tuple(r for r, _ in found), trial=trial,
                                         processes=where)
                     for part in middle}}


def roofs_of(args, done):
    """The speeds every row is held to: each the middle of the rounds' ceilings (the forklift
    the faster of its two reads in each round), each row held round by round to its own round's
    (or the speeds the flags give); and their records."""
    if flags.given_speeds(args):
        return flags.given_speeds(args), []
    size = speeds.sizes(args.quick, args.on)
    ceiling = speeds.ceilings(done, SPEEDS_PREFIX)
    held_to = speeds.held_to(ceiling, size["size"], size["matmul"], "measured beside the rows "
                             "in every round: the middle of the rounds' ceilings, each row held "
                             "to its own round's")
    return held_to, records.from_rows([(ROOFS_TABLE, [
        speeds.figures(ceiling, size["size"], size["matmul"])])], {}, center=intervals.centered)


ROOFS_TABLE = Layout("speeds", [col("memory speed", "memory GB/s", "GB/s", ".1f"),
                                col("matrix-vector read", "matrix-vector GB/s", "GB/s", ".1f"),
                                col("streaming read", "streaming GB/s", "GB/s", ".1f"),
                                col("laid-out read", "laid-out GB/s", "GB/s", ".1f"),
                                col("math speed", "math GFLOP/s", "GFLOP/s", ".1f"),
                                col("BLAS product", "BLAS GFLOP/s", "GFLOP/s", ".1f"),
                                col("tiles product", "tiles GFLOP/s", "GFLOP/s", ".1f"),
                                col("balance", "FLOPs/byte", "FLOPs/byte", ".1f",
                                    centered=True)],
                     timed=("memory speed", "math speed"), per="figure",
                     title="The forklift and the workbench")


def assessed(cfg, args, planned, rows, done):
    """Everything the measurements make, from them alone (so that more rounds would make it
    again): -> Made"""
    settings = records.settings_of(args, paths=str(Paths(**done.paths)) if done.paths else None)
    held_to, found = roofs_of(args, done)
    found = [{**r, "settings": settings} for r in found]
    outcomes = outcomes_of(cfg, planned, rows, done)
    for name, e in planned.items():
        found += records.from_rows(e.figures(cfg, args, outcomes[name], held_to), settings)
    found += records.from_rows(summary.figures(outcomes), settings)
    found += records.from_rows(launches.figures(outcomes, done), settings)
    checked = [(n, o) for n, e in planned.items() if e.checked for o in outcomes[n]]
    held, ideal, points = [], [], None
    if checked:
        alone = {n: timing.Timing(tuple(s), "best") for n, s in done.alone.items()}
        held = check.held(cfg, checked, held_to, alone.get)
        found += records.from_rows(check.held_figures(held), settings)
        points = plans.roofline(cfg, [(n, o) for n, o in checked if planned[n].phase], held_to)
        ideal = plans.at_the_limits(cfg, args, {n: e for n, e in planned.items()
                                                if not e.model},  # (rows on another model:
                                    held_to, (summary.figures,))  # its own, not cfg's)
    return Made(found, held_to, held, outcomes, ideal, points)


def printed(cfg, args, facts, planned, made, done):
    """What the run prints and keeps, from what it made."""
    found, held_to = made.found, made.held_to
    if done.paths and args.on.numpy:
        chosen = {**(done.chosen or {}), **done.paths}
        yield from (tuning.paths_line(chosen, args), Saved("paths", chosen))
    elif not args.on.numpy:  # the library's own products on its device
        yield f"paths: {args.on.name}'s own products, one call each"
    yield Saved("rounds", {"rounds": done.rounds, "processes": done.processes,
                           "visit_s": {n: done.visit_s(n) for n in done.visits}})
    if done.device_bytes is not None:  # a GPU's: the most its processes held there
        yield Saved("device_memory_bytes", done.device_bytes)
    if done.stopped:
        yield Saved("stopped", done.stopped)
    for name, e in planned.items():
        yield from printers.spaced(e.sheets(found, cfg, args))
        if e.empty:  # under a typing table, on a GPU library's device
            yield from printers.spaced(launches.sheets(found, args, e.empty))
    yield from printers.spaced(summary.sheets(found))
    if records.of(found, ROOFS_TABLE.name):
        yield from printers.spaced([sheet(ROOFS_TABLE, found, settings=held_to.source,
                                          note=speeds.states_note(found, ROOFS_TABLE.name))])
    settings = found[0]["settings"] if found else records.settings_of(args)
    if made.held:
        counts = [len(v) for v in done.recorded.values()] or [1]
        yield from printers.spaced(sheets.check_sheets(found, made.held, held_to, plans.words(
            cfg, args.threads), (min(counts), max(counts))))
        if judge.on_a_gpu(vars(args)):  # the post's GPU claims, at this GPU's measured speeds
            turned = turning_here(cfg, args, held_to, settings)
            found += turned
            yield from printers.spaced([printers.Sheet(
                turning.TURNING, tuple(turned), settings=f"{cfg}, at the speeds measured here; "
                                                         f"the post's machine to compare")])
        preset = presets.preset_of(facts.get("device"), cfg.dtype)  # a GPU with a preset: its
        if preset:  # datasheet; else why it has none
            checked = [(n, o) for n, e in planned.items() if e.phase for o in made.outcomes[n]]
            found += records.from_rows(check.datasheet_figures(cfg, checked, preset), settings)
            yield from printers.spaced(sheets.datasheet(found, checked, preset))
        elif presets.identified(facts.get("device")):
            note(f"no datasheet row: {presets.identified(facts.get('device'))}")
        yield from (Saved("roofline", made.points), Saved("roofs", held_to.saved()),
                    Saved("at_limits", made.ideal))
    who = f"{cfg} on {facts['cpu']}, {args.threads} {plural(args.threads, 'thread')}"
    yield sheets.claims(found, held_to, ("two_phases",), args, facts["busy"], made.ideal,
                        stopped=done.stopped, told=TOLD)
    if args.plot:
        yield from (Picture(name, draw) for name, draw in
                    pictures.files(found, made.points, who, args.quick, DRAWINGS).items())


def turning_here(cfg, args, speeds, settings):
    """The turning points at the speeds this run measured (a GPU's), and the post's machine's to
    compare: the records the post's GPU claims are judged on, as a prediction's are."""
    post = presets.target("post", "float32", None, args.out).roofs
    return records.make(turning.TURNING, [
        {"name": name, "precision": cfg.dtype,
         **turning.turning(cfg, at, args.notes, args.typers, args.question)}
        for name, at in ((args.device, speeds), ("post", post))], settings)


def host_bytes(experiments, args):
    """What the host holds at most where the run's arrays live on a GPU: each model's float32
    tables, made by NumPy before they are copied to the device (its notebooks are made there);
    None on the CPU, where the host holds everything (peak_bytes())."""
    if not devices.device(args.device).gpu:
        return None
    cfg = dataclasses.replace(config(args), dtype="float32", note_dtype="float32")
    return accounting.held_bytes(cfg) + sum(
        accounting.held_bytes(dataclasses.replace(e.model(cfg), dtype="float32"))
        for e in (experiments[n] for n in args.experiments if experiments[n].model)
        if e.plan(args))


def peak_bytes(experiments, args):
    """The tables, plus the most that measuring the speeds or any experiment holds at once."""
    measuring = 0 if args.roofs or args.forklift else speeds.roofs_memory_bytes(
        args.quick, devices.device(args.device))
    cfg, others = config(args), 0
    for e in (experiments[n] for n in args.experiments if experiments[n].model):
        rows, own = e.plan(args), e.model(cfg)  # rows on a model of their own: its tables and
        others += accounting.held_bytes(own) + sum(plans.bytes_held(own, [  # fullest row,
            max(rows, key=lambda r: r.key)])) if rows else 0  #              beside ours
    return plans.peak_bytes(cfg, [experiments[n].plan(args) for n in args.experiments
                                  if not experiments[n].model], measuring) + others
