"""The tensor maps of backend/tensormap.py refuse what the copy engine cannot copy (no GPU needed: the checks
come before the driver is asked)."""

import pytest

from fftmatvec.backend.tensormap import rows_map


@pytest.mark.parametrize("address,shape", [(8, (2, 4, 10)), (16, (2, 4, 9))], ids=["address", "row"])
def test_rows_map_needs_16_byte_pieces(address, shape):
    with pytest.raises(ValueError, match="16-byte"):
        rows_map(address, shape, row_pitch=shape[1], box_rows=shape[1])
