"""Run the product with K right-hand sides (native/sbgemm.cu) a few times at
one size, for a profiler
(``ncu --kernel-name regex:sbgemm python3 benchmarks/gemm_run.py 1001 100 5000 16 complex64``);
``adjoint`` runs ``Fhat^H`` times K right-hand sides (``sbgemm_adj_tc``).

Usage: python benchmarks/gemm_run.py NF ND NM K DTYPE [REPEATS] [adjoint]
"""

import sys

import cupy as cp
import numpy as np

from fftmatvec.backend.gpu import GPUBackend


def main(nf: int, nd: int, nm: int, K: int, dtype: str, repeats: int = 2, adjoint: bool = False) -> None:
    be = GPUBackend()
    ta = np.dtype(dtype)
    be.gemm_min_k[ta] = 1
    be.adj_tensor_min_k[ta] = 1
    be.blas_min_k[(ta, adjoint)] = 10**6
    real = np.float32 if ta == np.complex64 else np.float64
    A = cp.random.standard_normal((nf, nd, 2 * nm), dtype=real).view(dtype)
    n_in, n_out = (nd, nm) if adjoint else (nm, nd)
    x = cp.random.standard_normal((nf, n_in, 2 * K), dtype=real).view(dtype)
    y = cp.empty((nf, n_out, K), dtype)
    for _ in range(repeats):
        be.sbgemv(A, x, y, adjoint=adjoint)
    be.synchronize()
    ref = cp.matmul(A[:4].conj().transpose(0, 2, 1) if adjoint else A[:4], x[:4])
    print("relative error against cupy.matmul", float(cp.linalg.norm(y[:4] - ref) / cp.linalg.norm(ref)))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]), int(a[1]), int(a[2]), int(a[3]), a[4], int(a[5]) if len(a) > 5 else 2,
         len(a) > 6 and a[6] == "adjoint")
