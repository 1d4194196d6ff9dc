"""Precision codes, the error model, the measured Pareto front and ``precision="auto"``."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from fftmatvec import BTTOperator, ConfigError
from fftmatvec.btt import LocalBTT
from fftmatvec.precision import (ALL_CODES, CONSTANTS, DEFAULT, STAGES, error_bound, error_terms, model_sizes, parse,
                                 validate_tolerance)
from fftmatvec.conditioning import gaussian_rows
from fftmatvec.tuning import TIE, Measurement, Tuning, conditioning, measure, pareto_front, synthetic_matrix

EPS_S = float(np.finfo(np.float32).eps) / 2
EPS_D = float(np.finfo(np.float64).eps) / 2


def rel_err(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


# -- the codes are unchanged -------------------------------------------------------
def test_codes_unchanged():
    assert STAGES == ("pad", "fft", "sbgemv", "ifft", "reduce")
    assert len(ALL_CODES) == 32 and len(set(ALL_CODES)) == 32 and DEFAULT == "ddddd"
    p = parse("DSSDD")
    assert p.code == "dssdd" and p.sbgemv == np.complex64 and p.pad == np.float64
    assert p.unit_roundoff("fft") == EPS_S and p.unit_roundoff("pad") == EPS_D
    with pytest.raises(ConfigError):
        parse("dssd")


# -- the model ------------------------------------------------------------------------
def test_error_bound_formula():
    Nt, nm, kappa = 100, 37, 3.5
    log_l = math.log2(2 * Nt)
    c = CONSTANTS
    want = kappa * (c["c1"] * EPS_D + (c["cF"] * EPS_D + c["c2"] * EPS_S + c["c4"] * EPS_D) * log_l
                    + c["c3"] * EPS_S * nm + c["c5"] * EPS_S * math.log2(2 * 4))
    got = error_bound("dssds", kappa=kappa, Nt=Nt, n_inner=nm, n_reduce=4)
    assert got == pytest.approx(want, rel=1e-12)
    terms = error_terms("dssds", Nt=Nt, n_inner=nm, n_reduce=4)
    assert set(terms) == set(STAGES) | {"setup"}
    assert kappa * sum(terms.values()) == pytest.approx(got, rel=1e-12)
    # single precision anywhere costs; the SBGEMV term grows with the inner size
    assert all(error_bound(code, kappa=1, Nt=Nt, n_inner=nm) > error_bound(DEFAULT, kappa=1, Nt=Nt, n_inner=nm)
               for code in ALL_CODES if code != DEFAULT)
    assert error_bound("ddsdd", kappa=1, Nt=Nt, n_inner=1000) > 10 * error_bound("ddsdd", kappa=1, Nt=Nt, n_inner=10)


def test_model_sizes_forward_and_adjoint_differ():
    # F sums over the nm = ceil(Nm/pc) local columns and reduces over pc;
    # F^T sums over nd = ceil(Nd/pr) local rows and reduces over pr.
    assert model_sizes("forward", Nd=10, Nm=101, pr=2, pc=4) == (26, 4)
    assert model_sizes("adjoint", Nd=10, Nm=101, pr=2, pc=4) == (5, 2)
    with pytest.raises(ConfigError):
        model_sizes("sideways", 1, 1)


def test_conditioning_exact_estimated_and_rank_deficient():
    f = synthetic_matrix(6, 9, 20, cond=1e4, seed=3)
    ex = conditioning(f, exact=True)
    est = conditioning(f, exact=False)
    assert ex.exact and not est.exact
    assert est.norm == pytest.approx(ex.norm, rel=1e-6)
    assert 1e4 / 3 <= ex.cond <= 3e4 and est.cond <= ex.cond * (1 + 1e-9)
    # norm is max_k sigma_max(Fhat[k]), and it bounds the 2-norm of the dense BTT matrix
    Fhat = np.fft.rfft(f, n=40, axis=-1).transpose(2, 0, 1)
    assert ex.norm == pytest.approx(np.linalg.svd(Fhat, compute_uv=False).max(), rel=1e-12)
    lag = np.arange(20)[:, None] - np.arange(20)[None, :]
    dense = np.where(lag >= 0, f[:, :, np.clip(lag, 0, None)], 0.0).transpose(0, 2, 1, 3).reshape(6 * 20, 9 * 20)
    assert np.linalg.norm(dense, 2) <= ex.norm * (1 + 1e-12)
    assert ex.frobenius == pytest.approx(np.linalg.norm(dense), rel=1e-12)
    # rank deficient: the design's cond is infinite, the product condition is finite
    g = synthetic_matrix(6, 9, 20, cond=10, rank=2, seed=4)
    cg = conditioning(g)
    assert math.isinf(cg.cond) or cg.cond > 1e12
    assert 1 <= cg.kappa_forward < 100 and 1 <= cg.kappa_adjoint < 100
    if math.isinf(cg.cond):
        assert cg.to_dict()["cond"] is None  # JSON has no inf
    with pytest.raises(Exception, match="zero"):
        conditioning(np.zeros((2, 3, 4)))


# -- measured error never exceeds the predicted bound -----------------------------------
OPERATORS = [
    # (Nd, Nm, Nt, cond, rank)
    (1, 1, 1, 1.0, None),
    (4, 4, 8, 1.0, None),
    (5, 7, 16, 1e2, None),
    (9, 3, 24, 1e6, None),
    (12, 40, 64, 1e4, None),
    (6, 30, 50, 10.0, 2),
]


@pytest.mark.parametrize("Nd,Nm,Nt,cond,rank", OPERATORS)
def test_measured_error_within_bound(Nd, Nm, Nt, cond, rank, rng):
    f = synthetic_matrix(Nd, Nm, Nt, cond=cond, rank=rank, seed=int(rng.integers(2**31)))
    t = measure(f, probes=3, repeats=1, seed=int(rng.integers(2**31)))
    assert len(t.entries) == 64 and {e.direction for e in t.entries} == {"forward", "adjoint"}
    worst = 0.0
    for e in t.entries:
        assert e.error <= e.bound, f"{e.direction} {e.code}: error {e.error:.3e} > bound {e.bound:.3e}"
        if e.code == DEFAULT:
            assert e.error == 0.0
        else:  # the measurement is not vacuous: every single-precision stage leaves a trace
            assert e.error > EPS_S / 100
        worst = max(worst, e.error / e.bound)
    assert worst > 0.005  # the bound is not vacuous either (small sizes: within ~200x)
    for d in ("forward", "adjoint"):  # the probes' kappa concentrates at the a-priori one
        assert t.kappa[d] >= 1
        assert 0.5 * t.conditioning.kappa(d) <= t.kappa[d] <= 3 * t.conditioning.kappa(d)


def test_bound_holds_on_tsunami_operator(rng):
    from fftmatvec.models.tsunami import build_model, default_config

    cfg = default_config(1)
    cfg.update(param_nx=40, nt=40)
    f = build_model(cfg).p2o()
    t = measure(f, probes=2, repeats=1, seed=int(rng.integers(2**31)))
    assert t.conditioning.cond > 1e3  # ill conditioned, yet the bound holds
    for e in t.entries:
        assert e.error <= e.bound, (e.direction, e.code, e.error, e.bound)


def test_bound_uses_the_products_condition_not_cond():
    # x nearly in the null space of F: ||F x|| << ||F|| ||x||, the relative
    # error of a single-precision input grows like ||F|| ||x|| / ||F x||.
    rng = np.random.default_rng(7)
    Nd, Nm, Nt = 2, 12, 8
    f = np.zeros((Nd, Nm, Nt))
    f[:, :, 0] = rng.standard_normal((Nd, Nm))  # memoryless: F = A (x) I
    A = f[:, :, 0]
    z = rng.standard_normal((Nm, Nt))
    null = z - np.linalg.pinv(A) @ (A @ z)  # A null = 0
    x = null + 1e-4 * (np.linalg.pinv(A) @ rng.standard_normal((Nd, Nt)))
    op64, op32 = BTTOperator(f), BTTOperator(f, precision="sdddd")
    y = op64.matvec(x)
    kappa = np.linalg.svd(A, compute_uv=False)[0] * np.linalg.norm(x) / np.linalg.norm(y)
    err = rel_err(op32.matvec(x), y)
    assert kappa > 1e3 and err > 100 * EPS_S  # amplified far beyond a generic input's ~EPS_S
    assert err <= error_bound("sdddd", kappa=kappa, Nt=Nt, n_inner=Nm)
    assert err > error_bound("sdddd", kappa=1.0, Nt=Nt, n_inner=Nm)  # kappa is needed


# -- Pareto front and choice -----------------------------------------------------------------
def _fake(points: dict[str, tuple[float, float]], direction="forward") -> Tuning:
    times, errors = zip(*points.values())
    front = pareto_front(times, errors)
    entries = [Measurement(direction, c, e, t, bound=10 * e + 1e-15, pareto=p)
               for (c, (t, e)), p in zip(points.items(), front)]
    cond = conditioning(synthetic_matrix(2, 2, 2, seed=0))
    return Tuning(entries, cond, {direction: 1.0}, {"Nd": 2, "Nm": 2, "Nt": 2, "pr": 1, "pc": 1}, "cpu", 1, 1)


def test_pareto_front_and_choice_logic():
    pts = {"ddddd": (10.0, 0.0), "dssdd": (5.0, 8e-8), "sssss": (4.0, 3e-7), "ssddd": (6.0, 9e-8),
           "ddsdd": (5.0, 1e-7)}
    t = _fake(pts)
    front = {e.code for e in t.entries if e.pareto}
    assert front == {"ddddd", "dssdd", "sssss"}  # ssddd: slower and worse than dssdd; ddsdd: same time, worse
    assert t.choose(1e-7).forward == "dssdd"
    tied = _fake({"ddddd": (10.0, 0.0), "sssss": (5.0, 9e-8), "dssdd": (5.1, 2e-8)})
    assert tied.choose(1e-7).forward == "dssdd"  # 2% slower counts as a tie: the more accurate wins
    assert tied.choose(1e-7, tie=0).forward == "sssss"
    with pytest.raises(ConfigError):
        tied.choose(1e-7, tie=-1)
    assert t.choose(1e-6).forward == "sssss"
    assert t.choose(1e-8).forward == "ddddd" and t.choose(1e-8).met["forward"]
    strict = t.choose(1e-7, require_bound=True)  # bounds are 10x the errors: only ddddd's 1e-15 passes
    assert strict.forward == "ddddd"
    assert {e.code for e in strict.entries if e.meets} == {"ddddd"}
    none = _fake({"ddddd": (1.0, 0.0)}).choose(1e-16, require_bound=True)
    assert none.forward == "ddddd" and not none.met["forward"]


@pytest.fixture(scope="module")
def mid():
    """A mid-size operator and its measurement (shared by the choice tests)."""
    f = synthetic_matrix(10, 48, 64, cond=1e3, seed=11)
    return f, measure(f, probes=3, repeats=3, seed=5)


def test_chosen_code_meets_tolerance(mid):
    f, t = mid
    for tol in (1e-6, 3e-7, 1e-7, 1e-9):
        c = t.choose(tol)
        for d in ("forward", "adjoint"):
            e = c.entry(d, c.chosen(d))
            assert e.error <= tol and c.met[d]
            ok = [x for x in c.table(d) if x.error <= tol]
            assert e.time <= (1 + TIE) * min(x.time for x in ok)  # the fastest that meets it, up to noise
            assert e.pareto
            strict = t.choose(tol, tie=0).entry(d, t.choose(tol, tie=0).chosen(d))
            assert strict.time == min(x.time for x in ok)
    # the choice holds on fresh vectors through the public operator (generic inputs: within 3x)
    c = t.choose(1e-6)
    op = BTTOperator(f, precision=c.forward, adjoint_precision=c.adjoint)
    ref = BTTOperator(f)
    rng = np.random.default_rng(99)
    m, d = rng.standard_normal((48, 64)), rng.standard_normal((10, 64))
    assert rel_err(op.matvec(m), ref.matvec(m)) <= 3e-6
    assert rel_err(op.rmatvec(d), ref.rmatvec(d)) <= 3e-6


def test_table_json_ready(mid):
    _, t = mid
    d = json.loads(json.dumps(t.choose(1e-7).to_dict()))
    assert d["forward"] in ALL_CODES and d["adjoint"] in ALL_CODES
    assert len(d["table"]) == 64
    row = d["table"][0]
    assert {"direction", "code", "bound", "error", "time_s", "pareto", "meets"} <= set(row)


# -- precision="auto" ------------------------------------------------------------------------------
def test_auto_tight_tolerance_selects_all_double():
    f = synthetic_matrix(5, 12, 16, cond=1e2, seed=2)
    op = BTTOperator(f, precision="auto", tolerance=1e-10)  # below what any single stage can meet
    assert op.precision.code == "ddddd" and op.adjoint_precision.code == "ddddd"
    assert op.tuning is not None and op.tuning.met == {"forward": True, "adjoint": True}


def test_auto_loose_tolerance_uses_single_and_composes_in_normal(model_times):
    """With single-precision stages faster (model times) a loose tolerance
    picks codes with single stages, and F^T F with the two chosen codes stays
    within the sum of the tolerances."""
    f = synthetic_matrix(8, 40, 48, cond=1e3, seed=8)
    tol = 1e-6
    op = BTTOperator(f, precision="auto", tolerance=tol)
    assert op.precision.code != "ddddd" and op.adjoint_precision.code != "ddddd"
    ef = op.tuning.entry("forward", op.precision.code).error
    ea = op.tuning.entry("adjoint", op.adjoint_precision.code).error
    assert ef <= tol and ea <= tol
    ref = BTTOperator(f)
    rng = np.random.default_rng(1)
    for _ in range(3):
        m = rng.standard_normal((40, 48))
        # F^T F with the two chosen codes: errors add (~ the sum of tolerances)
        assert rel_err(op.normal(m), ref.normal(m)) <= 2 * (tol + tol)


def test_auto_keeps_a_given_adjoint_code():
    f = synthetic_matrix(3, 5, 8, seed=1)
    op = BTTOperator(f, precision="auto", adjoint_precision="dssdd", tolerance=1e-7)
    assert op.adjoint_precision.code == "dssdd"
    assert op.tuning.directions == ["forward"]


@pytest.mark.parametrize("tol", [0, -1e-7, 1.0, 5, float("nan"), float("inf"), "abc", True, None, [1e-7]])
def test_invalid_tolerance_rejected(tol):
    f = synthetic_matrix(2, 3, 4, seed=0)
    with pytest.raises(ConfigError):
        BTTOperator(f, precision="auto", tolerance=tol)
    with pytest.raises(ConfigError):
        validate_tolerance(tol)


def test_tolerance_without_auto_rejected():
    f = synthetic_matrix(2, 3, 4, seed=0)
    with pytest.raises(ConfigError, match="auto"):
        BTTOperator(f, precision="dssdd", tolerance=1e-7)


# -- the command -----------------------------------------------------------------------------
def _cli(argv):
    from fftmatvec.commands import precision as cmd

    parser = argparse.ArgumentParser()
    cmd.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["precision", *argv])
    return args.func(args)


def test_cli_json_and_plot(tmp_path, capsys):
    png = tmp_path / "pareto.png"
    rc = _cli(["--Nm", "9", "--Nd", "4", "--Nt", "12", "--tol", "1e-7", "--repeats", "2",
               "--plot", str(png), "--json"])
    assert rc == 0
    out = capsys.readouterr()
    d = json.loads(out.out.strip().splitlines()[-1])
    assert d["forward"] in ALL_CODES and d["adjoint"] in ALL_CODES and len(d["table"]) == 64
    assert {r["direction"] for r in d["table"]} == {"forward", "adjoint"}
    assert "chosen for F" in out.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_matrix_dir_and_errors(tmp_path, capsys):
    from fftmatvec.io import write_matrix

    write_matrix(tmp_path / "mat", synthetic_matrix(3, 5, 6, seed=4))
    assert _cli(["--matrix", str(tmp_path / "mat"), "--tol", "1e-6", "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    assert "F m (forward)" in text and "F^T d (adjoint)" in text and "chosen for F^T" in text
    for bad in (["--matrix", str(tmp_path / "mat"), "--Nm", "3", "--tol", "1e-7"],
                ["--Nm", "3", "--tol", "1e-7"],
                ["--Nm", "3", "--Nd", "2", "--Nt", "4", "--tol", "0"],
                ["--Nm", "3", "--Nd", "2", "--Nt", "4", "--tol", "x"],
                ["--Nm", "3", "--Nd", "2", "--Nt", "4", "--tol", "1e-7", "--grid", "2x2"]):
        with pytest.raises(ConfigError):
            _cli(bad)


# -- the measurement's probes and its copies of Fhat ------------------------------------------------
@pytest.mark.parametrize("n_threads", [1, 3, 64])
def test_probe_rows_do_not_depend_on_the_split(rng, monkeypatch, n_threads):
    from fftmatvec.backend import threads

    monkeypatch.setattr(threads, "cores_per_rank", lambda: n_threads)
    seed = int(rng.integers(2**31))
    whole = gaussian_rows((seed, 1, 2), 0, 11, 7)
    parts = np.concatenate([gaussian_rows((seed, 1, 2), a, b - a, 7) for a, b in ((0, 4), (4, 5), (5, 11))])
    assert np.array_equal(whole, parts)

    def one_stream(n_rows, ncols):  # Box-Muller of the rows' uniforms drawn in one go
        bits = np.random.PCG64(np.random.SeedSequence([seed, 1, 2]))
        u = np.random.Generator(bits).random((n_rows, 2, -(-ncols // 2)))
        radius, angle = np.sqrt(-2.0 * np.log1p(-u[:, 0])), 2.0 * np.pi * u[:, 1]
        return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)], axis=1)[:, :ncols]

    assert np.array_equal(whole, one_stream(11, 7))
    assert np.array_equal(gaussian_rows((seed, 1, 2), 0, 40, 20001), one_stream(40, 20001))  # rows in steps of 6
    assert not np.array_equal(whole, gaussian_rows((seed, 1, 3), 0, 11, 7))  # another probe
    big = gaussian_rows((seed, 0, 0), 0, 400, 500)
    assert abs(big.mean()) < 0.01 and abs(big.std() - 1) < 0.01  # standard Gaussian (2e5 values)
    assert abs(np.mean(big**4) - 3) < 0.1


def test_pcg64_jump_is_numpys_advance(rng):
    """The constants the device's PCG64 kernel jumps with (native/random.cu) reproduce NumPy's stream:
    the state ``delta`` steps on, and the doubles drawn from there."""
    from fftmatvec.backend.pcg64 import MULT, jump

    for delta in (0, 1, 2, 3, int(rng.integers(1, 2**20)), int(rng.integers(2**40, 2**62)), 2**64 - 1):
        bits = np.random.PCG64(np.random.SeedSequence([int(rng.integers(2**31)), 2 << 20]))
        start = bits.state["state"]
        mult, plus = jump(delta, start["inc"])
        bits.advance(delta)
        state = (mult * start["state"] + plus) % 2**128
        assert state == bits.state["state"]["state"]
        drawn = []
        for _ in range(3):  # PCG64: a step, then the XSL-RR output of the new state; random() its top 53 bits
            state = (state * MULT + start["inc"]) % 2**128
            x, rot = ((state >> 64) ^ state) % 2**64, state >> 122
            drawn.append(((x >> rot | x << (64 - rot) % 64) % 2**64 >> 11) * 2.0**-53)
        assert drawn == list(np.random.Generator(bits).random(3))


def test_complex64_copy_rounded_from_complex128_is_the_direct_one(rng):
    from fftmatvec.backend import get_backend

    be = get_backend("cpu")
    f = rng.standard_normal((3, 7, 10))
    both = be.fft_matrices(f, [np.complex64, np.complex128])
    assert np.array_equal(both[np.dtype(np.complex64)], be.fft_matrix(f, np.complex64))
    assert np.array_equal(both[np.dtype(np.complex128)], be.fft_matrix(f, np.complex128))
    engine = LocalBTT(f, be, both)
    engine.apply(np.zeros((7, 10, 1)), parse("ddddd"))
    engine.keep([np.complex64])
    assert set(engine.Fhat) == {np.dtype(np.complex64)} and not engine._workspaces
    with pytest.raises(ValueError, match="cannot keep"):
        engine.keep([np.complex128])


def test_auto_transforms_f_once_and_keeps_the_chosen_precisions(monkeypatch, model_times):
    from fftmatvec.backend.cpu import CPUBackend

    calls, original = [], CPUBackend.fft_matrix

    def counted(self, f, dtype):
        calls.append(np.dtype(dtype))
        return original(self, f, dtype)

    monkeypatch.setattr(CPUBackend, "fft_matrix", counted)
    f = synthetic_matrix(6, 20, 16, cond=1e2, seed=3)
    op = BTTOperator(f, precision="auto", tolerance=1e-5)
    assert calls == [np.dtype(np.complex128)]  # complex64 rounded from it, not transformed again
    kept = {op.precision.sbgemv, op.adjoint_precision.sbgemv}
    assert set(op.engine.Fhat) == kept and np.dtype(np.complex64) in kept  # model times favour single stages
    m = np.random.default_rng(0).standard_normal((20, 16))
    assert rel_err(op.matvec(m), BTTOperator(f).matvec(m)) <= 3e-5


def test_codes_past_the_tolerance_on_the_first_probe_are_not_probed_again(monkeypatch):
    """With time_below, a code whose first probe already misses it skips the other probes: the admissible
    codes' errors are the full measurement's, the others' errors a lower bound above it."""
    from fftmatvec import tuning

    f = synthetic_matrix(6, 30, 24, cond=1e2, seed=5)
    tol = 7e-8  # within the single-precision codes' errors (3e-8 to 1.2e-7 here): some meet it, some do not
    options = dict(probes=3, repeats=1, seed=7)
    full = measure(f, **options)
    counted = []
    product = tuning._grid_product
    monkeypatch.setattr(tuning, "_grid_product", lambda *a: counted.append(1) or product(*a))
    pruned = measure(f, time_below=tol, **options)
    misses = 0
    for e in pruned.entries:
        ref = full.entry(e.direction, e.code).error
        if ref <= tol:
            assert e.error == ref, (e.direction, e.code)
        else:
            assert tol < e.error <= ref, (e.direction, e.code)
            misses += 1
    assert misses and 0 < sum(e.error <= tol for e in pruned.entries)  # the same codes admissible
    # per direction: 3 reference products, every code on the first probe, the kept ones (at least the
    # admissible) on the other two, one timed product of each admissible code
    admissible = [sum(e.error <= tol for e in pruned.entries if e.direction == d) for d in ("forward", "adjoint")]
    assert sum(3 + 32 + 3 * a for a in admissible) <= len(counted) < sum(3 + 96 + a for a in admissible)


