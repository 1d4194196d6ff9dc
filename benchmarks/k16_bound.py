"""How fast any batched product with a separate forward-transform pass can
be: the `K = 16` target's memory traffic timed alone, against the target.

    python benchmarks/k16_bound.py --out benchmarks/results/h200-k16-bound.jsonl

The issue's `K = 16` target asks the time per vector to be at most 1/12 of
one vector's product.  One vector's product streams `Fhat` near the copy
bandwidth; a batch of `K` also reads its `K` inputs, and with the forward
transform as its own pass writes their spectra and reads them back.  For
each code (`ddddd`, `dssdd`, big size) this gives, in one process:

* ``single``: one vector's product through ``BTTOperator.matvec``, waited
  for (the bench's ``time_s``), and the budget ``16/12`` of it for 16 vectors;
* ``matvec``, ``into`` and ``prepared``: the `K = 16` product through
  ``matvec`` (a new result array, or ``out=``) and as a prepared product,
  waited for, in alternated rounds (the median of each round, and of the
  rounds), with each kernel's device time (PyTorch's profiler, as
  ``gpu_probe.device_times``);
* ``traffic``: two memory-bound stand-ins that do no arithmetic: one reads
  the 16 inputs and writes spectrum-sized output (what a transform pass must
  move at least), one reads `Fhat` and those spectra (what the product must),
  back to back (each alone: ``traffic_transform``, ``traffic_product``);
  ``fused``: one that reads `Fhat` and the inputs only (what a
  product with the transform inside it would move);
* ``chip``: the multiprocessors, the L2, and all the registers and shared
  memory of the device, against the bytes of the `K` results of every
  frequency (what such a product would keep on chip).

Each line gives the time, the bytes, TB/s and the ratio "one vector's time
over the time per vector", which the target needs at 12 or more.  The
traffic line is a lower bound for any design with a separate transform pass
(it leaves out the transforms' and the product's arithmetic and the inverse
transform of the 16 results); if it is below 12, no such design meets the
target on this machine.
"""
from __future__ import annotations

import numpy as np

SRC = r"""
// The sum of the 16-byte pieces of a then b (n4a, n4b of them), U loads in flight per thread, read-only past L1
// with a 256-byte L2 prefetch (the fastest way to stream a buffer in benchmarks/gpu_probe.py --parts read).
template <int U> __global__ void read_two(const float4* __restrict__ a, long long n4a, const float4* __restrict__ b,
                                          long long n4b, float* sink) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    float s = 0.f;
    for (int which = 0; which < 2; ++which) {
        const float4* p = which ? b : a;
        const long long n4 = which ? n4b : n4a;
        long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
        for (; i + (U - 1) * stride < n4; i += U * stride) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
                asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                             : "=f"(v[u].x), "=f"(v[u].y), "=f"(v[u].z), "=f"(v[u].w) : "l"(p + i + u * stride));
#pragma unroll
            for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
        }
        for (; i < n4; i += stride) {
            const float4 v = p[i];
            s += v.x + v.y + v.z + v.w;
        }
    }
    if (s == 1.2345f) sink[0] = s;  // keeps the loads
}

// out[i] = (x[i], x[i]) for i < nx, zero for nx <= i < n: reads the nx samples once and writes n complex values
// of C, U of each in flight per thread.
template <typename C, int U> __global__ void expand(const double* __restrict__ x, long long nx, C* __restrict__ out,
                                                    long long n) {
    typedef decltype(C().x) R;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += U * stride) {
        double v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = i + u * stride < nx ? __ldcs(x + i + u * stride) : 0.0;
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (i + u * stride < n) {
                C c;
                c.x = (R)v[u];
                c.y = (R)v[u];
                __stcs(out + i + u * stride, c);
            }
    }
}
"""

KERNELS = ("read_two<8>", "expand<double2, 4>", "expand<float2, 4>")  # the instantiations used
CODES = ("ddddd", "dssdd")
K = 16
TARGET = 12


