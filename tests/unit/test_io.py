"""Tests of fftmatvec.io: meta_adj, matrix and vector files, slabs, checksums, atomic writes.

Expectations are built independently of the readers: raw h5py reads, zlib CRCs
computed here, and a direct causal convolution for the C++ reference fixture.
"""

import os
import re
import zlib

import h5py
import numpy as np
import pytest

from fftmatvec.errors import ConfigError, FileFormatError
from fftmatvec.io import (MatrixMeta, VectorInfo, atomic_path, binary_dir, block_path, data_checksum,
                          read_matrix, read_matrix_slab, read_meta, read_vector, write_matrix,
                          write_meta, write_vector)

META_8 = "15\n289\n10\nadj/vec_\n.h5\n1\n0\n1\n"


@pytest.fixture
def matrix(tmp_path, rng):
    """A written 4 x 5 x 3 matrix with checksums: (dir, f)."""
    f = rng.standard_normal((4, 5, 3))
    write_matrix(tmp_path / "m", f)
    return tmp_path / "m", f


def raw_vec(path):
    with h5py.File(path, "r") as h5:
        return h5["vec"][...], dict(h5["vec"].attrs)


def set_vec(path, data=None, **attrs):
    """Rewrite dataset vec (if data given) and/or its attributes (None deletes one)."""
    with h5py.File(path, "r+") as h5:
        if data is not None:
            old = dict(h5["vec"].attrs)
            del h5["vec"]
            h5.create_dataset("vec", data=data).attrs.update(old)
        for name, value in attrs.items():
            if value is None:
                del h5["vec"].attrs[name]
            else:
                h5["vec"].attrs[name] = value


def causal_conv(f, m):
    """y[i, t] = sum_j sum_{s<=t} f[i, j, t-s] m[j, s], by loops over t and s."""
    y = np.zeros((f.shape[0], f.shape[2]))
    for t in range(f.shape[2]):
        for s in range(t + 1):
            y[:, t] += f[:, :, t - s] @ m[:, s]
    return y


# ---------------------------------------------------------------- meta_adj


def test_meta_round_trip_and_both_dir_forms(tmp_path):
    meta = MatrixMeta(3, 7, 5, prefix="sub/blk_", is_p2q=True, checksum=1)
    write_meta(tmp_path / "m", meta)
    assert (tmp_path / "m" / "binary" / "meta_adj").read_text().splitlines() == \
        ["3", "7", "5", "sub/blk_", ".h5", "1", "1", "1", "1"]
    assert read_meta(tmp_path / "m") == meta
    assert read_meta(tmp_path / "m" / "binary") == meta
    assert binary_dir(tmp_path / "m") == binary_dir(tmp_path / "m" / "binary")
    assert block_path(tmp_path / "m", meta, 2) == tmp_path / "m/binary/sub/blk_000002.h5"
    assert list((tmp_path / "m" / "binary").iterdir()) == [tmp_path / "m/binary/meta_adj"]


def test_meta_eight_lines_means_no_checksum(tmp_path):
    (tmp_path / "binary").mkdir()
    (tmp_path / "binary" / "meta_adj").write_text(META_8)
    assert read_meta(tmp_path) == MatrixMeta(15, 289, 10, "adj/vec_", ".h5", False, 0)


@pytest.mark.parametrize("text, needle", [
    (None, "cannot read"),
    (META_8.replace("289", "2x9"), "line 2 (Nm)"),
    ("15\n289\n10\nadj/vec_\n.h5\n1\n0\n", "7 lines"),
    (META_8 + "0\n7\n", "10 lines"),
    (META_8.replace(".h5\n1\n", ".h5\n0\n"), "reindexed=0"),
    (META_8.replace("0\n1\n", "0\n2\n"), "reverse_dof=2"),
    (META_8.replace("1\n0\n1\n", "1\n3\n1\n"), "is_p2q=3"),
    (META_8.replace("289", "0"), "Nm=0"),
    (META_8.replace(".h5", ".bin"), "'.bin'"),
    (META_8.replace("adj/vec_", "/abs/vec_"), "prefix"),
    (META_8 + "-1\n", "checksum=-1"),
], ids=["missing", "not-int", "7-lines", "10-lines", "reindexed", "reverse_dof", "is_p2q",
        "Nm", "extension", "prefix", "checksum"])
def test_bad_meta(tmp_path, text, needle):
    (tmp_path / "binary").mkdir()
    if text is not None:
        (tmp_path / "binary" / "meta_adj").write_text(text)
    with pytest.raises(FileFormatError, match=re.escape(needle)) as err:
        read_meta(tmp_path)
    assert str(tmp_path / "binary" / "meta_adj") in str(err.value)


