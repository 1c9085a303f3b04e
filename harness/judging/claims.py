"""The post's claims, as data: each with the post's words and figure, the rule it is judged by
(a direction, an order, a share, a bound, with its edge where the post's conclusion would
change, not the post's machine's number), the judge that reads its figures from the records,
and the kind of machine on which it would not hold; and why a ratio of two rows does not hold.
judge.py resolves them."""
from harness.post import CUBE_TOKENS, MODEL, NOTES, PROMPTS, QUESTION, TYPERS, USERS
import model
from harness.terminal import plural
from harness.keeping.records import Missing, find, number, rows
from harness.measuring.speeds import CACHE_RULE
from harness.judging.gpu_claims import GPU_CLAIMS, LAUNCH_CLAIM
from harness.judging.rules import (FREEZE, Claim, Test, above, below, every, figure, more, plain,
                                   speeds, value, within)
from model import BYTES, FLOPS_PER_NUMBER

ABOUT = 1.5  # "about the same": within this factor either way
OFF = 2  # batching within 2x of what the accounting gives at this machine's limits, either way
DIMINISHING = 2  # 64 users give under 2x the tokens per second of 16 (the post's 1.4x): a 4th
#                  of the users more for less than twice the tokens, the notebooks' price
ONE_TOKEN = FLOPS_PER_NUMBER / BYTES  # FLOPs per byte of a table number one token meets: 0.5
FAR = 4  # "far more": this many times
MOST_TOKENS = 256  # a trip needs fewer tokens than this: "a question of a few hundred" passes them
GROWS = 3  # a 1,024-token question waits over 3x as long as a 256-token one: the wait follows
#            the length (4x the tokens; the post's 5.9x), not a fixed cost
TURN = 2  # a read at a quarter of the turn or less costs this many times the best per token
#           (at the limits: turn / tokens, 4x or more), one at twice the turn or more, less


# ---- the judges: each reads the figures it needs and gives the rule written beside it below

def sizes(t, experiment, key):
    """The numbers a key takes in an experiment's rows, smallest first: a row without the key,
    or with text there (an older or edited file's), names no size and is left out."""
    return sorted({v for keys in rows(t, experiment) for v in [dict(keys).get(key)]
                   if number(v)})


def from_memory(t):
    """Raise Missing where the forklift's table fitted in the cache the run recorded (STREAM's
    rule): its reading is the cache's speed, not memory's, and backs no claim."""
    read = find(t, "machine_speed", "read")
    cache = (read.get("settings") or {}).get("cache_bytes")
    if cache and read["value"] * 1e6 < CACHE_RULE * cache:
        raise Missing(f"the forklift's table, {read['value']:,.0f} MB, is under {CACHE_RULE}x "
                      f"the {cache / 2 ** 20:,.0f} MiB cache: it read the cache, not memory; "
                      f"rerun with a larger --size")


def balance(t, r):
    from_memory(t)
    b = figure(t, "machine_speed", "math speed") / figure(t, "machine_speed", "memory speed")
    n = b * (BYTES / FLOPS_PER_NUMBER)  # the tokens a trip needs
    return (f"{b.value:.1f} FLOPs per byte, a trip needs about {n.value:.0f} tokens",
            within(b, FAR * ONE_TOKEN, MOST_TOKENS * ONE_TOKEN, label="the balance", fmt=".1f"))


def one_token(t, r):
    read, typed = figure(t, "prefill", "time", prompt=1), figure(t, "decode", "step", users=1)
    return (f"{read.value:.1f} against {typed.value:.1f} ms",
            within(read / typed, 1 / ABOUT, ABOUT, label="the ratio", fmt=".2f"))


def under_3_ms(t, r):
    ms = [figure(t, "prefill", "time per token", prompt=p) for p in (64, 256)]
    one = figure(t, "prefill", "time", prompt=1)
    return (f"{ms[0].value:.2f} and {ms[1].value:.2f} ms, a 1-token question {one.value:.1f} ms",
            every(*(below(m / one, 0.25, label=f"{p} tokens' share", fmt=".3f")
                    for p, m in zip((64, 256), ms))))


