"""The sheets the suite prints beyond each experiment's own: the check (every row against its
limit), the breakdown (where each row's time goes), the datasheet (a GPU against its published
limits) and the claims (each as judged, the post's words, figure and this machine's, the figure
its verdict rests on with its interval, the verdict as measured and at this machine's limits,
led by how busy or disturbed the run was)."""
import dataclasses

from harness import stopping
from harness.terminal import plural
from harness.measuring import bench
from harness.keeping import records
from harness.keeping.records import Layout, col, disturbance
from harness.judging import intervals
from harness.judging.check import BREAKDOWN, CHECK, DATASHEET, SLIVER
from harness.judging.judge import VERDICTS, both, summed, verdict_records
from harness.judging.rules import HOLDS, UNKNOWN
from harness.showing.printers import Sheet, sheet


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


def claims(found, roofs, scripts, args, busy=(), limit_found=(), stopped=None, *, told):
    """The claims sheet of these scripts' figures, run with args: the claims judged once, here,
    into records (judge.verdict_records), saved with the run's figures; in the plain layout each
    claim as judged, then the post's words, figure and this machine's, with the verdict as
    measured and, where limit_found holds the run's rows at their limits, the verdict a perfect
    implementation would get on this machine. A quick run's small sizes are not the post's: its
    claims are not judged."""
    if args.quick:
        return Sheet(Layout("claims", COLUMNS, title="The post's claims"), rows=[],
                     text="(a quick run: the post's claims are judged on a full run, with the "
                          "post's sizes)")
    judged = both(found, roofs, scripts, vars(args), busy, limit_found, claims=told.claims)
    lines = banner(found, busy)
    if records.of(found, "decode xl"):  # a GPU run that typed on GPT-2 xl too
        lines.append(f"(judged on GPT-2 {args.model}, the run's model, but the claim that typing "
                     f"waits on the forklift, judged on GPT-2 xl: the model whose step "
                     f"outlasts its launches)")
    if stopped:
        lines.append(f"STOPPED: {stopping.cut_short_words(stopped)}; the claims are judged on "
                     f"the processes measured before")
    predicted = getattr(args, "predict", None)
    w = max([16, *(len(f[2]) for f in judged)])
    text = "\n".join(lines + [summed(judged)] + [
        f"{verdict:<{w}} {c.rule}\n{'':{w + 1}}the post: \"{c.says}\" ({c.post}); here "
        f"{here or '-'}" + (f" (at the limits {limited(at, c)})" if at else "")
        + (f"\n{'':{w + 1}}tested: {tested}" if tested and not why else "")
        + (f"\n{'':{w + 1}}why: {why}" if why else "")
        for c, here, verdict, why, at, tested in judged])
    first = predicted[0] + (f" x{args.devices[0]}" if predicted and (
        getattr(args, "devices", None) or [1])[0] > 1 else "") if predicted else ""
    title = (f"The post's claims about a GPU, predicted for {first}" if predicted
             else "The post's claims on this machine")
    return Sheet(dataclasses.replace(VERDICTS, title=title), records=tuple(verdict_records(
        judged, records.settings_of(args), bool(predicted))),
                 text=text if args.tablefmt == "plain" else None,
                 note="\n".join(lines) if args.tablefmt != "plain" else "",
                 settings="each verdict by the rule given, on the predicted limits, nothing "
                          "run or measured" if predicted else
                 f"each claim as judged, then the post's words; each measured figure with its "
                 f"interval from the run's processes, at the level Holm's step-down gives its "
                 f"claim, which keeps the chance of any wrong firm verdict among the report's "
                 f"claims under {intervals.FAMILY:.0%}")


def limited(at, c=None):
    """A claim at this machine's limits, in words: '6.4x: holds', '100%: holds by construction'."""
    if not at:
        return ""
    return f"{at[0]}: {at[1]}" + (" by construction (on any CPU)" if c is not None
                                  and c.construction and at[1] == HOLDS else "")


FIELDS = ("verdict", "judged", "the post says", "post", "here", "tested", "at the limits", "why")


COLUMNS = [col(f, f, "", "s") for f in FIELDS]


# ---- the check, the breakdown and the datasheet


def check_sheets(found, held, roofs, words, runs):
    """The check sheet (each row's measured time against its limit, and which limit binds) and
    the breakdown (each part's milliseconds, the tables against the same products alone,
    attention against its own limit, and whose excess is largest), from their records; each
    row named as its experiment's sheet names it. words: the model and threads."""
    labels = {tuple({"experiment": h.experiment, **h.keys}.items()): h.label for h in held}
    return [sheet(CHECK, found, settings=words, labels=labels,
                  note=f"(limit = max(bytes / {roofs.bytes_per_s / 1e9:.1f} GB/s, FLOPs / "
                       f"{roofs.flops_per_s / 1e9:.1f} GFLOP/s); speeds {roofs.source}"
                       + ("; x limit: the middle of the rounds' own, each round's time over "
                          "that round's limit)" if roofs.timings else ")")),
            sheet(BREAKDOWN, found, settings=words, labels=labels,
                  note=f"(each row's trip recorded part by part once in each of "
                       f"{recordings(runs)}, apart from the timed ones: "
                       f"the middle of each part; one call: the trip's table products, one BLAS "
                       f"call each on the BLAS's own threads, outside the model, best of "
                       f"{bench.ALONE_RUNS}; "
                       f"x one call: the tables' time against it, under 1 where the suite's path "
                       f"beats the library's; attention x limit: attention's against its limit, "
                       f"where it is {SLIVER:.0%} of the trip or more)")]


def recordings(runs):
    """How many processes recorded each row's trip, in words: runs, a count or (fewest, most)."""
    fewest, most = (runs, runs) if isinstance(runs, int) else runs
    return (f"{most} {plural(most, 'process')}" if fewest == most else
            f"{fewest} to {most} processes (a row whose parts back no claim in fewer)")


def datasheet(found, checked, preset):
    """The datasheet sheet, from its records, each row named as its experiment's sheet names it."""
    labels = {tuple({"experiment": name, **r.row.keys}.items()): r.row.label
              for name, r in checked}
    return [sheet(DATASHEET, found, labels=labels,
                  settings=f"{preset.title}'s published speeds: what --predict {preset.name}"
                           f":{preset.dtype} says",
                  note=f"(datasheet = max(bytes / {preset.roofs.bytes_per_s / 1e9:,.0f} GB/s, "
                       f"FLOPs / {preset.roofs.flops_per_s / 1e9:,.0f} GFLOP/s); x datasheet: how "
                       f"far this device falls short of its datasheet's limit; sources: "
                       f"{preset.roofs.source})")]
