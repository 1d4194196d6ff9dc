"""Grid shapes without MPI: parsing, the "auto" rule, the serial grid.

(These live in tests/unit because pytest-mpi skips everything under a
directory named ``mpi`` unless ``--with-mpi`` is given.)
"""

from __future__ import annotations

import numpy as np
import pytest

from fftmatvec.errors import ConfigError
from fftmatvec.grid import ProcessGrid, SerialGrid, comm_volume, parse_shape

@pytest.mark.parametrize("text, size, expected", [
    (None, 6, (1, 6)), ("2x3", 6, (2, 3)), (" 3 X 2 ", 6, (3, 2)), ((6, 1), 6, (6, 1)),
    ((np.int64(2), 2), 4, (2, 2)), ("1x1", 1, (1, 1)),
])
def test_parse_shape(text, size, expected):
    assert parse_shape(text, size) == expected


@pytest.mark.parametrize("text, size, needle", [
    ("2x3", 4, "needs 6 ranks"), ("0x4", 4, "positive"), ((2, -2), -4, "positive"),
    ("abc", 4, "expected 'PRxPC'"), ("2x", 2, "expected 'PRxPC'"), ((2, 2, 1), 4, "expected (pr, pc)"),
    ((2.0, 2), 4, "integers"), ((True, 4), 4, "integers"), (7, 7, "expected (pr, pc)"),
])
def test_bad_shapes_are_config_errors(text, size, needle):
    with pytest.raises(ConfigError) as info:
        parse_shape(text, size)
    assert needle in str(info.value)


def test_auto_shape_rule():
    # 1 x p when the reduction of the Nd-block result is cheapest (published: 1 x p)
    assert ProcessGrid.auto_shape(4, Nd=15, Nm=289) == (1, 4)
    assert ProcessGrid.auto_shape(8, Nd=100, Nm=5000) == (1, 8)
    # many ranks: a few grid rows cut the reduction more than they add broadcast
    pr, pc = ProcessGrid.auto_shape(4096, Nd=100, Nm=5000)
    assert pr * pc == 4096 and 4 <= pr <= 16
    assert comm_volume(pr, pc, 100, 5000) < comm_volume(1, 4096, 100, 5000)
    # fewer idle ranks first: Nm=1 cannot use pc > 1
    assert ProcessGrid.auto_shape(4, Nd=8, Nm=1) == (4, 1)
    assert ProcessGrid.auto_shape(6) == (1, 6)
    for size in (1, 2, 3, 4, 6, 12):
        pr, pc = ProcessGrid.auto_shape(size, 7, 11)
        assert pr * pc == size
    with pytest.raises(ConfigError):
        ProcessGrid.auto_shape(0, 3, 3)


def test_comm_volume_model():
    assert comm_volume(1, 1, 10, 10) == 0
    assert comm_volume(1, 4, 10, 10) == 10            # reduction of Nd blocks only
    assert comm_volume(4, 1, 10, 10) == 10            # broadcast of Nm blocks only
    assert comm_volume(2, 2, 10, 11) == 6 + 5


def test_serial_grid_is_identity():
    g = SerialGrid()
    x = np.arange(6.0).reshape(2, 3)
    assert g.col_bcast(x) is x and g.row_reduce(x, all=True) is x
    assert g.row_block(5) == (0, 5) and g.col_block(0) == (0, 0)
    assert g.holds_param() and g.holds_data() and g.comm is None and g.shape == (1, 1)
    assert g.comm_seconds == 0.0
    with g as same:
        assert same is g