def ttft_grows(t, r):
    times = [figure(t, "prefill", "time", prompt=p) for p in PROMPTS]
    return (", ".join(f"{s.value:.1f}" for s in times) + " ms",
            above(figure(t, "prefill", "time", prompt=1024) / figure(t, "prefill", "time",
                                                                       prompt=256),
                  GROWS, label="1,024 over 256 tokens", fmt=".2f"))


def half_the_workbench(t, r):
    best = max((figure(t, "prefill", "math speed", prompt=p) for p in (64, 256)),
               key=lambda f: f.value)
    peak = speeds(t, r).flops_per_s
    share = best * 1e9 / peak
    return (f"{best.value:.1f} of {peak.value / 1e9:.1f} GFLOP/s ({share.value:.0%})",
            above(share, 0.25, label="the share", fmt=".0%"))


def turn_near_20(t, r):
    turn = (speeds(t, r).balance * (BYTES / FLOPS_PER_NUMBER)).value  # tokens a trip needs
    prompts = sizes(t, "prefill", "prompt")
    few = [p for p in prompts if p <= turn / (2 * TURN)]
    many = [p for p in prompts if p >= turn * TURN]
    if not few or not many:
        raise Missing(f"prefill: a question of at most {turn / (2 * TURN):.0f} and one of at "
                      f"least {turn * TURN:.0f} tokens (the turn here is near {turn:.0f})")
    ms = {p: figure(t, "prefill", "time per token", prompt=p) for p in prompts}
    best = min(ms.values(), key=lambda f: f.value)
    few, many = few[-1], many[0]
    return (f"{few} {plural(few, 'token')} {ms[few].value:.2f} ms a token, {many} tokens "
            f"{ms[many].value:.2f}, "
            f"the best {best.value:.2f} (the turn here: about {turn:.0f} tokens)",
            every(above(ms[few] / best, TURN, label=f"{few} {plural(few, 'token')} over the best",
                        fmt=".2f"),
                  below(ms[many] / best, TURN, label=f"{many} tokens over the best",
                        fmt=".2f")))


def long_costs_more(t, r):
    long = figure(t, "prefill", "time per token", prompt=1024)
    mid = figure(t, "prefill", "time per token", prompt=256)
    return f"{long.value:.2f} against {mid.value:.2f} ms", more(long, mid)


def attention_share(t, p):
    return (figure(t, "breakdown", "attention", experiment="prefill", prompt=p)
            / figure(t, "breakdown", "trip", experiment="prefill", prompt=p))


def attention_grows(t, r):
    share = {p: attention_share(t, p) for p in (256, 1024)}
    return (f"attention {share[256].value:.0%} of the trip at 256 tokens, "
            f"{share[1024].value:.0%} at 1,024",
            above(share[1024] / share[256], 1.25, label="the growth", fmt=".2f"))


def notebooks_carried(t, r):
    ms = {p: figure(t, "breakdown", p, experiment="decode", users=64)
          for p in ("attention", "tables")}
    return (f"attention {ms['attention'].value:.1f} ms, tables {ms['tables'].value:.1f} ms",
            more(ms["attention"], ms["tables"], "attention over the tables",
                 "the tables take as long or longer"))


def workbench_barely_helps(t, r):
    s = speeds(t, r)
    flops = value(t, "decode", "math speed", users=1) * value(t, "decode", "step", users=1) * 1e6
    math = flops / s.flops_per_s * 1e3  # ms of one user's step at the workbench's speed
    fetch = value(t, "decode", "bytes read", users=1) * 1e6 / s.bytes_per_s * 1e3
    return (f"math {math.value:.1f} ms against fetching {fetch.value:.1f} ms",
            below(math / fetch, 0.1, label="math over fetching", fmt=".3f"))


