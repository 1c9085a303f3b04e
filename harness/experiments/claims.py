"""The post's claims, in the post's order, each kept in the module of the experiment whose
figures it reads (its words, its figure, the rule it is judged by with its edge, its judge, and
the kind of machine on which it would not hold); judge.py resolves them."""
from harness.experiments import (collision, cube, decode, launches, machine, prefill, summary,
                                 turning)

MODULES = (machine, prefill, decode, launches, collision, summary, cube, turning)
CLAIMS = [c for module in MODULES for c in module.CLAIMS]
