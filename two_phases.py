"""Reading is stuck on the workbench, typing on the forklift: a random-weight GPT-2 small reads
questions (prefill), types for many users in one trip (decode), meets a long question, and types
with notebooks of several depths; every timing is then held to the machine's limits.

    python two_phases.py                    # the post's experiments, the depth, the pictures
    python two_phases.py --quick --no-save  # a smoke run: seconds, not minutes
    python two_phases.py --predict h100-sxm --dtype bfloat16  # runs nothing: limits only
"""
# The post's sections in its order, each experiment a module of harness/experiments/: the rows it
# plans (what rides each trip), how it measures them, the figures its records hold, and the
# sheets they print; harness/model_run.py runs them, and --predict and the memory check read the
# same plans.
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()

import argparse

from harness import flags, model_run, runner, self_check
from harness.experiments import SEED, collision, decode, depth, prefill, wide
from harness.experiments.told import TOLD
from harness.post import NOTES, PROMPTS, QUESTION, TYPERS, USERS  # the post's sizes
from harness.terminal import note
from harness.predicting import predict
from harness.showing import pictures
import model

EXPERIMENTS = {"prefill": prefill.EXPERIMENT, "decode": decode.EXPERIMENT,
               "collision": collision.EXPERIMENT, "depth": depth.EXPERIMENT,
               "wide": wide.EXPERIMENT}  # (wide: typing on GPT-2 xl, on a GPU only)
#              the post's Phase 1 and Phase 2, when they share a server, and beyond the post
QUICK = {"prompts": (1, 16, 64), "users": (1, 4), "notes": 64, "typers": 2, "question": 64,
         "chunk": (16, 32), "depths": (0, 32, 64), "compiled": "off"}  # (no seconds compiling)
RUNS = 3  # rounds of each row at least: the server's rows, a round of seconds in each process,
#           in 3 processes or more; the cheaper rows in many more rounds, as the budget holds
BUDGET_S = 150  # seconds the measuring may take, fresh processes added while they fit: with
#                 machine_speed's 16 and cube_bug's 36, the README's first command within 3 min
#                 30 s on a 2-core machine (the least, --processes, run whatever the budget says)
MOST_USERS = 1_000_000  # users, typers or chunk tokens: a prediction may go far; memory stops it
LONGEST = 1_000_000  # tokens of a question or a notebook: GPT-2 reads 1,024, a predicted model more


# ---------------------------------------------------------------------------------------------
# flags


def build_parser():
    p = flags.parser(__doc__, runs=RUNS, prog="two_phases.py", budget=BUDGET_S)
    g = p.add_argument_group("two_phases: the experiments (defaults are the post's)")
    g.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=tuple(EXPERIMENTS),
                   metavar="NAME", help=f"which to run, of {', '.join(EXPERIMENTS)}")
    g.add_argument("--prompts", nargs="+", type=flags.whole(1, LONGEST), default=PROMPTS,
                   metavar="T", help="prefill: question lengths in tokens")
    g.add_argument("--users", nargs="+", type=flags.whole(1, MOST_USERS), default=USERS,
                   metavar="U", help="decode: users typing one token each in the same trip")
    g.add_argument("--notes", type=flags.whole(0, LONGEST - 1), default=NOTES,
                   metavar="N", help="decode and collision: notes already in each typer's notebook")
    g.add_argument("--typers", type=flags.whole(1, MOST_USERS), default=TYPERS,
                   metavar="U", help="collision: users typing when the new user arrives")
    g.add_argument("--question", type=flags.whole(1, LONGEST), default=QUESTION,
                   metavar="T", help="collision: the new user's question length in tokens")
    dial = g.add_mutually_exclusive_group()
    dial.add_argument("--chunk", nargs="+", type=flags.whole(1, MOST_USERS), default=collision.DIAL,
                      metavar="C",
                      help="collision: the dial, question tokens read per step; a row reading "
                           "the whole question at once is always added")
    dial.add_argument("--budget", nargs="+", type=flags.whole(2, 2 * MOST_USERS), default=None,
                      metavar="B",
                      help="collision: the same dial as vLLM's per-step token budget "
                           "(max_num_batched_tokens): chunk = B - typers")
    g.add_argument("--depths", nargs="+", type=flags.whole(0, LONGEST - 1), default=depth.DEPTHS,
                   metavar="N", help="depth: notes already in each typer's notebook; its users "
                                     f"are --users, else {' '.join(map(str, depth.USERS))}")
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
    given = args.users is not USERS and args.users is not QUICK["users"]  # argparse makes a list
    args.depth_users = args.users if given else (1, 2) if args.quick else depth.USERS
    dial = "--budget" if args.budget else "--chunk"
    if args.budget:
        if min(args.budget) <= args.typers:
            p.error(f"argument --budget: each budget must be larger than --typers "
                    f"({args.typers}), to leave room for the question, got {min(args.budget)}")
        args.chunk = [budget - args.typers for budget in args.budget]
    # the dial, once: each chunk at most the question, and the question read all at once
    args.chunk = sorted({min(c, args.question) for c in args.chunk} | {args.question})
    steps = len(collision.schedule(args.question, args.chunk[0]))
    context = predict.check_range(p, args)
    if "collision" in args.experiments and args.notes + steps > context:
        smallest = f"a budget of {args.chunk[0] + args.typers}" if args.budget else \
            f"a chunk of {args.chunk[0]}"
        p.error(f"argument {dial}: the typers' {args.notes} notes plus one per step "
                f"({steps} steps for {smallest}) must fit in a notebook of {context:,} "
                f"tokens; use a larger {dial} or fewer --notes")
    if "wide" in args.experiments and list(args.experiments) != list(EXPERIMENTS) \
            and not wide.plan(args):  # named, where it plans nothing
        p.error("argument --experiments: wide types on GPT-2 xl on a GPU only (--device "
                "torch:cuda, torch:mps or cupy:cuda), beside a smaller --model")
    predict.check_riders(p, args)  # before any plan is made: a plan can be too big to make
    flags.check_speed_flags(p, args)
    args.plot = pictures.wanted(p, args)
    if args.notes == 0 and args.predict is None:
        p.error("argument --notes: a measured run's typers have read a question, at least 1 "
                "note each; an empty notebook is for --predict")
    if predict.check_flags(p, args, {n: EXPERIMENTS[n] for n in args.experiments}):
        return flags.settled(args)  # a prediction: nothing is built, nothing to fit in memory
    flags.need_memory(p, model_run.peak_bytes(EXPERIMENTS, args),
                      f"GPT-2 {args.model} with these settings",
                      "--model, --users, --prompts, --notes, --depths, --typers or --chunk",
                      args.device)
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
