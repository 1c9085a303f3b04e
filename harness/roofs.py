"""The speeds a run holds its rows to, its roofs, where the flags give them instead of the
rounds measuring them: from a saved machine_speed result (--roofs), or given (--forklift and
--workbench); and those flags."""
from harness import flags
from harness.keeping import schema
from harness.measuring.speeds import Speeds


def given(args):
    """The speeds the flags give, or None where they give none."""
    if args.roofs:
        return args.roofs
    if args.forklift:
        return Speeds(args.forklift * 1e9, args.workbench * 1e9, "given on the command line")
    return None


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
