"""The post's claims, as data: each with the post's figure, a rule about its substance (a
direction, an order, a share, a bound) and the verdict on this machine's saved sheets: holds,
does not hold, or cannot tell here. A claim that does not hold says why, as the check and
breakdown tables do."""
from harness.printers import Layout, Sheet, col
from harness.records import EXCESS, Missing, label, rows
from harness.gpu_claims import GPU_CLAIMS
from harness.rules import (Claim, FAILS, HOLDS, UNKNOWN, about, above, below, every, figure,
                           more, speeds, value)


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
    times = [figure(t, "prefill", "time", prompt=p) for p in (1, 16, 64, 256, 1024)]
    return (", ".join(f"{s.value:.1f}" for s in times) + " ms",
            every(*(more(b, a) for a, b in zip(times, times[1:]))))


def half_the_workbench(t, r):
    best = max((figure(t, "prefill", "math speed", prompt=p) for p in (64, 256)),
               key=lambda f: f.value)
    share = best * 1e9 / speeds(r).flops_per_s
    peak = speeds(r).flops_per_s / 1e9
    return f"{best.value:.1f} of {peak:.1f} GFLOP/s ({share.value:.0%})", about(share, 0.5)


def attention_grows(t, r):
    share = {p: value(t, "breakdown", "attention", experiment="prefill", prompt=p)
             / value(t, "breakdown", "trip", experiment="prefill", prompt=p)
             for p in (256, 1024)}
    return f"attention {share[256]:.0%} of the trip at 256 tokens, {share[1024]:.0%} at 1,024", (
        share[1024] > share[256])


def notebooks_carried(t, r):
    ms = {p: value(t, "breakdown", p, experiment="decode", users=64)
          for p in ("attention", "tables")}
    return f"attention {ms['attention']:.1f} ms, tables {ms['tables']:.1f} ms", (
        ms["attention"] > ms["tables"])


def workbench_barely_helps(t, r):
    flops = value(t, "decode", "math speed", users=1) * value(t, "decode", "step", users=1) * 1e6
    math = flops / speeds(r).flops_per_s * 1e3  # ms of one user's step at the workbench's speed
    fetch = value(t, "decode", "bytes read", users=1) * 1e6 / speeds(r).bytes_per_s * 1e3
    return f"math {math:.1f} ms against fetching {fetch:.1f} ms", below(math / fetch, 0.1)


def long_costs_more(t, r):
    long = figure(t, "prefill", "time per token", prompt=1024)
    mid = figure(t, "prefill", "time per token", prompt=256)
    return f"{long.value:.2f} against {mid.value:.2f} ms", more(long, mid)


def compute_bound(t, r):
    bound = [value(t, "check", "bound by", experiment="prefill", prompt=p)
             for p in (256, 1024)]
    busier = (figure(t, "prefill", "math speed", prompt=256)
              / figure(t, "prefill", "math speed", prompt=1))
    return (f"{bound[0]}-bound and {bound[1]}-bound, {busier.value:.0f}x the math of 1 token",
            every(all(b == "workbench" for b in bound), above(busier, 4)))


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
    steps = [figure(t, "decode", "step", users=u) for u in (1, 4, 16, 64)]
    return (", ".join(f"{s.value:.1f}" for s in steps) + " ms",
            every(*(more(b, a) for a, b in zip(steps, steps[1:]))))


def notebooks_outweigh(t, r):
    one = value(t, "decode", "bytes read", users=1)
    many = value(t, "decode", "bytes read", users=64)
    notebook = (many - one) / 63  # MB read = tables + users x one notebook
    ratio = 64 * notebook / (one - notebook)
    return f"{64 * notebook:,.0f} against {one - notebook:,.0f} MB", ratio > 1


def freeze(t, r):
    normal = figure(t, "collision", "normal gap")
    at_once = figure(t, "collision", "all at once gap")
    times = at_once / normal
    return (f"{at_once.value:.1f} against {normal.value:.1f} ms ({times.value:.0f}x)",
            about(times, 40))


