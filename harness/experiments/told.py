"""What the post tells, gathered from the experiments' modules for every stage that judges or
places it (the verdicts, the claims sheet, the report, a prediction's pictures): its claims in
the post's order (claims.py) and its pictures in the order the report places them: the roofline
(every row against the machine's two limits), each experiment's own (kept in its module, beside
its table), and a prediction's grid. The stages below take it as an argument: none names an
experiment."""
from harness.experiments import collision, decode, depth
from harness.experiments.claims import CLAIMS
from harness.post import Told
from harness.showing.pictures import GRID, ROOFLINE

DRAWINGS = (ROOFLINE, decode.PICTURE, collision.PICTURE, depth.PICTURE, GRID)
TOLD = Told(tuple(CLAIMS), DRAWINGS)
