"""Host-side layout rules of the fused transforms (native/fft.cu), checked without a GPU."""
import numpy as np
import pytest

from fftmatvec.backend.gpu import fft_radices, fused_row_stride, pass_twiddles


@pytest.mark.parametrize("M", [1, 10, 21, 100, 500, 1000, 1024])
@pytest.mark.parametrize("itemsize", [8, 16])
@pytest.mark.parametrize("S", [1, 2, 4, 8, 16, 32])
def test_row_stride_spreads_series_over_banks(M, itemsize, S):
    """The S series of one warp access (series fastest) start in distinct
    bank groups: the lanes of one shared-memory wavefront hit P distinct groups."""
    ld = fused_row_stride(M, S, itemsize)
    P = 128 // itemsize
    assert M + 1 <= ld < M + 1 + P
    lanes = range(min(P, 32))
    groups = {((lane // S) + (lane % S) * ld) % P for lane in lanes}
    if 1 < S < P:
        assert len(groups) == P
    else:
        assert ld == M + 1


@pytest.mark.parametrize("M", [1, 2, 7, 10, 12, 60, 100, 250, 400, 500, 1000, 11, 13, 22])
def test_radices_multiply_to_length(M):
    radices = fft_radices(M)
    if any(M % p == 0 for p in (11, 13)):
        assert radices is None
        return
    assert int(np.prod(radices)) == M and all(r in (2, 3, 4, 5, 7, 8, 10) for r in radices)
    # twiddle table: the passes' R - 1 rows of NS entries each, M - 1 in all (one unused entry for M = 1)
    assert len(pass_twiddles(radices)) == max(M - 1, 1)
