"""Forward products by chunks of block rows (``reduce_chunks``), one process:
the same result as the one-piece product, timed or not, for every chunk count."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import direct_btt, rel_err

from fftmatvec import BTTOperator, ConfigError
from fftmatvec.backend.cpu import CPUBackend
from fftmatvec.collectives import LocalCollectives, Request


@pytest.mark.parametrize("chunks", [1, 2, 3, 7, 50])
@pytest.mark.parametrize("shape", [(5, 7, 6), (1, 4, 5), (7, 3, 9)], ids=lambda s: "x".join(map(str, s)))
def test_chunked_forward_equals_one_piece(rng, shape, chunks):
    f = rng.standard_normal(shape)
    m = rng.standard_normal(shape[1:])
    M = rng.standard_normal(shape[1:] + (3,))
    op = BTTOperator(f, reduce_chunks=chunks)
    ref = direct_btt(f, m)
    assert rel_err(op.matvec(m), ref) < 1e-13
    y2 = op.matvec(M)
    for k in range(3):
        assert rel_err(y2[:, :, k], direct_btt(f, M[:, :, k])) < 1e-13
    timer = op.backend.timer()
    assert rel_err(op.matvec(m, timer=timer), ref) < 1e-13
    assert {"pad", "fft", "sbgemv", "ifft", "unpad"} <= set(timer.times)
    assert all(len(v) == 1 for v in timer.times.values())  # one entry per stage and product


@pytest.mark.parametrize("code", ["ddddd", "dssdd", "sssss"])
def test_chunked_forward_mixed_precision(rng, code):
    f = rng.standard_normal((6, 9, 8))
    m = rng.standard_normal((9, 8))
    one = BTTOperator(f, precision=code).matvec(m)
    three = BTTOperator(f, precision=code, reduce_chunks=3).matvec(m)
    assert rel_err(three, one) < (1e-5 if "s" in code else 1e-13)


def test_engine_hands_over_each_chunk_once(rng):
    f = rng.standard_normal((7, 4, 5))
    op = BTTOperator(f, device=CPUBackend(workers=1))
    x = rng.standard_normal((4, 5, 1))
    seen = []
    y = op.engine.apply_rows(x, op.precision, 3, lambda rows, mark: seen.append(rows.shape[0]))
    assert seen == [3, 2, 2] and y.shape == (7, 5, 1)
    assert rel_err(y[:, :, 0], direct_btt(f, x[:, :, 0])) < 1e-13


@pytest.mark.parametrize("bad", [0, -2, "x"])
def test_bad_chunk_count(rng, bad):
    with pytest.raises(ConfigError, match="reduce_chunks"):
        BTTOperator(rng.standard_normal((2, 3, 4)), reduce_chunks=bad)


def test_requests_and_local_ireduce():
    buf = np.arange(4.0)
    req = LocalCollectives().ireduce(buf)
    assert req.done and req.wait() is buf
    calls = []
    late = Request(lambda: calls.append(1) or "sum")
    assert not late.done and late.wait() == "sum" and late.wait() == "sum" and calls == [1]
