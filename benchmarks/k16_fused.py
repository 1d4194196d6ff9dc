"""A `K = 16` forward product with the forward transform inside it, in
complex128 (`ddddd`): the one kind of design whose bytes fit the issue's
`K = 16` target (benchmarks/k16_bound.py, docs/gpu.md "K = 16").  An
experiment, not the engine's product: it is correct, and slower than the
engine (docs/gpu-kernels.md, stop 39).

    python benchmarks/k16_fused.py --out benchmarks/results/h200-k16-fused.jsonl

One persistent kernel, one block per multiprocessor (G blocks, all running
at once).  It keeps the sums of the frequencies it works on in registers
across all parameters, so it splits the frequencies in two sweeps, each
holding half of them (12.8 MB of sums at the big size, against 25.6 MB for
all):

* the even frequencies ``f = 2q`` are the unpadded real transform of length
  ``Nt`` (``q <= Nt/2``), computed as a complex transform of length
  ``M = Nt/2`` of ``x[2m] + i x[2m+1]`` and the usual post-processing;
* the odd frequencies ``f = 2k + 1`` (``k < M``) come from one complex
  transform of length ``M`` of ``v[t] = (x[t] - i x[t + M]) exp(-i pi t / Nt)``:
  ``X[4j + 1] = V[j]``, and ``X[f] = conj(X[2 Nt - f])`` gives the rest,
  ``X[2k + 1] = conj(V[(Nt - 1 - k) / 2])`` for odd ``k``.

Each sweep reads the inputs once (1.28 GB in all at the big size, against
the 2.56 GB a separate transform pass writes and reads back) and the rows
of `Fhat` of its frequencies.  A sweep runs over chunks of G parameters,
the whole grid in step:

1. block ``b`` transforms parameter ``c G + b`` (its 16 right-hand sides,
   ``--series`` at a time in shared memory, fft.cu's Stockham passes) and
   stores their spectra in a chunk buffer ``(Q, G, 16)`` that stays in the
   L2 (two buffers, used in turn);
2. a grid barrier (an atomic counter);
3. every warp adds the chunk's products to its tiles of sums (16 rows of
   `Fhat` of one frequency by the 16 right-hand sides, float64
   ``mma.sync.m16n8k8``, four real products per complex one), k-step by
   k-step of 8 columns through a ring of ``--stages`` stages in shared
   memory filled by ``cp.async``: each lane's own `Fhat` fragments, and the
   spectra of the block's frequencies.

After each sweep the sums go to ``Yhat (Nt + 1, Nd, 16)``; the engine's
fused inverse transform (``irfft_unpad``) makes ``y``.

The script checks the result against ``BTTOperator.matvec`` on the same
inputs and times, waited for (the bench's medians, alternated rounds): one
vector's ``matvec`` (16 vectors must take at most 16/12 of it: the
``budget_us``), the 16-vector ``matvec``, and the fused product, whole
(``fused_both``) and in parts (``--phases``): without its transforms
(``product``), without its products (``transform``), its barriers alone
(``barriers``), and its products' copies without their arithmetic
(``copies``).  Two more measurements say what bounds the products:
``dmma_rate`` (the float64 tensor cores' rate on values in registers) and
``rows_read`` (`Fhat` read by plain loads in the products' order of rows,
with several amounts of loads in flight).
"""
from __future__ import annotations

import math

import numpy as np

