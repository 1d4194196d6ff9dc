"""Calibrate the constants c1..c5, cF of the precision error model.

    python benchmarks/calibrate_precision.py [--safety 2] [--check]

Model (fftmatvec.precision.error_bound, design.md section 3, docs/precision.md):

    err <= kappa * [ c1 eps1 + (cF eps_d + c2 eps2 + c4 eps4) log2(L)
                     + c3 eps3 n_inner + c5 eps5 log2(2 n_reduce) ]

For every operator of the families below, both directions (F with
n_inner = Nm, F^T with n_inner = Nd; one process, so n_reduce = 1) and 4
Gaussian probes each, the code with only stage i in single precision
(sdddd, dsddd, ddsdd, dddsd, dddds) is measured against ddddd, and

    c_i = safety * max  err / (kappa * eps_s * g_i)

with g = 1, log2 L, n_inner, log2 L, log2(2 n_reduce) and kappa the product
condition of the probe (||F|| ||x|| / ||F x||, ||F|| = max_k sigma_max(Fhat[k])).
cF: the all-double pipeline ddddd against the exact product of integer-valued
f and x (exact in int64), cF = safety * max err / (kappa * eps_d * log2 L).
Constants are rounded up to two significant digits.  Finally every one of the
32 codes is checked against the bound on all the operators.

``--check`` exits 1 if the constants in fftmatvec/precision.py differ from
the calibrated ones by more than 30% or any bound is violated.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from fftmatvec.backend import get_backend
from fftmatvec.btt import LocalBTT
from fftmatvec.precision import ALL_CODES, CONSTANTS, error_bound, model_sizes, parse
from fftmatvec.tuning import conditioning, synthetic_matrix

EPS_S = float(np.finfo(np.float32).eps) / 2
EPS_D = float(np.finfo(np.float64).eps) / 2
SINGLE_STAGE = {"c1": "sdddd", "c2": "dsddd", "c3": "ddsdd", "c4": "dddsd", "c5": "dddds"}
PROBES = 4


def families(rng: np.random.Generator):
    """(name, f) pairs: shapes from scalar to a few hundred, conditions 1 to 1e8."""
    shapes = [(1, 1, 1), (1, 1, 16), (3, 3, 4), (5, 7, 16), (7, 5, 16), (16, 16, 32), (8, 64, 64),
              (64, 8, 64), (20, 200, 128), (120, 30, 100), (40, 300, 128), (4, 1000, 32), (1, 300, 512)]
    seed = 0
    for nd, nm, nt in shapes:
        for cond in (1.0, 1e2, 1e4, 1e8):
            seed += 1
            yield f"synthetic cond={cond:g}", synthetic_matrix(nd, nm, nt, cond=cond, seed=seed)
        if min(nd, nm) > 2:
            seed += 1
            yield "synthetic rank 2", synthetic_matrix(nd, nm, nt, cond=10.0, rank=2, seed=seed)
        # i.i.d. Gaussian impulse responses with random exponential decay
        tau = rng.uniform(1, max(2, nt), (nd, nm, 1))
        yield "gaussian decaying", rng.standard_normal((nd, nm, nt)) * np.exp(-np.arange(nt) / tau)
        # an orthogonal memoryless map: ||F x|| = ||x||, kappa = 1 exactly
        if nd == nm:
            f = np.zeros((nd, nm, nt))
            f[:, :, 0] = np.linalg.qr(rng.standard_normal((nd, nd)))[0]
            yield "orthogonal delta", f
    try:  # a real, ill-conditioned p2o map
        from fftmatvec.models.tsunami import build_model, default_config

        yield "tsunami 1-D", build_model(default_config(1)).p2o()
    except Exception as exc:  # the model is optional here
        print(f"(tsunami model skipped: {exc})", file=sys.stderr)


def stage_ratios(f: np.ndarray, be, rng: np.random.Generator) -> tuple[dict, list]:
    """Per constant, the largest err / (kappa eps g); and every code's
    ``(code, err, kappa, Nt, n_inner, n_reduce)`` for checking the bound."""
    nd, nm, nt = f.shape
    eng = LocalBTT(f, be, {np.complex64, np.complex128})
    cond = conditioning(f, backend=be, Fhat=eng.Fhat[np.dtype(np.complex128)])
    log_l = math.log2(2 * nt)
    ratios, checks = {}, []
    for direction in ("forward", "adjoint"):
        adjoint = direction == "adjoint"
        n_inner, n_reduce = model_sizes(direction, nd, nm)
        g = {"c1": 1.0, "c2": log_l, "c3": float(n_inner), "c4": log_l, "c5": math.log2(2 * n_reduce)}
        for _ in range(PROBES):
            x = rng.standard_normal((nm if not adjoint else nd, nt, 1))
            ref = eng.apply(x, parse("ddddd"), adjoint).copy()
            rn = np.linalg.norm(ref)
            if rn == 0:
                continue
            kappa = cond.norm * np.linalg.norm(x) / rn
            errs = {}
            for code in ALL_CODES:
                p = parse(code)
                y = eng.apply(x.astype(p.pad), p, adjoint).astype(np.float64)
                errs[code] = np.linalg.norm(y - ref) / rn
                checks.append((code, errs[code], kappa, nt, n_inner, n_reduce))
            for name, code in SINGLE_STAGE.items():
                r = errs[code] / (kappa * EPS_S * g[name])
                ratios[name] = max(ratios.get(name, 0.0), r)
    return ratios, checks


def exact_ratio(be, rng: np.random.Generator) -> float:
    """Largest ddddd error against exact integer products / (kappa eps_d log2 L)."""
    worst = 0.0
    for nd, nm, nt in [(3, 5, 8), (8, 8, 64), (16, 64, 128), (64, 16, 256), (20, 300, 200)]:
        f = rng.integers(-8, 9, (nd, nm, nt)).astype(np.float64)
        eng = LocalBTT(f, be, {np.complex128})
        norm = conditioning(f, backend=be).norm
        for adjoint in (False, True):
            n_in = nd if adjoint else nm
            x = rng.integers(-8, 9, (n_in, nt)).astype(np.int64)
            fi = f.astype(np.int64)
            exact = np.zeros((nm if adjoint else nd, nt), np.int64)
            for s in range(nt):  # y[:, t] += f[:, :, s] x[:, t - s]  (adjoint: transposed, anti-causal)
                if adjoint:
                    exact[:, : nt - s] += fi[:, :, s].T @ x[:, s:]
                else:
                    exact[:, s:] += fi[:, :, s] @ x[:, : nt - s]
            y = eng.apply(x[:, :, None].astype(np.float64), parse("ddddd"), adjoint)[:, :, 0]
            ex = exact.astype(np.float64)
            err = np.linalg.norm(y - ex) / np.linalg.norm(ex)
            kappa = norm * np.linalg.norm(x) / np.linalg.norm(ex)
            worst = max(worst, err / (kappa * EPS_D * math.log2(2 * nt)))
    return worst


def round_up(v: float, digits: int = 2) -> float:
    if v <= 0:
        return 0.0
    e = math.floor(math.log10(v)) - digits + 1
    return math.ceil(v / 10**e) * 10**e


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--safety", type=float, default=2.0, help="factor over the largest observed ratio (default 2)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--check", action="store_true", help="compare with the constants in fftmatvec.precision")
    args = ap.parse_args(argv)
    be = get_backend("cpu")
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    worst: dict[str, tuple[float, str]] = {}
    all_checks = []
    n_ops = 0
    for name, f in families(rng):
        ratios, checks = stage_ratios(f, be, rng)
        all_checks += checks
        n_ops += 1
        for k, r in ratios.items():
            if r > worst.get(k, (0.0, ""))[0]:
                worst[k] = (r, f"{name} {f.shape}")
    worst["cF"] = (exact_ratio(be, rng), "integer operators vs exact")
    calibrated = {k: round_up(args.safety * worst[k][0]) for k in ("c1", "c2", "c3", "c4", "c5", "cF")}
    print(f"{n_ops} operators x 2 directions x {PROBES} probes, {time.perf_counter() - t0:.1f} s")
    print(f"{'const':<6} {'max ratio':>10}  {'calibrated':>10}  {'in code':>8}  worst case")
    for k in ("c1", "c2", "c3", "c4", "c5", "cF"):
        print(f"{k:<6} {worst[k][0]:10.3f}  {calibrated[k]:10.3g}  {CONSTANTS[k]:8.3g}  {worst[k][1]}")
    # every code against the bound, with the calibrated constants and with those in the code
    for label, consts in (("calibrated", calibrated), ("in code", CONSTANTS)):
        bad, tight = _verify(all_checks, consts)
        print(f"bounds with the {label} constants: {len(all_checks)} checks (all 32 codes), {bad} violated, "
              f"largest error/bound {tight:.3f}")
    if args.check:
        off = [k for k in calibrated if abs(calibrated[k] - CONSTANTS[k]) > 0.3 * max(calibrated[k], 1e-12)]
        bad, _ = _verify(all_checks, CONSTANTS)
        if off or bad:
            print(f"check failed: constants off {off}, {bad} bounds violated", file=sys.stderr)
            return 1
    return 0


def _verify(checks, consts) -> tuple[int, float]:
    """Each measured error against its bound with ``consts``: (violations, largest error/bound)."""
    bad, tight = 0, 0.0
    for code, err, kappa, nt, n_inner, n_reduce in checks:
        bound = error_bound(code, kappa=kappa, Nt=nt, n_inner=n_inner, n_reduce=n_reduce, constants=consts)
        bad += err > bound
        tight = max(tight, err / bound)
    return bad, tight


if __name__ == "__main__":
    sys.exit(main())
