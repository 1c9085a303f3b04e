"""The slow road: h**3 against h*h*h on one floor's worth of numbers, by sign.

    python cube_bug.py                    # 786,432 numbers (256 tokens x 3072), middle of rounds
    python cube_bug.py --quick --no-save  # a smoke run of a second
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()


import argparse
import dataclasses
import time

import numpy as np

from harness import flags, runner
from harness.post import CUBE_TOKENS, NOTES
from harness.terminal import plural
from engine import pool
from harness.measuring import bench as b, processes, rounds, timing
from harness.measuring.devices import NUMPY
from engine.blocks import Paths
from harness.measuring.rounds import Trial
from harness.keeping import records
from harness.keeping.records import KEYS, Layout, Measured, col, ms
from harness.experiments.registry import TOLD
from harness.showing import sheets
from harness.showing.printers import ROW, Saved, format_table, sheet
import accounting
import model

TOKENS = CUBE_TOKENS  # a 256-token question ...
MLP = 4 * model.SIZES["small"].width  # ... times the thinking room's width (3072): one floor's
#                                       786,432 numbers
QUICK = {"tokens": 16, "in_model": False}  # a smoke run of a second: the numbers alone
QUICK_NOTES = 64  # the typing user's notes in a quick run (a full run's: the post's NOTES)
SAMPLE_S = 0.02  # repeat sub-millisecond calls inside a sample until it lasts this long
SAME = 1e-6  # largest relative difference still "the same answer" in float32 (eps is 1.2e-7)
RUNS = 5  # rounds of each race at least (the post's: 5 to 7, the middle kept)
BUDGET_S = 36  # seconds the measuring may take: fresh processes are added while they fit

CASES = (  # (label, how the numbers are made from seeded standard normals)
    ("all positive", np.abs),
    ("all negative", lambda h: -np.abs(h)),
    ("mixed (real)", lambda h: h),  # a real mix: about half negative, as in a model
)


def mlp(size):
    """The thinking room's width of a GPT-2 size: 4 x its width (3072 for small)."""
    return 4 * model.SIZES[size].width


def inputs(tokens, make, seed=0, width=MLP, on=NUMPY):
    h = np.random.default_rng(seed).standard_normal((tokens, width), dtype=np.float32)
    return on.asarray(make(h).astype(np.float32, copy=False))  # (tokens, width)


def largest_relative_difference(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), np.finfo(np.float32).tiny)))


def race(h, label, on=NUMPY):
    """Both ways on the same numbers (on the device's arrays: whether a GPU has the slow road
    too), as a round visits them, each timed by the device's own timer (a burst of calls a
    sample, once calibrate() has sized it): -> (h**3's trial, h*h*h's)"""
    return (Trial(f"{label} power", [lambda: h ** 3], timer=on),
            Trial(f"{label} product", [lambda: h * h * h], timer=on))


def same_answer(h, label, on=NUMPY):
    """The largest relative difference between h**3 and h*h*h, checked before any timing."""
    diff = largest_relative_difference(on.to_numpy(h ** 3), on.to_numpy(h * h * h))
    if not diff <= SAME:  # (not an assert: python -O would skip it)
        raise AssertionError(f"{label}: h**3 and h*h*h differ by {diff:.1e}")
    return diff


def post_line(label, power_ms, product_ms, diff):
    """One line of the post's layout, plus the proof that the answer is the same."""
    return (f"{label:<12}   h**3: {power_ms:6.2f} ms   h*h*h: {product_ms:5.2f} ms   "
            f"({ratio(power_ms / product_ms)}x)   same answer (largest rel. diff {diff:.1e})")


def ratio(r):
    """The post's '(   2x)', with a decimal where a whole number would hide one (1.3x)."""
    return f"{r:4.1f}" if r < 10 else f"{r:4.0f}"


CUBE = Layout("cube", [col("numbers", "numbers", "", "s", key=True),
                      col("power", "h**3 ms", "ms", ".2f", compared=True),
                      col("product", "h*h*h ms", "ms", ".2f", compared=True),
                      col("ratio", "ratio", "x", ".0f"),
                      col("largest relative difference", "largest rel. diff", "", ".1e")],
              timed=("power", "product"), per="figure",
              title="The slow road: h**3 against h*h*h, by sign")


