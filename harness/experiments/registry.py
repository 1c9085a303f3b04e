"""The experiments as every stage finds them: each module of this folder, in the post's order (its
PLACE), declares its experiment whole (EXPERIMENT: plans.Experiment), its claims (CLAIMS) or
both. A new experiment is a new module here and nothing else: two_phases.py offers it (its
flags, its --quick sizes), model_run.py measures it, its records are saved, reported and
compared, and --predict plans it. The stages below the experiments take what they need of it
as an argument (TOLD: the claims and pictures); none names an experiment."""
import importlib
import os
import pkgutil

from harness.post import Told
from harness.showing.pictures import GRID, ROOFLINE


def modules():
    """This folder's modules that declare an experiment or claims, in the post's order."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = [importlib.import_module(f"{__package__}.{m.name}")
             for m in pkgutil.iter_modules([here]) if m.name != "registry"]
    return sorted((m for m in found if hasattr(m, "PLACE")), key=lambda m: m.PLACE)


MODULES = tuple(modules())
EXPERIMENTS = {m.EXPERIMENT.name: m.EXPERIMENT for m in MODULES if hasattr(m, "EXPERIMENT")}
CLAIMS = tuple(c for m in MODULES for c in getattr(m, "CLAIMS", ()))  # the post's, in its order
DRAWINGS = (ROOFLINE, *(e.picture for e in EXPERIMENTS.values() if e.picture), GRID)
#   in the order the report places them: the roofline (every row against the machine's two
#   limits), each experiment's own (beside its table), and a prediction's grid
TOLD = Told(CLAIMS, DRAWINGS)
QUICK = {k: v for e in EXPERIMENTS.values() for k, v in e.quick.items()}  # --quick's sizes
