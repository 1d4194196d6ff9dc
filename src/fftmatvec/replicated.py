"""A distributed operator seen through whole vectors replicated on every rank.

The inversion keeps its vectors whole on every rank (they are small next to
``Fhat``) so that priors, solvers and outputs are those of one process, while
the products, the expensive part, are shared by the process grid: each rank
applies its slab and the result is gathered back to every rank.  With the GPU
backend the vectors stay on the rank's GPU (``xp`` is CuPy) and no vector
crosses to the host: the gather goes device to device through NCCL (or a
CUDA-aware MPI; a plain MPI stages it through the host).
"""

from __future__ import annotations

import numpy as np

from .operator import BTTOperator
from .vector import DistVector


class ReplicatedOperator:
    """``F`` of a (possibly distributed) :class:`BTTOperator` on whole vectors.

    Parameters
    ----------
    op : BTTOperator
        Built on any grid.

    Every method takes and returns whole SOTI arrays of ``xp``, the same on
    every rank: ``matvec`` (Nm, Nt[, K]) -> (Nd, Nt[, K]), ``rmatvec`` and
    ``normal`` likewise.  Collective: every rank calls every method.

    Attributes
    ----------
    xp : module
        The backend's array module (NumPy, or CuPy for the GPU backend).
    """

    def __init__(self, op: BTTOperator) -> None:
        self.op = op
        self.grid = op.grid
        self.dims, self.dimsd = op.dims, op.dimsd
        self.precision, self.adjoint_precision = op.precision, op.adjoint_precision
        self.device = op.backend.name  # "cpu" or "gpu": where the products run
        self.xp = op.backend.xp

    @property
    def grid_shape(self) -> list[int]:
        return [self.grid.pr, self.grid.pc]

    def _apply(self, method, v: np.ndarray, space: str) -> np.ndarray:
        if self.grid.size == 1:
            return method(v)
        return self.xp.asarray(method(DistVector.from_global(v, self.grid, space)).allgather())

    def matvec(self, m: np.ndarray) -> np.ndarray:
        return self._apply(self.op.matvec, m, "param")

    def rmatvec(self, d: np.ndarray) -> np.ndarray:
        return self._apply(self.op.rmatvec, d, "data")

    def normal(self, m: np.ndarray) -> np.ndarray:
        return self._apply(self.op.normal, m, "param")