def forklift_helps(t, r):
    steps = {n: figure(t, "depth", "step", users=1, notes=n) for n in (0, 1023)}
    mb = {n: value(t, "depth", "bytes read", users=1, notes=n) for n in (0, 1023)}
    fetch = (mb[1023] - mb[0]) * 1e6 / speeds(t, r).bytes_per_s * 1e3  # ms at the forklift's
    extra = steps[1023].value - steps[0].value
    return (f"1,023 notes {extra:+.1f} ms over none, their {mb[1023] - mb[0]:.0f} MB "
            f"{fetch.value:.1f} ms at the forklift's speed",
            more(steps[1023], steps[0] + fetch / 2))


def compute_bound(t, r):
    bound = [value(t, "check", "bound by", experiment="prefill", prompt=p) for p in (256, 1024)]
    busier = (figure(t, "prefill", "math speed", prompt=256)
              / figure(t, "prefill", "math speed", prompt=1))
    said = (f"both {bound[0]}-bound" if bound[0] == bound[1] else
            f"{bound[0]}-bound at 256 tokens, {bound[1]}-bound at 1,024")
    return (f"{said}, {busier.value:.0f}x the math of 1 token",
            every(plain(all(b == "workbench" for b in bound),
                        f"{bound[0]}-bound at 256 tokens, {bound[1]}-bound at 1,024"),
                  above(busier, FAR, label="256 over 1 token", fmt=".1f")))


def idle_workbench(t, r):
    share = figure(t, "decode", "math speed", users=1) * 1e9 / speeds(t, r).flops_per_s
    return f"{share.value:.1%}", below(share, 0.1, label="the share", fmt=".1%")


def forklift_share(t, r):
    step = figure(t, "decode", "step", users=1) / 1e3
    share = value(t, "decode", "bytes read", users=1) * 1e6 / speeds(t, r).bytes_per_s / step
    return f"{share.value:.0%}", above(share, 0.8, label="the share", fmt=".0%")


def gain(t, users):
    return (figure(t, "decode", "tokens per second", users=users)
            / figure(t, "decode", "tokens per second", users=1))


def at_limits(r, users):
    """The tokens per second `users` users would type at this machine's limits, by the
    accounting (GPT-2 small, the post's notes each)."""
    if r is None:
        raise Missing("the machine's speeds")
    return users / r.limit(model.SIZES[MODEL], [(NOTES, 1)] * users)[0]


def batching_16(t, r):
    g = gain(t, 16)
    limits = at_limits(r, 16) / at_limits(r, 1)
    return (f"{g.value:.1f}x of the accounting's {limits:.1f}x",
            within(g / limits, 1 / OFF, OFF, label="the gain over the limits'", fmt=".2f"))


def batching_64(t, r):
    more = (figure(t, "decode", "tokens per second", users=64)
            / figure(t, "decode", "tokens per second", users=16))
    return (f"{gain(t, 64).value:.1f}x, 16 users {gain(t, 16).value:.1f}x",
            below(more, DIMINISHING, label="64 over 16 users", fmt=".2f",
                  way=f"not below {DIMINISHING}: no diminishing return"))


def gaps_grow(t, r):
    steps = [figure(t, "decode", "step", users=u) for u in USERS]
    mb = [value(t, "decode", "bytes read", users=u) for u in USERS]
    return (", ".join(f"{s.value:.1f}" for s in steps) + " ms",
            every(*(above(b / a, 1 + (mb_b / mb_a - 1) / 2, label=f"{v} over {u} users",
                          fmt=".2f")
                    for u, v, a, b, mb_a, mb_b in zip(USERS, USERS[1:], steps, steps[1:], mb,
                                                      mb[1:]))))


def notebooks_outweigh(t, r):
    one = value(t, "decode", "bytes read", users=1)
    many = value(t, "decode", "bytes read", users=64)
    notebook = (many - one) / 63  # MB read = tables + users x one notebook
    ratio = 64 * notebook / (one - notebook)
    return (f"{64 * notebook:,.0f} against {one - notebook:,.0f} MB ({ratio:.1f}x); "
            f"accounting: the same on every machine",
            within(ratio, 7 / ABOUT, 7 * ABOUT, label="the ratio", fmt=".1f"))