FUSED = r"""
namespace k16 {
typedef double2 C;
using fmv::index_t;

// d += a b for one 16 x 8 x 8 tile in float64 (the PTX ISA's fragments, g = lane / 4, t = lane % 4: a[e] =
// A[g + 8 (e & 1)][t + 4 (e >> 1)], b0 = B[t][g], b1 = B[t + 4][g], d[e] = C[g + 8 (e >> 1)][2 t + (e & 1)])
__device__ __forceinline__ void mma1688(double (&d)[4], const double (&a)[4], double b0, double b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b0), "d"(b1));
}
// d += a b for one 8 x 8 x 4 tile (a = A[g][t], b = B[t][g], d[e] = C[g][2 t + e]): only dmma_rate uses it
__device__ __forceinline__ void mma884(double (&d)[2], double a, double b) {
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
        : "+d"(d[0]), "+d"(d[1])
        : "d"(a), "d"(b));
}

// The Stockham passes of radices Rs... from NS on, between two buffers; returns the one holding the result.
template <int M, int NS, int S, int NT, int... Rs> struct Chain {
    static __device__ C* run(C* in, C*, const C*) { return in; }
};
template <int M, int NS, int S, int NT, int R, int... Rest> struct Chain<M, NS, S, NT, R, Rest...> {
    static __device__ C* run(C* in, C* out, const C* twp) {
        __syncthreads();
        fmv::stockham_pass<R, -1, M, NS, S, NT, 0>(in, out, twp);
        return Chain<M, NS * R, S, NT, Rest...>::run(out, in, twp);
    }
};

// The whole grid waits here until every block has arrived `target` / G times in all (count starts at zero).
__device__ void grid_barrier(unsigned* count, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(count, 1u);
        unsigned seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
        } while (seen < target);
        __threadfence();
    }
    __syncthreads();
}

// Spectra of parameter p's 16 series (x: (nm, N, 16)) at the sweep's frequencies into column b of sp (Q, G, 16):
// even sweep q <= M (f = 2q), odd sweep q < M (f = 2q + 1).  Zero for p >= nm.
template <int N, int NT, int S, int... Rs>
__device__ void transform(const double* __restrict__ x, C* sp, C* buf0, C* buf1, const C* __restrict__ twp,
                          const C* __restrict__ twl, const C* __restrict__ two, bool odd, int p, int nm) {
    constexpr int M = N / 2, K = 16, ld = fmv::Row<M, S, C>::ld;
    const int G = gridDim.x, b = blockIdx.x;
    const bool live = p < nm;
    const double* xp = x + (index_t)(live ? p : 0) * N * K;
    for (int k0 = 0; k0 < K; k0 += S) {
        for (int e = threadIdx.x; e < S * M; e += NT) {
            const int s = e % S, m = e / S;
            C z = fmv::czero<C>();
            if (live) {
                if (odd) {
                    const double a = __ldcs(xp + (index_t)m * K + k0 + s);
                    const double c = __ldcs(xp + (index_t)(m + M) * K + k0 + s);
                    z = fmv::cmul(make_double2(a, -c), __ldg(two + m));
                } else {
                    z = make_double2(__ldcs(xp + (index_t)(2 * m) * K + k0 + s),
                                     __ldcs(xp + (index_t)(2 * m + 1) * K + k0 + s));
                }
            }
            buf0[s * ld + m] = z;
        }
        const C* res = Chain<M, 1, S, NT, Rs...>::run(buf0, buf1, twp);
        __syncthreads();
        if (odd) {
            for (int e = threadIdx.x; e < S * M; e += NT) {
                const int s = e % S, q = e / S;
                const C v = (q & 1) ? fmv::cconj(res[s * ld + (N - 1 - q) / 2]) : res[s * ld + q / 2];
                sp[((index_t)q * G + b) * K + k0 + s] = v;
            }
        } else {
            for (int e = threadIdx.x; e < S * (M + 1); e += NT) {
                const int s = e % S, q = e / S;
                const C zf = res[s * ld + (q == M ? 0 : q)], zmf = res[s * ld + (q == 0 ? 0 : M - q)];
                sp[((index_t)q * G + b) * K + k0 + s] = fmv::real_spectrum(zf, zmf, __ldg(twl + q));
            }
        }
        __syncthreads();
    }
}

// Y[f, i, k] = sum_j A[f, i, j] X[f, j, k] with X the spectra of x (nm, N, 16), for all N + 1 frequencies
// (A: Fhat (N + 1, ND, NM), Y: (N + 1, ND, 16), complex128).  phases: 1 transforms, 2 products, 3 both;
// 4 with 2: the products' copies without their arithmetic.
// A sweep's tiles are its Q frequencies' rows in groups of 16 (rt a frequency, the last one padded); warp gw
// of the grid takes tiles gw T / W .. (gw + 1) T / W - 1 (at most TPW, at most two frequencies: rt >= TPW),
// so block b's tiles span at most XQ frequencies.
// Launch: gridDim.x = G <= the multiprocessors (one block each: they must all run at once), blockDim.x = NT,
// dynamic shared memory max(2 S Row<M, S>::ld, NS (4 TPW NT + 8 XQ XS)) * 16 bytes; spec 2 (M + 1) G 16
// complex; *count zero.
template <int N, int ND, int NM, int NT, int S, int TPW, int XQ, int NS, int... Rs>
__global__ void __launch_bounds__(NT, 1)
k16_fused(const double* __restrict__ x, const C* __restrict__ A, C* spec, C* __restrict__ Y,
          const C* __restrict__ twp, const C* __restrict__ twl, const C* __restrict__ two, unsigned* count,
          int phases) {
    constexpr int nd = ND, nm = NM, rt = (ND + 15) / 16, M = N / 2, K = 16, WPB = NT / 32;
    // X's rows in shared memory [frequency][column][right-hand side]: XS = 18 puts a fragment's lanes in
    // distinct banks
    constexpr int ld = fmv::Row<M, S, C>::ld, XS = K + 2, STAGE = 4 * TPW * NT + 8 * XQ * XS;
    static_assert(N % 2 == 0 && K % S == 0 && NT % 32 == 0 && NS >= 2, "sizes");
    extern __shared__ double2 fmv_smem[];
    C* buf0 = fmv_smem;  // the transform's two buffers, or the product's ring of NS stages
    C* buf1 = buf0 + S * ld;
    const int G = gridDim.x, b = blockIdx.x, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nchunks = (nm + G - 1) / G;
    const index_t bufsize = (index_t)(M + 1) * G * K;
    unsigned target = 0;
    int step = 0;
    for (int odd = 0; odd < 2; ++odd) {
        const int Q = odd ? M : M + 1;
        const long long T = (long long)Q * rt, W = (long long)G * WPB, gw = (long long)b * WPB + (threadIdx.x >> 5);
        const int tile0 = (int)(gw * T / W), ntiles = (int)((gw + 1) * T / W) - tile0;
        // tiles u < us are rows ra + 16 u .. of frequency qa, the others rows 16 (u - us) .. of qb; the lane's
        // rows of tile u are rows(u) + g (+ 8), A's at pa or pb + 16 u NM (+ 8 NM)
        const int qa = tile0 / rt, ra = tile0 % rt * 16, us = min(ntiles, rt - tile0 % rt);
        const int qb = us < ntiles ? qa + 1 : qa;
        auto rows = [&](int u) { return u < us ? ra + 16 * u : 16 * (u - us); };
        const C* pa = A + ((index_t)(2 * qa + odd) * nd + ra + g) * NM;
        const C* pb = A + ((index_t)(2 * qb + odd) * nd + g - 16 * us) * NM;
        // the block's frequencies qlo .. qlo + nq - 1
        const int qlo = (int)((long long)b * WPB * T / W) / rt;
        const int nq = (int)(((long long)(b + 1) * WPB * T / W - 1) / rt) - qlo + 1;
        double acc[TPW][2][2][4];  // [tile][right-hand sides 8h ..][Re, Im][fragment element], over all chunks
#pragma unroll
        for (int u = 0; u < TPW; ++u)
#pragma unroll
            for (int e = 0; e < 16; ++e) acc[u][e / 8][e / 4 % 2][e % 4] = 0;
        for (int c = 0; c < nchunks; ++c, ++step) {
            C* sp = spec + (step & 1) * bufsize;
            if (phases & 1) transform<N, NT, S, Rs...>(x, sp, buf0, buf1, twp, twl, two, odd, c * G + b, nm);
            target += G;
            grid_barrier(count, target);
            if (!(phases & 2)) continue;
            const int j0 = c * G, jn = min(G, nm - j0);
            // k-step j (columns 8 j .. 8 j + 7 of the chunk) goes to stage j % NS by cp.async, NS - 1 k-steps
            // ahead: A's fragments into the lane's own slots (4 u + e: row rows(u) + g + 8 (e & 1), column 8 j +
            // t + 4 (e >> 1)), which only it reads back; the spectra of the block's frequencies for all its warps.
            auto issue = [&](int j) {
                C* slot = buf0 + (j % NS) * STAGE + threadIdx.x;
#pragma unroll
                for (int u = 0; u < TPW; ++u)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int jl = 8 * j + t + 4 * (e >> 1), r = 8 * (e & 1);
                        const bool valid = u < ntiles && jl < jn && rows(u) + g + r < nd;
                        const C* src = (u < us ? pa : pb) + (index_t)(16 * u + r) * NM + j0 + jl;
                        fmv::cp_async<16>(slot + (4 * u + e) * NT, valid ? src : A, valid);
                    }
                C* xs = buf0 + (j % NS) * STAGE + 4 * TPW * NT;
                for (int p = threadIdx.x; p < nq * 8 * K; p += NT) {
                    const int qq = p / (8 * K), col = p / K % 8, k = p % K;
                    fmv::cp_async<16>(xs + (qq * 8 + col) * XS + k,
                                      sp + ((index_t)(qlo + qq) * G + min(8 * j + col, G - 1)) * K + k, true);
                }
                fmv::cp_async_commit();
            };
            const int nsteps = (jn + 7) / 8;
            for (int j = 0; j < NS - 1; ++j) issue(j);
            for (int j = 0; j < nsteps; ++j) {
                fmv::cp_async_wait<NS - 2>();
                __syncthreads();  // every thread's copies of step j are in, and every thread is done with j - 1
                issue(j + NS - 1);  // (into the stage of step j - 1)
                if (phases & 4) continue;  // the copies alone
                const C* slot = buf0 + (j % NS) * STAGE + threadIdx.x;
                const C* xs = buf0 + (j % NS) * STAGE + 4 * TPW * NT + t * XS + g;
#pragma unroll
                for (int u = 0; u < TPW; ++u) {
                    if (u >= ntiles) continue;  // (the same for the whole warp)
                    double ar[4], ai[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const C a = slot[(4 * u + e) * NT];
                        ar[e] = a.x;
                        ai[e] = a.y;
                    }
                    // X's values of right-hand side g + 8 h, columns t and t + 4
                    const C* xq = xs + ((u < us ? qa : qb) - qlo) * 8 * XS;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const C v0 = xq[8 * h], v1 = xq[4 * XS + 8 * h];
                        mma1688(acc[u][h][0], ar, v0.x, v1.x);  // Re += Ar Xr - Ai Xi
                        mma1688(acc[u][h][0], ai, -v0.y, -v1.y);
                        mma1688(acc[u][h][1], ar, v0.y, v1.y);  // Im += Ar Xi + Ai Xr
                        mma1688(acc[u][h][1], ai, v0.x, v1.x);
                    }
                }
            }
            fmv::cp_async_wait<0>();
            __syncthreads();  // the next transform writes over the ring
        }
#pragma unroll
        for (int u = 0; u < TPW; ++u) {
            if (u >= ntiles) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 4; ++e) {  // row rows(u) + g + 8 (e >> 1), right-hand side 8 h + 2 t + (e & 1)
                    const int i = rows(u) + g + 8 * (e >> 1);
                    if (i < nd)
                        Y[((index_t)(2 * (u < us ? qa : qb) + odd) * nd + i) * K + 8 * h + 2 * t + (e & 1)] =
                            make_double2(acc[u][h][0][e], acc[u][h][1][e]);
                }
        }
    }
}
}  // namespace k16

// Fhat's bytes read in the product's order alone: block b reads its share of each sweep's rows (the rows of
// frequencies odd, odd + 2, ..., as the product's tiles), W columns of them at a time (W * 16 bytes a row), with
// U loads of 16 bytes in flight a thread, through to the L2 only; out gets one sum a block (keeps the loads).
template <int W, int U> __global__ void rows_read(const double2* __restrict__ A, int nf, int nd, int nm, double* out) {
    const int G = gridDim.x, b = blockIdx.x;
    double sum = 0;
    for (int odd = 0; odd < 2; ++odd) {
        const long long R = (long long)((nf - odd + 1) / 2) * nd;  // the sweep's rows
        const int r0 = (int)(b * R / G), nr = (int)((b + 1) * R / G) - r0;
        for (int c0 = 0; c0 < nm; c0 += W) {
            const int n = nr * W;
            for (int p = threadIdx.x; p < n; p += U * blockDim.x) {
                double2 v[U];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int q = p + u * blockDim.x, r = r0 + q / W, col = c0 + q % W;
                    const long long row = (long long)(2 * (r / nd) + odd) * nd + r % nd;
                    v[u] = q < n && col < nm ? __ldcg(A + row * nm + col) : make_double2(0, 0);
                }
#pragma unroll
                for (int u = 0; u < U; ++u) sum += v[u].x + v[u].y;
            }
        }
    }
    if (sum == 1.2345) out[b] = sum;
}

// The float64 tensor cores' rate alone: every warp runs `reps` rounds of 8 independent m16n8k8 (KD = 8) or
// m8n8k4 (KD = 4) products on values in registers; out gets one sum a warp (keeps the products).
template <int KD> __global__ void dmma_rate(double* out, int reps) {
    double d[8][4] = {}, a[4];
    for (int e = 0; e < 4; ++e) a[e] = 1e-3 * (threadIdx.x + e);
    const double b0 = 1e-3 * threadIdx.x, b1 = 2e-3;
    for (int r = 0; r < reps; ++r)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if constexpr (KD == 8)
                k16::mma1688(d[i], a, b0, b1);
            else
                k16::mma884(reinterpret_cast<double(&)[2]>(d[i]), a[0], b0);
        }
    double sum = 0;
    for (int i = 0; i < 8; ++i) sum += d[i][0] + d[i][1] + d[i][2] + d[i][3];
    if (threadIdx.x % 32 == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = sum;
}
"""

