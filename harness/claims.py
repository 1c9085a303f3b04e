"""The post's claims, as data: each with the post's words and figure, the rule it is judged by (a
direction, an order, a share, a bound, said as a claim) and the verdict on this machine's
records: holds, does not hold (and which way), or cannot tell here (and why: too few runs, runs
other work disturbed, speeds that moved across the margin, runs that spread across it). A claim
that does not hold says why, from the check and breakdown tables."""
import dataclasses

from harness.printers import Layout, Sheet, col
from harness.records import EXCESS, Missing, Seen, disturbance, label, named, rows
from harness.gpu_claims import GPU_CLAIMS
from harness.rules import (FAILS, HOLDS, UNKNOWN, Claim, Fails, about, above, below, every,
                           figure, more, speeds, value, within)
from harness.timing import BETWEEN, MIN_RUNS, WILD

PROMPTS = (1, 16, 64, 256, 1024)  # the post's question lengths, and its users typing together
USERS = (1, 4, 16, 64)


# ---- the judges: each reads the figures it needs and applies the rule written beside it below

def balance(t, r):
    v = figure(t, "machine_speed", "balance")
    return f"{v.value:.1f} FLOPs per byte", about(v, 10.1)


def tokens_needed(t, r):
    v = figure(t, "machine_speed", "tokens a trip needs")
    return f"about {v.value:.0f}", about(v, 20)


def one_token(t, r):
    read, typed = figure(t, "prefill", "time", prompt=1), figure(t, "decode", "step", users=1)
    return f"{read.value:.1f} against {typed.value:.1f} ms", about(read / typed, 1)


def under_3_ms(t, r):
    ms = [figure(t, "prefill", "time per token", prompt=p) for p in (64, 256)]
    one = figure(t, "prefill", "time", prompt=1)
    return (f"{ms[0].value:.2f} and {ms[1].value:.2f} ms, a 1-token question {one.value:.1f} ms",
            every(*(below(m / one, 0.25) for m in ms)))


def ttft_grows(t, r):
    times = [figure(t, "prefill", "time", prompt=p) for p in PROMPTS]
    slower = [Fails(f"{b.record['keys']['prompt']:,} tokens read faster than "
                    f"{a.record['keys']['prompt']:,}") if b.hi < a.lo else True
              for a, b in zip(times, times[1:])]  # a tie (at the limits: both on the forklift)
    #                                               is no faster
    return (", ".join(f"{s.value:.1f}" for s in times) + " ms",
            every(*slower, above(times[-1] / times[0], 10)))


def half_the_workbench(t, r):
    best = max((figure(t, "prefill", "math speed", prompt=p) for p in (64, 256)),
               key=lambda f: f.value)
    peak = speeds(r).flops_per_s
    share = best * 1e9 / peak
    return f"{best.value:.1f} of {peak / 1e9:.1f} GFLOP/s ({share.value:.0%})", about(share, 0.5)


def turn_near_20(t, r):
    ms = {p: figure(t, "prefill", "time per token", prompt=p) for p in (16, 64, 256)}
    best = min(ms[64], ms[256], key=lambda f: f.value)
    needed = speeds(r).balance * 4 / 2  # tokens a trip needs: balance x 4 bytes / 2 FLOPs
    return (f"16 tokens {ms[16].value:.2f} ms a token, 64 tokens {ms[64].value:.2f}, the best "
            f"{best.value:.2f} (tokens a trip needs here: about {needed:.0f})",
            every(above(ms[16] / best, 1.5), below(ms[64] / best, 1.5)))


def attention_grows(t, r):
    share = {p: value(t, "breakdown", "attention", experiment="prefill", prompt=p)
             / value(t, "breakdown", "trip", experiment="prefill", prompt=p)
             for p in (256, 1024)}
    return (f"attention {share[256]:.0%} of the trip at 256 tokens, {share[1024]:.0%} at 1,024",
            above(share[1024] / share[256], 1.25))


def notebooks_carried(t, r):
    ms = {p: value(t, "breakdown", p, experiment="decode", users=64)
          for p in ("attention", "tables")}
    return f"attention {ms['attention']:.1f} ms, tables {ms['tables']:.1f} ms", (
        True if ms["attention"] > ms["tables"] else Fails("the tables took longer"))


