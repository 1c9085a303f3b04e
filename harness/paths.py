"""How a trip does the work whose fastest way depends on the CPU, chosen where the suite runs
(bench.choose) and printed on the line after the machine line."""
import dataclasses
import typing

import numpy as np

ATTENTION = ("einsum", "matmul", "vec") if hasattr(np, "vecmat") else ("einsum", "matmul")
#           the ways one query may read its notes (model.product): "vec" needs NumPy 2.2


class Block(typing.NamedTuple):
    """How the table products of up to `tokens` tokens go, for tables of `inputs` inputs (the
    numbers each row meets a token with): `rows` rows of a thread's share at a time (None: all),
    which meet `depth` inputs at a time (None: all at once); neither: unblocked."""
    tokens: int
    inputs: int
    rows: typing.Optional[int] = None
    depth: typing.Optional[int] = None

    def shown(self):
        return shown(self.rows, self.depth)


def shown(rows, depth):
    """A block as the paths line and the saved trials name it: "unblocked", "512" (rows),
    "512x768" (rows x inputs at a time), "all x768" (all of a thread's rows)."""
    if not (rows or depth):
        return "unblocked"
    return f"{rows or 'all '}" + (f"x{depth}" if depth else "")


@dataclasses.dataclass(frozen=True)
class Paths:
    """How a trip does the work whose fastest way depends on the CPU: attention's products for
    one query (one of ATTENTION), and the Blocks of the table products (see model.table()),
    ascending in tokens; a token count past them all, or a table size not among them, goes
    unblocked. Every path gives the same answer within float32 rounding."""
    attention: str = "einsum"
    blocks: tuple = ()

    def __post_init__(self):  # plain tuples, as read back from saved results, become Blocks
        object.__setattr__(self, "blocks", tuple(Block(*b) for b in self.blocks))

    def block(self, tokens, inputs):  # -> (rows, depth) for model.table(), or None: unblocked
        if tokens < 2:  # one token: a matrix-vector product, for the BLAS's own threads
            return None
        b = next((b for b in self.blocks if tokens <= b.tokens and b.inputs == inputs), None)
        return (b.rows, b.depth) if b and (b.rows or b.depth) else None

    def __str__(self):
        """e.g. "attention by vec; table blocks at 2, 4 tokens (rows, or rows x inputs at a
        time): tables of 64 inputs 8, unblocked; of 256 inputs 8x64, all x64" """
        if not any(b.rows or b.depth for b in self.blocks):
            return f"attention by {self.attention}; tables unblocked"
        counts = sorted({b.tokens for b in self.blocks})
        sizes = sorted({b.inputs for b in self.blocks})
        shown = {(b.tokens, b.inputs): b.shown() for b in self.blocks}
        return (f"attention by {self.attention}; table blocks at {', '.join(map(str, counts))} "
                "tokens (rows, or rows x inputs at a time): tables of " + "; of ".join(
                    f"{i} inputs " + ", ".join(shown.get((n, i), "unblocked") for n in counts)
                    for i in sizes))
