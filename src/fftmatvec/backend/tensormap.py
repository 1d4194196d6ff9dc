"""Tensor maps for the copy engine's tensor copies (CUDA, compute capability 9.0).

A kernel that copies boxes of an array into shared memory with
``cp.async.bulk.tensor`` (``tensor_copy_3d`` in native/fftmatvec_common.cuh)
names the array by a 128-byte ``CUtensorMap``: its address, sizes, strides,
box and shared-memory swizzle, encoded by the driver
(``cuTensorMapEncodeTiled``).  The kernel reads the map from global memory.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

_UINT64 = 4  # CU_TENSOR_MAP_DATA_TYPE_UINT64: 8-byte elements copied as they are
_SWIZZLE_128B = 3  # CU_TENSOR_MAP_SWIZZLE_128B: 16-byte piece p of row r lands at piece p ^ (r % 8)
#: How far the L2 widens a box's reads from memory (CUtensorMapL2promotion: 0 none, 1, 2, 3: to 64, 128, 256
#: bytes).  None: 256 bytes took the same time (benchmarks/results/h200-gemm-ab-l2-promotion-stop45.jsonl).
L2_PROMOTION = 0


@functools.cache
def _encode():
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    encode.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(u64),
                       ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    encode.restype = ctypes.c_int
    return encode


def rows_map(address: int, shape: tuple[int, int, int], row_pitch: int, box_rows: int) -> np.ndarray:
    """The tensor map of an array of 8-byte elements (complex64) at device ``address``.

    Parameters
    ----------
    address : int
        Device address of element ``[0, 0, 0]``, 16-byte aligned.
    shape : (n0, n1, n2)
        Sizes, slowest first: ``n2`` elements a row (contiguous), ``n1`` rows
        ``n2`` elements apart, ``n0`` blocks of rows ``row_pitch`` rows apart.
    row_pitch : int
        Rows from one block to the next (``>= n1``).
    box_rows : int
        Rows of a box (at most 256); a box is 16 elements (128 bytes) wide,
        laid out in shared memory with the 128-byte swizzle.  Elements
        outside the array are copied as zeros.

    Returns
    -------
    numpy.ndarray
        The 128 bytes of the map (uint8).
    """
    n0, n1, n2 = shape
    if address % 16 or (n2 * 8) % 16:
        raise ValueError("a tensor map needs a 16-byte aligned address and rows of whole 16-byte pieces")
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    raw = np.zeros(128 + 64, np.uint8)  # the map must be 64-byte aligned on the host too
    start = -raw.ctypes.data % 64
    zero_fill = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE; no interleave
    rc = _encode()(raw.ctypes.data + start, _UINT64, 3, address, (u64 * 3)(n2, n1, n0),
                   (u64 * 2)(n2 * 8, row_pitch * n2 * 8), (u32 * 3)(16, box_rows, 1), (u32 * 3)(1, 1, 1), 0,
                   _SWIZZLE_128B, L2_PROMOTION, zero_fill)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed (CUresult {rc})")
    return raw[start:start + 128].copy()