K = 16
TARGET = 12
PHASES = {"both": 3, "product": 2, "transform": 1, "barriers": 0, "copies": 6}
# rows_read's orders: (columns a row visit, loads in flight a thread, threads a block)
READ_ORDERS = ((8, 8, 256), (32, 8, 256), (128, 8, 256), (32, 16, 256), (32, 8, 512), (32, 16, 512), (8, 16, 512),
               (16, 16, 512))


def source() -> str:
    """The kernels' text: native/fft.cu (its passes and helpers, includes expanded) and FUSED."""
    from fftmatvec.backend import kernels

    return kernels.source("fft.cu") + FUSED


class Layout:
    """How k16_fused splits one size over `blocks` multiprocessors (as its comments say), and its instantiation.

    Raises SystemExit for a size it does not take: Nt odd, Nt/2 with a prime factor above 7, or more tiles a warp
    than a frequency has (a warp's tiles would span three frequencies).
    """

    def __init__(self, Nt: int, Nd: int, Nm: int, blocks: int, threads: int, series: int, stages: int) -> None:
        from fftmatvec.backend.gpu import fft_radices

        self.radices = fft_radices(Nt // 2)
        if Nt % 2 or self.radices is None:
            raise SystemExit(f"Nt = {Nt}: needs Nt even and Nt/2 of factors 2, 3, 5, 7")
        self.Nt, self.Nd, self.Nm, self.blocks, self.threads, self.series, self.stages = (
            Nt, Nd, Nm, blocks, threads, series, stages)
        rt, warps = math.ceil(Nd / 16), blocks * threads // 32  # tiles of 16 rows a frequency; warps in all
        self.tiles_per_warp = math.ceil((Nt // 2 + 1) * rt / warps)  # the even sweep has Nt/2 + 1 frequencies
        if rt < self.tiles_per_warp:
            raise SystemExit(f"Nd = {Nd}: a warp's {self.tiles_per_warp} tiles would span more than two frequencies")
        self.block_frequencies = 0
        for Q in (Nt // 2 + 1, Nt // 2):
            T = Q * rt
            for b in range(blocks):
                first, end = b * (threads // 32) * T // warps, (b + 1) * (threads // 32) * T // warps
                self.block_frequencies = max(self.block_frequencies, (end - 1) // rt - first // rt + 1)

    @property
    def shared_bytes(self) -> int:
        """The kernel's dynamic shared memory (its launch comment)."""
        from fftmatvec.backend.gpu import fused_row_stride

        transform = 2 * self.series * fused_row_stride(self.Nt // 2, self.series, 16)
        ring = self.stages * (4 * self.tiles_per_warp * self.threads + 8 * self.block_frequencies * (K + 2))
        return max(transform, ring) * 16

    @property
    def name(self) -> str:
        return (f"k16::k16_fused<{self.Nt}, {self.Nd}, {self.Nm}, {self.threads}, {self.series}, "
                f"{self.tiles_per_warp}, {self.block_frequencies}, {self.stages}, {', '.join(map(str, self.radices))}>")

    def kernels(self) -> tuple[str, ...]:
        """Every instantiation the script launches."""
        reads = sorted({f"rows_read<{w}, {u}>" for w, u, _ in READ_ORDERS})
        return (self.name, "dmma_rate<8>", "dmma_rate<4>", *reads)


def main(argv=None) -> int:
    from gpu_probe import json_lines, size_parser

    ap = size_parser(__doc__)
    ap.add_argument("--threads", type=int, default=256, help="threads a block")
    ap.add_argument("--series", type=int, default=8, choices=(2, 4, 8, 16), help="series a block transforms at once")
    ap.add_argument("--stages", type=int, default=2, help="k-steps in the ring in shared memory")
    ap.add_argument("--phases", default=",".join(PHASES), help="which kernels to time, of " + ",".join(PHASES))
    ap.add_argument("-N", "--reps", type=int, default=10, help="waited-for calls per median")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds")
    args = ap.parse_args(argv)

    import cupy as cp

    from fftmatvec import BTTOperator
    from fftmatvec.backend import kernels
    from fftmatvec.backend.gpu import pass_twiddles
    from fftmatvec.bench import _median_time, random_slab

    emit = json_lines(args.out)
    Nm, Nd, Nt = args.Nm, args.Nd, args.Nt
    M = Nt // 2
    device = cp.cuda.Device()
    blocks = device.attributes["MultiProcessorCount"]
    lay = Layout(Nt, Nd, Nm, blocks, args.threads, args.series, args.stages)
    if lay.shared_bytes > device.attributes["MaxSharedMemoryPerBlockOptin"]:
        raise SystemExit(f"{lay.shared_bytes} bytes of shared memory a block, more than the device has: "
                         "fewer --stages or --series")
    mod = cp.RawModule(code=source(), options=kernels.options(), name_expressions=lay.kernels())
    fn = mod.get_function(lay.name)
    fn.max_dynamic_shared_size_bytes = lay.shared_bytes

    f = random_slab(0, Nd, Nm, Nt, (0, Nd), (0, Nm))
    op = BTTOperator(f, device="gpu", precision="ddddd")
    be = op.backend
    Fhat = op.engine.Fhat[np.dtype(np.complex128)]
    rng = np.random.default_rng(2)
    x1 = be.asarray(rng.standard_normal((Nm, Nt)))
    xK = be.asarray(rng.standard_normal((Nm, Nt, K)))
    twp = cp.asarray(pass_twiddles(lay.radices))
    twl = cp.asarray(np.exp(-2j * np.pi * np.arange(M + 1) / Nt))
    two = cp.asarray(np.exp(-1j * np.pi * np.arange(M) / Nt))
    spec = cp.zeros((2, M + 1, blocks, K), np.complex128)
    count = cp.zeros(1, np.uint32)
    Yhat = cp.zeros((Nt + 1, Nd, K), np.complex128)
    y = cp.empty((Nd, Nt, K), np.float64)
    sink = cp.empty(blocks * 16, np.float64)
    sync = device.synchronize

    def fused(phases: int = 3):
        count.fill(0)
        fn((blocks,), (args.threads,), (xK, Fhat, spec, Yhat, twp, twl, two, count, np.int32(phases)),
           shared_mem=lay.shared_bytes)
        be.irfft_unpad(Yhat, y, np.float64)

    fused()
    y_ref = op.matvec(xK)
    err = float(cp.abs(y - y_ref).max() / cp.abs(y_ref).max())
    fields = dict(Nm=Nm, Nd=Nd, Nt=Nt, K=K, blocks=blocks, threads=args.threads, tiles_per_warp=lay.tiles_per_warp,
                  stages=args.stages, series=args.series, device=be.device_name, kernel=lay.name)
    check = dict(rel_error=err, registers=fn.num_regs, local_bytes=fn.local_size_bytes)
    if not err < 1e-12:  # which frequencies are wrong: Yhat against cupy's transform and batched product
        pad = cp.concatenate([xK, cp.zeros_like(xK)], axis=1)
        ref = cp.matmul(Fhat, cp.fft.rfft(pad, axis=1).transpose(1, 0, 2))
        scale = float(cp.abs(ref).max())
        check.update(yhat_error_even=float(cp.abs(Yhat[0::2] - ref[0::2]).max()) / scale,
                     yhat_error_odd=float(cp.abs(Yhat[1::2] - ref[1::2]).max()) / scale)
        ref = pad = None
    emit(what="check", **fields, **check)

    for kd, shape, fma in ((8, "m16n8k8", 16 * 8 * 8), (4, "m8n8k4", 8 * 8 * 4)):  # 8 warps a multiprocessor
        rate, reps = mod.get_function(f"dmma_rate<{kd}>"), 20000
        t = _median_time(lambda: rate((blocks,), (256,), (sink, np.int32(reps))), 5, sync)
        emit(what="dmma_rate", **fields, shape=shape, us=round(t * 1e6, 1),
             tflops=round(2 * fma * 8 * reps * blocks * 8 / t / 1e12, 2))
    for w, u, nt in READ_ORDERS:
        read = mod.get_function(f"rows_read<{w}, {u}>")
        t = _median_time(lambda: read((blocks,), (nt,), (Fhat, np.int32(Nt + 1), np.int32(Nd), np.int32(Nm), sink)),
                         5, sync)
        emit(what="rows_read", **fields, columns=w, read_threads=nt, in_flight_bytes=16 * u * nt,
             us=round(t * 1e6, 1), TBps=round(Fhat.nbytes / t / 1e12, 3))

    variants = {"single": lambda: op.matvec(x1), "matvec": lambda: op.matvec(xK)}
    for name in args.phases.split(","):
        variants[f"fused_{name}"] = (lambda p: lambda: fused(p))(PHASES[name])
    rounds = {label: [] for label in variants}
    for _ in range(args.rounds):  # alternated, as the bench's columns
        for label, call in variants.items():
            rounds[label].append(_median_time(call, args.reps, sync))
    t1 = float(np.median(rounds["single"]))
    for label in variants:
        t = float(np.median(rounds[label]))
        extra = {"budget_us": round(t1 * K / TARGET * 1e6, 1)} if label == "single" else {"ratio": round(t1 * K / t, 2)}
        emit(what=label, **fields, us=round(t * 1e6, 1), rounds_us=[round(r * 1e6, 1) for r in rounds[label]], **extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
