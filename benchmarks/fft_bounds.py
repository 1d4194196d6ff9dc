"""What each part of the fused transforms (native/fft.cu) costs: the
working tree's kernels against copies of fft.cu with parts of the arithmetic
taken out, timed by ``fft_ab.py`` on its cases (device time per transform,
CUPTI).  The copies compute wrong results (their errors say so); they bound
what making that part cheaper could save.

    python benchmarks/fft_bounds.py --out benchmarks/results/h200-fft-bounds.jsonl

Variants (written to ``--dir``, each named by what it leaves out):

* ``no-twiddles``: the passes after the first multiply by no twiddles (no
  loads, no powers, no products);
* ``no-dft``: no twiddles and no butterfly arithmetic: the passes only move
  values through shared memory;
* ``no-pre-post``: the forward's post-processing and the inverse's
  pre-processing (with their shuffles and twiddle loads) pass ``Z[f]`` and
  ``Y[f]`` through unchanged;
* ``skeleton``: all three: global loads, shared-memory passes, barriers and
  global stores only;
* ``skeleton-no-load``: the skeleton with the first pass's values made from
  their indices instead of loaded (``x`` for the forward, ``Y`` for the
  inverse);
* ``skeleton-no-store``: the skeleton with the global stores behind a test
  that fails at run time.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import fft_ab

# (variant, [(text in fft.cu, replacement)]); every text must occur exactly once
_NO_TWIDDLES = [("    if (NS > 1 && R > 1) {\n        constexpr int H", "    if (false) {\n        constexpr int H")]
_NO_DFT = _NO_TWIDDLES + [("    Dft<R, DIR>::run(v);\n}\n", "}\n")]
_NO_PRE_POST = [
    ("    const C E = cscale(csum(zf, z2), (T)0.5), D = cscale(csub(zf, z2), (T)0.5);\n"
     "    return csum(E, cmul(w, cmake<C>(D.y, -D.x)));  // O = D / i\n",
     "    return zf;\n"),
    ("    const C b = cconj(ymf);\n    return csum(csum(yf, b), times_i(cmul(csub(yf, b), cconj(w))));\n",
     "    return yf;\n"),
]
_NO_LOAD = [  # values made from their indices, so that nothing upstream folds away
    ("load_sample<GLOBAL>(reinterpret_cast<const TP*>(xs + t));", "TP{(TI)t, (TI)s};"),
    ("valid ? cload<C>(Ys + (index_t)(jl + r * nb) * B) : czero<C>();",
     "valid ? cmake<C>((typename real_of<C>::type)(jl + r), (typename real_of<C>::type)it.sl) : czero<C>();"),
]
_NO_STORE = [  # stores behind a test that fails at run time, so that the compiler keeps what feeds them
    ("st_keep(Xb + (index_t)f * B + sl,", "if (B < 0) st_keep(Xb + (index_t)f * B + sl,"),
    ("st_keep(Xb + (index_t)(M - f) * B + sl,", "if (B < 0) st_keep(Xb + (index_t)(M - f) * B + sl,"),
    ("*reinterpret_cast<P*>(ys + t) = ", "if (K < 0) *reinterpret_cast<P*>(ys + t) = "),
]
_SKELETON = _NO_DFT + _NO_PRE_POST
VARIANTS = {"no-twiddles": _NO_TWIDDLES, "no-dft": _NO_DFT, "no-pre-post": _NO_PRE_POST, "skeleton": _SKELETON,
            "skeleton-no-load": _SKELETON + _NO_LOAD, "skeleton-no-store": _SKELETON + _NO_STORE}


def variant_source(text: str, edits: list[tuple[str, str]]) -> str:
    """``text`` with each edit applied; an edit whose text does not occur exactly once is an error (fft.cu
    changed: update the edits)."""
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"fft_bounds: an edit no longer matches native/fft.cu: {old[:60]!r}")
        text = text.replace(old, new)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON lines appended here (fft_ab.py's records)")
    ap.add_argument("--dir", default="/tmp/fft-bounds", help="where the variant sources are written")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS))
    args = ap.parse_args()

    from fftmatvec.backend.kernels import native_dir

    text = (native_dir() / "fft.cu").read_text()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    revs = []
    for name in args.variants.split(","):
        edits = VARIANTS[name]
        path = folder / f"{name}.cu"
        path.write_text(variant_source(text, edits))
        revs += ["--rev", f"file:{path}"]
    sys.argv = [sys.argv[0], *revs, "--out", args.out]
    return fft_ab.main()


if __name__ == "__main__":
    raise SystemExit(main())
