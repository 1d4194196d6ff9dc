"""Bayesian inversion with a BTT parameter-to-observable map (design.md section 6).

Priors and noise (:mod:`.prior`, :mod:`.noise`), CG with an injectable inner
product and checkpoints (:mod:`.cg`), three MAP solvers (:mod:`.solve`) and
QoI forecasts with posterior bands (:mod:`.qoi`).  No MPI here: the
distributed version passes its reductions in as ``inner`` / ``gram``.  The
vectors are NumPy or CuPy arrays (a prior's ``xp`` says which), worked on
where they are through :mod:`fftmatvec.backend.arrays`.
"""

from fftmatvec.inversion.cg import CGResult, cg, dot, gram
from fftmatvec.inversion.noise import WhiteNoise
from fftmatvec.inversion.prior import MaternPrior, WhitePrior
from fftmatvec.inversion.qoi import LowRankPosterior, QoIForecast, qoi_forecast
from fftmatvec.inversion.solve import (
    METHODS,
    DataSpaceCholesky,
    MAPResult,
    map_cg_data,
    map_cg_parameter,
    solve_map,
)

__all__ = [
    "METHODS", "CGResult", "DataSpaceCholesky", "LowRankPosterior", "MAPResult",
    "MaternPrior", "QoIForecast", "WhiteNoise", "WhitePrior", "cg", "dot", "gram",
    "map_cg_data", "map_cg_parameter", "qoi_forecast", "solve_map",
]