def main(argv=None) -> int:
    from gpu_probe import device_times, json_lines, size_parser

    ap = size_parser(__doc__)
    ap.add_argument("--codes", default=",".join(CODES))
    ap.add_argument("-N", "--reps", type=int, default=10, help="waited-for calls per median")
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds of the K = 16 products")
    args = ap.parse_args(argv)

    import cupy as cp

    from fftmatvec import BTTOperator
    from fftmatvec.bench import _median_time, random_slab
    from fftmatvec.precision import parse

    emit = json_lines(args.out)
    Nm, Nd, Nt = args.Nm, args.Nd, args.Nt
    Nf = Nt + 1
    mod = cp.RawModule(code=SRC, options=("-std=c++17",), name_expressions=KERNELS)
    attributes = cp.cuda.Device().attributes
    sms = attributes["MultiProcessorCount"]
    sink = cp.zeros(1, np.float32)
    f = random_slab(0, Nd, Nm, Nt, (0, Nd), (0, Nm))

    # what a kernel keeping all K results of every frequency on chip would have to fit in
    emit(what="chip", multiprocessors=sms, l2_bytes=attributes["L2CacheSize"],
         register_bytes=sms * attributes["MaxRegistersPerMultiprocessor"] * 4,
         shared_bytes=sms * attributes["MaxSharedMemoryPerMultiprocessor"],
         sums_bytes={"complex128": Nf * Nd * K * 16, "complex64": Nf * Nd * K * 8})

    def waited(fn) -> float:
        """Median seconds of a call waited for (as the bench's time_s), after a warm-up call."""
        return _median_time(fn, args.reps, cp.cuda.Device().synchronize)

    for code in args.codes.split(","):
        prec = parse(code)
        op = BTTOperator(f, device="gpu", precision=code)
        be = op.backend
        bw = be.copy_bandwidth(nbytes=2 << 30)
        Fhat = op.engine.Fhat[prec.sbgemv]
        rng = np.random.default_rng(1)
        x1 = be.asarray(rng.standard_normal((Nm, Nt)))
        xK = be.asarray(rng.standard_normal((Nm, Nt, K)))
        t1 = waited(lambda: op.matvec(x1))
        fields = dict(code=code, Nm=Nm, Nd=Nd, Nt=Nt, K=K, copy_Bps=bw, device=be.device_name)
        emit(what="single", **fields, us=round(t1 * 1e6, 1), budget_us=round(t1 * K / TARGET * 1e6, 1),
             floor_ratio=round(t1 / (Fhat.nbytes / bw), 4))
        yK = be.empty((Nd, Nt, K), np.float64)
        variants = {"matvec": lambda: op.matvec(xK), "into": lambda: op.matvec(xK, out=yK),
                    "prepared": op.prepare(xK, out=yK)}
        rounds = {label: [] for label in variants}
        for _ in range(args.rounds):  # alternated, so that no variant always runs after a long stretch of load
            for label, fn in variants.items():
                rounds[label].append(waited(fn))
        for label, fn in variants.items():
            t = float(np.median(rounds[label]))
            emit(what=label, **fields, us=round(t * 1e6, 1), ratio=round(t1 * K / t, 2),
                 rounds_us=[round(r * 1e6, 1) for r in rounds[label]],
                 kernels_us=device_times(fn, cp.cuda.Device().synchronize, n=5))
        variants = None
        op = None  # only Fhat's bytes stay for the stand-ins

        spectra = cp.empty((Nf, Nm, K), prec.sbgemv_in)
        xs = cp.asarray(xK, dtype=np.float64)
        xK = yK = None
        expand = mod.get_function(f"expand<{'double2' if spectra.itemsize == 16 else 'float2'}, 4>")
        read_two = mod.get_function("read_two<8>")
        grid = (sms * 4,)

        def transform_traffic():
            expand(grid, (512,), (xs, np.int64(xs.size), spectra, np.int64(spectra.size)))

        def product_traffic():
            read_two(grid, (512,), (Fhat, np.int64(Fhat.nbytes // 16), spectra, np.int64(spectra.nbytes // 16), sink))

        def fused_traffic():
            read_two(grid, (512,), (Fhat, np.int64(Fhat.nbytes // 16), xs, np.int64(xs.nbytes // 16), sink))

        for label, calls, nbytes in (
            ("traffic", (transform_traffic, product_traffic), xs.nbytes + 2 * spectra.nbytes + Fhat.nbytes),
            ("traffic_transform", (transform_traffic,), xs.nbytes + spectra.nbytes),
            ("traffic_product", (product_traffic,), spectra.nbytes + Fhat.nbytes),
            ("fused", (fused_traffic,), xs.nbytes + Fhat.nbytes),
        ):
            def run():
                for call in calls:
                    call()

            t = waited(run)
            emit(what=label, **fields, us=round(t * 1e6, 1), GB=round(nbytes / 1e9, 3),
                 TBps=round(nbytes / t / 1e12, 3), ratio=round(t1 * K / t, 2))
        spectra = xs = Fhat = None
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
