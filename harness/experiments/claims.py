"""The post's claims, in the post's order, each kept in the module of the experiment whose
figures it reads (its words, its figure, the rule it is judged by with its edge, its judge, and
the kind of machine on which it would not hold); judge.py resolves them."""
from harness.experiments import (collision, cube, decode, launches, machine, prefill, summary,
                                 turning)

MODULES = (machine, prefill, decode, launches, collision, summary, cube, turning)
CLAIMS = [c for module in MODULES for c in module.CLAIMS]
GPU_CLAIMS = turning.CLAIMS  # predicted for a GPU, and judged at a GPU's measured speeds too


def family(gpu=False):
    """How many claims share the chance of a wrong firm verdict in a report: every script's
    claims whose verdict rests on measured figures (timings, or the machine's two speeds), a
    GPU's own among them where the run was on one. Each script's take a share of
    intervals.FAMILY as large as their count's, spent among them by Holm's step-down, so that
    the report's verdicts together keep to it."""
    return sum(1 for c in CLAIMS if in_family(c, gpu))


def in_family(c, gpu=False):
    """Whether claim c is one of a report's family (see family())."""
    return c.basis != "accounting" and not c.predicted and (gpu or not c.gpu)
