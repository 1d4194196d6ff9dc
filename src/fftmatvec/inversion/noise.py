"""White Gaussian observation noise ``Gn = diag(std^2)`` in data space.

Vectors are SOTI arrays ``(Nd, Nt)`` or batches ``(Nd, Nt, K)``, NumPy or
CuPy (a per-entry ``std`` lives on the device of the data it was made from).
"""

from __future__ import annotations

import math

import numpy as np

from fftmatvec.backend.arrays import array_module
from fftmatvec.errors import ConfigError
from fftmatvec.inversion.cg import Inner, dot
from fftmatvec.inversion.prior import Array, bcast


class WhiteNoise:
    """``Gn = diag(std^2)``, uncorrelated noise.

    Parameters
    ----------
    std : float, or (Nd, Nt) float64 (per entry, NumPy or CuPy); all > 0

    Attributes
    ----------
    std : 0-d or (Nd, Nt) float64, in the module of the ``std`` given
    """

    def __init__(self, std: Array | float) -> None:
        self.std = array_module(std).asarray(std, dtype=float)
        if not bool((self.std > 0).all()):
            raise ConfigError("noise std must be > 0 (and finite) everywhere")

    @classmethod
    def relative(cls, d: Array, rel: float, *, per_entry: bool = False,
                 inner: Inner = dot) -> WhiteNoise:
        """Noise whose level is a fraction ``rel`` of the signal ``d``.

        ``per_entry=False``: one std for all entries, ``rel * ||d|| / sqrt(n)``
        (``rel`` times the RMS of ``d``, ``n`` its number of entries, both
        through ``inner``).  ``per_entry=True``: ``std = rel * |d|`` entry by
        entry (every entry of ``d`` must be nonzero).

        Parameters
        ----------
        d : (Nd, Nt) float64
            Noise-free (or observed) data.
        rel : float, > 0
        """
        if per_entry:
            return cls(rel * abs(d))
        ones = array_module(d).ones_like(d)
        return cls(rel * math.sqrt(inner(d, d) / inner(ones, ones)))

    def apply(self, d: Array) -> Array:
        """``Gn d``; d (Nd, Nt[, K])."""
        return d * bcast(self.std**2, d)

    def inv(self, d: Array) -> Array:
        """``Gn^{-1} d``."""
        return d / bcast(self.std**2, d)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
        """A draw from ``N(0, Gn)`` of ``shape`` ((Nd, Nt) or (Nd, Nt, K)), on
        the host (NumPy), from ``rng``."""
        xi = rng.standard_normal(shape)
        return xi * bcast(self.std, xi)