def freeze(t, r):
    normal = figure(t, "collision", "normal gap")
    at_once = figure(t, "collision", "all at once gap")
    times = at_once / normal
    return (f"{at_once.value:.1f} against {normal.value:.1f} ms ({times.value:.0f}x)",
            above(times, FREEZE, label="the freeze", fmt=".1f"))


def small_bumps(t, r):
    steps, chunk = value(t, "collision", "steps"), value(t, "collision", "chunk")
    if chunk != 128:
        raise Missing(f"collision: chunks of 128 (the dial's chunk here is {chunk})")
    worst = figure(t, "collision", "chunked worst gap")
    return (f"chunks of {chunk}: {steps} bumps, worst {worst.value:.1f} ms",
            every(plain(steps == 8, f"{steps} steps"),
                  more(figure(t, "collision", "all at once gap") / 2, worst,
                       "half the freeze over the worst bump")))


def dial(t, r):
    chunks = sizes(t, "dial", "chunk")
    if len(chunks) < 2:
        raise Missing("dial: fewer than two chunk sizes")
    first = {c: figure(t, "dial", "first word", chunk=c) for c in chunks}
    worst = {c: figure(t, "dial", "worst gap", chunk=c) for c in chunks}
    pairs = list(zip(chunks, chunks[1:]))
    return (f"chunks of {chunks[0]} to {chunks[-1]}: first word "
            + ", ".join(f"{first[c].value:.0f}" for c in chunks) + " ms, worst gap "
            + ", ".join(f"{worst[c].value:.0f}" for c in chunks) + " ms",
            every(*(Test(first[a] / first[b], 1, True, f"chunks of {b} give the first word "
                         f"later than {a}", f"first word, {a} over {b}", ".2f", ties=True)
                    for a, b in pairs),
                  *(above(worst[b] / worst[a], 1, label=f"worst gap, {b} over {a}", fmt=".2f",
                          way=f"chunks of {b} not rougher than {a}") for a, b in pairs)))


def cheaper(t, r):
    typed = figure(t, "decode", "step", users=1)
    if not sizes(t, "prefill", "prompt"):
        raise Missing("prefill: not run")
    read = min((figure(t, "prefill", "time per token", prompt=p)
                for p in sizes(t, "prefill", "prompt")), key=lambda f: f.value)
    times = typed / read
    return f"{times.value:.0f}x", above(times, 5, label="typing over reading", fmt=".1f")


def bug(t, trip):
    return figure(t, "bug", "power", trip=trip) / figure(t, "bug", "product", trip=trip)


def bug_in_reading(t, r):
    v = bug(t, "reading")
    return f"{v.value:.2f}x", above(v, 1.25, label="the ratio", fmt=".2f")


def bug_in_typing(t, r):
    v = bug(t, "typing")
    return f"{v.value:.2f}x", every(
        Test(v, 1, True, "h**3 ran faster, beyond the interval: the difference is noise "
                         "between the trips, not the bug", "the ratio", ".2f", ties=True),
        below(v, 1.25, label="the ratio", fmt=".2f"))


def negatives(t, r):
    v = figure(t, "bug", "negative share", trip="reading")
    return f"{v.value:.0f}%", within(v, 40, 60, label="the share", fmt=".0f")


def cube(numbers, edge, slow):
    def judge(t, r):
        v = figure(t, "cube", "power", numbers=numbers) / figure(t, "cube", "product",
                                                                numbers=numbers)
        said = f"{v.value:.1f}x" if v.value < 10 else f"{v.value:.0f}x"
        return said, (above if slow else below)(v, edge, label="the ratio", fmt=".3g")
    return judge


# ---- why a ratio of two rows does not hold: which of the two is further over its limit

