"""Process grids: which blocks a rank owns and how blocks move between ranks.

A grid is ``pr x pc`` ranks; rank ``(r, c)`` owns block rows ``I_r`` (the
``Nd`` sensors split over ``pr``) and block columns ``J_c`` (the ``Nm``
parameters split over ``pc``).  Parameter vectors live on grid row 0 and data
vectors on grid column 0 (design.md section 4).

:class:`SerialGrid` is the one-process grid: every movement is the identity.
"""

from __future__ import annotations

from typing import Any

from .layout import block_range

Array = Any


class SerialGrid:
    """The ``1 x 1`` grid of a single process."""

    pr = pc = 1
    r = c = 0
    size = 1

    def row_block(self, Nd: int) -> tuple[int, int]:
        """``(start, count)`` of my block rows ``I_r``."""
        return block_range(Nd, self.pr, self.r)

    def col_block(self, Nm: int) -> tuple[int, int]:
        """``(start, count)`` of my block columns ``J_c``."""
        return block_range(Nm, self.pc, self.c)

    def col_bcast(self, x: Array) -> Array:
        """Broadcast ``x`` from grid row 0 down my grid column."""
        return x

    def row_bcast(self, x: Array) -> Array:
        """Broadcast ``x`` from grid column 0 along my grid row."""
        return x

    def row_reduce(self, y: Array, all: bool = False) -> Array:
        """Sum ``y`` along my grid row, to grid column 0 (everywhere if ``all``)."""
        return y

    def col_reduce(self, y: Array, all: bool = False) -> Array:
        """Sum ``y`` down my grid column, to grid row 0 (everywhere if ``all``)."""
        return y

    def holds_param(self) -> bool:
        """Whether this rank holds its block of parameter-space vectors."""
        return self.r == 0

    def holds_data(self) -> bool:
        """Whether this rank holds its block of data-space vectors."""
        return self.c == 0
