"""White Gaussian observation noise ``Gn = diag(std^2)`` in data space.

Vectors are SOTI arrays ``(Nd, Nt)`` or batches ``(Nd, Nt, K)``.
"""

from __future__ import annotations

import math

import numpy as np

from fftmatvec.errors import ConfigError
from fftmatvec.inversion.cg import Inner, dot
from fftmatvec.inversion.prior import bcast

Array = np.ndarray


class WhiteNoise:
    """``Gn = diag(std^2)``, uncorrelated noise.

    Parameters
    ----------
    std : float, or (Nd, Nt) float64 (per entry); all > 0

    Attributes
    ----------
    std : 0-d or (Nd, Nt) float64
    """

    def __init__(self, std: Array | float) -> None:
        self.std = np.asarray(std, dtype=float)
        if not np.all(self.std > 0):
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
            return cls(rel * np.abs(d))
        ones = np.ones_like(d)
        return cls(rel * math.sqrt(inner(d, d) / inner(ones, ones)))

    def apply(self, d: Array) -> Array:
        """``Gn d``; d (Nd, Nt[, K])."""
        return d * bcast(self.std**2, d)

    def inv(self, d: Array) -> Array:
        """``Gn^{-1} d``."""
        return d / bcast(self.std**2, d)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
        """A draw from ``N(0, Gn)`` of ``shape`` ((Nd, Nt) or (Nd, Nt, K))."""
        xi = rng.standard_normal(shape)
        return xi * bcast(self.std, xi)
