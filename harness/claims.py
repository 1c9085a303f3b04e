"""The post's claims, as data: each with the post's figure, a rule about its substance (a
direction, an order, a share, a bound) and the verdict on this machine's saved sheets: holds,
does not hold, or cannot tell here. A claim that does not hold says why, as the check and
breakdown tables do."""
import dataclasses

from harness.printers import Sheet, col
from harness.records import Missing, find, rows

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "cannot tell here"
ABOUT = 2  # "about X" holds within this factor of X either way: the same size, not the same digits


@dataclasses.dataclass(frozen=True)
class Claim:
    """script: whose sheets tell; says: the post's words; post: the post's figure; rule: when it
    holds, in words; judge(records, roofs) -> (this machine's figure in words, True, False, or
    None for cannot tell); rows: the check table's rows that say why when it does not hold."""
    script: str
    says: str
    post: str
    rule: str
    judge: object
    rows: tuple = ()
    why: str = ""  # why it may not hold, where no row of the check table says
    needs: tuple = ()  # the flags the post's figure was measured with: (flag, value)


def figure(found, experiment, name, /, **keys):
    """(value, lo, hi): a figure of the records and the range of the runs behind it."""
    f = find(found, experiment, name, **keys)
    return f.value, f.lo, f.hi


def speeds(r):
    """The machine's Speeds the figures are held to, or Missing where the run saved none."""
    if r is None:
        raise Missing("the machine's speeds")
    return r


def about(value, post):
    return post / ABOUT <= value <= post * ABOUT


def more(a, b):
    """Figure a is more than figure b: True, False, or None when their ranges overlap."""
    if a[1] > b[2]:
        return True
    return False if a[2] < b[1] else None


# ---- the judges: each reads the figures it needs and applies the rule written beside it below

def balance(t, r):
    v = figure(t, "machine_speed", "balance")[0]
    return f"{v:.1f} FLOPs per byte", v > 1


def tokens_needed(t, r):
    v = figure(t, "machine_speed", "tokens a trip needs")[0]
    return f"about {v:.0f}", 1 < v < 256


def one_token(t, r):
    read, typed = figure(t, "prefill", "time", prompt=1)[0], figure(t, "decode", "step", users=1)[0]
    return f"{read:.1f} against {typed:.1f} ms", about(read, typed)


def under_3_ms(t, r):
    ms = [figure(t, "prefill", "time per token", prompt=p)[0] for p in (64, 256)]
    return f"{ms[0]:.2f} and {ms[1]:.2f} ms", max(ms) < 3


def half_the_workbench(t, r):
    best = max(figure(t, "prefill", "math speed", prompt=p)[0] for p in (64, 256))
    share = best * 1e9 / speeds(r).flops_per_s
    peak = speeds(r).flops_per_s / 1e9
    return f"{best:.1f} of {peak:.1f} GFLOP/s ({share:.0%})", about(share, 0.5)


def long_costs_more(t, r):
    long = figure(t, "prefill", "time per token", prompt=1024)
    mid = figure(t, "prefill", "time per token", prompt=256)
    return f"{long[0]:.2f} against {mid[0]:.2f} ms", more(long, mid)


def compute_bound(t, r):
    bound = [figure(t, "check", "bound by", experiment="prefill", row=f"{p} tokens")[0]
             for p in (256, 1024)]
    return f"{bound[0]}-bound and {bound[1]}-bound", all(b == "workbench" for b in bound)


def idle_workbench(t, r):
    share = figure(t, "decode", "math speed", users=1)[0] * 1e9 / speeds(r).flops_per_s
    return f"{share:.1%}", share < 0.04


def forklift_share(t, r):
    step = figure(t, "decode", "step", users=1)[0] / 1e3
    share = figure(t, "decode", "bytes read", users=1)[0] * 1e6 / speeds(r).bytes_per_s / step
    return f"{share:.0%}", share > 0.8


def batching(users, post):
    def judge(t, r):
        gain = (figure(t, "decode", "tokens per second", users=users)[0]
                / figure(t, "decode", "tokens per second", users=1)[0])
        return f"{gain:.1f}x", about(gain, post)
    return judge


def gaps_grow(t, r):
    steps = [figure(t, "decode", "step", users=u) for u in (1, 4, 16, 64)]
    grows = [more(b, a) for a, b in zip(steps, steps[1:])]
    return (", ".join(f"{s[0]:.1f}" for s in steps) + " ms",
            False if False in grows else None if None in grows else True)


def notebooks_outweigh(t, r):
    one = figure(t, "decode", "bytes read", users=1)[0]
    many = figure(t, "decode", "bytes read", users=64)[0]
    notebook = (many - one) / 63  # MB read = tables + users x one notebook
    ratio = 64 * notebook / (one - notebook)
    return f"{64 * notebook:,.0f} against {one - notebook:,.0f} MB", ratio > 1