def workbench_barely_helps(t, r):
    flops = value(t, "decode", "math speed", users=1) * value(t, "decode", "step", users=1) * 1e6
    math = flops / speeds(r).flops_per_s * 1e3  # ms of one user's step at the workbench's speed
    fetch = value(t, "decode", "bytes read", users=1) * 1e6 / speeds(r).bytes_per_s * 1e3
    return f"math {math:.1f} ms against fetching {fetch:.1f} ms", below(math / fetch, 0.1)


def forklift_helps(t, r):
    steps = {n: figure(t, "depth", "step", users=1, notes=n) for n in (0, 1023)}
    mb = {n: value(t, "depth", "bytes read", users=1, notes=n) for n in (0, 1023)}
    fetch = (mb[1023] - mb[0]) * 1e6 / speeds(r).bytes_per_s * 1e3  # ms at the forklift's speed
    extra = steps[1023].value - steps[0].value
    return (f"1,023 notes {extra:+.1f} ms over none, their {mb[1023] - mb[0]:.0f} MB "
            f"{fetch:.1f} ms at the forklift's speed", more(steps[1023], steps[0] + fetch / 2))


def long_costs_more(t, r):
    long = figure(t, "prefill", "time per token", prompt=1024)
    mid = figure(t, "prefill", "time per token", prompt=256)
    return f"{long.value:.2f} against {mid.value:.2f} ms", more(long, mid)


def compute_bound(t, r):
    bound = [value(t, "check", "bound by", experiment="prefill", prompt=p) for p in (256, 1024)]
    busier = (figure(t, "prefill", "math speed", prompt=256)
              / figure(t, "prefill", "math speed", prompt=1))
    bound_by = (True if all(b == "workbench" for b in bound) else
                Fails(f"{bound[0]}-bound at 256 tokens, {bound[1]}-bound at 1,024"))
    said = (f"both {bound[0]}-bound" if bound[0] == bound[1] else
            f"{bound[0]}-bound at 256 tokens, {bound[1]}-bound at 1,024")
    return (f"{said}, {busier.value:.0f}x the math of 1 token",
            every(bound_by, above(busier, 4)))


def idle_workbench(t, r):
    share = figure(t, "decode", "math speed", users=1) * 1e9 / speeds(r).flops_per_s
    return f"{share.value:.1%}", below(share, 0.1)


def forklift_share(t, r):
    step = figure(t, "decode", "step", users=1) / 1e3
    share = value(t, "decode", "bytes read", users=1) * 1e6 / speeds(r).bytes_per_s / step
    return f"{share.value:.0%}", above(share, 0.8)


def batching(users, post):
    def judge(t, r):
        gain = (figure(t, "decode", "tokens per second", users=users)
                / figure(t, "decode", "tokens per second", users=1))
        return f"{gain.value:.1f}x", about(gain, post)
    return judge


def gaps_grow(t, r):
    steps = [figure(t, "decode", "step", users=u) for u in USERS]
    return (", ".join(f"{s.value:.1f}" for s in steps) + " ms",
            every(*(more(b, a) for a, b in zip(steps, steps[1:]))))


def notebooks_outweigh(t, r):
    one = value(t, "decode", "bytes read", users=1)
    many = value(t, "decode", "bytes read", users=64)
    notebook = (many - one) / 63  # MB read = tables + users x one notebook
    ratio = 64 * notebook / (one - notebook)
    return (f"{64 * notebook:,.0f} against {one - notebook:,.0f} MB ({ratio:.1f}x); "
            f"accounting: the same on every machine", about(ratio, 7))


def freeze(t, r):
    normal = figure(t, "collision", "normal gap")
    at_once = figure(t, "collision", "all at once gap")
    times = at_once / normal
    return (f"{at_once.value:.1f} against {normal.value:.1f} ms ({times.value:.0f}x)",
            about(times, 40))


def small_bumps(t, r):
    steps, chunk = value(t, "collision", "steps"), value(t, "collision", "chunk")
    if chunk != 128:
        raise Missing(f"collision: chunks of 128 (the dial's chunk here is {chunk})")
    worst = figure(t, "collision", "chunked worst gap")
    smaller = more(figure(t, "collision", "all at once gap") / 2, worst)
    return (f"chunks of {chunk}: {steps} bumps, worst {worst.value:.1f} ms",
            every(True if steps == 8 else Fails(f"{steps} steps"), smaller))