def test_auto_times_only_the_codes_meeting_the_tolerance():
    f = synthetic_matrix(6, 30, 24, cond=1e2, seed=5)
    tol = 1e-8  # below a single-precision rounding: most codes miss it
    t = BTTOperator(f, precision="auto", tolerance=tol, auto_options=dict(probes=2, repeats=2)).tuning
    timed = {(e.direction, e.code) for e in t.entries if not math.isnan(e.time)}
    assert timed == {(e.direction, e.code) for e in t.entries if e.error <= tol}
    assert any(e.error > tol for e in t.entries)  # some codes were left untimed
    assert all(not e.pareto for e in t.entries if math.isnan(e.time))
    untimed = next(e for e in t.entries if e.direction == "forward" and math.isnan(e.time))
    row = next(line for line in t.format().splitlines() if line.split()[:1] == [untimed.code])  # F m comes first
    assert row.split()[3:5] == ["-", "-"]  # time and speed-up
    full = BTTOperator(f, precision="auto", tolerance=tol, auto_options=dict(probes=2, repeats=2, time_all=True))
    assert all(math.isfinite(e.time) for e in full.tuning.entries)
    strict = t.choose(1e-3)  # a looser tolerance admits untimed codes, which cannot be chosen
    for d in ("forward", "adjoint"):
        assert math.isfinite(strict.entry(d, strict.chosen(d)).time)