def measure_here(args, job):
    """A worker's part of the rounds: each case's numbers both ways (each sample repeating a
    short call until it lasts SAMPLE_S), and, with --in-model, the model reading and typing with
    the cube written each way; the negative share of what the model cubes (by the first
    process); freed memory kept in the process, for both ways alike (bench.keep_freed_memory)."""
    began, on, wanted = time.perf_counter(), args.on, job.trials
    b.keep_freed_memory()
    trials = [rounds.calibrate(t, SAMPLE_S) for label, make in CASES
              if wanted is None or f"{label} power" in wanted
              for t in race(inputs(args.tokens, make, width=mlp(args.model), on=on), label, on)]
    bench, more = None, {}
    if args.in_model and (wanted is None or set(IN_MODEL) & set(wanted)):
        bench, model_trials = in_the_model(args, on)
        trials += model_trials
    try:
        setup_s = time.perf_counter() - began
        result = rounds.run(trials, job)
        if bench is not None and job.process == 0:
            more["negative share"] = negative_share(bench, b.tokens(bench.cfg, args.tokens, 2, on))
        return {**result, **more, "setup_s": setup_s}
    finally:
        if bench is not None and bench.pool:
            bench.pool["helpers"].shutdown()


IN_MODEL = tuple(f"{phase} {cube}" for phase in ("reading", "typing")
                 for cube in ("power", "product"))  # the trials of the bug in the model


def kinds(args):
    """The kinds of worker process: the cases alone (a process of them starts in about a second,
    with no model to make, so their ratios get many fresh processes) and, with --in-model, the
    model's trips (its tables made in each)."""
    cases = tuple(f"{label} {way}" for label, _ in CASES for way in ("power", "product"))
    return (processes.Kind("", cases),
            *((processes.Kind("in the model", IN_MODEL),) if args.in_model else ()))


def in_the_model(args, on):
    """The bug in the model itself: one user's question of --tokens read in one trip, and one
    user typing with the post's notes, each trip with the cube written both ways. -> (the
    bench, the trials)"""
    cfg, notes = model.SIZES[args.model], QUICK_NOTES if args.quick else NOTES
    bench = b.Bench(cfg, on.tables(model.floors(cfg, 0)),
                    pool.workers(args.threads) if on.numpy else None, args.runs, on=on)
    reading = (b.tokens(cfg, args.tokens, 2, on), [(b.book(bench, 1, args.tokens), args.tokens)])
    typing = b.typing(bench, b.read_question(bench, notes, 1), 1, 3)
    return bench, [dataclasses.replace(b.trial(dataclasses.replace(bench, paths=Paths(cube=cube)),
                                               f"{phase} {cube}", *trip), recorded=None)
                   for phase, trip in (("reading", reading), ("typing", typing))
                   for cube in ("power", "product")]


def experiment(args, facts):
    """Each case raced in rounds into records; the post's lines, the bug in the model and the
    claims, each from them."""
    on, width = args.on, mlp(args.model)
    diffs = {label: same_answer(inputs(args.tokens, make, width=width, on=on), label, on)
             for label, make in CASES}
    settings = records.settings_of(args)
    done = processes.measured(args, __file__, measure_here, kinds(args))
    found = records.from_rows(figures(args, done, diffs), settings)
    cube = sheet(CUBE, found, settings=f"{args.tokens * width:,} float32 numbers, a floor of "
                                       f"GPT-2 {args.model} at {args.tokens} "
                                       f"{plural(args.tokens, 'token')}; {args.threads} "
                                       f"{plural(args.threads, 'thread')}")
    version = f"numpy {np.__version__}" if on.numpy else f"{on.name}, " + on.facts()["library"]
    v = {(r["keys"]["numbers"], r["figure"]): r["value"] for r in found
         if r["experiment"] == CUBE.name}
    text = "\n".join([post_line(label, v[label, "power"], v[label, "product"],
                                v[label, "largest relative difference"])
                      for label, _ in CASES] + [version]) if args.tablefmt == "plain" else (
        format_table(CUBE.columns, cube.cells(), args.tablefmt) + "\n" + version)
    yield dataclasses.replace(cube, text=text)
    yield ""
    if args.in_model:
        negative = next(r["value"] for r in found if r["figure"] == "negative share")
        yield from (sheet(BUG, found, labels=PHASES(args), settings=f"GPT-2 {args.model}, "
                          f"{args.threads} {plural(args.threads, 'thread')}",
                          note=f"; {negative:.0f}% of the numbers its first floor cubes reading "
                               f"the question are negative"), "")
    if done.device_bytes is not None:  # a GPU's: the most its processes held there
        yield Saved("device_memory_bytes", done.device_bytes)
    if done.stopped:
        yield Saved("stopped", done.stopped)
    yield sheets.claims(found, None, ("cube_bug",), args, facts["busy"], stopped=done.stopped,
                        told=TOLD)


