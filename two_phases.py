"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), meets a long question, and types
with notebooks of several depths; every timing is then held to the machine's limits.

    python two_phases.py                    # the post's experiments, the depth, the pictures
    python two_phases.py --quick --no-save  # a smoke run: seconds, not minutes
    python two_phases.py --predict h100-sxm --dtype bfloat16  # runs nothing: limits only
"""
# The post's sections in its order, each experiment a module of harness/experiments/ (found
# there by registry.py): its flags, the rows it plans (what rides each trip), how it measures
# them, the figures its records hold, and the sheets they print; harness/model_run.py runs them,
# and --predict and the memory check read the same plans.
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()

import argparse

from harness import flags, model_run, runner, self_check
from harness.experiments import SEED
from harness.experiments.registry import EXPERIMENTS, QUICK, TOLD
from harness.terminal import note
from harness.predicting import predict
from harness.showing import pictures
import model

QUICK = {**QUICK, "compiled": "off"}  # each experiment's small sizes; no seconds compiling
RUNS = 3  # rounds of each row at least: the server's rows, a round of seconds in each process,
#           in 3 processes or more; the cheaper rows in many more rounds, as the budget holds
BUDGET_S = 150  # seconds the measuring may take, fresh processes added while they fit: with
#                 machine_speed's and cube_bug's, sized to the README's first command's promise
#                 (the least, --processes, run whatever the budget says)


# ---------------------------------------------------------------------------------------------
# flags


def build_parser():
    p = flags.parser(__doc__, runs=RUNS, prog="two_phases.py", budget=BUDGET_S)
    g = p.add_argument_group("two_phases: the experiments (defaults are the post's)")
    g.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=tuple(EXPERIMENTS),
                   metavar="NAME", help=f"which to run, of {', '.join(EXPERIMENTS)}")
    for e in EXPERIMENTS.values():  # each experiment's own flags, in the post's order
        if e.flags:
            e.flags(g)
    g.add_argument("--model", type=flags.checked(predict.config), default="small", metavar="SIZE",
                   help=f"which GPT-2: {', '.join(model.SIZES)} (the post's is small); with "
                        f"--predict, any model: a file of models/ by name, or a JSON file")
    g.add_argument("--seed", type=flags.whole(0, 2 ** 63 - 1), default=SEED, metavar="S",
                   help="seed of the random tables")
    g.add_argument("--plot", action=argparse.BooleanOptionalAction, default=None,
                   help="draw the pictures (roofline, dial, decode, depth) into the results "
                        "folder; default: for a full run that saves, not for --quick")
    flags.add_speed_flags(g)
    flags.add_device_flags(g)
    flags.add_check_flag(g)
    predict.add_flags(g)
    flags.add_path_flags(g)
    return p


def parse_args(argv=None):
    p = build_parser()
    args = flags.parse(p, argv, QUICK)
    predict.check_range(p, args, [n for e in EXPERIMENTS.values() if e.lengths
                                  for n in e.lengths(args)])
    for e in EXPERIMENTS.values():  # each experiment's flags made one form, or refused
        if e.settle:
            e.settle(p, args)
    predict.check_riders(p, args, {flag: n for name in args.experiments
                                   if EXPERIMENTS[name].riders
                                   for flag, n in EXPERIMENTS[name].riders(args).items()})
    flags.check_speed_flags(p, args)
    args.plot = pictures.wanted(p, args)
    if predict.check_flags(p, args, {n: EXPERIMENTS[n] for n in args.experiments}):
        return flags.settled(args)  # a prediction: nothing is built, nothing to fit in memory
    flags.need_memory(p, model_run.peak_bytes(EXPERIMENTS, args),
                      f"GPT-2 {args.model} with these settings",
                      "--model, --users, --prompts, --notes, --depths, --typers or --chunk",
                      args.device, model_run.host_bytes(EXPERIMENTS, args))
    return flags.settled(args)


def main(argv=None):
    args = parse_args(argv)
    if args.self_check:  # a device's once-over, saving nothing
        return self_check.run(args)
    if args.predict:
        return runner.run("two_phases", args, lambda block, facts: predict.items(  # Part 4
            block, {n: EXPERIMENTS[n] for n in args.experiments}, TOLD), predict.words(args))
    if not args.worker:
        note(f"estimated peak memory: {model_run.peak_bytes(EXPERIMENTS, args) / 1e9:.1f} GB")
    return runner.run("two_phases", args, model_run.run(EXPERIMENTS, __file__),
                      worker=model_run.worker(EXPERIMENTS))


if __name__ == "__main__":
    stopping.leave(main())