def dial(t, r):
    chunks = sorted(dict(keys)["chunk"] for keys in rows(t, "dial"))
    if len(chunks) < 2:
        raise Missing("dial: fewer than two chunk sizes")
    first, last = chunks[0], chunks[-1]
    small = (figure(t, "dial", "first word", chunk=first),
             figure(t, "dial", "worst gap", chunk=first))
    large = (figure(t, "dial", "first word", chunk=last),
             figure(t, "dial", "worst gap", chunk=last))
    return (f"chunks of {first} to {last}: first word {small[0].value:.0f} to "
            f"{large[0].value:.0f} ms, worst gap {small[1].value:.0f} to {large[1].value:.0f} ms",
            every(more(small[0], large[0]), more(large[1], small[1])))


def cheaper(t, r):
    v = figure(t, "summary", "times cheaper")
    return f"{v.value:.0f}x", about(v, 14)


def bug_in_reading(t, r):
    v = figure(t, "bug", "ratio", trip="reading")
    return f"{v.value:.2f}x", about(v, 2)


def bug_in_typing(t, r):
    v = figure(t, "bug", "ratio", trip="typing")
    if v.hi < 1:  # h**3 clearly faster: no bug explains that, the trips' noise does
        return f"{v.value:.2f}x", Fails("h**3 ran faster, beyond the spread of the runs: the "
                                        "difference is noise between the trips, not the bug")
    if v.value < 1:  # h**3 faster, within the noise: no sign of "barely slower" either way
        return f"{v.value:.2f}x", None
    return f"{v.value:.2f}x", below(v, 1.25)


def negatives(t, r):
    v = figure(t, "bug", "negative share", trip="reading")
    return f"{v.value:.0f}%", within(v, 40, 60)


def cube(numbers, post):
    def judge(t, r):
        v = figure(t, "cube", "ratio", numbers=numbers)
        return f"{v.value:.1f}x" if v.value < 10 else f"{v.value:.0f}x", about(v, post)
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
SMALL, NOTES, SERVER = (("model", "small"),), (("model", "small"), ("notes", 512)), (
    ("model", "small"), ("notes", 512), ("typers", 8), ("question", 1024))
