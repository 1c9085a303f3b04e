"""Beyond the post: how deep the notebooks are. A typing trip fetches the tables once and every
user's notes: with few notes the tables dominate and batching is nearly free, with many the notes
dominate and batching stops helping."""
from harness import flags
from harness.experiments import SEED
from harness.keeping import records
from harness.keeping.records import Layout, col, ms, sig, timed
from harness.measuring import bench as b, speeds
from harness.predicting import plans
from harness.predicting.plans import EXTRA, Experiment, Processes, Row, trial_name
from harness.showing.pictures import Drawing, rows_of
from harness.showing.printers import sheet
from harness.terminal import plural
import accounting

NAME = "depth"  # the experiment, as --experiments names it
PLACE = 9  # its place in the post's order (experiments/registry.py)
DEPTHS = (0, 128, 512, 1023)  # typing with notebooks this deep ...
USERS = (1, 16)  # ... for this many users, unless --users says otherwise


def add_flags(g):
    g.add_argument("--depths", nargs="+", type=flags.whole(0, flags.LONGEST - 1), default=DEPTHS,
                   metavar="N", help="depth: notes already in each typer's notebook; its users "
                                     f"are --users, else {' '.join(map(str, USERS))}")


def settle(p, args):
    """Its users: --users where given, else USERS (a quick run's 1 and 2)."""
    args.depth_users = args.users if "users" in args.given else (1, 2) if args.quick else USERS


def alone(row):
    """Whether a row is one user's: those share the first processes; many users' notebooks
    (16 users' 1,023 notes each, 1.2 GB to make) back no claim and measure in their own."""
    return row.key[0] == 1


def plan(args):
    return [Row({"users": u, "notes": n}, f"{u} {plural(u, 'user')} at {n} {plural(n, 'note')}",
                [[(n, 1)] * u]) for u in args.depth_users for n in args.depths]


def trials(bench, args, rows):
    first = b.read_question(bench, max(row.key[1] for row in rows), SEED + 1)
    book = b.copies(bench, first, max(row.key[0] for row in rows), room=1)  # each row reads its
    for row in rows:  #                                                        users and notes
        u, n = row.key
        yield b.trial(bench, trial_name(NAME, row), b.tokens(bench.cfg, u, SEED + 3, bench.on),
                      [(b.view(book, u, n), 1)], recorded=False)  # no breakdown: none is held


def figures(cfg, args, outcomes, roofs):
    rows = []
    for r in outcomes:
        (u, n), t, riders = r.row.key, r.figures["time"], r.row.steps[0]
        fetched = accounting.bytes_read(cfg, riders)
        rows.append({"users": u, "notes": n, "step": ms(t),
                     "tokens per second": timed(u / t.seconds, t, -1), "bytes read": fetched / 1e6,
                     "notes share": 100 * accounting.costs(cfg, riders)["attention"][0] / fetched,
                     "x limit": speeds.x_limit(cfg, r.row.steps, t, roofs)[0]})
    return [(TABLE, rows)]


def sheets(found, cfg, args):
    steps = [(r["keys"]["users"], r["keys"]["notes"], r["value"] / 1e3)
             for r in records.of(found, TABLE.name) if r["figure"] == "step"]
    return [sheet(TABLE, found,
                  settings=f"one token for each user; {plans.words(cfg, args.threads)}",
                  note="; x limit as in the check; " + outweigh(steps, cfg))]


TABLE = Layout("depth", [col("users", "users", "users", "d", key=True),
                         col("notes", "notes", "notes", "d", key=True),
                         col("step", "step ms", "ms", ".1f", compared=True),
                         col("tokens per second", "tokens/s", "tokens/s", ".1f"),
                         col("bytes read", "MB read", "MB", ".0f"),
                         col("notes share", "notes % of bytes", "%", ".0f"),
                         col("x limit", "x limit", "x", ".2f")],
               timed=("step",), title="Beyond the post: how deep the notebooks are")