def freeze(t, r):
    normal = figure(t, "collision", "normal gap")[0]
    at_once = figure(t, "collision", "all at once gap")[0]
    return f"{at_once:.1f} against {normal:.1f} ms ({at_once / normal:.0f}x)", about(
        at_once / normal, 40)


def small_bumps(t, r):
    steps, chunk = figure(t, "collision", "steps")[0], figure(t, "collision", "chunk")[0]
    worst = figure(t, "collision", "chunked worst gap")
    freeze_ = figure(t, "collision", "all at once gap")
    smaller = more(freeze_, worst)
    return (f"chunks of {chunk}: {steps} bumps, worst {worst[0]:.1f} ms",
            None if smaller is None or chunk != 128 else steps == 8 and smaller)


def dial(t, r):
    chunks = sorted(dict(keys)["chunk"] for keys in rows(t, "dial"))
    if len(chunks) < 2:
        raise Missing("dial: fewer than two chunk sizes")
    first, last = chunks[0], chunks[-1]
    small = (figure(t, "dial", "first word", chunk=first),
             figure(t, "dial", "worst gap", chunk=first))
    large = (figure(t, "dial", "first word", chunk=last),
             figure(t, "dial", "worst gap", chunk=last))
    sooner, rougher = more(small[0], large[0]), more(large[1], small[1])
    return (f"chunks of {first} to {last}: first word {small[0][0]:.0f} to "
            f"{large[0][0]:.0f} ms, worst gap {small[1][0]:.0f} to {large[1][0]:.0f} ms",
            False if False in (sooner, rougher) else None if None in (sooner, rougher) else True)


def cheaper(t, r):
    v = figure(t, "summary", "times cheaper")[0]
    return f"{v:.0f}x", about(v, 14)


def cube(numbers, post):
    def judge(t, r):
        v = figure(t, "cube", "ratio", numbers=numbers)[0]
        return f"{v:.1f}x" if v < 10 else f"{v:.0f}x", about(v, post)
    return judge


CUBE_WHY = ("h**3 takes NumPy's general power loop, whose speed depends on the NumPy build and "
            "the CPU (the post's: NumPy 2.5.3)")
SMALL, NOTES, SERVER = (("model", "small"),), (("model", "small"), ("notes", 512)), (
    ("model", "small"), ("notes", 512), ("typers", 8), ("question", 1024))
CUBE = (("model", "small"), ("tokens", 256))
CLAIMS = [
    Claim("machine_speed", "The workbench outpaces the forklift: about 10 FLOPs per byte",
          "10.1", "above 1 FLOP per byte: one token (0.5 per byte) leaves the workbench idle",
          balance),
    Claim("machine_speed", "A trip needs about 20 tokens to keep the math busy", "about 20",
          "more than 1 and fewer than 256: typing waits on the forklift, a long question not",
          tokens_needed),
    Claim("two_phases", "A 1-token question costs about the same as typing one word",
          "32.7 against 37.5 ms", "within 2x of each other", one_token,
          (("prefill", "1 token"), ("decode", "1 user")), needs=NOTES),
    Claim("two_phases", "At 64 to 256 tokens each token costs under 3 ms", "2.88 and 2.84 ms",
          "both under 3 ms", under_3_ms, (("prefill", "64 tokens"), ("prefill", "256 tokens")),
          needs=SMALL),
    Claim("two_phases", "... running at about half the workbench's top speed",
          "59.9 of 120.9 GFLOP/s", "the better of 64 and 256 tokens within 2x of half the "
          "workbench", half_the_workbench, (("prefill", "256 tokens"),), needs=SMALL),
    Claim("two_phases", "At 1,024 tokens each token costs more than at 256",
          "4.18 against 2.84 ms", "more, beyond the spread of the runs", long_costs_more,
          (("prefill", "1024 tokens"),), needs=SMALL),
    Claim("two_phases", "Reading is stuck on the workbench", "compute-bound",
          "the check table's prefill rows of 256 and 1,024 tokens are workbench-bound",
          compute_bound, needs=SMALL),
    Claim("two_phases", "One typing user uses under 4% of the workbench", "3.7%", "under 4%",
          idle_workbench, (("decode", "1 user"),), needs=NOTES),
    Claim("two_phases", "More than 80% of the typing time is the forklift", "31 of 37.5 ms",
          "one user's bytes at the forklift's speed over the step: above 80%", forklift_share,
          (("decode", "1 user"),), needs=NOTES),
    Claim("two_phases", "Batching 16 users gives about 3.7x the tokens per second", "3.7x",
          "within 2x of 3.7x", batching(16, 3.7), (("decode", "16 users"),), needs=NOTES),
    Claim("two_phases", "... and 64 users about 5.2x", "5.2x", "within 2x of 5.2x",
          batching(64, 5.2), (("decode", "64 users"),), needs=NOTES),
    Claim("two_phases", "Each user's gap between words grows with the batch",
          "37.5, 85.3, 162.5, 461.8 ms", "each step slower than the one with fewer users, beyond "
          "the spread of the runs", gaps_grow, needs=NOTES),
    Claim("two_phases", "At 64 users the notebooks outweigh the tables, 7x over",
          "2,416 against 340 MB", "the model's accounting: the notebooks' bytes over the "
          "tables' above 1", notebooks_outweigh, needs=NOTES),
    Claim("two_phases", "Reading a long question at once freezes the typers for about 40x "
          "their normal gap", "4723.0 against 118.0 ms", "within 2x of 40x", freeze,
          (("collision", "normal gap"), ("collision", "all at once")), needs=SERVER),
    Claim("two_phases", "Chunks of 128 give 8 small bumps instead", "8 bumps, worst 671.2 ms",
          "8 steps, the worst gap under the one-shot freeze (chunks of 128 only)", small_bumps,
          (("collision", "chunks of 128, worst"),), needs=SERVER),
    Claim("two_phases", "The chunk size is a dial: bigger chunks give the newcomer its first "
          "word sooner, smaller ones keep the typers smoother", "a dial",
          "from the smallest chunk to the largest, the first word comes sooner and the worst "
          "gap grows", dial, needs=SERVER),
    Claim("two_phases", "Reading is about 14 times cheaper per token than typing", "14x",
          "within 2x of 14x", cheaper, needs=NOTES),
    Claim("cube_bug", "h**3 is about 2x slower than h*h*h on positive numbers", "2x",
          "within 2x of 2x", cube("all positive", 2), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... about 109x on negative numbers", "109x", "within 2x of 109x",
          cube("all negative", 109), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... about 55x on a real mix", "55x", "within 2x of 55x",
          cube("mixed (real)", 55), why=CUBE_WHY, needs=CUBE),
]


