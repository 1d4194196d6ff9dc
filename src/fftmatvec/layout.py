"""Block ownership and the SOTI (space-outer, time-inner) conventions.

Every vector is an ``(n, Nt)`` array (``x[j, t]``), optionally with a
trailing batch axis ``(n, Nt, K)``; flattened, block ``j``'s ``Nt`` values are
contiguous.  Blocks are split over ranks by :func:`block_range`, the one split
rule used by the operator, the I/O and the tests.
"""

from __future__ import annotations


def block_range(n: int, parts: int, index: int) -> tuple[int, int]:
    """Return ``(start, count)`` of part ``index`` when ``n`` blocks are split
    over ``parts`` as evenly as possible, the remainder going to the lowest
    indices.  Parts beyond ``n`` get ``count == 0``.
    """
    if parts < 1 or not 0 <= index < parts:
        raise ValueError(f"part {index} of {parts} does not exist")
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, base + (index < extra)
