"""The verdicts: every claim's rule resolved at the level the report's claims share (the chance
of any wrong firm verdict among them, spent by Holm's step-down: every test at its claim's step
for "holds", each test a share of it for "does not hold"), as measured and at this machine's
limits; and why a claim does not hold, from the check and breakdown tables."""
from harness.keeping.records import EXCESS, Layout, Missing, col, label, make, rows
from harness.judging import intervals
from harness.measuring import devices
from harness.judging.rules import (FAILS, HOLDS, UNKNOWN, Claim, Fails, chance, count, resolve,
                                   value)


def verdicts(found, roofs, scripts, settings=None, busy=(), *, claims):
    """[(claim, this machine's figure, verdict, why, tested)] for these scripts' claims among
    claims (every claim the suite judges, in the post's order: experiments/registry.py; tested: the
    figure its verdict rests on, with its interval and the rule's edge), from their records,
    whose runs had these settings (their flags, by name; None: the post's). Each measured
    figure is weighed by its interval over the run's processes, at each claim's share of the
    report's chance of a wrong firm verdict (intervals.FAMILY). A run made while another run of
    this suite measured (busy, in words) tells nothing by its timings. A prediction's verdicts
    say so."""
    predicted = bool(settings and settings.get("predict"))
    return [(c, here, f"predicted: {verdict}" if predicted and verdict != UNKNOWN else verdict,
             why, tested) for c, here, verdict, why, tested in judged(found, roofs, scripts,
                                                                     settings, busy, claims)]


def judged(found, roofs, scripts, settings, busy, claims):
    """Every claim's rule first, then each resolved at the tail Holm's step-down gives it
    among these scripts' claims of the report's family (their share of intervals.FAMILY: a
    claim's share a claim, so that the scripts of one report, judged apart, keep to it
    together); a claim outside the family (the accounting's, a prediction's) at the whole
    share, where its verdict needs no interval."""
    predicting = bool(settings and settings.get("predict"))
    gpu = not predicting and on_a_gpu(settings)  # a GPU's claims, at its measured speeds too
    chosen = [c for c in claims if c.script in scripts and (gpu or not c.gpu)
              and (c.predicted == predicting or gpu and c.predicted)]  # (a prediction's claims
    #                                      are a GPU's: judged at a GPU's measured speeds too)
    ruled = [(c, *rule_of(c, found, roofs, settings, busy)) for c in chosen]
    kin = [in_family(c, gpu) for c in chosen]
    alpha = intervals.FAMILY * sum(kin) / max(family(claims, gpu), 1)
    stepped = iter(intervals.holm([chance(rule) if rule is not None and not early else None
                                   for (c, _, rule, early), k in zip(ruled, kin) if k], alpha))
    tails = [next(stepped) if k else alpha for k in kin]
    return [(c, here, UNKNOWN, early, "") if early else
            (c, *verdict_of(c, here, resolve(rule, tail, tail / max(count(rule), 1)), found,
                            roofs))
            for (c, here, rule, early), tail in zip(ruled, tails)]


def family(claims, gpu=False):
    """How many claims share the chance of a wrong firm verdict in a report: every script's
    claims whose verdict rests on measured figures (timings, or the machine's two speeds), a
    GPU's own among them where the run was on one. Each script's take a share of
    intervals.FAMILY as large as their count's, spent among them by Holm's step-down, so that
    the report's verdicts together keep to it."""
    return sum(1 for c in claims if in_family(c, gpu))


def in_family(c, gpu=False):
    """Whether claim c is one of a report's family (see family())."""
    return c.basis != "accounting" and not c.predicted and (gpu or not c.gpu)


def on_a_gpu(settings):
    """Whether the run's arrays lived on a GPU (--device torch:cuda, torch:mps, cupy, cupy:cuda),
    as its Device said."""
    return devices.on_a_gpu((settings or {}).get("device"))


def rule_of(c, found, roofs, settings, busy):
    """(this machine's figure in words, the claim's rule, '') or, where it cannot be judged at
    all, ('' or the figure, None, why)."""
    other = [f"--{k} {v}" for k, v in c.needs
             if settings is not None and settings.get(k) not in (v, [v])]
    if other:
        return "", None, "the post measured it with " + " ".join(other)
    try:
        here, rule = c.judge(found, roofs)
    except Missing as e:  # a figure truly absent; any other error is a bug, and raises
        return "", None, f"not measured here ({e})"
    if c.measured and busy:
        return here, None, f"busy: {'; '.join(busy)}"
    return here, rule, ""


def verdict_of(c, here, done, found, roofs):
    """(figure in words, verdict, why, tested) of a resolved rule: tested, where a measured
    figure decided it, says that figure with its interval and the edge; cannot tell says how
    close it came and what would settle it; does not hold says which way, and why from the
    check and breakdown tables."""
    tested = done.shown() if done.test is not None and done.test.figure.measured else ""
    if done.verdict is None:
        return here, UNKNOWN, done.why() if done.test is not None else "cannot be judged", tested
    if done.verdict:
        return here, HOLDS, "", tested
    way = done.verdict.way if isinstance(done.verdict, Fails) else ""
    because = (c.explain(found, roofs) if c.explain else "") or "; ".join(
        filter(None, (reason(found, *row) for row in c.rows))) or c.why
    return (here, FAILS, "; ".join(filter(None, (way, because))) or "outside the rule's range",
            tested)


