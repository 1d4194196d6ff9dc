"""fftmatvec: block-triangular Toeplitz operators applied with FFTs.

Fast products with parameter-to-observable maps of linear time-invariant
systems (``F``, ``F^T``, ``F^T F``), in mixed precision, on CPUs or GPUs,
over a grid of MPI ranks, and the Bayesian inversion built on them.
"""

from .backend import get_backend
from .errors import ConfigError, FftmatvecError, FileFormatError
from .grid import ProcessGrid, SerialGrid
from .operator import BTTOperator, PreparedProduct
from .precision import ALL_CODES, parse as parse_precision
from .replicated import ReplicatedOperator
from .vector import DistVector

__version__ = "0.1.0"

__all__ = [
    "BTTOperator",
    "PreparedProduct",
    "ProcessGrid",
    "SerialGrid",
    "DistVector",
    "ReplicatedOperator",
    "get_backend",
    "parse_precision",
    "ALL_CODES",
    "FftmatvecError",
    "ConfigError",
    "FileFormatError",
    "__version__",
]