def small_bumps(t, r):
    steps, chunk = value(t, "collision", "steps"), value(t, "collision", "chunk")
    worst = figure(t, "collision", "chunked worst gap")
    smaller = more(figure(t, "collision", "all at once gap") / 2, worst)
    return (f"chunks of {chunk}: {steps} bumps, worst {worst.value:.1f} ms",
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
    return f"{v.value:.2f}x", below(v, 1.25)


def cube(numbers, post):
    def judge(t, r):
        v = figure(t, "cube", "ratio", numbers=numbers)
        return f"{v.value:.1f}x" if v.value < 10 else f"{v.value:.0f}x", about(v, post)
    return judge


CUBE_WHY = ("h**3 takes NumPy's general power loop, whose speed depends on the NumPy build and "
            "the CPU (the post's: NumPy 2.5.3)")
SMALL, NOTES, SERVER = (("model", "small"),), (("model", "small"), ("notes", 512)), (
    ("model", "small"), ("notes", 512), ("typers", 8), ("question", 1024))
CUBE = (("model", "small"), ("tokens", 256))
NOT_PRINTED = "(no figure)"  # the post says it in words only: judged on this machine's figures
NOTES_CUBE = (("model", "small"),)
CLAIMS = [
    Claim("machine_speed", "The workbench outpaces the forklift: about 10 FLOPs per byte",
          "10.1", "within 1.5x of 10.1: one token (0.5 FLOPs per byte) leaves the workbench "
          "about 95% idle", balance),
    Claim("machine_speed", "A trip needs about 20 tokens to keep the math busy", "about 20",
          "within 1.5x of 20: typing (one token) waits on the forklift, a long question not",
          tokens_needed),
    Claim("two_phases", "A 1-token question costs about the same as typing one word",
          "32.7 against 37.5 ms", "within 1.5x of each other", one_token,
          (("prefill", {"prompt": 1}), ("decode", {"users": 1})), needs=NOTES),
    Claim("two_phases", "At 64 to 256 tokens each token costs under 3 ms", "2.88 and 2.84 ms",
          "both under a quarter of a 1-token question's time (the post's 3 ms was 9% of its 32.7;"
          " 3 ms itself is the machine's speed, not the point)", under_3_ms,
          (("prefill", {"prompt": 64}), ("prefill", {"prompt": 256})), needs=SMALL),
    Claim("two_phases", "The wait for the first word depends mostly on the question's length",
          "32.7, 86.6, 184.6, 726.4, 4278.3 ms", "each longer question read slower than the "
          "shorter one, beyond the spread of the runs", ttft_grows, needs=SMALL),
    Claim("two_phases", "... running at about half the workbench's top speed",
          "59.9 of 120.9 GFLOP/s", "the better of 64 and 256 tokens within 1.5x of half the "
          "workbench", half_the_workbench, (("prefill", {"prompt": 256}),), needs=SMALL),
    Claim("two_phases", "At 1,024 tokens each token costs more than at 256",
          "4.18 against 2.84 ms", "more, beyond the spread of the runs", long_costs_more,
          (("prefill", {"prompt": 1024}),), needs=SMALL),
    Claim("two_phases", "... because the notebook's part grows faster than the question",
          NOT_PRINTED, "attention's share of the recorded trip larger at 1,024 tokens than at "
          "256 (one recorded trip each, as the breakdown shows)", attention_grows,
          needs=SMALL),
    Claim("two_phases", "Reading is stuck on the workbench", "compute-bound",
          "the check's prefill rows of 256 and 1,024 tokens are workbench-bound, and 256 "
          "tokens do 4x or more the math per second of 1 (the bound alone is the accounting's)",
          compute_bound, needs=SMALL),
    Claim("two_phases", "One typing user uses under 4% of the workbench", "3.7%",
          "under 10%: at a machine's limits one token uses 0.5 FLOPs a byte against a balance "
          "of about 10, so 4% is the post's suite, not the claim",
          idle_workbench, (("decode", {"users": 1}),), needs=NOTES),
    Claim("two_phases", "More than 80% of the typing time is the forklift", "31 of 37.5 ms",
          "one user's bytes at the forklift's speed over the step: above 80%", forklift_share,
          (("decode", {"users": 1}),), needs=NOTES),
    Claim("two_phases", "Batching 16 users gives about 3.7x the tokens per second", "3.7x",
          "within 1.5x of 3.7x", batching(16, 3.7), (("decode", {"users": 16}),), needs=NOTES),
    Claim("two_phases", "... and 64 users about 5.2x", "5.2x", "within 1.5x of 5.2x",
          batching(64, 5.2), (("decode", {"users": 64}),), needs=NOTES),
    Claim("two_phases", "Each user's gap between words grows with the batch",
          "37.5, 85.3, 162.5, 461.8 ms", "each step slower than the one with fewer users, beyond "
          "the spread of the runs", gaps_grow, needs=NOTES),
    Claim("two_phases", "At 64 users the notebooks outweigh the tables, 7x over",
          "2,416 against 340 MB", "the model's accounting: the notebooks' bytes over the "
          "tables' above 1", notebooks_outweigh, needs=NOTES, measured=False),
    Claim("two_phases", "... so at 64 users the forklift mostly carries notebooks", NOT_PRINTED,
          "in the recorded trip of 64 users, reading the notes takes longer than the tables",
          notebooks_carried, needs=NOTES),
    Claim("two_phases", "A faster workbench would barely help typing", "4.5 of 121 GFLOP/s",
          "one user's math at the workbench's speed under a tenth of its fetching at the "
          "forklift's", workbench_barely_helps, needs=NOTES, measured=False),
    Claim("two_phases", "Reading a long question at once freezes the typers for about 40x "
          "their normal gap", "4723.0 against 118.0 ms", "within 1.5x of 40x", freeze,
          (("collision", {"chunk": None}), ("collision", {"chunk": 1024})), needs=SERVER),
    Claim("two_phases", "Chunks of 128 give 8 small bumps instead", "8 bumps, worst 671.2 ms",
          "8 steps, the worst gap under half the one-shot freeze (chunks of 128 only)",
          small_bumps,
          (("collision", {"chunk": 128}),), needs=SERVER),
    Claim("two_phases", "The chunk size is a dial: bigger chunks give the newcomer its first "
          "word sooner, smaller ones keep the typers smoother", "a dial",
          "from the smallest chunk to the largest, the first word comes sooner and the worst "
          "gap grows", dial, needs=SERVER),
    Claim("two_phases", "Reading is about 14 times cheaper per token than typing", "14x",
          "within 1.5x of 14x", cheaper, needs=NOTES),
    Claim("cube_bug", "h**3 is about 2x slower than h*h*h on positive numbers", "2x",
          "within 1.5x of 2x", cube("all positive", 2), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... about 109x on negative numbers", "109x", "within 1.5x of 109x",
          cube("all negative", 109), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... about 55x on a real mix", "55x", "within 1.5x of 55x",
          cube("mixed (real)", 55), why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "With h**3 in the model, reading is about 2x slower", "about 2x",
          "within 1.5x of 2x: the bug costs a 256-token read about half its time", bug_in_reading,
          why=CUBE_WHY, needs=CUBE),
    Claim("cube_bug", "... and typing barely slower", "barely", "under 1.25x: one token is only "
          "3,072 numbers a floor", bug_in_typing, why=CUBE_WHY, needs=NOTES_CUBE),
    *GPU_CLAIMS,
]


def verdicts(found, roofs, scripts, settings=None, busy=()):
    """[(claim, this machine's figure, verdict, why)] for the claims of these scripts, from
    their records, whose runs had these settings (their flags, by name; None: the post's). A
    run made while the machine was busy (busy: what else ran, in words) tells nothing by its
    timings: every claim that rests on them cannot be told. A prediction's verdicts say so."""
    predicted = bool(settings and settings.get("predict"))
    return [(c, here, f"predicted: {verdict}" if predicted and verdict != UNKNOWN else verdict,
             why) for c, here, verdict, why in judged(found, roofs, scripts, settings, busy)]


def judged(found, roofs, scripts, settings, busy):
    out = []
    predicting = bool(settings and settings.get("predict"))
    for c in (c for c in CLAIMS if c.script in scripts and c.predicted == predicting):
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
        if busy and c.measured:
            out.append((c, here, UNKNOWN, f"busy: {'; '.join(busy)}"))
            continue
        verdict = HOLDS if holds else UNKNOWN if holds is None else FAILS
        why = ("noisy: the runs spread across the rule's margin" if holds is None else
               "; ".join(filter(None, (reason(found, *row) for row in c.rows))) or c.why
               if not holds else "")
        out.append((c, here, verdict, why))
    return out


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
    named = sorted((p for p in EXCESS if total and excess[p] >= SHARE * total),
                   key=excess.get, reverse=True)
    row = label({k: v for k, v in keys.items() if v is not None})
    return (f"{experiment}{' ' + row if row else ''}: {ratio:.2f}x its limit, {total:.1f} ms "
            f"over it: " + ", ".join(f"{p} +{excess[p]:.1f}" for p in named) + " ms")


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


def sheet(found, roofs, scripts, args, busy=(), limit_found=()):
    """The claims sheet of these scripts' figures, run with args; two lines a claim in the plain
    layout, each with the verdict as measured and, where limit_found holds the run's rows at
    their limits, the verdict a perfect implementation would get on this machine. A quick run's
    small sizes are not the post's: its claims are not judged."""
    if args.quick:
        return Sheet(Layout("claims", COLUMNS, title="The post's claims"), rows=[],
                     text="(a quick run: the post's claims are judged on a full run, with the "
                          "post's sizes)")
    found, predicted = both(found, roofs, scripts, vars(args), busy, limit_found), getattr(
        args, "predict", None)
    rows = [dict(zip(FIELDS, [verdict, c.says, c.post, here, limited(at), c.rule, why]))
            for c, here, verdict, why, at in found]
    banner = ["BUSY: " + BUSY.format("; ".join(busy))] if busy else []
    w = max([16, *(len(f[2]) for f in found)])
    text = "\n".join(banner + [f"{verdict:<{w}} {c.says}\n{'':{w + 1}}post {c.post}; here "
                                f"{here or '-'}" + (f" (at the limits {limited(at)})" if at else "")
                                + f"; rule: {c.rule}" + (f"\n{'':{w + 1}}why: {why}" if why else "")
                                for c, here, verdict, why, at in found])
    title = (f"The post's claims about a GPU, predicted for {predicted[0]}" if predicted
             else "The post's claims on this machine")
    return Sheet(Layout("claims", COLUMNS, title=title), rows=rows,
                 text=text if args.tablefmt == "plain" else None,
                 note=banner[0] if banner and args.tablefmt != "plain" else "",
                 settings="each verdict by the rule given, on its limits: a real engine reaches "
                          "some fraction of them" if predicted else
                 "each verdict by the rule given; 'about' means within 1.5x either way, over "
                 "the middle half of the runs")


def both(found, roofs, scripts, settings, busy=(), limit_found=()):
    """[(claim, figure, verdict, why, (figure, verdict) at this machine's limits or None)]: the
    claims judged as measured and, where limit_found holds the rows at their limits, as a perfect
    implementation would show them here; a failed claim's why says which of the two is why."""
    bounds = [r for r in found if r["experiment"] == "check"]  # the accounting's, at any speed
    limits = at_the_limits(limit_found and [*limit_found, *bounds], roofs, scripts, settings)
    return [(c, here, verdict, why_at(verdict, why, limits.get(c.says)), limits.get(c.says))
            for c, here, verdict, why in verdicts(found, roofs, scripts, settings, busy)]


def why_at(verdict, why, at):
    """A failed claim's why, saying first whether the machine's limits or the code are why."""
    if verdict != FAILS or not at:
        return why
    return ("it fails at this machine's limits too: the machine, not the code; " if at[1] == FAILS
            else "it holds at this machine's limits: the suite's distance from them is why; "
            ) + why


def limited(at):
    """A claim at this machine's limits, in words: '6.4x: holds'."""
    return f"{at[0]}: {at[1]}" if at else ""


FIELDS = ("verdict", "the post says", "post", "here", "at the limits", "rule", "why")
COLUMNS = [col(f, f, "", "s") for f in FIELDS]