def summed(judged):
    """'14 of 22 findings hold, 8 cannot tell here; 4 more follow from the accounting: 4 hold':
    the findings (verdicts on the rows' timings) first, how many hold of how many, then the
    claims that follow from the model's accounting (alone, or at this machine's two measured
    speeds). judged: both()'s (claim, here, verdict, ...), or from_records()'s."""
    findings = [v for c, _, v, *_ in judged if c.basis == "timings"]
    accounting = [v for c, _, v, *_ in judged if c.basis != "timings"]
    holds = sum(v.removeprefix("predicted: ") == HOLDS for v in findings)
    rest = counted([v for v in findings if v.removeprefix("predicted: ") != HOLDS])
    parts = [f"{holds} of {len(findings)} {'finding' if len(findings) == 1 else 'findings'} "
             f"{'holds' if holds == 1 and len(findings) == 1 else 'hold'}"
             + (f", {rest}" if rest else "") if findings else "",
             f"{len(accounting)} {'more ' if findings else ''}"
             f"{'follows' if len(accounting) == 1 else 'follow'} from the accounting: "
             f"{counted(accounting)}" if accounting else ""]
    return "; ".join(filter(None, parts)) or "no claims"


def counted(verdicts):
    """'14 hold, 2 do not hold, 6 cannot tell here', in that order."""
    count = {}
    for v in verdicts:
        plain = v.removeprefix("predicted: ")
        count[plain] = count.get(plain, 0) + 1
    words = {HOLDS: "hold", FAILS: "do not hold"}
    ranks = [HOLDS, FAILS, UNKNOWN]
    return ", ".join(f"{n} {words.get(v, v) if n > 1 else v}" for v, n in sorted(
        count.items(), key=lambda kv: ranks.index(kv[0]) if kv[0] in ranks else 9))


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


def at_the_limits(limit_found, roofs, scripts, settings, claims):
    """{claim's words: (this machine's figure at its limits, the verdict there)}: the claims
    judged on the rows a perfect implementation would show on this machine (every trip at its
    limit on the speeds measured in this run). Empty where the run has no such rows."""
    if not limit_found:
        return {}
    plain = None if settings is None else {k: v for k, v in settings.items() if k != "predict"}
    return {c.says: (here, verdict) for c, here, verdict, *_ in verdicts(
        limit_found, roofs, scripts, plain, claims=claims) if here}  # a claim with no rows at
    #                                                                the limits: none


def both(found, roofs, scripts, settings, busy=(), limit_found=(), *, claims):
    """[(claim, figure, verdict, why, (figure, verdict) at this machine's limits or None,
    tested)]: the claims judged as measured and, where limit_found holds the rows at their
    limits, as a perfect implementation would show them here; a failed claim's why says which of
    the two is why."""
    bounds = [r for r in found if r["experiment"] == "check"]  # the accounting's, at any speed
    limits = at_the_limits(limit_found and [*limit_found, *bounds], roofs, scripts, settings,
                           claims)
    return [(c, here, verdict, why_at(c, verdict, why, limits.get(c.says)), limits.get(c.says),
             tested) for c, here, verdict, why, tested in verdicts(found, roofs, scripts,
                                                                    settings, busy,
                                                                    claims=claims)]


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


# ---- the verdicts as records: made once, when a run judges its claims, and saved with its
# figures; the report and compare.py read them, never judging again


VERDICTS = Layout("claims", [col("claim", "the post says", "", "s", key=True),
                             *(col(f, f, "", "s") for f in (
                                 "script", "verdict", "rule", "post", "here", "tested", "why",
                                 "here at the limits", "verdict at the limits"))],
                  title="The post's claims")


def verdict_records(judged, settings, predicted=False):
    """The records of claims judged (both()'s (claim, here, verdict, why, at, tested)): one row
    a claim, keyed by the post's words, each field text."""
    return make(VERDICTS, [{"claim": c.says, "script": c.script, "verdict": verdict,
                            "rule": c.rule, "post": c.post, "here": here, "tested": tested,
                            "why": why, "here at the limits": at[0] if at else "",
                            "verdict at the limits": at[1] if at else ""}
                           for c, here, verdict, why, at, tested in judged], settings, predicted)


def from_records(found, claims):
    """Claims judged, as both() gives them, from their records (verdict_records()): each claim
    the suite's own where it still has it, else one made of what the record says. Every field
    is read as text, as it was saved (a number an edited file holds there, as its digits); a
    row that names no claim is left out: there is nothing to show its verdict under."""
    known = {c.says: c for c in claims}
    out = []
    for keys, f in rows(found, VERDICTS.name).items():
        if "claim" not in dict(keys):
            continue
        says, f = str(dict(keys)["claim"]), {k: str(v) for k, v in f.items()}
        c = known.get(says) or Claim(f.get("script", ""), says, f.get("post", ""),
                                     f.get("rule", ""), None)
        at = (f.get("here at the limits", ""), f["verdict at the limits"]) \
            if f.get("verdict at the limits") else None
        out.append((c, f.get("here", ""), f.get("verdict", UNKNOWN), f.get("why", ""), at,
                    f.get("tested", "")))
    return out
