"""The forward transform of the big size's 5000 x 16 series (``Nt = 1000``) with its spectra stored three ways:
frequency-major (``tile`` 0, the engine's layout), in tiles of the block's ``S`` series (each block writes one
contiguous run of whole lines) and in tiles of ``K = 16`` series (a parameter's spectra in one run, written by
four blocks); complex128 and float64 into complex64, CUDA-event medians of 7, two rounds.  One JSON line each.

It needs ``rfft_pad``'s store tiles, which commit 9d7bf0e added and 8e2b0c4 took out again
(docs/gpu-kernels.md, stop 34):

    git archive 9d7bf0e src native | tar -x -C /tmp/tiles
    PYTHONPATH=/tmp/tiles/src python3 benchmarks/rfft_store_layouts.py
"""

import json

import cupy as cp
import numpy as np

from fftmatvec.backend.gpu import GPUBackend
from tensor_products import event_time

N, NT, K = 5000, 1000, 16


def main() -> None:
    be = GPUBackend()
    x = cp.random.default_rng(3).standard_normal((N, NT, K))
    for rnd in (1, 2):
        for ctype in (np.dtype(np.complex128), np.dtype(np.complex64)):
            out = cp.empty((NT + 1, N, K), ctype)
            S = be._fused_config(NT, ctype, N * K, K)[0]["rfft_pad"]
            for tile in (0, S, K):
                t = event_time(lambda: be._fused_transform("rfft_pad", x, out, ctype, N * K, K, NT, None, tile=tile))
                print(json.dumps(dict(round=rnd, ctype=ctype.name, S=S, tile=tile, us=round(t * 1e6, 1))))


if __name__ == "__main__":
    main()
