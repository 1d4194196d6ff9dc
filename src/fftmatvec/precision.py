"""Five-letter precision codes: one letter per stage, ``s`` single or ``d`` double.

Stage order (design.md section 3): ``pad`` (broadcast + pad), ``fft``,
``sbgemv``, ``ifft``, ``reduce`` (unpad + reduce).  ``ddddd`` is the default;
``dssdd`` runs the FFT and the per-frequency product in single precision.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

STAGES = ("pad", "fft", "sbgemv", "ifft", "reduce")
ALL_CODES = tuple("".join(c) for c in itertools.product("ds", repeat=len(STAGES)))
DEFAULT = "ddddd"

_REAL = {"s": np.dtype(np.float32), "d": np.dtype(np.float64)}
_COMPLEX = {"s": np.dtype(np.complex64), "d": np.dtype(np.complex128)}


@dataclass(frozen=True)
class Precision:
    """A parsed precision code with the dtypes each stage runs in.

    Attributes
    ----------
    code : str
        The five letters, e.g. ``"dssdd"``.
    pad, fft, ifft, reduce : numpy.dtype
        Real dtypes: the broadcast message and padding, the FFT input, the
        inverse FFT output, the unpadded result and its reduction.
    fft_hat, sbgemv, ifft_hat : numpy.dtype
        Complex dtypes: the FFT output, ``Fhat`` and the product, the inverse
        FFT input.
    """

    code: str

    def _letter(self, stage: str) -> str:
        return self.code[STAGES.index(stage)]

    @property
    def pad(self) -> np.dtype:
        return _REAL[self._letter("pad")]

    @property
    def fft(self) -> np.dtype:
        return _REAL[self._letter("fft")]

    @property
    def fft_hat(self) -> np.dtype:
        return _COMPLEX[self._letter("fft")]

    @property
    def sbgemv(self) -> np.dtype:
        return _COMPLEX[self._letter("sbgemv")]

    @property
    def ifft_hat(self) -> np.dtype:
        return _COMPLEX[self._letter("ifft")]

    @property
    def ifft(self) -> np.dtype:
        return _REAL[self._letter("ifft")]

    @property
    def reduce(self) -> np.dtype:
        return _REAL[self._letter("reduce")]

    def unit_roundoff(self, stage: str) -> float:
        """``eps_i`` of the stage: half the machine epsilon of its dtype."""
        return float(np.finfo(_REAL[self._letter(stage)]).eps) / 2

    def __str__(self) -> str:
        return self.code


def parse(code: "str | Precision") -> Precision:
    """Parse a five-letter code; raise :class:`ConfigError` naming the valid form."""
    if isinstance(code, Precision):
        return code
    if not isinstance(code, str) or code.lower() not in ALL_CODES:
        raise ConfigError(
            f"unknown precision code {code!r}: expected 5 letters from 's'/'d' "
            f"in stage order {'/'.join(STAGES)}, e.g. 'ddddd' or 'dssdd'"
        )
    return Precision(code.lower())
