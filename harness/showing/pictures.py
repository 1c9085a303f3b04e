"""The pictures a reader looks at, drawn from a two_phases run's records: how a picture is
declared (Drawing), drawn and labelled, and the two that belong to no one experiment, the
roofline and a prediction's grid (the chunk-size dial, decode's trade and the notebooks' depth
are drawn by their experiments' modules). Each explains itself: axes with units, a title, a
legend. Nothing here measures.

    python two_phases.py   # saves results/<machine>/roofline.png, dial.png, decode.png, depth.png
"""
import dataclasses
import io
import os
import textwrap

import numpy as np

from harness.keeping.records import number, rate, rows, sig
from harness.terminal import warn


OFFSETS = [(6, 5), (6, -13), (-6, 5), (-6, -13), (8, -4), (-8, -4), (0, 9), (0, -17),
           (10, 14), (-10, 14), (10, -22), (-10, -22), (16, 4), (-16, 4), (16, -12), (-16, -12),
           (14, 20), (-14, 20), (14, -28), (-14, -28)]  # points from the marker, tried in turn:
#                                                      each keeps the label beside its point
QUICK = "quick run: small sizes, not the post's experiment"
PREDICTED = "predicted: limits, nothing was run"


_config = {"made": None, "why": None}  # made: the folder made for matplotlib's settings and
#                                        font cache, if any; why: why matplotlib did not load


def own_config():
    """Where the user's own matplotlib folder cannot be written (an unwritable HOME), give it a
    temp folder of this run's, removed again by tidy(): matplotlib would make one of its own,
    left behind by the run's quick exit, and say so in a warning of many lines."""
    import os
    import tempfile
    if "MPLCONFIGDIR" in os.environ or _config["made"]:
        return
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    mine = os.path.join(home, "matplotlib")
    if os.access(mine if os.path.isdir(mine) else home if os.path.isdir(home)
                 else os.path.dirname(home), os.W_OK):
        return
    _config["made"] = tempfile.mkdtemp(prefix="prefill-vs-decode-matplotlib-")
    os.environ["MPLCONFIGDIR"] = _config["made"]


def tidy():
    """Remove the temp folder own_config() made, if it made one."""
    import os
    import shutil
    if _config["made"]:
        shutil.rmtree(_config["made"], ignore_errors=True)
        os.environ.pop("MPLCONFIGDIR", None)
        _config["made"] = None


def available():
    """Whether matplotlib loads. The suite draws into files alone, with Agg, whatever
    MPLBACKEND says; why it fails to load otherwise (a broken install) is kept, for one line."""
    own_config()  # before matplotlib is first imported
    os.environ["MPLBACKEND"] = "agg"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    except Exception as e:
        _config["why"] = one_line(e)
        return False
    return True


def wanted(p, args):
    """Whether a two_phases run draws the pictures: --plot or --no-plot, else a full run that
    saves does. Flags that cannot go with drawing are refused in one line."""
    if args.plot and args.no_save:
        p.error("argument --plot: draws into the results folder, so not with --no-save")
    if args.plot and args.threads and len(args.threads) > 1:
        p.error("argument --plot: draws one run's pictures, not a sweep's; give one --threads")
    if args.plot and not available():
        p.error(f"argument --plot: matplotlib does not load ({_config['why']})" if
                _config["why"] else "argument --plot: needs matplotlib (python -m pip install "
                                    "matplotlib)")
    sweep = args.threads and len(args.threads) > 1
    if args.plot is not None or args.quick or args.no_save or sweep:
        return bool(args.plot)
    if not available() and _config["why"]:
        warn(f"matplotlib does not load ({_config['why']}): no pictures")
    return available()


@dataclasses.dataclass(frozen=True)
class Drawing:
    """A picture a run's records can make. name: its file; under: the sheet the report places it
    under; title: its title there; look: what to look at, in words, where its records say
    nothing (words(found) -> the same, written from the figures it shows, or None); draw(ax,
    data) -> (its title on the picture, the points to label); experiment: whose rows it draws
    (data), or "" for the roofline, whose speeds and points the run gives."""
    name: str
    under: str
    title: str
    look: str
    draw: object
    words: object = None
    experiment: str = ""


def files(found, roofline, who, quick, drawings, predicted=False):
    """{file name: draw(f), f a binary file to draw into} for every picture of drawings
    (Drawing) this run's records can make. roofline: the speeds and the points (or None); who:
    the model and the machine, for the titles; quick, predicted: mark each picture as a quick
    run's, or a prediction's."""
    mark = PREDICTED if predicted else QUICK if quick else ""
    return {d.name: (lambda f, make=d.draw, data=data: save(make, data, who, mark, f))
            for d in drawings
            for data in [rows_of(found, d.experiment) if d.experiment else roofline]
            if data and (data.get("points") or data.get("machines") if isinstance(data, dict)
                         else data)}


