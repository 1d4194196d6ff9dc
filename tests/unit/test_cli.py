"""The ``fftmatvec`` command line: results, JSON output, exit codes, messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import direct_btt, direct_btt_adjoint, rel_err

from fftmatvec.cli import main
from fftmatvec.io import read_vector, write_matrix, write_vector
from fftmatvec.precision import parse


@pytest.fixture
def small_problem(tmp_path, rng):
    f = rng.standard_normal((4, 7, 6))
    write_matrix(tmp_path / "mat", f)
    m, d = rng.standard_normal((7, 6)), rng.standard_normal((4, 6))
    write_vector(tmp_path / "m.h5", m, "param")
    write_vector(tmp_path / "d.h5", d, "data")
    return tmp_path, f, m, d


def test_matvec_forward_adjoint_normal(small_problem):
    tmp, f, m, d = small_problem
    mat = str(tmp / "mat")
    assert main(["matvec", "--matrix", mat, "--input", str(tmp / "m.h5"), "--output", str(tmp / "y.h5")]) == 0
    y, info = read_vector(tmp / "y.h5", "data")
    assert rel_err(y, direct_btt(f, m)) < 1e-13 and not info.qoi
    assert main(["matvec", "--matrix", mat, "--input", str(tmp / "d.h5"), "--output", str(tmp / "z.h5"), "--adjoint"]) == 0
    assert rel_err(read_vector(tmp / "z.h5", "param")[0], direct_btt_adjoint(f, d)) < 1e-13
    assert main(["matvec", "--matrix", mat, "--input", str(tmp / "m.h5"), "--output", str(tmp / "n.h5"), "--normal", "--precision", "dssdd"]) == 0
    ref = direct_btt_adjoint(f, direct_btt(f, m))
    assert 1e-12 < rel_err(read_vector(tmp / "n.h5", "param")[0], ref) < 1e-5
    # the F^T pass in its own code: all-double forward and single-precision adjoint, not the forward's
    assert main(["matvec", "--matrix", mat, "--input", str(tmp / "m.h5"), "--output", str(tmp / "n2.h5"), "--normal",
                 "--adjoint-precision", "ddsdd"]) == 0
    mixed = read_vector(tmp / "n2.h5", "param")[0]
    assert 1e-12 < rel_err(mixed, ref) < 1e-5
    assert not np.array_equal(mixed, read_vector(tmp / "n.h5", "param")[0])
    assert main(["matvec", "--matrix", mat, "--input", str(tmp / "m.h5"), "--output", str(tmp / "x.h5"),
                 "--adjoint-precision", "ddsdd"]) == 2  # needs --normal


def test_matvec_reference_fixture(reference_dir, tmp_path):
    out = tmp_path / "q.h5"
    rc = main(["matvec", "--matrix", str(reference_dir / "test_mat_qoi"),
               "--input", str(reference_dir / "test_param_vec_SOTI.h5"), "--output", str(out)])
    assert rc == 0
    q, info = read_vector(out, "data")
    assert info.qoi
    assert rel_err(q, read_vector(reference_dir / "test_qoi_vec_SOTI.h5")[0]) < 1e-6


def test_matvec_errors_are_one_line(small_problem, capsys):
    tmp, *_ = small_problem
    mat = str(tmp / "mat")
    # data-space vector given to the forward product
    rc = main(["matvec", "--matrix", mat, "--input", str(tmp / "d.h5"), "--output", str(tmp / "y.h5")])
    err = capsys.readouterr().err
    assert rc == 1 and "d.h5" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp / "y.h5").exists()
    rc = main(["matvec", "--matrix", str(tmp / "nope"), "--input", str(tmp / "m.h5"), "--output", str(tmp / "y.h5")])
    assert rc == 1 and "nope" in capsys.readouterr().err
    rc = main(["matvec", "--matrix", mat, "--input", str(tmp / "m.h5"), "--output", str(tmp / "y.h5"), "--precision", "abc"])
    assert rc == 2 and "precision" in capsys.readouterr().err


def test_info(reference_dir, capsys):
    assert main(["info", str(reference_dir / "test_mat")]) == 0
    out = capsys.readouterr().out
    assert "Nd=15" in out and "Nm=289" in out and "Nt=10" in out and "p2o" in out
    assert "complex64" in out and "verified" in out


def test_bench_json(capsys):
    rc = main(["bench", "--Nm", "13", "--Nd", "3", "--Nt", "9", "--nrhs", "2", "-N", "3", "--check", "--compare-naive", "--json"])
    assert rc == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("time_s", "back_to_back_s", "floor_s", "floor_ratio", "stages", "rel_error", "naive_time_s",
                "dense_time_s"):
        assert key in result
    assert result["into_out_s"] > 0 and result["prepared_s"] > 0
    assert set(result["stages"]) == {"pad", "fft", "sbgemv", "ifft", "unpad"}
    assert result["rel_error"] < 1e-13 and result["reference"] == "dense"
    assert result["warmup_s"] == 0 and result["warmup_products"] == 0  # none by default


def test_bench_warmup_option(capsys):
    assert main(["bench", "--Nm", "5", "--Nd", "2", "--Nt", "4", "-N", "2", "--warmup", "0.05", "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["warmup_s"] == 0.05 and result["warmup_products"] >= 2 and "warm-up" in out
    assert main(["bench", "--Nm", "5", "--Nd", "2", "--Nt", "4", "--warmup", "-1"]) == 2


def test_bench_adjoint_mixed_precision_error_level(capsys):
    assert main(["bench", "--Nm", "11", "--Nd", "4", "--Nt", "7", "--adjoint", "--precision", "ddssd", "-N", "2", "--check", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 1e-12 < result["rel_error"] < 1e-5 and result["adjoint"] and result["precision"] == "ddssd"


@pytest.mark.parametrize("codes, tol", [(("ddddd",), 1e-13), (("dssdd", "ddssd"), 1e-5)])
def test_bench_normal_times_both_passes(codes, tol, capsys):
    """``--normal`` times ``F^T F m`` against its float64 reference, with a
    floor that counts both passes' reads of ``Fhat``, each in its code's
    SBGEMV precision, and a prepared product."""
    nm, nd, nt = 11, 4, 7
    extra = ["--adjoint-precision", codes[1]] if len(codes) > 1 else []
    assert main(["bench", "--Nm", str(nm), "--Nd", str(nd), "--Nt", str(nt), "--nrhs", "2", "--normal",
                 "--precision", codes[0], *extra, "-N", "2", "--check", "--compare-naive", "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert "F^T F m" in out and result["normal"] and not result["adjoint"]
    assert result["precision"] == codes[0] and result["adjoint_precision"] == codes[-1]
    assert result["rel_error"] < tol and result["reference"] == "dense"
    itemsize = sum(16 if parse(code).sbgemv == np.complex128 else 8 for code in (codes[0], codes[-1]))
    assert result["fhat_bytes"] == (nt + 1) * nd * nm * itemsize
    assert result["prepared_s"] > 0 and result["into_out_s"] is None  # F^T F m takes no out=
    assert set(result["stages"]) == {"pad", "fft", "sbgemv", "ifft", "unpad"}
    assert result["naive_time_s"] > 0 and result["dense_time_s"] > 0


def test_bench_normal_usage_errors(capsys):
    sizes = ["bench", "--Nm", "5", "--Nd", "2", "--Nt", "4"]
    assert main([*sizes, "--adjoint-precision", "ddssd"]) == 2  # needs --normal
    assert "--normal" in capsys.readouterr().err
    assert main([*sizes, "--normal", "--adjoint"]) == 2
    assert main([*sizes, "--normal", "--adjoint-precision", "xyz"]) == 2


def test_usage_errors_exit_2(capsys):
    assert main(["bench", "--Nm", "0", "--Nd", "3", "--Nt", "9"]) == 2
    assert main(["bench", "--Nd", "3", "--Nt", "9"]) == 2
    assert main(["nosuchcommand"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_reader_that_left_ends_the_command_quietly(reference_dir):
    """`fftmatvec info ... | head -0`: exit status 1 and nothing on stderr
    (before, "fftmatvec: error: [Errno 32] Broken pipe")."""
    read, write = os.pipe()
    os.close(read)  # the reader left before the first line
    try:
        proc = subprocess.run([sys.executable, "-m", "fftmatvec", "info", str(reference_dir / "test_mat")],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (1, "")


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "fftmatvec", "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("info", "matvec", "bench"):
        assert command in out
