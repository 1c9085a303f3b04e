"""The post's pictures, in the order the report places them: the roofline (every row against
the machine's two limits), each experiment's own (kept in its module, beside its table), and a
prediction's grid."""
from harness.experiments import collision, decode, depth
from harness.showing.pictures import GRID, ROOFLINE

DRAWINGS = (ROOFLINE, decode.PICTURE, collision.PICTURE, depth.PICTURE, GRID)
