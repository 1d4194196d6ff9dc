"""The fused transforms of native/fft.cu in the working tree against the same
file at other git revisions: device time per transform (CUPTI, through
PyTorch's profiler) and the error against NumPy, on the series counts of the
big and middle sizes, on one GPU.

    python benchmarks/fft_ab.py --rev baaf98c --out benchmarks/results/h200-fft-ab.jsonl
    python benchmarks/fft_ab.py --radices 500:10,10,5 --out benchmarks/results/h200-fft-ab-orders.jsonl

One JSON line per variant and case: ``variant`` (``tree`` or the revision),
the series count ``n``, ``K``, ``nt``, the real and complex types, the launch
set-up (``S``, ``threads``), ``pad_rfft_us``, ``irfft_unpad_us``,
``err_rfft`` (max error over max value against ``numpy.fft.rfft``) and
``err_roundtrip`` (the inverse of the forward against the input).  The launch
set-up is the working tree's (``GPUBackend._fused_config``) for every variant,
so ``--rev`` suits revisions with the same kernel templates and launch rules;
for others run that revision's package (``git archive REV src native``) with
``--label REV`` beside the tree's.  ``--radices M:R1,R2,...`` is a variant
of the tree whose transforms of length ``2 M`` take the passes of those
radices in that order, forward and inverse (the cases of other lengths skip
it).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ab_sources import use_revisions
from gpu_probe import device_times

CASES = [  # (series, K, real type, complex type, Nt)
    (5000, 1, np.float64, np.complex128, 1000), (5000, 1, np.float32, np.complex64, 1000),
    (5000, 1, np.float64, np.complex64, 1000), (100, 1, np.float64, np.complex128, 1000),
    (1000, 1, np.float64, np.complex128, 500), (1000, 1, np.float64, np.complex64, 500),
    (50, 1, np.float64, np.complex128, 500), (5000, 16, np.float64, np.complex128, 1000),
    (5000, 16, np.float64, np.complex64, 1000),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", action="append", default=[], help="git revision to compare (repeatable)")
    ap.add_argument("--out", required=True, help="JSON lines appended here")
    ap.add_argument("--label", default="tree", help="variant name of the package imported (default: tree); "
                    "for a revision whose launch set-up differs, run its own package with this label")
    ap.add_argument("--radices", action="append", default=[], metavar="M:R1,R2,...",
                    help="a variant with these radices, in this order, for length 2 M (repeatable)")
    args = ap.parse_args()

    import cupy as cp

    import fftmatvec.backend.gpu_transforms as transforms_module
    from fftmatvec.backend.fused_fft import FFT_BUTTERFLIES
    from fftmatvec.backend.gpu import GPUBackend

    orders = {}
    for spec in args.radices:
        M, _, radices = spec.partition(":")
        order = [int(r) for r in radices.split(",")]
        if int(np.prod(order)) != int(M) or not set(order) <= FFT_BUTTERFLIES:
            raise SystemExit(f"--radices {spec}: radices of native/fft.cu (2, 3, 4, 5, 7, 8, 10) whose product is M")
        orders[f"radices {radices}"] = (int(M), order)
    default_radices = transforms_module.fft_radices
    select_revision = use_revisions("fft.cu", args.rev)

    def select(variant: str) -> None:
        """The tree or a revision of fft.cu, with the default radices or a variant's."""
        M, order = orders.get(variant, (None, None))
        transforms_module.fft_radices = default_radices if order is None else (
            lambda m: list(order) if m == M else default_radices(m))
        select_revision("tree" if order is not None or variant == args.label else variant)

    be = GPUBackend()
    rng = np.random.default_rng(7)
    with open(args.out, "a") as out:
        for n, K, real, cplx, nt in CASES:
            x_host = rng.standard_normal((n, nt, K)).astype(real)
            x = cp.asarray(x_host)
            x_hat = cp.empty((nt + 1, n, K), cplx)
            y = cp.empty((n, nt, K), real)
            fft_real = np.float32 if cplx == np.complex64 else np.float64
            ref = np.fft.rfft(x_host.astype(np.float64), n=2 * nt, axis=1).transpose(1, 0, 2)
            for variant in [args.label] + args.rev + [v for v, (M, _) in orders.items() if M == nt]:
                select(variant)
                be._fused.clear()
                be.pad_rfft(x, x_hat)
                err_rfft = float(np.abs(x_hat.get() - ref).max() / np.abs(ref).max())
                be.irfft_unpad(x_hat, y, fft_real)
                err_roundtrip = float(np.abs(y.get() - x_host).max() / np.abs(x_host).max())
                t_fwd = sum(device_times(lambda: be.pad_rfft(x, x_hat), be.synchronize).values())
                t_inv = sum(device_times(lambda: be.irfft_unpad(x_hat, y, fft_real), be.synchronize).values())
                S, threads, _, _, _, radices = be._fused_config(nt, np.dtype(cplx), n * K, K)[:6]
                rec = dict(what="fft-ab", variant=variant, n=n, K=K, nt=nt, radices=list(radices),
                           real=np.dtype(real).name, ctype=np.dtype(cplx).name, S=S, threads=threads,
                           pad_rfft_us=round(t_fwd, 2), irfft_unpad_us=round(t_inv, 2), err_rfft=err_rfft,
                           err_roundtrip=err_roundtrip)
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