def look(drawing, found):
    """What to look at in the picture, in one line, from the records it was drawn from: a line
    that does not do what the picture's point is says so, with its figures."""
    return (drawing.words(found) if drawing.words else None) or drawing.look


def drawn(drawings):
    """{file name: the PNG's bytes} of drawings ({file name: draw(f)}), drawn before anything is
    saved: pictures that fail (matplotlib's fonts, memory, a broken install) are said in one
    line and left out, and the result is saved without them."""
    out, failed = {}, {}
    for name, draw in drawings.items():
        f = io.BytesIO()
        try:
            draw(f)
        except Exception as e:
            failed[name] = one_line(e)
        else:
            out[name] = f.getvalue()
    if failed:
        names = ", ".join(failed)
        why = "; ".join(dict.fromkeys(failed.values()))  # the same cause said once
        warn(f"{'pictures' if len(failed) > 1 else 'picture'} {names} not drawn ({why}): "
             f"the results are saved without {'them' if len(failed) > 1 else 'it'}")
    return out


def one_line(e):
    said = str(e).strip().splitlines()
    return f"{type(e).__name__}: {said[0][:160]}" if said else type(e).__name__


def save(make, data, who, mark, f):
    """Draw the picture into f, a binary file open for writing, with matplotlib's own defaults
    (never a user's matplotlibrc or style: the same picture on every machine)."""
    own_config()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        fig = figure(plt, make, data, who, mark)
        try:
            fig.savefig(f, dpi=110, format="png", bbox_inches="tight")
        finally:
            plt.close(fig)


def figure(plt, make, data, who, mark=""):
    """One picture: make(ax, data) draws it and returns its title and the points to label; a
    prediction's or a quick run's says so across it, and every picture says when it was drawn."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.grid(True, which="both", alpha=0.3)  # make() may take it away
    what, points = make(ax, data)
    ax.margins(0.12)
    title = ("PREDICTED: " if mark == PREDICTED else "") + what
    ax.set_title("\n".join([title] + textwrap.wrap(who, 100)), fontsize=10)
    ax.tick_params(labelsize=8)  # the title larger than the ticks: read first
    plain_ticks(ax)
    if ax.get_legend() is None and len(ax.get_legend_handles_labels()[1]) > 1:  # one line
        ax.legend(fontsize=8, loc="best")  #            needs no legend: its axes say it
    if mark:
        ax.text(0.5, 0.5, mark, transform=ax.transAxes, ha="center", va="center", fontsize=16,
                color="red", alpha=0.3, rotation=20)
    fig.tight_layout()
    place_labels(fig, ax, points)
    return fig


# ---- the roofline's caption in the report, written from the figures it shows


def roofline_words(found):
    ridge = [r["value"] for r in found if r["experiment"] == "speeds" and r["figure"] ==
             "balance" and number(r["value"])]
    at = (f" at {sig(ridge[0])} FLOPs per byte (the balance of the speeds measured in this "
          f"run's own rounds, which every row is held to)") if ridge else ""
    return (f"each row at its FLOPs per byte: left of the ridge{at} the forklift binds "
            f"(typing), right of it the workbench (reading a long question)")


def plain_ticks(ax):
    """Tick labels as numbers are written (10, 100, 1,000; 0.5), never 10^2, on a log axis too."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    words = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
        if scale == "log":
            axis.set_major_formatter(words)
            axis.set_minor_formatter(NullFormatter())


def rows_of(found, experiment, numbers=()):
    """The experiment's rows from its records, each {key or figure: value}, in the order run,
    and "flagged": whether other work disturbed any figure of the row (no verdict rests on it).
    numbers: the keys and figures a row must hold as numbers to be among them (a row of an
    older or edited file without one, or with text there, is not described)."""
    flagged = {json_keys(r) for r in found if r["experiment"] == experiment and r.get("disturbed")}
    return [row for keys, figures in rows(found, experiment).items()
            for row in [{**dict(keys), **figures, "flagged": tuple(keys) in flagged}]
            if all(number(row.get(n)) for n in numbers)]


def json_keys(record):
    return tuple(record["keys"].items())


