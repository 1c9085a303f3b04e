"""The slow road: h**3 against h*h*h on one floor's worth of numbers, by sign.

    python cube_bug.py                    # 786,432 numbers (256 tokens x 3072), middle of 7
    python cube_bug.py --quick --no-save  # a smoke run of a second
"""
if __name__ == "__main__":  # Ctrl-C or a kill while the rest loads ends in one line
    from harness import stopping
    stopping.stop_quietly()


import dataclasses

import numpy as np

from harness import claims, cli, timing
from harness.printers import Sheet, Then, col, format_table
from harness.records import Measured, timed
from harness.terminal import plural
import model

TOKENS = 256  # a 256-token question ...
MLP = 4 * model.SIZES["small"].width  # ... times the thinking room's width (3072): one floor's
#                                       786,432 numbers
QUICK = {"tokens": 16}
SAMPLE_S = 0.02  # repeat sub-millisecond calls inside a sample until it lasts this long
SAME = 1e-6  # largest relative difference still "the same answer" in float32 (eps is 1.2e-7)

CASES = (  # (label, how the numbers are made from seeded standard normals)
    ("all positive", np.abs),
    ("all negative", lambda h: -np.abs(h)),
    ("mixed (real)", lambda h: h),  # a real mix: about half negative, as in a model
)


def mlp(size):
    """The thinking room's width of a GPT-2 size: 4 x its width (3072 for small)."""
    return 4 * model.SIZES[size].width


def inputs(tokens, make, seed=0, width=MLP):
    h = np.random.default_rng(seed).standard_normal((tokens, width), dtype=np.float32)
    return make(h).astype(np.float32, copy=False)  # (tokens, width)


def largest_relative_difference(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), np.finfo(np.float32).tiny)))


def race(h, runs, label):
    """Both ways on the same numbers; checks they agree before timing them."""
    diff = largest_relative_difference(h ** 3, h * h * h)
    assert diff <= SAME, f"{label}: h**3 and h*h*h differ by {diff:.1e}"
    power = timing.measure(lambda: h ** 3, runs, what=f"{label} h**3", min_sample_s=SAMPLE_S)
    product = timing.measure(lambda: h * h * h, runs, what=f"{label} h*h*h", min_sample_s=SAMPLE_S)
    return power, product, diff


def post_line(label, power_ms, product_ms, diff):
    """One line of the post's layout, plus the proof that the answer is the same."""
    return (f"{label:<12}   h**3: {power_ms:6.2f} ms   h*h*h: {product_ms:5.2f} ms   "
            f"({ratio(power_ms / product_ms)}x)   same answer (largest rel. diff {diff:.1e})")


def ratio(r):
    """The post's '(   2x)', with a decimal where a whole number would hide one (1.3x)."""
    return f"{r:4.1f}" if r < 10 else f"{r:4.0f}"


COLUMNS = [col("numbers", "numbers", "", "s", key=True),
           col("power", "h**3 ms", "ms", ".2f", compared=True),
           col("product", "h*h*h ms", "ms", ".2f", compared=True),
           col("ratio", "ratio", "x", ".0f"),
           col("largest relative difference", "largest rel. diff", "", ".1e")]


def experiment(args, facts):
    tokens, width = args.tokens, mlp(args.model)
    rows, lines = [], []
    for label, make in CASES:
        power, product, diff = race(inputs(tokens, make, width=width), args.runs, label)
        ms = power.seconds * 1e3, product.seconds * 1e3
        rows.append({"numbers": label, "power": timed(ms[0], power),
                     "product": timed(ms[1], product),
                     "ratio": Measured(ms[0] / ms[1], ((1, power), (-1, product))),
                     "largest relative difference": diff})
        lines.append(post_line(label, *ms, diff))
    version = f"numpy {np.__version__}"
    sheet = Sheet("cube", COLUMNS, rows, timed=("power", "product"), per="figure",
                  title="The slow road: h**3 against h*h*h, by sign",
                  settings=f"{tokens * width:,} float32 numbers, a floor of GPT-2 {args.model} "
                           f"at {tokens} {plural(tokens, 'token')}; {args.threads} "
                           f"{plural(args.threads, 'thread')}")
    text = "\n".join(lines + [version]) if args.tablefmt == "plain" else (
        format_table(COLUMNS, sheet.cells(), args.tablefmt) + "\n" + version)
    yield dataclasses.replace(sheet, text=text)
    yield ""
    yield Then(lambda found: [claims.sheet(found, None, ("cube_bug",), args, facts["busy"])])


def build_parser():
    p = cli.parser(__doc__, runs=7)
    g = p.add_argument_group("cube_bug")
    g.add_argument("--tokens", type=cli.whole(1, 10 ** 8), default=TOKENS, metavar="N",
                   help="question length: the numbers are N x 4 x the model's width, one floor's "
                        "worth")
    g.add_argument("--model", choices=model.SIZES, default="small", metavar="SIZE",
                   help=f"whose floor: GPT-2 {', '.join(model.SIZES)} (the post's is small)")
    return p


ARRAYS = 8  # the numbers, each way's answer and temporaries, and the check's: the most held at once


def parse_args(argv=None):
    p = build_parser()
    args = cli.parse(p, argv, QUICK)
    cli.need_memory(p, ARRAYS * args.tokens * mlp(args.model) * model.BYTES,
                       f"--tokens {args.tokens}", "--tokens")
    return args


def main(argv=None):
    return cli.run("cube_bug", parse_args(argv), experiment)


if __name__ == "__main__":
    stopping.leave(main())
