"""Five-letter precision codes: one letter per stage, ``s`` single or ``d`` double.

Stage order (design.md section 3): ``pad`` (broadcast + pad), ``fft``,
``sbgemv``, ``ifft``, ``reduce`` (unpad + reduce).  ``ddddd`` is the default;
``dssdd`` runs the FFT and the per-frequency product in single precision.

The error model of design.md section 3 lives here too: :func:`error_bound`
(with :func:`error_terms`, :func:`model_sizes` and the calibrated
:data:`CONSTANTS`) and :func:`validate_tolerance`.  Measuring the codes and
choosing one for a tolerance is :mod:`fftmatvec.tuning`; docs/precision.md
explains both.
"""

from __future__ import annotations

import functools
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

    The dtypes are computed once per object (read on every product).

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
    sbgemv_in : numpy.dtype
        Complex dtype in which the FFT output is kept for the product: the
        product's where that is lower than the FFT's (the transform rounds
        as it stores, which is the rounding the product would do on its
        loads), else the FFT's.
    """

    code: str

    def _letter(self, stage: str) -> str:
        return self.code[STAGES.index(stage)]

    @functools.cached_property
    def pad(self) -> np.dtype:
        return _REAL[self._letter("pad")]

    @functools.cached_property
    def fft(self) -> np.dtype:
        return _REAL[self._letter("fft")]

    @functools.cached_property
    def fft_hat(self) -> np.dtype:
        return _COMPLEX[self._letter("fft")]

    @functools.cached_property
    def sbgemv(self) -> np.dtype:
        return _COMPLEX[self._letter("sbgemv")]

    @functools.cached_property
    def sbgemv_in(self) -> np.dtype:
        return self.sbgemv if self.sbgemv.itemsize < self.fft_hat.itemsize else self.fft_hat

    @functools.cached_property
    def ifft_hat(self) -> np.dtype:
        return _COMPLEX[self._letter("ifft")]

    @functools.cached_property
    def ifft(self) -> np.dtype:
        return _REAL[self._letter("ifft")]

    @functools.cached_property
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


# -- error model (design.md section 3) ------------------------------------------
#
#   ||dv|| / ||v|| <= kappa * [ c1 eps1 + (cF eps_d + c2 eps2 + c4 eps4) log2(L)
#                               + c3 eps3 n_inner + c5 eps5 log2(2 n_reduce) ]
#
# eps_i: unit roundoff of stage i; eps_d: that of float64 (Fhat is always
# computed in float64 at set-up).  Adaptations of the design's formula, which
# keep its shape:
#   * log2(Nt) is read as log2(L) = log2(2 Nt), the length of the transforms
#     (so that Nt = 1 still counts the rounding of the cast and the FFT);
#   * log2(pc) is read as log2(2 pc) = 1 + log2(pc): the unpad stage rounds
#     the result to its precision once even without a reduction (pc = 1),
#     then a tree reduction over pc partial results adds log2(pc) roundings;
#   * n_inner and n_reduce depend on the direction: F sums over the local
#     parameter blocks, nm = ceil(Nm/pc), and reduces over the pc ranks of a
#     grid row; F^T sums over the local sensor blocks, nd = ceil(Nd/pr), and
#     reduces over the pr ranks of a grid column (see :func:`model_sizes`);
#   * kappa is the condition of the *product*, kappa = ||F|| ||x|| / ||F x||
#     (||F^T|| ||d|| / ||F^T d|| for the adjoint), with ||F|| bounded by
#     max_k sigma_max(Fhat[k]).  Every stage's error is a perturbation whose
#     effect on the result is at most ||F|| times its size; kappa turns that
#     into a relative error of the result.  For random (Gaussian) inputs it
#     concentrates at ||F||_2 sqrt(n_in) / ||F||_F, finite even for a
#     rank-deficient F.  The design's "worst condition number over
#     frequencies", max_k sigma_max(Fhat[k]) / sigma_min(Fhat[k]), is infinite
#     for a rank-deficient Fhat[k] and huge for the numerically low-rank maps
#     of real problems, yet the error of a product does not grow with it: it
#     is reported as a diagnostic only (docs/precision.md).
#
# The constants are empirical: per stage, twice the largest ratio of the
# measured error (one stage in single precision, the rest in double, random
# Gaussian probes, against all-double) to kappa * eps * (its size factor),
# over random operators of several shapes and condition numbers; cF likewise
# from the all-double error against exact integer arithmetic.  Reproduce them
# with ``python benchmarks/calibrate_precision.py`` (docs/precision.md).
#
# Calibrated (benchmarks/calibrate_precision.py, seed 2024, CPU backend: 80
# operators from 1x1x1 to 40x300x128 and 4x1000x32, conditions 1 to 1e8,
# rank-deficient, i.i.d. decaying, orthogonal and the 1-D tsunami map; both
# directions, 4 probes each).  Largest observed ratios: 0.87 for c1, c2, c4,
# c5 and 1.42 for c3 (all at the scalar 1x1x1 operator, where one rounding
# of one number is the whole error; at realistic sizes the ratios are 0.1-0.4
# for c1, c5, 0.03-0.15 for c2, c4 and 0.005-0.6 for c3), 0.22 for cF.  With
# these constants the largest error/bound over all 32 codes was 0.49.
C1 = 1.8  # pad: cast of the input
C2 = 1.8  # fft: cast to the FFT precision + forward FFT, per log2(L)
C3 = 2.9  # sbgemv: Fhat rounding + casts + the per-frequency sums, per inner term
C4 = 1.8  # ifft: cast + inverse FFT, per log2(L)
C5 = 1.8  # unpad + reduce, per log2(2 n_reduce)
CF = 0.45  # the float64 set-up of Fhat (and the all-double floor), per log2(L)

#: The constants of :func:`error_bound` by name.
CONSTANTS = {"c1": C1, "c2": C2, "c3": C3, "c4": C4, "c5": C5, "cF": CF}

DIRECTIONS = ("forward", "adjoint")

_EPS_D = float(np.finfo(np.float64).eps) / 2


def model_sizes(direction: str, Nd: int, Nm: int, pr: int = 1, pc: int = 1) -> tuple[int, int]:
    """``(n_inner, n_reduce)`` of the error model for one direction.

    ``F`` (``"forward"``): each rank sums ``nm = ceil(Nm/pc)`` terms per
    output entry and the partial results are reduced over ``pc`` ranks.
    ``F^T`` (``"adjoint"``): ``nd = ceil(Nd/pr)`` terms, reduced over ``pr``.
    """
    if direction not in DIRECTIONS:
        raise ConfigError(f"direction {direction!r}: expected one of {DIRECTIONS}")
    for name, v in (("Nd", Nd), ("Nm", Nm), ("pr", pr), ("pc", pc)):
        if int(v) != v or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    if direction == "forward":
        return -(-int(Nm) // int(pc)), int(pc)
    return -(-int(Nd) // int(pr)), int(pr)


def error_terms(
    code: "str | Precision", *, Nt: int, n_inner: int, n_reduce: int = 1, constants: dict | None = None
) -> dict[str, float]:
    """The bracket of :func:`error_bound`, term by term (without ``kappa``).

    Keys: the stage names of :data:`STAGES` and ``"setup"`` (the ``cF``
    term).  Their sum times ``kappa`` is the bound.
    """
    p = parse(code)
    c = dict(CONSTANTS, **(constants or {}))
    log_l = float(np.log2(2 * int(Nt)))
    return {
        "pad": c["c1"] * p.unit_roundoff("pad"),
        "fft": c["c2"] * p.unit_roundoff("fft") * log_l,
        "sbgemv": c["c3"] * p.unit_roundoff("sbgemv") * int(n_inner),
        "ifft": c["c4"] * p.unit_roundoff("ifft") * log_l,
        "reduce": c["c5"] * p.unit_roundoff("reduce") * float(np.log2(2 * int(n_reduce))),
        "setup": c["cF"] * _EPS_D * log_l,
    }


def error_bound(
    code: "str | Precision",
    *,
    kappa: float,
    Nt: int,
    n_inner: int,
    n_reduce: int = 1,
    constants: dict | None = None,
) -> float:
    """Predicted bound on the relative error ``||dv|| / ||v||`` of one product.

    Parameters
    ----------
    code : str or Precision
    kappa : float
        Condition of the product, ``||F|| ||x|| / ||F x||`` (>= 1); see
        :func:`fftmatvec.conditioning.conditioning` and docs/precision.md.
    Nt : int
        Time steps (the transforms have length ``L = 2 Nt``).
    n_inner, n_reduce : int
        From :func:`model_sizes`: terms per product sum on one rank and the
        number of ranks the partial results are reduced over.
    constants : dict, optional
        Override some of :data:`CONSTANTS` (keys ``c1``..``c5``, ``cF``).
    """
    if np.isnan(kappa) or kappa < 0:
        raise ConfigError(f"kappa must be a non-negative number, got {kappa!r}")
    terms = error_terms(code, Nt=Nt, n_inner=n_inner, n_reduce=n_reduce, constants=constants)
    return float(kappa) * sum(terms.values())


def validate_tolerance(tolerance: object) -> float:
    """``tolerance`` as a float in ``(0, 1)``; :class:`ConfigError` otherwise.

    A relative error tolerance: finite, positive and below 1 (a relative
    error of 1 is no accuracy at all).
    """
    if isinstance(tolerance, bool) or tolerance is None:
        raise ConfigError(f"tolerance must be a number in (0, 1), got {tolerance!r}")
    try:
        tol = float(tolerance)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"tolerance must be a number in (0, 1), got {tolerance!r}") from None
    if not (np.isfinite(tol) and 0.0 < tol < 1.0):
        raise ConfigError(f"tolerance must be a number in (0, 1), got {tolerance!r}")
    return tol
