"""The complex64 tensor-core products at the big size (1001 frequencies, ``Nd = 100``, ``Nm = 5000``), forward
(``sbgemm_tc``) and adjoint (``sbgemm_adj_tc``) with 16 and 8 right-hand sides: CUDA-event times (medians of 7),
x the floor (``Fhat``'s bytes over a device copy's bandwidth measured here), cuBLAS's batched product timed
beside each, and both errors against complex128 on the first 8 frequencies.  One JSON line per product,
labelled with the first argument, so that two packages can be compared in alternation:

    for r in 1 2; do for v in base:/tmp/base/src tree:$PWD/src; do
        PYTHONPATH=${v#*:} python3 benchmarks/tensor_products.py ${v%%:*} >> results.jsonl
    done; done

(``/tmp/base`` from ``git archive REV src native | tar -x -C /tmp/base``).

usage: python benchmarks/tensor_products.py LABEL
"""

import json
import sys

import cupy as cp
import numpy as np

from fftmatvec.backend.gpu import GPUBackend

NF, ND, NM = 1001, 100, 5000
C64 = np.dtype(np.complex64)


def event_time(fn, reps: int = 7) -> float:
    """Median seconds of ``fn`` over ``reps`` calls after one warm-up, each between two CUDA events."""
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
    return float(np.median(times))


def main(label: str) -> None:
    be = GPUBackend()
    rng = cp.random.default_rng(5)
    A = rng.standard_normal((NF, ND, 2 * NM), dtype=np.float32).view(C64)
    src = cp.empty(A.nbytes // 4, np.float32)
    dst = cp.empty_like(src)
    bandwidth = 2 * src.nbytes / event_time(lambda: cp.copyto(dst, src))
    floor = A.nbytes / bandwidth
    for K in (16, 8):
        for adjoint in (False, True):
            n_in, n_out = (ND, NM) if adjoint else (NM, ND)
            x = rng.standard_normal((NF, n_in, 2 * K), dtype=np.float32).view(C64)
            y = cp.empty((NF, n_out, K), C64)
            be.gemm_min_k[C64] = be.adj_tensor_min_k[C64] = 1  # the tensor-core kernels
            be.blas_min_k[(C64, adjoint)] = 10**6
            be._launch.clear()
            t = event_time(lambda: be.sbgemv(A, x, y, adjoint=adjoint))
            be.blas_min_k[(C64, adjoint)] = 1  # cuBLAS's batched product
            be.adj_tensor_min_k[C64] = 10**6
            y_blas = cp.empty_like(y)
            t_blas = event_time(lambda: be.sbgemv(A, x, y_blas, adjoint=adjoint))
            A64, x64 = A[:8].astype(np.complex128), x[:8].astype(np.complex128)
            ref = cp.matmul(A64.conj().transpose(0, 2, 1) if adjoint else A64, x64)
            err = float(cp.linalg.norm(y[:8] - ref) / cp.linalg.norm(ref))
            err_blas = float(cp.linalg.norm(y_blas[:8] - ref) / cp.linalg.norm(ref))
            print(json.dumps(dict(label=label, K=K, adjoint=adjoint, us=t * 1e6, floor_ratio=t / floor,
                                  cublas_ratio=t_blas / floor, err=err, err_cublas=err_blas)))


if __name__ == "__main__":
    main(sys.argv[1])