def figures(args, done, diffs):
    """The records' rows: each case's race, and the model's trips each way, from the rounds."""
    def way(name):
        runs = done.runs(name)
        return timing.taken([s[0] for s in runs.steps], what=name, runs=runs, said=True)
    rows = []
    for label, _ in CASES:
        power, product = way(f"{label} power"), way(f"{label} product")
        rows.append({"numbers": label, "power": ms(power), "product": ms(product),
                     "ratio": Measured(power.seconds / product.seconds,
                                       ((1, power), (-1, product))),
                     "largest relative difference": diffs[label]})
    made = [(CUBE, rows)]
    if args.in_model:
        bug = []
        for phase in ("reading", "typing"):
            power, product = way(f"{phase} power"), way(f"{phase} product")
            bug.append({KEYS: {"trip": phase}, "power": ms(power), "product": ms(product),
                        "ratio": Measured(power.seconds / product.seconds,
                                          ((1, power), (-1, product)))})
        bug[0]["negative share"] = done.extra.get("negative share")
        made.append((BUG, bug))
    return made


def PHASES(args):
    """Each phase's row name: {keys: words}."""
    notes = QUICK_NOTES if args.quick else NOTES
    return {(("trip", "reading"),): f"reading {args.tokens} {plural(args.tokens, 'token')}",
            (("trip", "typing"),): f"typing for 1 user at {notes} notes"}


def negative_share(bench, x):
    """How many of the numbers the model cubes are negative, in percent: its first floor's
    feed-forward inputs to GELU, reading x. x: (width, tokens)"""
    h = bench.on.to_numpy(bench.floors[0]["up"] @ model.norm(x))  # (4 width, tokens)
    return 100.0 * float(np.mean(h < 0))


BUG = Layout("bug", [col(ROW, "phase", "", "s", key=True),
                     col("power", "h**3 ms", "ms", ".1f", compared=True),
                     col("product", "h*h*h ms", "ms", ".1f", compared=True),
                     col("ratio", "slower by", "x", ".2f")],
             timed=("power", "product"),
             unprinted=(col("negative share", "negative %", "%", ".0f"),),
             title="The bug in the model: a trip with the cube written each way")


def build_parser():
    p = flags.parser(__doc__, runs=RUNS, prog="cube_bug.py", budget=BUDGET_S)
    g = p.add_argument_group("cube_bug")
    g.add_argument("--tokens", type=flags.whole(1, 10 ** 8), default=TOKENS, metavar="N",
                   help="question length: the numbers are N x 4 x the model's width, one floor's "
                        "worth")
    g.add_argument("--model", choices=model.SIZES, default="small", metavar="SIZE",
                   help=f"whose floor: GPT-2 {', '.join(model.SIZES)} (the post's is small)")
    g.add_argument("--in-model", action=argparse.BooleanOptionalAction, default=True,
                   help="also time the model reading --tokens and typing for one user, with "
                        "the cube written each way (--tokens is then at most "
                        f"{model.CONTEXT:,}, GPT-2's context)")
    return p


ARRAYS = 8  # the numbers, each way's answer and temporaries, and the check's: the most held at once


def parse_args(argv=None):
    p = build_parser()
    args = flags.parse(p, argv, QUICK)
    if args.in_model and args.tokens > model.CONTEXT:
        p.error(f"argument --tokens: the model reads at most {model.CONTEXT:,} tokens, got "
                f"{args.tokens:,}; add --no-in-model to time more numbers alone")
    tables = (accounting.table_numbers(model.SIZES[args.model]) * accounting.BYTES
              if args.in_model else 0)
    flags.need_memory(p, ARRAYS * args.tokens * mlp(args.model) * accounting.BYTES + tables,
                    f"--tokens {args.tokens} with --model {args.model}", "--tokens or --model")
    return flags.settled(args)


def main(argv=None):
    return runner.run("cube_bug", parse_args(argv), experiment, worker=measure_here)


if __name__ == "__main__":
    stopping.leave(main())