def roofline_figure(ax, data):
    """The forklift's slope rising to the workbench's flat roof, and every prefill and decode
    row at its arithmetic intensity (all the trip's math, per byte fetched). A prediction may
    hold several machines: each its roof and its rows, in its own colour, every row labelled.
    The axes hold every row and every roof."""
    machines = data.get("machines") or [{"name": "", **data}]
    many = len(machines) > 1
    xs = [x for m in machines for x in [m["flops_per_s"] / m["bytes_per_s"]]
          + [p[2] for p in m["points"]]]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    points, ys, ringed = [], [], False
    for i, m in enumerate(machines):
        bw, peak, name = m["bytes_per_s"], m["flops_per_s"], f"{m['name']}: " if many else ""
        roof = [min(bw * x, peak) / 1e9 for x in grid]
        ax.loglog(grid, roof, color=f"C{i}" if many else "black", lw=2,
                  label=textwrap.fill(f"{name}{rate(bw, 'B/s')}, {rate(peak, 'FLOP/s')}, "
                                      f"ridge at {sig(peak / bw)} FLOPs per byte", 70)
                  if many else
                  f"the roof: the forklift's {sig(bw / 1e9)} GB/s, then the workbench's "
                  f"{sig(peak / 1e9)} GFLOP/s")
        ax.axvline(peak / bw, color=f"C{i}" if many else "grey", ls=":",
                   label=None if many else f"the ridge: {sig(peak / bw)} FLOPs per byte, at "
                                           f"the speeds the rows are held to")
        ys += roof
        for kind, words, marker in (("prefill", "reading (prefill)", "o"),
                                    ("decode", "typing (decode)", "s")):
            mine = [p for p in m["points"] if p[0] == kind]
            if mine:
                ax.scatter([p[2] for p in mine], [p[3] / 1e9 for p in mine], marker=marker,
                           s=40, zorder=3, color=f"C{i}" if many else None,
                           label=None if i else words + (" (shape)" if many else ""))
                ys += [p[3] / 1e9 for p in mine]
                flagged = [(p[2], p[3] / 1e9) for p in mine if len(p) > 4 and p[4]]
                if flagged:  # ringed in red, as the dial and the depth ring theirs
                    ax.scatter(*zip(*flagged), s=160, facecolors="none", edgecolors="red",
                               zorder=4, label="disturbed by other work: no verdict rests on it"
                               if not ringed else None)
                    ringed = True
                points += [(p[2], p[3] / 1e9, p[1]) for p in mine] if i == 0 else []
                #  (several machines: the first's rows labelled, the others' in the same order
                #  along their own roofs; labelling every machine's made them collide)
    if many:  # each machine's own ridge: the words at the two ends, under every machine's
        ax.text(0.01, 0.97, "left of a ridge: memory-bound, stuck on the forklift", ha="left",
                va="top", fontsize=8, color="dimgrey", transform=ax.transAxes)
        ax.text(0.99, 0.03, "right of it: compute-bound, stuck on the workbench", ha="right",
                va="bottom", fontsize=8, color="dimgrey", transform=ax.transAxes)
    else:
        ridge, at = machines[0]["flops_per_s"] / machines[0]["bytes_per_s"], \
            ax.get_xaxis_transform()
        ax.text(ridge / 1.3, 0.97, "memory-bound: stuck on the forklift", ha="right", va="top",
                fontsize=8, color="dimgrey", transform=at)
        ax.text(ridge * 1.3, 0.97, "compute-bound: stuck on the workbench", ha="left",
                va="top", fontsize=8, color="dimgrey", transform=at)
    if many:  # the machines' legend under the axes, clear of every point
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
                  title=f"rows labelled on {machines[0]['name'].split()[0]}'s roof; the same "
                        f"rows, in the same order, on the others'", title_fontsize=7)
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys) / 3, max(ys) * 4)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte fetched)")
    ax.set_ylabel("speed (GFLOP/s, all of a trip's math)")
    return "The roofline: where reading and typing sit against the machine's two limits", points


def trade(ax, rows, x, y, style, legend, xlabel, ylabel, labels):
    """One line through the rows, x against y, a point other work disturbed ringed in red:
    -> the points to label."""
    xs, ys = [r[x] for r in rows], [r[y] for r in rows]
    ax.plot(xs, ys, style, label=legend)
    flagged = [(a, b) for a, b, r in zip(xs, ys, rows) if r.get("flagged")]
    if flagged:
        ax.scatter(*zip(*flagged), s=160, facecolors="none", edgecolors="red", zorder=4,
                   label="disturbed by other work: no verdict rests on it")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return list(zip(xs, ys, labels))


LIMITS = {"forklift": "tab:blue", "workbench": "tab:orange", "link": "tab:purple",
          "does not fit": "lightgrey"}  # a grid cell's colour, by the limit its words name