def verdicts(found, roofs, scripts, settings=None):
    """[(claim, this machine's figure, verdict, why)] for the claims of these scripts, from
    their records, whose runs had these settings (their flags, by name; None: the post's)."""
    out = []
    for c in (c for c in CLAIMS if c.script in scripts):
        other = [f"--{k} {v}" for k, v in c.needs
                 if settings is not None and settings.get(k) not in (v, [v])]
        if other:
            out.append((c, "", UNKNOWN, "the post measured it with " + " ".join(other)))
            continue
        try:
            here, holds = c.judge(found, roofs)
        except Missing as e:  # a figure truly absent; any other error is a bug, and raises
            out.append((c, "", UNKNOWN, f"not measured here ({e})"))
            continue
        verdict = HOLDS if holds else UNKNOWN if holds is None else FAILS
        why = ("within the spread of the runs" if holds is None else
               "; ".join(filter(None, (reason(found, *row) for row in c.rows))) or c.why
               if not holds else "")
        out.append((c, here, verdict, why))
    return out


def reason(found, experiment, row):
    """Why a row is far from what the post saw, as the check and breakdown tables say."""
    try:
        ratio = figure(found, "check", "x limit", experiment=experiment, row=row)[0]
        most = figure(found, "breakdown", "most excess", experiment=experiment, row=row)[0]
    except Missing:
        return ""
    return f"{experiment} {row}: {ratio:.2f}x its limit, most excess {most}"


def sheet(found, roofs, scripts, args):
    """The claims sheet of these scripts' figures, run with args; two lines a claim in the plain
    layout. A quick run's small sizes are not the post's: its claims are not judged."""
    if args.quick:
        return Sheet("claims", COLUMNS, [], recorded=False, title="The post's claims",
                     text="(a quick run: the post's claims are judged on a full run, with the "
                          "post's sizes)")
    judged = verdicts(found, roofs, scripts, vars(args))
    rows = [dict(zip(FIELDS, [verdict, c.says, c.post, here, c.rule, why]))
            for c, here, verdict, why in judged]
    text = "\n".join(f"{verdict:<16} {c.says}\n{'':17}post {c.post}; here {here or '-'}; "
                     f"rule: {c.rule}" + (f"\n{'':17}why: {why}" if why else "")
                     for c, here, verdict, why in judged) if args.tablefmt == "plain" else None
    return Sheet("claims", COLUMNS, rows, text=text, recorded=False,
                 title="The post's claims on this machine",
                 settings="each verdict by the rule given; 'about' means within 2x either way")


FIELDS = ("verdict", "the post says", "post", "here", "rule", "why")
COLUMNS = [col(f, f, "", "s") for f in FIELDS]
