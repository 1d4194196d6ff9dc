"""What the L2's state after one product costs the next: the big products timed by CUDA events with other work
between them.

    python benchmarks/l2_state.py --out benchmarks/results/h200-l2-state.jsonl

A product leaves lines in the L2 that the next product's stream of ``Fhat``
pushes out: its dirty results (the adjoint's 40 or 80 MB of samples, of which
the inverse transform writes only part to memory while it runs, docs/gpu.md)
and whatever it kept at evict-last priority.  Each row (the big ``ddssd``
``F^T d``, ``ddddd`` ``F^T d`` and ``dssdd`` ``F m``, the last a control whose
result is 0.8 MB) runs as a prepared product (one graph launch), queued back to
back or each waited for by the host, with one of these between consecutive
products:

* ``none``: nothing;
* ``idle``: a kernel that spins for as long as ``clean`` takes after the
  product (the device idle as long, the L2 left as the product left it);
* ``clean``: a kernel that reads ``--clean-mb`` of another buffer with plain
  loads, so that the product's dirty lines go to memory during it;
* ``dirty``: a kernel that writes ``--dirty-mb`` of another buffer, so that
  the next product finds that many dirty lines; ``dirty_wt``, ``dirty_cs``
  and ``dirty_ef`` write them by ``st.global.wt``, ``st.global.cs`` and at
  evict-first priority (a cache hint) instead of plain stores;
* ``fhat_read`` and ``fhat_prefetch``: the first ``--fhat-mb`` of the row's
  ``Fhat`` (the first frequencies, which the product's first blocks read)
  read with plain loads, or asked of the L2 by ``prefetch.global.L2``;
* ``other`` and ``other_fhat_read``: the same operator's product in the other
  direction (a forward product between adjoints), alone or followed by
  ``fhat_read``, for what that read costs where the L2 holds no dirty result.

Events before and after each product, and after the step between, give the
median product (``product_us``) and product plus step (``with_step_us``), in
``--rounds`` rounds that alternate the steps.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

SRC = r"""
extern "C" __global__ void read_plain(const float4* __restrict__ a, long long n4, float* sink) {
    float s = 0.f;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = a[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1.2345f) sink[0] = s;  // never, but the loads are not dead
}
// KIND 0: a plain store; 1: st.global.wt; 2: st.global.cs; 3: at evict-first priority (a createpolicy cache hint)
template <int KIND> __global__ void write_kind(float4* __restrict__ a, long long n4) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = make_float4(1.f, 2.f, 3.f, (float)i);
        if (KIND == 0) a[i] = v;
        if (KIND == 1)
            asm volatile("st.global.wt.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a + i), "f"(v.x), "f"(v.y), "f"(v.z),
                         "f"(v.w) : "memory");
        if (KIND == 2)
            asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a + i), "f"(v.x), "f"(v.y), "f"(v.z),
                         "f"(v.w) : "memory");
        if (KIND == 3)
            asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_first.b64 pol, 1.0;\n\t"
                         "st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, pol;\n\t}" ::"l"(a + i),
                         "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
    }
}
extern "C" __global__ void prefetch_lines(const char* __restrict__ a, long long lines) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a + 128 * i));
}
extern "C" __global__ void spin_ns(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < (unsigned long long)ns);
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", default="ddssd-adj,ddddd-adj,dssdd")
    ap.add_argument("--steps", default="none,idle,clean,dirty")
    ap.add_argument("--clean-mb", type=int, default=128)
    ap.add_argument("--dirty-mb", type=int, default=48)
    ap.add_argument("--fhat-mb", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-N", type=int, default=30)
    ap.add_argument("--Nm", type=int, default=5000)
    ap.add_argument("--Nd", type=int, default=100)
    ap.add_argument("--Nt", type=int, default=1000)
    ap.add_argument("--set", action="append", default=[], metavar="ATTR=VALUE",
                    help="set an integer attribute of the backend, e.g. fwd_release_min_bytes=0")
    args = ap.parse_args()

    import cupy as cp

    from fftmatvec import BTTOperator
    from fftmatvec.backend.gpu import GPUBackend
    from fftmatvec.bench import random_slab

    be = GPUBackend()
    for setting in args.set:
        attr, _, value = setting.partition("=")
        if not hasattr(be, attr):
            raise SystemExit(f"GPUBackend has no attribute {attr!r}")
        setattr(be, attr, int(value))
    kinds = [f"write_kind<{k}>" for k in range(4)]
    mod = cp.RawModule(code=SRC, options=("-std=c++17",), name_expressions=kinds)
    read_plain, spin_ns = mod.get_function("read_plain"), mod.get_function("spin_ns")
    prefetch_lines = mod.get_function("prefetch_lines")
    writes = [mod.get_function(k) for k in kinds]
    blocks = be.sm_count * 8
    clean_buf = cp.ones(args.clean_mb << 18, dtype=cp.float32)  # MB << 20 bytes, 4 a value
    dirty_buf = cp.empty(args.dirty_mb << 18, dtype=cp.float32)
    sink = cp.zeros(1, dtype=cp.float32)
    spin = {"ns": 0}
    steps = {
        "none": lambda: None,
        "idle": lambda: spin_ns((1,), (32,), (np.int64(spin["ns"]),)),
        "clean": lambda: read_plain((blocks,), (256,), (clean_buf, np.int64(clean_buf.size // 4), sink)),
    }
    for kind, name in enumerate(("dirty", "dirty_wt", "dirty_cs", "dirty_ef")):
        steps[name] = lambda w=writes[kind]: w((blocks,), (256,), (dirty_buf, np.int64(dirty_buf.size // 4)))
    fhat = {"now": None, "other": None}  # the row's Fhat and its product in the other direction
    nfhat = args.fhat_mb << 20
    steps["fhat_read"] = lambda: read_plain((blocks,), (256,), (fhat["now"], np.int64(nfhat // 16), sink))
    steps["fhat_prefetch"] = lambda: prefetch_lines((blocks,), (256,), (fhat["now"], np.int64(nfhat // 128)))
    steps["other"] = lambda: fhat["other"]()
    steps["other_fhat_read"] = lambda read=steps["fhat_read"]: (fhat["other"](), read())
    clean_step = steps["clean"]
    steps = {s: steps[s] for s in args.steps.split(",")}
    command = "python benchmarks/l2_state.py " + " ".join(sys.argv[1:])
    out = open(args.out, "a")

    def emit(**rec) -> None:
        line = json.dumps(dict(rec, command=command))
        print(line, flush=True)
        out.write(line + "\n")
        out.flush()

    def timed(product, step, n: int, waited: bool) -> tuple[float, float]:
        events = [[cp.cuda.Event() for _ in range(3)] for _ in range(n)]
        for e0, e1, e2 in events:
            e0.record()
            product()
            e1.record()
            step()
            e2.record()
            if waited:
                e2.synchronize()
        events[-1][2].synchronize()
        prod = [cp.cuda.get_elapsed_time(a, b) * 1e3 for a, b, _ in events]
        both = [cp.cuda.get_elapsed_time(a, c) * 1e3 for a, _, c in events]
        return float(np.median(prod)), float(np.median(both))

    f = random_slab(7, args.Nd, args.Nm, args.Nt, (0, args.Nd), (0, args.Nm))
    ops = {}
    for row in args.rows.split(","):
        code, adjoint = row.removesuffix("-adj"), row.endswith("-adj")
        key = "c128" if code == "ddddd" else "c64"
        if key not in ops:
            ops[key] = BTTOperator(f, device=be, precision=code if code != "ddssd" else "dssdd",
                                   adjoint_precision="ddddd" if code == "ddddd" else "ddssd")
        op = ops[key]
        v = cp.asarray(np.random.default_rng([7, 1]).standard_normal((args.Nd if adjoint else args.Nm, args.Nt, 1)))
        y = cp.empty((args.Nm if adjoint else args.Nd, args.Nt, 1))
        product = op.prepare(v, adjoint=adjoint, out=y)
        u = cp.asarray(np.random.default_rng([7, 2]).standard_normal((args.Nm if adjoint else args.Nd, args.Nt, 1)))
        fhat["other"] = op.prepare(u, adjoint=not adjoint, out=cp.empty((args.Nd if adjoint else args.Nm, args.Nt, 1)))
        fhat["now"] = op.engine.Fhat[(op.adjoint_precision if adjoint else op.precision).sbgemv]
        for _ in range(3):
            product()
        be.synchronize()
        p, w = timed(product, clean_step, args.N, False)
        spin["ns"] = int(1e3 * (w - p))  # the clean step's own time, from its end back to the product's
        for rnd in range(args.rounds):
            for waited in (False, True):
                for name, step in steps.items():
                    p, w = timed(product, step, args.N, waited)
                    emit(row=row, Nm=args.Nm, Nd=args.Nd, Nt=args.Nt, round=rnd, waited=waited, step=name,
                         product_us=round(p, 2), with_step_us=round(w, 2), idle_us=round(spin["ns"] / 1e3, 2),
                         clean_mb=args.clean_mb, dirty_mb=args.dirty_mb, fhat_mb=args.fhat_mb, settings=args.set,
                         device=be.device_name)
        del product, v, y, u
        fhat["other"] = None


if __name__ == "__main__":
    main()