# ---------------------------------------------------------------- matrices


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 7, 5), (5, 2, 9)])
@pytest.mark.parametrize("prefix", ["adj/vec_", "blk_"])
@pytest.mark.parametrize("checksum", [True, False])
def test_matrix_round_trip(tmp_path, rng, shape, prefix, checksum):
    f = rng.standard_normal(shape)
    f_in = f.copy()
    meta = write_matrix(tmp_path, f, prefix=prefix, checksum=checksum, is_p2q=True)
    assert meta == MatrixMeta(*shape, prefix=prefix, is_p2q=True, checksum=int(checksum))
    assert np.array_equal(f, f_in)
    for i in range(shape[0]):            # the files, read raw: SOTI, the C++ attribute types
        data, attrs = raw_vec(tmp_path / "binary" / f"{prefix}{i:06d}.h5")
        assert np.array_equal(data, f[i].reshape(-1))
        assert attrs["n_param"] == shape[1] and attrs["n_param"].dtype == np.int32
        assert attrs["param_steps"] == shape[2] and attrs["reindex"].dtype == np.int32
        assert ("checksum" in attrs) == checksum
        if checksum:
            assert attrs["checksum"] == zlib.crc32(f[i].astype("<f8").tobytes())
    g, meta_read = read_matrix(tmp_path)
    assert meta_read == meta and g.dtype == np.float64
    assert np.array_equal(g, f)
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]


def test_slab_reads_match_full_array(matrix, rng):
    mdir, f = matrix
    Nd, Nm, _ = f.shape
    for _ in range(40):
        i0, j0 = rng.integers(0, Nd + 1), rng.integers(0, Nm + 1)
        ni, nj = rng.integers(0, Nd - i0 + 1), rng.integers(0, Nm - j0 + 1)
        slab = read_matrix_slab(mdir, (i0, ni), (j0, nj))
        assert slab.shape == (ni, nj, f.shape[2])
        assert np.array_equal(slab, f[i0:i0 + ni, j0:j0 + nj])
    assert np.array_equal(read_matrix_slab(mdir, slice(1, 3), slice(2, None)), f[1:3, 2:])
    assert read_matrix_slab(mdir, (2, 0), (0, 5)).shape == (0, 5, 3)
    with pytest.raises(ConfigError):
        read_matrix_slab(mdir, (3, 2), (0, 1))
    with pytest.raises(ConfigError):
        read_matrix_slab(mdir, slice(0, 4, 2), (0, 1))


def test_slab_reads_only_its_files_and_hyperslabs(matrix, monkeypatch):
    mdir, f = matrix
    meta = read_meta(mdir)
    for i in (0, 3):
        block_path(mdir, meta, i).unlink()
    reads = []
    read_direct = h5py.Dataset.read_direct

    def spy(self, dest, source_sel=None, dest_sel=None):
        reads.append((dest.size, source_sel))
        return read_direct(self, dest, source_sel, dest_sel)

    monkeypatch.setattr(h5py.Dataset, "read_direct", spy)
    monkeypatch.setattr(h5py.Dataset, "__getitem__", None)  # nothing else reads values
    assert np.array_equal(read_matrix_slab(mdir, (1, 2), (1, 3), meta), f[1:3, 1:4])
    nt = f.shape[2]
    assert reads == [(3 * nt, np.s_[nt:4 * nt])] * 2


def test_partial_column_slab_skips_checksum_full_row_verifies(matrix):
    mdir, f = matrix
    path = mdir / "binary" / "adj" / "vec_000001.h5"
    set_vec(path, checksum=np.int64(12345))
    assert np.array_equal(read_matrix_slab(mdir, (1, 1), (0, 4)), f[1:2, :4])
    with pytest.raises(FileFormatError, match="checksum=12345"):
        read_matrix_slab(mdir, (1, 1), (0, 5))


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_the_first_bad_block_row_is_named_whichever_thread_checks_it(matrix, monkeypatch, n_threads):
    from fftmatvec.backend import threads

    monkeypatch.setattr(threads, "cores_per_rank", lambda: n_threads)
    mdir, f = matrix
    bad = f[3].ravel().copy()
    bad[5] = np.inf  # block 1, step 2
    set_vec(mdir / "binary" / "adj" / "vec_000003.h5", data=bad)  # its checksum no longer matches either
    set_vec(mdir / "binary" / "adj" / "vec_000002.h5", checksum=np.int64(7))
    with pytest.raises(FileFormatError, match=r"vec_000002.h5: checksum=7 but the data's CRC-32 is"):
        read_matrix_slab(mdir, (0, 4), (0, 5))
    with pytest.raises(FileFormatError, match=r"vec_000003.h5: checksum=\d+ but the data's CRC-32 is"):
        read_matrix_slab(mdir, (3, 1), (0, 5))
    with pytest.raises(FileFormatError, match=r"vec_000003.h5: non-finite value at vec\[5\] \(block 1, step 2\)"):
        read_matrix_slab(mdir, (2, 2), (1, 4))  # no checksums of partial rows: the NaN check names it


