"""SciPy ``LinearOperator`` view of a BTT operator on flattened SOTI vectors."""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator


def as_scipy(op) -> LinearOperator:
    """Wrap ``op`` (``dims``, ``dimsd``, ``matvec``, ``rmatvec``) for SciPy solvers.

    A flat vector ``x`` of length ``Nm*Nt`` is ``m.ravel()`` of an ``(Nm, Nt)``
    SOTI array; ``matmat`` takes ``(Nm*Nt, K)`` and runs as one batched product.
    """
    nm, nt = op.dims
    nd, _ = op.dimsd

    def matmat(X: np.ndarray) -> np.ndarray:
        return op.matvec(X.reshape(nm, nt, -1)).reshape(nd * nt, -1)

    def rmatmat(Y: np.ndarray) -> np.ndarray:
        return op.rmatvec(Y.reshape(nd, nt, -1)).reshape(nm * nt, -1)

    return LinearOperator(
        shape=op.shape,
        dtype=np.float64,
        matvec=lambda x: op.matvec(x.reshape(nm, nt)).ravel(),
        rmatvec=lambda y: op.rmatvec(y.reshape(nd, nt)).ravel(),
        matmat=matmat,
        rmatmat=rmatmat,
    )