def further(found, experiment, first, second, per=1):
    """The two rows' distances from their limits (check records; per: a row's keys -> the count
    its ms are divided by), and which is further over: the one that works against a claim that
    the first is the larger."""
    def over(keys):
        n = per(keys) if callable(per) else per
        ms = value(found, "check", "measured", experiment=experiment, **keys) / n
        limit = value(found, "check", "limit", experiment=experiment, **keys) / n
        return ms, limit
    try:
        (a, la), (b, lb) = over(first[1]), over(second[1])
    except Missing:
        return ""
    unit = " a token" if callable(per) else ""
    said = (f"{first[0]}: {a:.2f} ms{unit}, {a / la:.2f}x its limit of {la:.2f} (+{a - la:.2f}); "
            f"{second[0]}: {b:.2f} ms{unit}, {b / lb:.2f}x its limit of {lb:.2f} (+{b - lb:.2f})")
    if b / lb > a / la:
        return said + (f": {second[0]} is further over its limit, which shrinks {first[0]}'s "
                       f"lead: the suite's distance from the limits, not the machine")
    return said + f": {first[0]} is the further over its limit"


def long_costs_more_why(found, roofs):
    return further(found, "prefill", ("1,024 tokens", {"prompt": 1024}),
                   ("256 tokens", {"prompt": 256}), per=lambda keys: keys["prompt"])


def freeze_why(found, roofs):
    return further(found, "collision", ("the freeze", {"chunk": 1024}),
                   ("the normal gap", {"chunk": None}))


CUBE_WHY = ("h**3 takes NumPy's general power loop, whose speed depends on the NumPy build and "
            "the CPU (the post's: NumPy 2.5.3)")
