"""How a trip does the work whose fastest way depends on the CPU, chosen where the suite runs
(bench.choose) and printed on the line after the machine line."""
import dataclasses

import numpy as np

ATTENTION = ("einsum", "matmul", "vec") if hasattr(np, "vecmat") else ("einsum", "matmul")
#           the ways one query may read its notes (model.product): "vec" needs NumPy 2.2


@dataclasses.dataclass(frozen=True)
class Paths:
    """How a trip does the work whose fastest way depends on the CPU: attention's products for
    one query (one of ATTENTION), and the blocks of a table product (see model.table()) by its column
    count and the table's width (the numbers each row meets a token with): ((most columns,
    width, rows, depth), ...), ascending in columns; rows None, or a count or width past them
    all, is one call a thread. Every path gives the same answer within float32 rounding."""
    attention: str = "einsum"
    blocks: tuple = ()

    def block(self, columns, width):  # -> (rows, depth), or None for one call a thread
        if columns < 2:  # one token: a matrix-vector product, for the BLAS's own threads
            return None
        return next(((rows, depth) if rows else None for most, wide, rows, depth in self.blocks
                     if columns <= most and wide == width), None)

    def __str__(self):
        """e.g. "attention by vec; table blocks at 2 tokens (rows, or rows x inputs at a time):
        tables of 64 inputs 8; of 256 inputs 8x64" """
        if not any(rows for _, _, rows, _ in self.blocks):
            return f"attention by {self.attention}; tables unblocked"
        tokens = sorted({n for n, *_ in self.blocks})
        widths = sorted({w for _, w, *_ in self.blocks})
        shown = {(n, w): f"{rows}x{depth}" if depth else str(rows or "unblocked")
                 for n, w, rows, depth in self.blocks}
        return (f"attention by {self.attention}; table blocks at {', '.join(map(str, tokens))} "
                "tokens (rows, or rows x inputs at a time): tables of " + "; of ".join(
                    f"{w} inputs " + ", ".join(shown.get((n, w), "unblocked") for n in tokens)
                    for w in widths))
