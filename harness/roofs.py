"""The speeds a run holds its rows to, its roofs: measured at the start and at the end of the run
(the faster of each), taken from a saved machine_speed result (--roofs), or given (--forklift
and --workbench); and those flags."""
from harness import devices, flags, schema, timing
from harness.speeds import Speeds, sizes
from harness.terminal import warn

DRIFT = 0.10  # the speeds at the end of a run differ from the start by more: say so


def given(args):
    """The speeds the flags give, or None where they give none."""
    if args.roofs:
        return args.roofs
    if args.forklift:
        return Speeds(args.forklift * 1e9, args.workbench * 1e9, "given on the command line")
    return None


def speeds(args, measure):
    """The forklift and workbench speeds: given by the flags, or measured now by measure(size,
    matmul, runs) -> (Speeds, ...) at machine_speed's own sizes (same run, same noise)."""
    return given(args) or measure(**sizes(args.quick), runs=args.runs,
                                  again=timing.again_for(args),
                                  on=devices.device(getattr(args, "device", "numpy")))[0]


def add_flags(g):
    """The flags that give the speeds instead of measuring them."""
    given = g.add_mutually_exclusive_group()
    given.add_argument("--roofs", default=None, metavar="FILE",
                       type=flags.reads(schema.read_roofs, "a machine_speed.py results file"),
                       help="take the forklift and workbench speeds from a saved "
                            "machine_speed.json instead of measuring them in this run")
    given.add_argument("--forklift", type=flags.speed("GB/s", 0.001, 1e6), default=None,
                       metavar="GB/S",
                       help="the memory speed to hold the rows to (or to predict with), "
                            "with --workbench, instead of measuring it")
    g.add_argument("--workbench", type=flags.speed("GFLOP/s", 0.001, 1e9), default=None,
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


def through(args, start, measure):
    """The speeds every row is held to: the faster of those measured at the start and the end of
    the run (see through_the_run), or the speeds given."""
    return start if args.roofs or args.forklift else through_the_run(start, speeds(args, measure))