SMALL = (("model", MODEL),)  # the flags each claim's figures were measured with, as the post's
WITH_NOTES = (*SMALL, ("notes", NOTES))
SERVER = (*WITH_NOTES, ("typers", TYPERS), ("question", QUESTION))
CUBE = (*SMALL, ("tokens", CUBE_TOKENS))
NOT_PRINTED = "in words only"  # the post gives no figure: judged on this machine's figures
LONG = "At 1,024 tokens each token costs more than at 256"
REFERENCE_BLAS = "a NumPy on the reference BLAS (no OpenBLAS or MKL), whose math is slow"
CLAIMS = [
    Claim("machine_speed", "The workbench outpaces the forklift: about 10 FLOPs per byte, so "
          "a trip needs about 20 tokens to keep the math busy", "10.1, about 20",
          f"The balance is over {FAR * ONE_TOKEN:g} FLOPs per byte, {FAR}x the {ONE_TOKEN:g} a "
          f"table number gives one token (typing leaves most of the workbench idle), and under "
          f"{MOST_TOKENS * ONE_TOKEN:g}, so that a trip needs (2 x the balance) fewer than "
          f"{MOST_TOKENS} tokens (a question of a few hundred passes them)", balance,
          fails_on=REFERENCE_BLAS + " (under 2); a data-centre GPU in 16-bit math, whose "
          "balance of a few hundred needs about a thousand tokens (over 128)"),
    Claim("two_phases", "A 1-token question costs about the same as typing one word",
          "32.7 against 37.5 ms", f"A 1-token read takes within {ABOUT:g}x of one user's typing "
          f"step either way: the same trip with one passenger", one_token,
          (("prefill", {"prompt": 1}), ("decode", {"users": 1})), needs=WITH_NOTES,
          construction=True, fails_on="a machine whose notes are read far slower than its "
          "tables (attention many times its limit)"),
    Claim("two_phases", "At 64 to 256 tokens each token costs under 3 ms", "2.88 and 2.84 ms",
          "At 64 and 256 tokens a token costs under a quarter of a 1-token read (the post's "
          "3 ms, 9% of its 32.7, is that machine's speed: the share is the claim)", under_3_ms,
          (("prefill", {"prompt": 64}), ("prefill", {"prompt": 256})), needs=SMALL,
          fails_on="a machine whose workbench is barely faster than its forklift (a balance "
          "under 1), or a BLAS slow at these shapes"),
    Claim("two_phases", "The wait for the first word depends mostly on the question's length",
          "32.7, 86.6, 184.6, 726.4, 4278.3 ms", f"A 1,024-token question waits over {GROWS}x "
          f"as long as a 256-token one (4x the tokens; the post's 5.9x): the wait follows the "
          f"length", ttft_grows, (("prefill", {"prompt": 1024}),), needs=SMALL,
          construction=True,
          fails_on="a GPU whose balance of hundreds keeps every read up to 1,024 tokens on the "
          "forklift, or one run as one launch after another, whose reads all cost alike"),
    Claim("two_phases", "... running at about half the workbench's top speed",
          "59.9 of 120.9 GFLOP/s", "The better of 64 and 256 tokens reads at more than a quarter "
          "of the workbench (the post's h**3 bug held it to a quarter, and the post went "
          "looking for a bug)", half_the_workbench, (("prefill", {"prompt": 256}),),
          needs=SMALL, construction=True,
          fails_on="a machine with a bug like the post's h**3, or whose BLAS is slow at the "
          "model's shapes"),
    Claim("two_phases", "Reading needs about 20 tokens on a trip to keep the math busy",
          "5.41, 2.88, 2.84 ms a token at 16, 64, 256", f"Around the turn the machine's balance "
          f"puts reading at (2 x the balance tokens): a read of at most a quarter of the turn "
          f"costs {TURN}x or more a token than the best read, one of at least twice the turn "
          f"under {TURN}x", turn_near_20, (("prefill", {"prompt": 16}),
                                           ("prefill", {"prompt": 64})),
          needs=SMALL, construction=True, fails_on="a machine whose short reads are slow for "
          "other reasons than the forklift, so that cost a token still falls far past the turn; "
          "or one whose tables sit in a cache as large as them (768 MB of 3D V-Cache), so that a "
          "short read costs little more a token than a long one"),
    Claim("two_phases", LONG, "4.18 against 2.84 ms", "A token costs more at 1,024 tokens than "
          "at 256 (their ratio above 1)", long_costs_more, needs=SMALL, construction=True,
          explain=long_costs_more_why, fails_on="a machine whose BLAS runs the 1,024-token "
          "products much better than the 256-token ones, so that attention's growth is hidden"),
    Claim("two_phases", "... because the notebook's part grows faster than the question",
          NOT_PRINTED, "Attention's share of the recorded trip is 1.25x or more at 1,024 tokens "
          "what it is at 256 (judged on its own, whether or not the cost a token rises)",
          attention_grows, needs=SMALL, fails_on="a machine whose attention runs far below its "
          "limit at short questions"),
    Claim("two_phases", "Reading is stuck on the workbench", "compute-bound",
          f"The 256- and 1,024-token reads are workbench-bound by the accounting, and 256 tokens "
          f"do {FAR}x or more the math per second of 1 token", compute_bound, needs=SMALL,
          fails_on="a GPU in 16-bit math, whose balance of hundreds keeps a 256-token read on "
          "the forklift"),
    Claim("two_phases", "One typing user uses under 4% of the workbench", "3.7%",
          "One user's typing uses under 10% of the workbench (at any machine's limits one "
          "token does 0.5 FLOPs a byte against a balance of about 10: the post's 4% is its "
          "suite's distance from them)", idle_workbench, (("decode", {"users": 1}),),
          needs=WITH_NOTES, fails_on="a machine whose balance is under 5 FLOPs per byte"),
    Claim("two_phases", "More than 80% of the typing time is the forklift", "31 of 37.5 ms",
          "One user's bytes at the forklift's speed take more than 80% of the typing step (the "
          "post's own threshold: the rest is math and overhead)", forklift_share,
          (("decode", {"users": 1}),), needs=WITH_NOTES, construction=True,
          fails_on="a machine where one typing step is far from its memory limit (a slow "
          "matrix-vector product, or attention many times its limit)"),
    LAUNCH_CLAIM,
    Claim("two_phases", "A faster workbench would barely help typing", "4.5 of 121 GFLOP/s",
          "One user's step does its math at the workbench's speed in under a tenth of the "
          "time its fetching takes at the forklift's", workbench_barely_helps, needs=WITH_NOTES,
          basis="speeds", fails_on="a machine whose balance is under 5 FLOPs per byte"),
    Claim("two_phases", "A faster forklift, or fewer bytes to fetch, would help typing",
          NOT_PRINTED, "Typing for 1 user at 1,023 notes is slower than at none by at least half "
          "the time its extra notes take at the forklift's speed", forklift_helps,
          why="typing's step should grow with the bytes it fetches: where it does not, the "
              "depth rows' time goes elsewhere (their x limit says how far each is from its "
              "limit)", needs=SMALL, construction=True, fails_on="a machine where the notes "
          "sit in a cache as large as them (hundreds of MB)"),
    Claim("two_phases", "Batching 16 users gives about 3.7x the tokens per second", "3.7x",
          f"16 users typing together give within {OFF}x either way of the tokens per second "
          f"over one user's that the accounting gives at this machine's limits (the post's 3.7x "
          f"against its limits' 6.4x): the tables are shared, the notebooks are not",
          batching_16, (("decode", {"users": 16}),), needs=WITH_NOTES, construction=True,
          fails_on="a GPU run one launch after another, whose step stays flat (16x, over 2x "
          "its limits' 6x), or a machine whose attention is far slower than its limit (under "
          "half its limits' gain)"),
    Claim("two_phases", "... and 64 users about 5.2x", "5.2x", f"64 users give under "
          f"{DIMINISHING}x the tokens per second of 16 (the post's 1.4x): the return "
          f"diminishes as the notebooks outweigh the tables", batching_64,
          (("decode", {"users": 64}),), needs=WITH_NOTES, construction=True,
          fails_on="a GPU whose step is its "
          "launches, flat from 16 users to 64 (4x the tokens per second)"),
    Claim("two_phases", "Each user's gap between words grows with the batch",
          "37.5, 85.3, 162.5, 461.8 ms", "Each 4x more users make the step grow at least half "
          "as much as the bytes it fetches do (the post's 2.3x, 1.9x and 2.8x against "
          "bytes 1.3x, 1.9x and 2.9x)", gaps_grow, (("decode", {"users": 4}),),
          needs=WITH_NOTES, construction=True, fails_on="a GPU whose steps are set by "
          "launches, not bytes, or a BLAS whose one-token product is far slower than its "
          "four-token one (1 user's step far above its limit)"),
    Claim("two_phases", "At 64 users the notebooks outweigh the tables, 7x over",
          "2,416 against 340 MB", f"64 users' notes weigh within {ABOUT:g}x of 7x the tables, "
          f"by the model's accounting", notebooks_outweigh, needs=WITH_NOTES, basis="accounting",
          fails_on="none: it is the accounting's"),
    Claim("two_phases", "... so at 64 users the forklift mostly carries notebooks", NOT_PRINTED,
          "In the recorded trip of 64 users, reading the notes takes longer than the tables",
          notebooks_carried, needs=WITH_NOTES, fails_on="a machine whose table products are far "
          "slower than its attention"),
    Claim("two_phases", "Reading a long question at once freezes the typers for about 40x "
          "their normal gap", "4723.0 against 118.0 ms", f"A 1,024-token question read at "
          f"once makes the typers' gap {FREEZE}x or more their normal one: many gaps, not a "
          f"few", freeze, (("collision", {"chunk": None}), ("collision", {"chunk": 1024})),
          needs=SERVER, explain=freeze_why, fails_on="a machine whose balance is over about 25 "
          "FLOPs per byte (a GPU), whose workbench reads the question in a few of the typers' "
          "fetches"),
    Claim("two_phases", "Chunks of 128 give 8 small bumps instead", "8 bumps, worst 671.2 ms",
          "Chunks of 128 read the question in 8 steps, the worst gap under half the one-shot "
          "freeze", small_bumps, (("collision", {"chunk": 128}),), needs=SERVER,
          construction=True,
          fails_on="a machine whose steps cost the same whatever they carry (launch-bound)"),
    Claim("two_phases", "The chunk size is a dial: bigger chunks give the newcomer its first "
          "word sooner, smaller ones keep the typers smoother", "a dial",
          "From each chunk size to the next larger, the first word comes no later (a tie, as "
          "two large chunks' nearly equal reads give, holds) and the worst gap grows", dial,
          needs=SERVER, construction=True,
          fails_on="a machine whose steps cost the same whatever they carry "
          "(launch-bound: the worst gap flat), or one whose workbench slows on large trips, so "
          "that a larger chunk gives the first word later"),
    Claim("two_phases", "Reading is about 14 times cheaper per token than typing", "14x",
          "The cheapest read costs a token under a fifth of one user's typing step (about an "
          "order of magnitude: the post's 14x)", cheaper, needs=WITH_NOTES,
          fails_on="a machine whose balance is under about 2 FLOPs per byte (at its limits "
          "the read is about 2 x the balance times cheaper)"),
    Claim("cube_bug", "h**3 is about 2x slower than h*h*h on positive numbers", "2x",
          "On positive numbers h**3 takes under 5x h*h*h's time: the slow road is the "
          "negatives'", cube("all positive", 5, slow=False), why=CUBE_WHY, needs=CUBE,
          fails_on="a NumPy whose power loop is slow for every sign"),
    Claim("cube_bug", "... about 109x on negative numbers", "109x", "On negative numbers "
          "h**3 takes 10x or more h*h*h's time: a slow road", cube("all negative", 10, True),
          why=CUBE_WHY, needs=CUBE, fails_on="a NumPy that cubes by multiplying (a fixed "
          "power loop)"),
    Claim("cube_bug", "... about 55x on a real mix", "55x", "On a mix of both (standard "
          "normals, half negative), 10x or more: half the numbers on the slow road slow the "
          "whole", cube("mixed (real)", 10, True), why=CUBE_WHY, needs=CUBE,
          fails_on="a NumPy that cubes by multiplying (a fixed power loop)"),
    Claim("cube_bug", "About half the numbers in a real model are negative", NOT_PRINTED,
          "40% to 60% of the numbers the model cubes, in its first floor reading the 256-token "
          "question, are negative", negatives, needs=CUBE, basis="accounting",
          fails_on="none: it is the model's numbers"),
    Claim("cube_bug", "With h**3 in the model, reading is about 2x slower", "about 2x",
          "A 256-token read with h**3 takes 1.25x or more its time with h*h*h", bug_in_reading,
          why=CUBE_WHY, needs=CUBE, fails_on="a NumPy that cubes by multiplying"),
    Claim("cube_bug", "... and typing barely slower", "barely", "One user's typing step with "
          "h**3 takes under 1.25x its time with h*h*h, and is not faster beyond the interval "
          "(one token is only 3,072 numbers a floor)", bug_in_typing, why=CUBE_WHY,
          needs=SMALL, fails_on="a machine whose power loop is so slow that 3,072 "
          "numbers a floor cost as much as the tables"),
    *GPU_CLAIMS,
]


def family(gpu=False):
    """How many claims share the chance of a wrong firm verdict in a report: every script's
    claims whose verdict rests on measured figures (timings, or the machine's two speeds), a
    GPU's own among them where the run was on one. Each takes an equal share, whichever
    script judges it, so that the report's verdicts together keep to intervals.FAMILY."""
    return sum(1 for c in CLAIMS if c.basis != "accounting" and not c.predicted
               and (gpu or not c.gpu))