def outweigh(rows, cfg):
    """Where the notes outweigh the tables, for each user count: predicted, where the notes
    weigh as much as the tables; measured, where a step takes twice its time with no notes.
    rows: [(users, notes, step seconds)]."""
    words, tables, note_bytes = [], accounting.table_bytes(cfg), accounting.note_bytes(cfg)
    for u in sorted({row[0] for row in rows}):
        steps = sorted((row[1], row[2]) for row in rows if row[0] == u)
        predicted = tables / (u * note_bytes)
        said = (f"from {predicted:,.0f} notes each" if predicted < cfg.context
                else f"never within {cfg.family or 'the model'}'s {cfg.context:,} notes")
        measured = next((a + (b - a) * (2 * steps[0][1] - ta) / (tb - ta)
                         for (a, ta), (b, tb) in zip(steps, steps[1:])
                         if ta < 2 * steps[0][1] <= tb), None) if steps[0][0] == 0 else None
        found = f"about {measured:,.0f}" if measured is not None else \
            f"not up to {steps[-1][0]:,}" if steps[0][0] == 0 else "unknown without depth 0"
        words.append(f"{u} {plural(u, 'user')}: {said}, measured {found}")
    return ("the notes outweigh the tables (by the accounting; measured: where a step takes "
            "twice its time with none): " + "; ".join(words))



# ---- its picture, and what to look at in it, written from the figures it shows

def draw(ax, rows):
    """Step time against notes, one line per user count, a point other work disturbed ringed."""
    for users in sorted({r["users"] for r in rows}):
        mine = [r for r in rows if r["users"] == users]
        ax.plot([r["notes"] for r in mine], [r["step"] for r in mine], "o-",
                label=f"{users} {plural(users, 'user')}")
        flagged = [(r["notes"], r["step"]) for r in mine if r.get("flagged")]
        if flagged:
            ax.scatter(*zip(*flagged), s=160, facecolors="none", edgecolors="red", zorder=4)
    ax.set_xlabel("notes already in each user's notebook")
    ax.set_ylabel("typing step (ms)")
    return "How deep the notebooks are: the notes each user brings cost every step", []


def look(found):
    rows = rows_of(found, "depth", ("users", "notes", "step"))
    lines = {}
    for r in sorted(rows, key=lambda r: r["notes"]):
        lines.setdefault(r["users"], []).append(r["step"])
    flat = {u: steps for u, steps in lines.items() if steps != sorted(steps)}
    if not lines:
        return "the typing step against the notes each user brings"
    if not flat:
        return ("the typing step against the notes each user brings: each line rises as the "
                "notebooks deepen, the more users the steeper")
    said = "; ".join(f"{u} {plural(u, 'user')}: " + ", ".join(sig(x) for x in steps) + " ms"
                     for u, steps in flat.items())
    return (f"the typing step against the notes each user brings: the lines of more users rise "
            f"as the notebooks deepen; where the notes are a sliver of what a step fetches, a "
            f"line does not rise everywhere ({said})")


PICTURE = Drawing("depth.png", "depth", "How deep the notebooks are",
                  "the typing step against the notes each user brings: each line rises as the "
                  "notebooks deepen, the more users the steeper", draw, look, experiment="depth")


EXPERIMENT = Experiment(plan, trials, figures, sheets, checked=False, name=NAME,
                        flags=add_flags, quick={"depths": (0, 32, 64)}, settle=settle,
                        lengths=lambda args: [("--depths", max(args.depths) + 1)],
                        riders=lambda args: {
                            "--users, at every --depths": sum(args.depth_users) * len(args.depths)},
                        processes=(Processes(which=alone),
                                   Processes(NAME, which=lambda row: not alone(row), least=1),
                                   Processes(EXTRA.kind, which=alone, extra=True)),
                        picture=PICTURE)