CUBE = (("model", "small"), ("tokens", 256))
NOT_PRINTED = "in words only"  # the post gives no figure: judged on this machine's figures
NOTES_CUBE = (("model", "small"),)
LONG = "At 1,024 tokens each token costs more than at 256"
CLAIMS = [
    Claim("machine_speed", "The workbench outpaces the forklift: about 10 FLOPs per byte",
          "10.1", "The balance is within 1.5x of 10.1 FLOPs per byte", balance),
    Claim("machine_speed", "A trip needs about 20 tokens to keep the math busy", "about 20",
          "The tokens a trip needs (2 x the balance) are within 1.5x of 20", tokens_needed),
    Claim("two_phases", "A 1-token question costs about the same as typing one word",
          "32.7 against 37.5 ms", "A 1-token read takes within 1.5x of one user's typing step",
          one_token, (("prefill", {"prompt": 1}), ("decode", {"users": 1})), needs=NOTES,
          construction=True),
    Claim("two_phases", "At 64 to 256 tokens each token costs under 3 ms", "2.88 and 2.84 ms",
          "At 64 and 256 tokens a token costs under a quarter of a 1-token read (the post's "
          "3 ms, 9% of its 32.7, is that machine's speed: the share is the claim)", under_3_ms,
          (("prefill", {"prompt": 64}), ("prefill", {"prompt": 256})), needs=SMALL),
    Claim("two_phases", "The wait for the first word depends mostly on the question's length",
          "32.7, 86.6, 184.6, 726.4, 4278.3 ms", "No longer question is read faster than a "
          "shorter one (a tie, as on the forklift at 1 and 16 tokens, is none), and 1,024 "
          "tokens take 10x or more a 1-token read", ttft_grows, needs=SMALL),
    Claim("two_phases", "... running at about half the workbench's top speed",
          "59.9 of 120.9 GFLOP/s", "The better of 64 and 256 tokens reads at within 1.5x of "
          "half the workbench", half_the_workbench, (("prefill", {"prompt": 256}),), needs=SMALL),
    Claim("two_phases", "Reading needs about 20 tokens on a trip to keep the math busy",
          "5.41, 2.88, 2.84 ms a token at 16, 64, 256", "A 16-token read costs 1.5x or more a token than the best of 64 and 256 "
          "(still on the forklift), a 64-token read under 1.5x (past the turn the machine's "
          "balance puts near 2 x the balance tokens)", turn_near_20,
          (("prefill", {"prompt": 16}),), needs=SMALL),
    Claim("two_phases", LONG, "4.18 against 2.84 ms", "A token costs more at 1,024 tokens than "
          "at 256, beyond the spread of the runs", long_costs_more, needs=SMALL,
          explain=long_costs_more_why),
    Claim("two_phases", "... because the notebook's part grows faster than the question",
          NOT_PRINTED, "Where a token costs more at 1,024 tokens: attention's share of the "
          "recorded trip is 1.25x or more at 1,024 tokens what it is at 256 (one recorded "
          "trip each, no spread: only a clear margin counts)", attention_grows, needs=SMALL,
          effect=LONG),
    Claim("two_phases", "Reading is stuck on the workbench", "compute-bound",
          "The 256- and 1,024-token reads are workbench-bound by the accounting, and 256 tokens "
          "do 4x or more the math per second of 1 token", compute_bound, needs=SMALL),
    Claim("two_phases", "One typing user uses under 4% of the workbench", "3.7%",
          "One user's typing uses under 10% of the workbench (at any machine's limits one "
          "token does 0.5 FLOPs a byte against a balance of about 10: the post's 4% is its "
          "suite's distance from them)", idle_workbench, (("decode", {"users": 1}),),
          needs=NOTES),
    Claim("two_phases", "More than 80% of the typing time is the forklift", "31 of 37.5 ms",
          "One user's bytes at the forklift's speed take more than 80% of the typing step",
          forklift_share, (("decode", {"users": 1}),), needs=NOTES, construction=True),
    Claim("two_phases", "A faster workbench would barely help typing", "4.5 of 121 GFLOP/s",
          "One user's step does its math at the workbench's speed in under a tenth of the "
          "time its fetching takes at the forklift's", workbench_barely_helps, needs=NOTES,
          basis="speeds"),
    Claim("two_phases", "A faster forklift, or fewer bytes to fetch, would help typing",
          NOT_PRINTED, "Typing for 1 user at 1,023 notes is slower than at none by at least half "
          "the time its extra notes take at the forklift's speed", forklift_helps,
          why="typing's step should grow with the bytes it fetches: where it does not, the "
              "depth rows' time goes elsewhere (their x limit says how far each is from its "
              "limit)", needs=SMALL),
    Claim("two_phases", "Batching 16 users gives about 3.7x the tokens per second", "3.7x",
          "16 users typing together give within 1.5x of 3.7x one user's tokens per second",
          batching(16, 3.7), (("decode", {"users": 16}),), needs=NOTES),
    Claim("two_phases", "... and 64 users about 5.2x", "5.2x", "64 users give within 1.5x of "
          "5.2x one user's tokens per second", batching(64, 5.2), (("decode", {"users": 64}),),
          needs=NOTES),
    Claim("two_phases", "Each user's gap between words grows with the batch",
          "37.5, 85.3, 162.5, 461.8 ms", "Each step is slower than the one with fewer users, "
          "beyond the spread of the runs", gaps_grow, needs=NOTES),
    Claim("two_phases", "At 64 users the notebooks outweigh the tables, 7x over",
          "2,416 against 340 MB", "64 users' notes weigh within 1.5x of 7x the tables, by the "
          "model's accounting", notebooks_outweigh, needs=NOTES, basis="accounting"),
    Claim("two_phases", "... so at 64 users the forklift mostly carries notebooks", NOT_PRINTED,
          "In the recorded trip of 64 users, reading the notes takes longer than the tables",
          notebooks_carried, needs=NOTES),
    Claim("two_phases", "Reading a long question at once freezes the typers for about 40x "
          "their normal gap", "4723.0 against 118.0 ms", "A 1,024-token question read at once "
          "makes the typers' gap within 1.5x of 40x their normal one", freeze,
          (("collision", {"chunk": None}), ("collision", {"chunk": 1024})), needs=SERVER,
          explain=freeze_why),
    Claim("two_phases", "Chunks of 128 give 8 small bumps instead", "8 bumps, worst 671.2 ms",
          "Chunks of 128 read the question in 8 steps, the worst gap under half the one-shot "
          "freeze", small_bumps, (("collision", {"chunk": 128}),), needs=SERVER),
    Claim("two_phases", "The chunk size is a dial: bigger chunks give the newcomer its first "
          "word sooner, smaller ones keep the typers smoother", "a dial",
          "From the smallest chunk to the largest, the first word comes sooner and the worst "
          "gap grows, beyond the spread of the runs", dial, needs=SERVER),
    Claim("two_phases", "Reading is about 14 times cheaper per token than typing", "14x",
          "The cheapest read costs a token within 1.5x of 14x less than one user's typing",
          cheaper, needs=NOTES),
    Claim("cube_bug", "h**3 is about 2x slower than h*h*h on positive numbers", "2x",
          "On positive numbers h**3 takes within 1.5x of 2x h*h*h's time", cube("all positive",
                                                                                 2),
          why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... about 109x on negative numbers", "109x", "On negative numbers, "
          "within 1.5x of 109x", cube("all negative", 109), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... about 55x on a real mix", "55x", "On a mix of both (standard "
          "normals), within 1.5x of 55x", cube("mixed (real)", 55), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "About half the numbers in a real model are negative", NOT_PRINTED,
          "40% to 60% of the numbers the model cubes, in its first floor reading the 256-token "
          "question, are negative", negatives, needs=CUBE, basis="accounting"),
    Claim("cube_bug", "With h**3 in the model, reading is about 2x slower", "about 2x",
          "A 256-token read with h**3 takes within 1.5x of 2x its time with h*h*h", bug_in_reading,
          why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... and typing barely slower", "barely", "One user's typing step with "
          "h**3 takes under 1.25x its time with h*h*h, and is not faster beyond the spread of "
          "the runs (one token is only 3,072 numbers a floor)", bug_in_typing, why=CUBE_WHY,
          needs=NOTES_CUBE),
    *GPU_CLAIMS,
]


# ---- the verdicts

def verdicts(found, roofs, scripts, settings=None, busy=()):
    """[(claim, this machine's figure, verdict, why)] for the claims of these scripts, from
    their records, whose runs had these settings (their flags, by name; None: the post's). A
    run made while another run of this suite measured (busy, in words) tells nothing by its
    timings, nor does a figure other work disturbed or one of fewer than MIN_RUNS runs: every
    claim that rests on them cannot be told. A prediction's verdicts say so."""
    predicted = bool(settings and settings.get("predict"))
    return [(c, here, f"predicted: {verdict}" if predicted and verdict != UNKNOWN else verdict,
             why) for c, here, verdict, why in judged(found, roofs, scripts, settings, busy)]


def judged(found, roofs, scripts, settings, busy):
    out, said = [], {}
    predicting = bool(settings and settings.get("predict"))
    gpu = not predicting and on_a_gpu(settings)  # a GPU's claims, at its measured speeds too
    for c in (c for c in CLAIMS if c.script in scripts
              and (c.predicted == predicting or gpu and c in GPU_CLAIMS)):
        verdict = one(c, found, roofs, settings, busy, said)
        said[c.says] = verdict[1]
        out.append((c, *verdict))
    return out


def on_a_gpu(settings):
    """Whether the run's arrays lived on a GPU (--device torch:cuda, torch:mps, cupy:cuda)."""
    return str((settings or {}).get("device") or "").split(":")[-1] in ("cuda", "mps")


def one(c, found, roofs, settings, busy, said):
    """(this machine's figure, the verdict, why) of one claim; said: {claim: verdict} so far."""
    other = [f"--{k} {v}" for k, v in c.needs
             if settings is not None and settings.get(k) not in (v, [v])]
    if other:
        return "", UNKNOWN, "the post measured it with " + " ".join(other)
    seen = Seen(found)
    try:
        here, holds = c.judge(seen, roofs)
    except Missing as e:  # a figure truly absent; any other error is a bug, and raises
        return "", UNKNOWN, f"not measured here ({e})"
    if c.measured and busy:
        return here, UNKNOWN, f"busy: {'; '.join(busy)}"
    if c.effect and said.get(c.effect) != HOLDS:
        return here, UNKNOWN, (f"what it explains, '{c.effect}', does not hold here: nothing "
                               f"to explain" if said.get(c.effect) == FAILS else
                               f"what it explains, '{c.effect}', cannot be told here")
    doubt = doubts(seen.used) if c.measured else ""
    if doubt:
        return here, UNKNOWN, doubt
    if holds is None:
        return here, UNKNOWN, drifted(c, found, roofs) or (
            f"noisy: the runs spread across the rule's margin, as far apart as two runs of one "
            f"machine may be ({BETWEEN:g}x)")
    if holds:
        return here, HOLDS, ""
    way = holds.way if isinstance(holds, Fails) else ""
    because = (c.explain(found, roofs) if c.explain else "") or "; ".join(
        filter(None, (reason(found, *row) for row in c.rows))) or c.why
    return here, FAILS, "; ".join(filter(None, (way, because))) or "outside the rule's range"


def doubts(used):
    """Why the records a judge read back no verdict, in words, or '': one other work disturbed
    beyond measuring again, one whose runs spread beyond WILD, or one of fewer than MIN_RUNS
    runs."""
    used = [r for r in used if not r.get("predicted") and r.get("statistic") != "limit"]
    for r in used:  # a limit is no measurement: nothing disturbs it
        if r.get("disturbed") is True:
            share = r.get("others")
            took = (f"up to {share:.0%} of the cores" if isinstance(share, (int, float))
                    else "the cores")
            return (f"disturbed: other work took {took} during the runs of {named(r)}, even "
                    f"measured again: rerun when the machine is quieter")
    for r in used:
        runs = r.get("samples")
        if runs and min(runs) > 0 and max(runs) / min(runs) > WILD:
            return (f"the runs of {named(r)} spread {max(runs) / min(runs):.1f}x, beyond "
                    f"{WILD:g}x: they were not measuring one thing; rerun")
    for r in used:
        if r.get("samples") and type(r.get("runs")) is int and r["runs"] < MIN_RUNS:
            return (f"{r['runs']} {'run' if r['runs'] == 1 else 'runs'} behind {named(r)}: "
                    f"fewer than {MIN_RUNS} back no verdict; rerun with --runs {MIN_RUNS} or "
                    f"more")
    return ""


def drifted(c, found, roofs):
    """Why a claim that cannot be told could not, where the machine's speeds moved between the
    start and the end of the run across the rule's margin: judged at either speed alone it is
    firm. '' where that is not why."""
    if not (c.measured or c.basis == "speeds") or getattr(roofs, "start", None) is None:
        return ""
    exact = dataclasses.replace(roofs, start=None, end=None)
    try:
        _, holds = c.judge(Seen(found), exact)
    except Missing:
        return ""
    if holds is None:
        return ""
    s, e = roofs.start, roofs.end
    return (f"the machine's speeds moved during the run (the forklift {s.bytes_per_s / 1e9:.1f} "
            f"to {e.bytes_per_s / 1e9:.1f} GB/s, the workbench {s.flops_per_s / 1e9:.1f} to "
            f"{e.flops_per_s / 1e9:.1f} GFLOP/s), across the rule's margin: rerun when the "
            f"machine is steadier")


SHARE = 0.2  # a part named in a why holds at least this share of the row's excess


def reason(found, experiment, keys):
    """Why a row is far from what the post saw, as the check and breakdown tables say: its
    distance from its limit, and each part that holds SHARE or more of the excess, in ms. The
    row is found by its keys ({"prompt": 256}; a key of None: one the row does not have)."""
    try:
        ratio = value(found, "check", "x limit", experiment=experiment, **keys)
        excess = {p: value(found, "breakdown", f"excess: {p}", experiment=experiment, **keys)
                  for p in EXCESS}
    except Missing:
        return ""
    total = sum(excess.values())
    named_parts = sorted((p for p in EXCESS if total and excess[p] >= SHARE * total),
                         key=excess.get, reverse=True)
    row = label({k: v for k, v in keys.items() if v is not None})
    return (f"{experiment}{' ' + row if row else ''}: {ratio:.2f}x its limit, {total:.1f} ms "
            f"over it: " + ", ".join(f"{p} +{excess[p]:.1f}" for p in named_parts) + " ms")


def at_the_limits(limit_found, roofs, scripts, settings):
    """{claim's words: (this machine's figure at its limits, the verdict there)}: the claims
    judged on the rows a perfect implementation would show on this machine (every trip at its
    limit on the speeds measured in this run). Empty where the run has no such rows."""
    if not limit_found:
        return {}
    plain = None if settings is None else {k: v for k, v in settings.items() if k != "predict"}
    return {c.says: (here, verdict) for c, here, verdict, _ in verdicts(
        limit_found, roofs, scripts, plain) if here}  # a claim with no rows at the limits: none


BUSY = ("the machine was busy while this ran ({}): no timing can back a verdict; rerun on a "
        "quiet machine, with more --runs, or with fewer --threads")


def banner(found, busy=()):
    """The claims sheet's first lines: how busy or disturbed the run was as a whole, and what to
    do about it; none for a quiet run."""
    lines = ["BUSY: " + BUSY.format("; ".join(busy))] if busy else []
    d = disturbance(found)
    if d["disturbed"]:
        lines.append(f"DISTURBED: other work took up to {d['others']:.0%} of the cores while "
                     f"{d['disturbed']} of {d['figures']} rows were measured, even measured "
                     f"again; the claims that rest on them read '{UNKNOWN}'. Rerun when the "
                     f"machine is quieter (close what else runs), or with more --runs")
    elif d["again"]:
        lines.append(f"(quiet enough: {d['again']} runs disturbed by other work were measured "
                     f"again)")
    return lines


def sheet(found, roofs, scripts, args, busy=(), limit_found=()):
    """The claims sheet of these scripts' figures, run with args; in the plain layout each claim
    as judged, then the post's words, figure and this machine's, with the verdict as measured
    and, where limit_found holds the run's rows at their limits, the verdict a perfect
    implementation would get on this machine. A quick run's small sizes are not the post's: its
    claims are not judged."""
    if args.quick:
        return Sheet(Layout("claims", COLUMNS, title="The post's claims"), rows=[],
                     text="(a quick run: the post's claims are judged on a full run, with the "
                          "post's sizes)")
    found, lines = both(found, roofs, scripts, vars(args), busy, limit_found), banner(found, busy)
    predicted = getattr(args, "predict", None)
    rows = [dict(zip(FIELDS, [verdict, c.rule, c.says, c.post, here, limited(at, c), why]))
            for c, here, verdict, why, at in found]
    w = max([16, *(len(f[2]) for f in found)])
    text = "\n".join(lines + [
        f"{verdict:<{w}} {c.rule}\n{'':{w + 1}}the post: \"{c.says}\" ({c.post}); here "
        f"{here or '-'}" + (f" (at the limits {limited(at, c)})" if at else "")
        + (f"\n{'':{w + 1}}why: {why}" if why else "") for c, here, verdict, why, at in found])
    title = (f"The post's claims about a GPU, predicted for {predicted[0]}" if predicted
             else "The post's claims on this machine")
    return Sheet(Layout("claims", COLUMNS, title=title), rows=rows,
                 text=text if args.tablefmt == "plain" else None,
                 note="\n".join(lines) if args.tablefmt != "plain" else "",
                 settings="each verdict by the rule given, on its limits: a real engine reaches "
                          "some fraction of them" if predicted else
                 "each claim as judged, then the post's words; 'within 1.5x' over the middle "
                 "half of the runs")


def both(found, roofs, scripts, settings, busy=(), limit_found=()):
    """[(claim, figure, verdict, why, (figure, verdict) at this machine's limits or None)]: the
    claims judged as measured and, where limit_found holds the rows at their limits, as a perfect
    implementation would show them here; a failed claim's why says which of the two is why."""
    bounds = [r for r in found if r["experiment"] == "check"]  # the accounting's, at any speed
    limits = at_the_limits(limit_found and [*limit_found, *bounds], roofs, scripts, settings)
    return [(c, here, verdict, why_at(c, verdict, why, limits.get(c.says)), limits.get(c.says))
            for c, here, verdict, why in verdicts(found, roofs, scripts, settings, busy)]


def why_at(c, verdict, why, at):
    """A failed claim's why, saying first whether the machine's limits or the code are why (not
    where the claim holds at the limits by how a limit is made: that tells neither)."""
    if verdict != FAILS or not at or c.construction:
        return why
    way, _, because = why.partition("; ")
    return "; ".join(filter(None, [way, "it fails at this machine's limits too: the machine, not "
                                        "the code" if at[1] == FAILS else
                                   "it holds at this machine's limits: the suite's distance "
                                   "from them is why", because]))


def limited(at, c=None):
    """A claim at this machine's limits, in words: '6.4x: holds', '100%: holds by construction'."""
    if not at:
        return ""
    return f"{at[0]}: {at[1]}" + (" by construction" if c is not None and c.construction
                                  and at[1] == HOLDS else "")


FIELDS = ("verdict", "judged", "the post says", "post", "here", "at the limits", "why")
COLUMNS = [col(f, f, "", "s") for f in FIELDS]