def test_extra_attributes_written_and_ignored(tmp_path, rng):
    f = rng.standard_normal((2, 3, 4))
    extras = {"dt": 0.01, "nx": np.int32(16), "xmin": 0.0, "reindex": np.int32(0)}
    write_matrix(tmp_path, f, attrs=extras)
    _, attrs = raw_vec(tmp_path / "binary/adj/vec_000001.h5")
    assert attrs["dt"] == 0.01 and attrs["nx"] == 16 and attrs["reindex"] == 1
    set_vec(tmp_path / "binary/adj/vec_000001.h5", reindex=1.0, comment="anything")
    assert np.array_equal(read_matrix(tmp_path)[0], f)


def test_rewrite_removes_old_meta_before_blocks(tmp_path, rng):
    write_matrix(tmp_path, rng.standard_normal((3, 2, 2)))
    (tmp_path / "binary/adj/vec_000002.h5").unlink()
    (tmp_path / "binary/adj/vec_000002.h5").mkdir()      # os.replace onto it fails
    with pytest.raises(OSError):
        write_matrix(tmp_path, rng.standard_normal((3, 2, 2)))
    with pytest.raises(FileFormatError, match="meta_adj"):
        read_matrix(tmp_path)


@pytest.mark.parametrize("bad", [np.zeros((2, 3)), np.zeros((0, 2, 2)),
                                 np.array([[[1.0, np.nan]]])], ids=["2-d", "empty", "nan"])
def test_write_matrix_rejects_bad_arrays(tmp_path, bad):
    with pytest.raises(ConfigError):
        write_matrix(tmp_path, bad)
    assert not (tmp_path / "binary" / "meta_adj").exists()


def corrupt_value(path):
    data, _ = raw_vec(path)
    data[4] += 1e-12
    set_vec(path, data)


@pytest.mark.parametrize("corrupt, needle", [
    (lambda p: p.unlink(), "no such file"),
    (lambda p: p.write_bytes(b"not hdf5"), "not a readable HDF5"),
    (lambda p: set_vec(p, n_param=np.int32(6)), "n_param=6 but meta_adj has Nm=5"),
    (lambda p: set_vec(p, param_steps=None), "no attribute 'param_steps'"),
    (lambda p: set_vec(p, reindex=np.int32(0)), "reindex=0"),
    (lambda p: set_vec(p, reindex=0.5), "not a whole number"),
    (lambda p: set_vec(p, np.zeros(14)), "14 values but Nm\\*Nt = 5\\*3 = 15"),
    (lambda p: set_vec(p, np.zeros(15, dtype=np.int64)), "int64"),
    (lambda p: set_vec(p, checksum=None), "no attribute 'checksum'"),
    (corrupt_value, "checksum=\\d+ but the data's CRC-32 is \\d+"),
], ids=["missing", "not-hdf5", "n_param", "no-param_steps", "reindex-0", "reindex-0.5",
        "length", "int-dtype", "no-checksum", "checksum-mismatch"])
def test_bad_block_row_file(matrix, corrupt, needle):
    mdir, _ = matrix
    path = mdir / "binary" / "adj" / "vec_000002.h5"
    corrupt(path)
    with pytest.raises(FileFormatError, match=needle) as err:
        read_matrix(mdir)
    assert str(path) in str(err.value)


def test_non_finite_block_value_names_index(tmp_path, rng):
    f = rng.standard_normal((2, 5, 3))
    write_matrix(tmp_path, f, checksum=False)
    path = tmp_path / "binary/adj/vec_000001.h5"
    set_vec(path, np.r_[f[1].ravel()[:7], np.nan, f[1].ravel()[8:]])
    with pytest.raises(FileFormatError, match=r"vec_000001.h5: non-finite value at vec\[7\] "
                       r"\(block 2, step 1\)"):
        read_matrix_slab(tmp_path, (1, 1), (1, 3))
    assert np.array_equal(read_matrix_slab(tmp_path, (1, 1), (3, 2)), f[1:2, 3:])


