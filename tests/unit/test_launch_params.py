"""The parameter array of a programmatic launch (fftmatvec.backend.launch), without a GPU."""

import ctypes

import numpy as np
import pytest

from fftmatvec.backend.launch import LaunchAttribute, LaunchConfig, kernel_params


class FakeDeviceArray:
    """What kernel_params reads of a CuPy array: ``data.ptr``."""

    class _Data:
        def __init__(self, ptr):
            self.ptr = ptr

    def __init__(self, ptr):
        self.data = self._Data(ptr)


def _read(params, i, ctype):
    return ctypes.cast(params[i], ctypes.POINTER(ctype)).contents.value


def test_parameters_point_at_values_of_the_kernels_types():
    args = (FakeDeviceArray(0x7F0012340000), np.int32(-7), np.int64(1 << 40), np.float32(0.5), np.float64(-2.25))
    params, keep = kernel_params(args)
    assert len(params) == len(keep) == 5
    assert _read(params, 0, ctypes.c_void_p) == 0x7F0012340000
    assert _read(params, 1, ctypes.c_int32) == -7
    assert _read(params, 2, ctypes.c_int64) == 1 << 40
    assert _read(params, 3, ctypes.c_float) == 0.5
    assert _read(params, 4, ctypes.c_double) == -2.25
    assert [ctypes.sizeof(v) for v in keep] == [8, 4, 8, 4, 8]


@pytest.mark.parametrize("bad", [3, 2.0, np.int16(3), np.complex64(1), np.zeros(3)],
                         ids=["int", "float", "int16", "complex", "host-array"])
def test_arguments_of_no_kernel_type_are_refused(bad):
    """A Python scalar has no fixed C type (CuPy would pick one): refused, as host arrays are."""
    with pytest.raises(TypeError, match="kernel argument"):
        kernel_params((np.int32(1), bad))


def test_launch_structures_match_cuda_h():
    """CUlaunchAttribute is 72 bytes (id, padding, 64-byte value); CUlaunchConfig
    holds the stream pointer at offset 32 and ends with the attribute count."""
    assert ctypes.sizeof(LaunchAttribute) == 72
    assert LaunchAttribute.value.offset == 8
    assert LaunchConfig.stream.offset == 32
    assert LaunchConfig.attrs.offset == 40
    assert LaunchConfig.n_attrs.offset == 48
