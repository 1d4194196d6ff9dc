"""HDF5 vector and block-row files: checked reads, slab reads, atomic writes.

Every file holds one dataset ``vec``: float64, 1-D, SOTI (block ``j``'s ``Nt``
values contiguous).  The format's attributes sit on the dataset:

* vector, parameter space: ``n_param``, ``param_steps``, ``reindex=1``;
* vector, data space: ``n_obs``, ``obs_steps``, ``reindex=1``, optional
  ``qoi=1`` for QoI vectors;
* matrix block row ``i`` (``f[i, :, :]``): ``n_param=Nm``, ``param_steps=Nt``,
  ``reindex=1`` and, when ``meta_adj`` says so, ``checksum``.

Any other attribute (``dt``, ``nx``, ``noise_cov``, ...) is ignored on read.
Sizes are written as int32, ``reindex`` as int32, ``qoi`` and ``checksum`` as
int64; on read any numeric type holding a whole number is accepted
(the reference files carry ``reindex`` as float64 ``1.0``).

Checksum: :func:`data_checksum` is the CRC-32 (``zlib.crc32``) of the data as
little-endian float64 bytes.  It is verified whenever a whole block row is
read (:func:`read_matrix`, or :func:`read_matrix_slab` over all columns);
reads of part of a row cannot verify it.

Every bad file raises :class:`~fftmatvec.errors.FileFormatError` naming the
file and the mismatch; bad arguments raise :class:`~fftmatvec.errors.ConfigError`.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import h5py
import numpy as np

from fftmatvec.backend.base import all_finite
from fftmatvec.backend.threads import map_slices
from fftmatvec.errors import ConfigError, FileFormatError
from fftmatvec.io.meta import (MatrixMeta, atomic_path, binary_dir, block_path,
                               read_meta, write_meta)

Space = Literal["param", "data"]
#: (count attribute, steps attribute) of each vector space.
SPACE_ATTRS: dict[str, tuple[str, str]] = {"param": ("n_param", "param_steps"),
                                           "data": ("n_obs", "obs_steps")}


@dataclass(frozen=True)
class VectorInfo:
    """What a vector file declares: ``space`` ("param" or "data"), ``n`` blocks
    of ``Nt`` steps (the whole file, also after a partial read), ``qoi`` flag."""

    space: Space
    n: int
    Nt: int
    qoi: bool


def data_checksum(data: np.ndarray) -> int:
    """CRC-32 of ``data`` as contiguous little-endian float64 bytes, in ``[0, 2**32)``.
    The bytes are read in place (a copy of a 1 GB row made it 2.7 times slower)."""
    return zlib.crc32(memoryview(np.ascontiguousarray(data, dtype="<f8")).cast("B"))


# ---------------------------------------------------------------- reading


def read_vector(path: str | os.PathLike, space: Space | None = None, *,
                blocks: tuple[int, int] | None = None, qoi: bool | None = None,
                expect_n: int | None = None, expect_nt: int | None = None,
                ) -> tuple[np.ndarray, VectorInfo]:
    """Read and check a vector file.

    Parameters
    ----------
    path : path of the HDF5 file.
    space : "param", "data" or None (accept either).
    blocks : (start, count) of the blocks to read, as one hyperslab; None = all.
    qoi : if not None, the file's ``qoi`` flag must equal it.
    expect_n, expect_nt : if not None, the file's block count / steps must equal
        them (e.g. the operator's ``Nm`` and ``Nt``).

    Returns
    -------
    x : (count, Nt) float64, SOTI — the requested blocks (all ``n`` by default).
    info : VectorInfo of the whole file.

    Raises
    ------
    FileFormatError
        Missing or unreadable file, no float 1-D ``vec``, missing, doubled or
        non-integer size attributes, length not ``n*Nt``, ``reindex`` not 1,
        ``qoi`` on a parameter vector, any expectation not met, NaN/Inf.
    ConfigError
        Unknown ``space`` or ``blocks`` outside ``[0, n)``.
    """
    if space not in (None, *SPACE_ATTRS):
        raise ConfigError(f"space {space!r} is not one of {tuple(SPACE_ATTRS)}")
    with _open_vec(path) as vec:
        attrs = vec.attrs
        found = [s for s, names in SPACE_ATTRS.items() if any(a in attrs for a in names)]
        if len(found) != 1:
            raise FileFormatError(
                f"{path}: {'both' if found else 'neither'} n_param/param_steps "
                f"{'and' if found else 'nor'} n_obs/obs_steps attributes")
        n_name, nt_name = SPACE_ATTRS[found[0]]
        info = VectorInfo(found[0], _size_attr(path, attrs, n_name),
                          _size_attr(path, attrs, nt_name),
                          qoi=bool(_int_attr(path, attrs, "qoi")))
        _check_length(path, vec, info.n, info.Nt, f"{n_name}*{nt_name}")
        _check_attr(path, attrs, "reindex", 1, "reindex must be 1 (SOTI ordering)")
        if info.qoi and info.space == "param":
            raise FileFormatError(f"{path}: qoi=1 on a parameter-space vector")
        for name, want, have in ((n_name, expect_n, info.n), (nt_name, expect_nt, info.Nt)):
            if want is not None and have != want:
                raise FileFormatError(f"{path}: {name}={have} but expected {want}")
        if space is not None and info.space != space:
            raise FileFormatError(f"{path}: a {info.space}-space vector "
                                  f"({n_name}/{nt_name}) but a {space}-space one was expected")
        if qoi is not None and info.qoi != qoi:
            raise FileFormatError(f"{path}: qoi={int(info.qoi)} but expected qoi={int(qoi)}")
        b0, nb = (0, info.n) if blocks is None else _span(blocks, info.n, "blocks")
        data = vec[b0 * info.Nt:(b0 + nb) * info.Nt]
    _check_finite(path, data, b0 * info.Nt, info.Nt)
    return data.astype(np.float64, copy=False).reshape(nb, info.Nt), info


def read_attrs(path: str | os.PathLike) -> dict[str, Any]:
    """All attributes of the dataset ``vec`` of a vector or block-row file,
    the format's own and the extras (``dt``, ``param_shape``, ...)."""
    with _open_vec(path) as vec:
        return {name: vec.attrs[name] for name in vec.attrs}


def read_matrix(matrix_dir: str | os.PathLike) -> tuple[np.ndarray, MatrixMeta]:
    """Read a whole matrix (``DIR`` or ``DIR/binary``), checksums verified.

    Returns
    -------
    f : (Nd, Nm, Nt) float64, SOTI — ``f[i, j, t]``.
    meta : MatrixMeta from ``meta_adj``.
    """
    meta = read_meta(matrix_dir)
    return read_matrix_slab(matrix_dir, (0, meta.Nd), (0, meta.Nm), meta), meta


def read_matrix_slab(matrix_dir: str | os.PathLike, rows: slice | tuple[int, int],
                     cols: slice | tuple[int, int], meta: MatrixMeta | None = None,
                     ) -> np.ndarray:
    """Read ``f[I, J, :]``, opening only the files of block rows ``I``.

    Parameters
    ----------
    matrix_dir : ``DIR`` or ``DIR/binary``.
    rows, cols : block rows ``I`` / columns ``J`` as ``(start, count)`` (count
        0 allowed) or a slice with step 1.
    meta : the parsed ``meta_adj``; read from ``matrix_dir`` when None.

    Returns
    -------
    f : (count_I, count_J, Nt) float64, SOTI — from each file only the
        hyperslab ``vec[j0*Nt:(j0+count_J)*Nt]`` is read.  Checksums are
        verified when ``J`` is all ``Nm`` columns.
    """
    meta = read_meta(matrix_dir) if meta is None else meta
    i0, ni = _span(rows, meta.Nd, "rows")
    j0, nj = _span(cols, meta.Nm, "cols")
    Nt = meta.Nt
    f = np.empty((ni, nj, Nt))
    paths = [block_path(matrix_dir, meta, i0 + k) for k in range(ni)]
    checksums: dict[int, int | None] = {}  # block row -> its file's attribute, when whole rows are checked
    for k, (path, row) in enumerate(zip(paths, f)):
        with _open_vec(path) as vec:
            _check_attr(path, vec.attrs, "n_param", meta.Nm, f"meta_adj has Nm={meta.Nm}")
            _check_attr(path, vec.attrs, "param_steps", Nt, f"meta_adj has Nt={Nt}")
            _check_attr(path, vec.attrs, "reindex", 1, "reindex must be 1 (SOTI ordering)")
            _check_length(path, vec, meta.Nm, Nt, "Nm*Nt")
            if nj:
                vec.read_direct(row.reshape(-1), np.s_[j0 * Nt:(j0 + nj) * Nt])
            if meta.checksum and nj == meta.Nm:
                checksums[k] = _int_attr(path, vec.attrs, "checksum")

    def check(rows: slice) -> None:  # the rows' values: one thread each, as zlib and NumPy release the GIL
        for k in range(rows.start, rows.stop):
            if k in checksums:
                crc = data_checksum(f[k])
                _check_value(paths[k], "checksum", checksums[k], crc, f"the data's CRC-32 is {crc}")
            _check_finite(paths[k], f[k], j0 * Nt, Nt)

    map_slices(check, ni)
    return f


# ---------------------------------------------------------------- writing


def write_vector(path: str | os.PathLike, x: np.ndarray, space: Space, *,
                 qoi: bool = False, attrs: Mapping[str, Any] | None = None) -> None:
    """Write ``x`` (n, Nt) float64, SOTI, as a vector file, atomically.

    ``attrs`` are extra dataset attributes (``dt``, ...); the format's own
    (sizes, ``reindex``, ``qoi``) are always set by this function.
    """
    if space not in SPACE_ATTRS:
        raise ConfigError(f"space {space!r} is not one of {tuple(SPACE_ATTRS)}")
    if qoi and space != "data":
        raise ConfigError("qoi=True needs space='data'")
    x = _checked_array(path, x, 2, "(n, Nt)")
    n_name, nt_name = SPACE_ATTRS[space]
    own = {n_name: np.int32(x.shape[0]), nt_name: np.int32(x.shape[1]), "reindex": np.int32(1)}
    if qoi:
        own["qoi"] = np.int64(1)
    _write_vec(path, x, {**(attrs or {}), **own})


def write_matrix(matrix_dir: str | os.PathLike, f: np.ndarray, *, is_p2q: bool = False,
                 prefix: str = "adj/vec_", checksum: bool = True,
                 attrs: Mapping[str, Any] | None = None) -> MatrixMeta:
    """Write ``f`` (Nd, Nm, Nt) float64, SOTI, as a matrix directory.

    Any old ``meta_adj`` is removed first, each block-row file is written
    atomically and ``meta_adj`` last, so an interrupted write never leaves a
    matrix that reads as valid.  ``attrs`` are extra attributes for every
    block row (``dt``, ``nx``, ...); the format's own are set by this function.
    With ``checksum`` each file carries :func:`data_checksum` of its row and
    ``meta_adj``'s checksum line is 1.

    Returns
    -------
    meta : the MatrixMeta written.
    """
    meta_path = binary_dir(matrix_dir) / "meta_adj"
    f = _checked_array(meta_path.parent, f, 3, "(Nd, Nm, Nt)")
    meta = MatrixMeta(*f.shape, prefix=prefix, is_p2q=is_p2q, checksum=int(checksum))
    meta_path.unlink(missing_ok=True)
    own = {"n_param": np.int32(meta.Nm), "param_steps": np.int32(meta.Nt),
           "reindex": np.int32(1)}
    for i, row in enumerate(f):
        if checksum:
            own["checksum"] = np.int64(data_checksum(row))
        _write_vec(block_path(matrix_dir, meta, i), row, {**(attrs or {}), **own})
    write_meta(matrix_dir, meta)
    return meta


# ---------------------------------------------------------------- helpers


@contextlib.contextmanager
def _open_vec(path: os.PathLike) -> Iterator[h5py.Dataset]:
    """Open ``path`` read-only and yield its dataset ``vec``, 1-D floating point."""
    try:
        h5 = h5py.File(path, "r")
    except FileNotFoundError:
        raise FileFormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise FileFormatError(f"{path}: not a readable HDF5 file ({exc})") from None
    with h5:
        vec = h5.get("vec")
        if not isinstance(vec, h5py.Dataset):
            raise FileFormatError(f"{path}: no dataset 'vec'")
        if vec.dtype.kind != "f" or vec.ndim != 1:
            raise FileFormatError(f"{path}: dataset 'vec' is {vec.dtype} of shape "
                                  f"{vec.shape}, expected 1-D floating point")
        yield vec


def _int_attr(path: os.PathLike, attrs: h5py.AttributeManager, name: str) -> int | None:
    """Attribute ``name`` as an int (any numeric type holding a whole number), or None."""
    if name not in attrs:
        return None
    value = np.asarray(attrs[name])
    if value.size != 1 or value.dtype.kind not in "iuf" or not float(value.item()).is_integer():
        raise FileFormatError(f"{path}: attribute {name}={value!r} is not a whole number")
    return int(value.item())


def _size_attr(path: os.PathLike, attrs: h5py.AttributeManager, name: str) -> int:
    """A required positive size attribute."""
    value = _int_attr(path, attrs, name)
    if value is None:
        raise FileFormatError(f"{path}: no attribute {name!r}")
    if value < 1:
        raise FileFormatError(f"{path}: {name}={value}, expected a positive size")
    return value


def _check_attr(path: os.PathLike, attrs: h5py.AttributeManager, name: str, expected: int,
                why: str) -> None:
    """Require attribute ``name == expected``; ``why`` ends the error message."""
    _check_value(path, name, _int_attr(path, attrs, name), expected, why)


def _check_value(path: os.PathLike, name: str, found: int | None, expected: int, why: str) -> None:
    """:func:`_check_attr` of a value read before (None: no attribute)."""
    if found != expected:
        have = f"no attribute {name!r}" if found is None else f"{name}={found}"
        raise FileFormatError(f"{path}: {have} but {why}")


def _check_length(path: os.PathLike, vec: h5py.Dataset, n: int, nt: int, what: str) -> None:
    if vec.shape[0] != n * nt:
        raise FileFormatError(f"{path}: 'vec' has {vec.shape[0]} values but "
                              f"{what} = {n}*{nt} = {n * nt}")


def _first_nonfinite(data: np.ndarray) -> int | None:
    """Flat index of the first NaN/Inf of ``data``, None when there is none
    (one sum without temporaries answers the usual case)."""
    if all_finite(np, data):
        return None
    bad = np.flatnonzero(~np.isfinite(data))
    return int(bad[0]) if bad.size else None


def _check_finite(path: os.PathLike, data: np.ndarray, offset: int, nt: int) -> None:
    """Raise on the first NaN/Inf of ``data``, read from ``vec[offset:]``."""
    k = _first_nonfinite(data)
    if k is not None:
        k += offset
        raise FileFormatError(f"{path}: non-finite value at vec[{k}] "
                              f"(block {k // nt}, step {k % nt})")


def _checked_array(path: os.PathLike, a: np.ndarray, ndim: int, shape: str) -> np.ndarray:
    """``a`` as float64 with ``ndim`` non-empty axes and finite values, for writing."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != ndim or 0 in a.shape:
        raise ConfigError(f"writing {path}: expected a non-empty {shape} array, "
                          f"got shape {a.shape}")
    k = _first_nonfinite(a)
    if k is not None:
        raise ConfigError(f"writing {path}: non-finite value at index "
                          f"{np.unravel_index(k, a.shape)}")
    return a


def _span(sel: slice | tuple[int, int], n: int, what: str) -> tuple[int, int]:
    """``(start, count)`` of a slice (step 1) or a ``(start, count)`` pair within ``[0, n)``."""
    if isinstance(sel, slice):
        start, stop, step = sel.indices(n)
        if step != 1:
            raise ConfigError(f"{what}: slice step must be 1, got {step}")
        return start, max(stop - start, 0)
    start, count = map(int, sel)
    if start < 0 or count < 0 or start + count > n:
        raise ConfigError(f"{what} (start={start}, count={count}) outside 0..{n}")
    return start, count


def _write_vec(path: os.PathLike, data: np.ndarray, attrs: Mapping[str, Any]) -> None:
    """Atomically write ``data`` flattened as dataset ``vec`` with ``attrs``."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as h5:
        vec = h5.create_dataset("vec", data=data.reshape(-1))
        vec.attrs.update(attrs)