def test_checksum_reads_the_little_endian_bytes_of_any_layout(rng):
    """``data_checksum`` reads the bytes in place; it still sums the
    little-endian float64 values for big-endian, strided or float32 input."""
    a = rng.standard_normal((4, 6))
    want = zlib.crc32(a.astype("<f8").tobytes())
    wide = np.zeros((4, 12))
    wide[:, ::2] = a
    for same in (a, a.astype(">f8"), wide[:, ::2], np.asfortranarray(a).T.T):
        assert data_checksum(same) == want
    assert data_checksum(a.astype(np.float32)) == zlib.crc32(a.astype(np.float32).astype("<f8").tobytes())


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, "large"])
def test_a_block_value_found_only_where_it_is_bad(tmp_path, rng, bad):
    """Values whose sum overflows are finite (the one-sum check falls back to
    the element-wise one); NaN and both infinities are found where they are."""
    row = rng.standard_normal(15)
    if bad == "large":
        row[:] = np.finfo(np.float64).max / 2
    else:
        row[11] = bad
    write_matrix(tmp_path, np.ones((1, 5, 3)), checksum=False)
    set_vec(tmp_path / "binary/adj/vec_000000.h5", row)
    if bad == "large":
        assert np.array_equal(read_matrix_slab(tmp_path, (0, 1), (0, 5)).ravel(), row)
    else:
        with pytest.raises(FileFormatError, match=r"non-finite value at vec\[11\] \(block 3, step 2\)"):
            read_matrix_slab(tmp_path, (0, 1), (0, 5))


# ---------------------------------------------------------------- vectors


@pytest.mark.parametrize("space, qoi, names", [
    ("param", False, ("n_param", "param_steps")),
    ("data", False, ("n_obs", "obs_steps")),
    ("data", True, ("n_obs", "obs_steps")),
])
def test_vector_round_trip(tmp_path, rng, space, qoi, names):
    x = rng.standard_normal((7, 4))
    path = tmp_path / "out" / "x.h5"
    write_vector(path, x, space, qoi=qoi, attrs={"dt": 0.5})
    data, attrs = raw_vec(path)
    assert np.array_equal(data, x.ravel())
    assert (attrs[names[0]], attrs[names[1]], attrs["reindex"], attrs["dt"]) == (7, 4, 1, 0.5)
    assert attrs[names[0]].dtype == np.int32 and attrs["reindex"].dtype == np.int32
    assert ("qoi" in attrs) == qoi and (not qoi or attrs["qoi"].dtype == np.int64)
    y, info = read_vector(path, space, qoi=qoi, expect_n=7, expect_nt=4)
    assert info == VectorInfo(space, 7, 4, qoi)
    assert np.array_equal(y, x)
    y, info = read_vector(path, blocks=(2, 3))
    assert np.array_equal(y, x[2:5]) and info.n == 7
    assert read_vector(path, blocks=(7, 0))[0].shape == (0, 4)
    assert os.listdir(path.parent) == ["x.h5"]


@pytest.mark.parametrize("kwargs, needle", [
    ({"space": "data"}, "a param-space vector \\(n_param/param_steps\\) but a data-space"),
    ({"expect_n": 300}, "n_param=6 but expected 300"),
    ({"expect_nt": 11}, "param_steps=4 but expected 11"),
    ({"qoi": True}, "qoi=0 but expected qoi=1"),
], ids=["space", "n", "nt", "qoi"])
def test_vector_expectations(tmp_path, kwargs, needle):
    path = tmp_path / "m.h5"
    write_vector(path, np.ones((6, 4)), "param")
    with pytest.raises(FileFormatError, match=needle) as err:
        read_vector(path, **kwargs)
    assert str(path) in str(err.value)


def make_vector(path, data=np.arange(6.0), **attrs):
    with h5py.File(path, "w") as h5:
        h5.create_dataset("vec", data=data).attrs.update(attrs)


GOOD = {"n_obs": np.int32(2), "obs_steps": np.int32(3), "reindex": 1.0}