def grid_figure(ax, rows):
    """A prediction's grid: users down, notebook depth across, each cell coloured by its limit
    and holding its words; the row of the most users that fit, uncoloured, last."""
    depths = [k for k in rows[0] if k.endswith(" notes")]
    for i, row in enumerate(rows):
        for j, d in enumerate(depths):
            words = str(row.get(d, ""))
            limit = next((k for k in LIMITS if words.startswith(k)), None)
            ax.add_patch(matplotlib_rectangle((j, i), LIMITS.get(limit, "white")))
            ax.text(j + 0.5, i + 0.5, words.replace(" (", "\n("), ha="center", va="center",
                    fontsize=7)
    ax.set_xlim(0, len(depths))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(depths))], [f"{d.split()[0]}" for d in depths])
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [str(r["users"]) for r in rows])
    ax.set_xlabel("notes each user already has (the notebook's depth)")
    ax.set_ylabel("users typing together")
    for name, colour in LIMITS.items():
        ax.scatter([], [], marker="s", s=60, color=colour, label=name)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    ax.grid(False)
    return "Which limit typing hits: users against notebook depth", []


def matplotlib_rectangle(at, colour):
    from matplotlib.patches import Rectangle
    return Rectangle(at, 1, 1, facecolor=colour, edgecolor="white", alpha=0.6)


def place_labels(fig, ax, points):
    """Label each point beside it where the label overlaps no other label, no marker and no
    drawn line (the roof, the ridge, a curve): the first of OFFSETS that is free, else the least
    crowded."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    marks = [ax.transData.transform((x, y)) for x, y, _ in points]
    every = [tuple(xy) for c in ax.collections for xy in c.get_offset_transform().transform(
        c.get_offsets())]  # every marker drawn, labelled or not
    lines, taken = traced(ax), []
    for (x, y, words), (mx, my) in zip(points, marks):
        best = None
        for dx, dy in OFFSETS:
            text = ax.annotate(words, (x, y), textcoords="offset points", xytext=(dx, dy),
                               fontsize=8, ha="left" if dx > 0 else "right" if dx < 0 else "center")
            box = text.get_window_extent(renderer).expanded(1.05, 1.1)
            clash = 10 * sum(box.overlaps(t) for t in taken) + 3 * sum(
                box.x0 - 4 < px < box.x1 + 4 and box.y0 - 4 < py < box.y1 + 4 for px, py in every
            ) + 10 * (box.x0 < ax.bbox.x0 or box.x1 > ax.bbox.x1 or box.y0 < ax.bbox.y0
                      or box.y1 > ax.bbox.y1) + 4 * nearer(box, (mx, my), every) + sum(
                weight * crossed(box, line) for weight, line in lines)
            if best is None or clash < best[0]:
                if best:
                    best[1].remove()
                best = (clash, text, box)
            else:
                text.remove()
            if clash == 0:
                break
        taken.append(best[2])


def traced(ax):
    """Every line drawn on the axes, as points on the screen two pixels or less apart, each with
    what crossing it costs a label: a solid line (a roof, a curve) more than a dotted one (the
    ridge), which costs less than a label that seems to name another point."""
    out = []
    for line in ax.get_lines():
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        steps = [np.linspace(p, q, int(np.ceil(np.hypot(*(q - p)) / 2)) + 1)
                 for p, q in zip(xy[:-1], xy[1:]) if np.isfinite([p, q]).all()]
        if steps:
            out.append((5 if line.get_linestyle() in ("-", "solid") else 2,
                        np.concatenate(steps)))
    return out


def crossed(box, line):
    """Whether a traced line passes through the label's box."""
    x, y = line[:, 0], line[:, 1]
    return bool(((x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)).any())


def nearer(box, own, marks):
    """How many other markers are not clearly farther from the label than its own (half as far
    again): each could seem to be the one it names."""
    def gap(p):  # from the point to the label's box
        return max(box.x0 - p[0], 0, p[0] - box.x1) ** 2 + max(box.y0 - p[1], 0, p[1] - box.y1) ** 2
    return sum(gap(p) < 2.25 * gap(own) + 1 for p in marks if tuple(p) != tuple(own))


ROOFLINE = Drawing("roofline.png", "check", "The roofline",
                   "each row at its FLOPs per byte: left of the ridge the forklift binds "
                   "(typing), right of it the workbench (reading a long question)",
                   roofline_figure, roofline_words)
GRID = Drawing("grid.png", "grid", "Which limit typing hits",
               "each cell a batch and a notebook depth, coloured by the limit it hits; grey does "
               "not fit the memory", grid_figure, experiment="grid")
