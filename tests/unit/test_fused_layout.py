"""Host-side layout rules of the fused transforms (native/fft.cu), checked without a GPU."""
import numpy as np
import pytest

from fftmatvec.backend.fused_fft import fft_radices, fused_in_place, fused_row_stride, pass_threads, pass_twiddles


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


@pytest.mark.parametrize("M", [1, 7, 10, 21, 98, 500, 1000, 1024])
@pytest.mark.parametrize("S", [1, 2, 4, 8, 16])
def test_pass_threads_are_the_fewest_that_do_a_pass_at_once(M, S):
    """pass_threads: a multiple of 32 with which every pass runs in one
    buffer, and 32 fewer would not do (the forward at Nt = 1000: 224 threads
    for two series, 416 for four)."""
    radices = fft_radices(M)
    threads = pass_threads(M, S, radices)
    assert threads % 32 == 0 and fused_in_place(M, S, threads, radices)
    assert threads == 32 or not fused_in_place(M, S, threads - 32, radices)
    if M == 1000:
        assert threads == {1: 128, 2: 224, 4: 416, 8: 800, 16: 1600}[S]