@pytest.mark.parametrize("make, needle", [
    (lambda p: None, "no such file"),
    (lambda p: h5py.File(p, "w").close(), "no dataset 'vec'"),
    (lambda p: make_vector(p, np.arange(6), **GOOD), "int64"),
    (lambda p: make_vector(p, np.zeros((2, 3)), **GOOD), "shape \\(2, 3\\)"),
    (lambda p: make_vector(p, np.arange(5.0), **GOOD), "5 values but n_obs\\*obs_steps"),
    (lambda p: make_vector(p, **GOOD, n_param=2), "both"),
    (lambda p: make_vector(p, reindex=1), "neither"),
    (lambda p: make_vector(p, n_obs=2, reindex=1), "no attribute 'obs_steps'"),
    (lambda p: make_vector(p, **{**GOOD, "n_obs": 0}), "n_obs=0"),
    (lambda p: make_vector(p, **{**GOOD, "reindex": np.int32(0)}), "reindex=0 but"),
    (lambda p: make_vector(p, n_obs=2, obs_steps=3), "no attribute 'reindex'"),
    (lambda p: make_vector(p, n_param=2, param_steps=3, reindex=1, qoi=1), "qoi=1 on a param"),
    (lambda p: make_vector(p, np.r_[0.0, 1, 2, 3, np.nan, 5], **GOOD),
     "non-finite value at vec\\[4\\] \\(block 1, step 1\\)"),
], ids=["missing", "no-vec", "int-dtype", "2-d", "length", "both-spaces", "no-space",
        "no-steps", "zero-size", "reindex-0", "no-reindex", "qoi-param", "nan"])
def test_bad_vector_file(tmp_path, make, needle):
    path = tmp_path / "x.h5"
    make(path)
    with pytest.raises(FileFormatError, match=needle) as err:
        read_vector(path)
    assert str(path) in str(err.value)


def test_vector_extra_attributes_ignored(tmp_path):
    make_vector(tmp_path / "x.h5", **GOOD, noise_cov=1.0, rel_noise=0.0, label="text")
    x, info = read_vector(tmp_path / "x.h5", "data")
    assert info == VectorInfo("data", 2, 3, False)
    assert np.array_equal(x, [[0, 1, 2], [3, 4, 5]])


@pytest.mark.parametrize("args", [(np.ones(4), "param"), (np.ones((2, 2)), "obs"),
                                  (np.ones((2, 2)), "param", True),
                                  (np.array([[1.0, np.inf]]), "data")],
                         ids=["1-d", "bad-space", "qoi-param", "inf"])
def test_write_vector_rejects_bad_arguments(tmp_path, args):
    with pytest.raises(ConfigError):
        write_vector(tmp_path / "x.h5", *args[:2], qoi=args[2] if len(args) > 2 else False)
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------- atomic writes


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "x.h5"
    write_vector(path, np.ones((2, 3)), "param")
    before = path.read_bytes()
    with pytest.raises(TypeError):       # h5py cannot store an object attribute: fails mid-write
        write_vector(path, np.zeros((2, 3)), "param", attrs={"bad": object()})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["x.h5"]


def test_atomic_path_replaces_only_on_success(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            assert tmp.parent == tmp_path and tmp.name != path.name
            raise RuntimeError
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]
    with atomic_path(path) as tmp:
        tmp.write_text("new")
        assert path.read_text() == "old"
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["a.txt"]


# ---------------------------------------------------------------- C++ reference


@pytest.mark.parametrize("name, is_p2q, vector", [("test_mat", False, "test_obs_vec_SOTI.h5"),
                                                  ("test_mat_qoi", True, "test_qoi_vec_SOTI.h5")])
def test_reference_fixture(reference_dir, name, is_p2q, vector):
    f, meta = read_matrix(reference_dir / name)
    assert meta == MatrixMeta(15, 289, 10, "adj/vec_", ".h5", is_p2q, 0)
    first, _ = raw_vec(reference_dir / name / "binary/adj/vec_000000.h5")
    assert np.array_equal(f[0, 0], first[:10]) and np.array_equal(f[0, 288], first[-10:])
    m, m_info = read_vector(reference_dir / "test_param_vec_SOTI.h5", "param",
                            qoi=False, expect_n=meta.Nm, expect_nt=meta.Nt)
    y, y_info = read_vector(reference_dir / vector, "data", qoi=is_p2q,
                            expect_n=meta.Nd, expect_nt=meta.Nt)
    assert (m_info, y_info) == (VectorInfo("param", 289, 10, False),
                                VectorInfo("data", 15, 10, is_p2q))
    y_ref = causal_conv(f, m)
    assert np.linalg.norm(y_ref - y) / np.linalg.norm(y) < 1e-6
    assert np.array_equal(read_matrix_slab(reference_dir / name / "binary", (4, 3), (100, 50)),
                          f[4:7, 100:150])
