"""The roofline picture of a two_phases.py run: the forklift's slope rising to the workbench's
flat roof, and every prefill and decode row at its arithmetic intensity (FLOPs per byte).

    python two_phases.py --plot   # saves results/<machine>/roofline.png and roofline.svg

matplotlib is optional: only --plot needs it.
"""
import textwrap

KINDS = (("prefill", "o", (5, -11)), ("decode", "s", (5, 5)))  # (experiment, marker, label offset)


def available():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def files(roofline, title):
    """{name: a function that draws the picture at the path it is given}, for the results."""
    return {f"roofline.{ext}": lambda path: save(roofline, title, path) for ext in ("png", "svg")}


def save(roofline, title, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = figure(plt, roofline, title)
    try:
        fig.savefig(path, dpi=120, format=path.rsplit(".", 1)[-1])
    finally:
        plt.close(fig)


def figure(plt, roofline, title):
    """roofline: {"bytes_per_s", "flops_per_s", "points": [[experiment, row, FLOPs per byte,
    FLOP/s]]}. Log-log axes; the ridge is where the two roofs meet, at the machine's balance."""
    bw, peak = roofline["bytes_per_s"], roofline["flops_per_s"]
    ridge = peak / bw
    xs = [p[2] for p in roofline["points"]] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.loglog(grid, [min(bw * x, peak) / 1e9 for x in grid], color="black", lw=2,
              label=f"roofline: forklift {bw / 1e9:.1f} GB/s, workbench {peak / 1e9:.1f} GFLOP/s")
    ax.axvline(ridge, color="grey", ls=":", label=f"ridge: {ridge:.1f} FLOPs per byte")
    for kind, marker, offset in KINDS:
        pts = [p for p in roofline["points"] if p[0] == kind]
        if pts:
            ax.scatter([p[2] for p in pts], [p[3] / 1e9 for p in pts], marker=marker, s=40,
                       label=kind, zorder=3)
            for _, row, x, y in pts:
                ax.annotate(row, (x, y / 1e9), textcoords="offset points", xytext=offset,
                            fontsize=8)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte fetched)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("\n".join(textwrap.wrap(title, 120)), fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
