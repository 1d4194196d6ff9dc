"""A `K = 16` forward product with the forward transform inside it, in
complex128 (`ddddd`): the one kind of design whose bytes fit the issue's
`K = 16` target (benchmarks/k16_bound.py, docs/gpu.md "K = 16").  An
experiment, not the engine's product: it is correct, and slower than the
engine (docs/gpu-kernels.md, stops 39 to 42).

    python benchmarks/k16_fused.py --out benchmarks/results/h200-k16-fused.jsonl

Persistent kernels, one block per multiprocessor (G blocks, all running at
once).  They keep the sums of the frequencies they work on in registers
across all parameters, so they split the frequencies in two sweeps, each
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
of `Fhat` of its frequencies.  A sweep runs over chunks of P = 8 (G / 8)
parameters: the chunk's parameters are transformed into spectra in a chunk
buffer that stays in the L2 (two buffers, used in turn), laid out as the
tensor cores take them; then every warp that multiplies adds the chunk's
products to its tiles of sums (16 rows of `Fhat` of one frequency by the 16
right-hand sides, float64 ``mma.sync.m16n8k8``, four real products per
complex one), k-step by k-step of 8 columns through a ring of stages in
shared memory.  ``--kernels`` names the forms:

* ``rows`` and ``bulk`` (``k16_fused``): the whole grid in step, each
  chunk's transforms (block ``b < P`` takes parameter ``c P + b``,
  ``--series`` at a time, fft.cu's Stockham passes), a grid barrier, then
  its products.  ``rows`` copies `Fhat` as the engine holds it, each lane
  its own fragments by ``cp.async``; ``bulk`` reads `Fhat` packed once
  (``k16_pack``) so that a block's k-step is one contiguous run, copied by
  one bulk copy (``cp.async.bulk``, counted by an ``mbarrier``) and
  refilled by the last warp done with the stage.
* ``ws`` (``k16_ws``, warp specialisation): in every block one or two
  warpgroups transform chunk after chunk while two others multiply, as
  one stream of k-steps over both sweeps (packed `Fhat`, bulk copies);
  counters in global memory hand each chunk's spectra over, and
  ``setmaxnreg`` gives the warps that multiply the registers of those that
  transform.  ``--ws`` lists its settings, each a kernel of its own.

After each sweep the sums go to ``Yhat (Nt + 1, Nd, 16)``; the engine's
fused inverse transform (``irfft_unpad``) makes ``y``.

The script checks the result against ``BTTOperator.matvec`` on the same
inputs and times, waited for (the bench's medians, alternated rounds): one
vector's ``matvec`` (16 vectors must take at most 16/12 of it: the
``budget_us``), the 16-vector ``matvec``, and each form, whole (``*_both``)
and in parts (``--phases``): without its transforms (``product``), without
its products (``transform``), its barriers alone (``barriers``), its
products' copies without their arithmetic (``copies``) and their arithmetic
without the copies (``math``); for ``ws`` also its transforms without their
stores (``unstored``), without their copies of the samples (``unfetched``)
and without either (``computed``); its transforms beside the products'
copies alone (``with_copies``) or beside their arithmetic alone
(``with_math``); and its products beside the transforms without their
stores, without their copies of the samples or without either
(``with_unstored``, ``with_unfetched``, ``with_computed``).  Two more
measurements say what bounds the products: ``dmma_rate`` (the float64
tensor cores' rate on values in registers, in three shapes) and
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
// d += a b for one 16 x 8 x 4 tile (a0 = A[g][t], a1 = A[g + 8][t], b = B[t][g], d as mma1688's; sm_90)
__device__ __forceinline__ void mma1684(double (&d)[4], double a0, double a1, double b) {
    asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a0), "d"(a1), "d"(b));
}
// d += a b for one 16 x 8 x 8 tile as mma1688, in one product or (K4) as two of 16 x 8 x 4, which hold the float64
// pipe half as long each
template <bool K4> __device__ __forceinline__ void mma_k8(double (&d)[4], const double (&a)[4], double b0, double b1) {
    if constexpr (K4) {
        mma1684(d, a[0], a[1], b0);
        mma1684(d, a[2], a[3], b1);
    } else {
        mma1688(d, a, b0, b1);
    }
}
// d += a b for one 8 x 8 x 4 tile (a = A[g][t], b = B[t][g], d[e] = C[g][2 t + e]): only dmma_rate uses it
__device__ __forceinline__ void mma884(double (&d)[2], double a, double b) {
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
        : "+d"(d[0]), "+d"(d[1])
        : "d"(a), "d"(b));
}

// 1-D bulk copies (cp.async.bulk: one contiguous run, global to shared, at evict-first priority in the L2),
// whose bytes count down a shared-memory barrier's transaction count as they land (the barriers: fmv::mbar_*,
// native/fftmatvec_common.cuh).
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar,
                                          bool evict_first) {
    if (evict_first)
        asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_first.b64 pol, 1.0;\n\t"
                     "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], "
                     "%2, [%3], pol;\n\t}" ::"r"(fmv::smem_address(dst)), "l"(src), "r"(bytes),
                     "r"(fmv::smem_address(bar))
                     : "memory");
    else
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         fmv::smem_address(dst)), "l"(src), "r"(bytes), "r"(fmv::smem_address(bar))
                     : "memory");
}

// The L2 fetches `bytes` (a multiple of 16) at src (16-byte aligned), ahead of a bulk copy of them
__device__ __forceinline__ void prefetch_l2(const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// The box at (column c0, row r0) of the 2-D tensor map `map` (in global memory) into dst (128-byte aligned), counted
// by bar.
__device__ __forceinline__ void tensor_copy(void* dst, const void* map, int c0, int r0, unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
            "r"(fmv::smem_address(dst)),
        "l"(map), "r"(c0), "r"(r0), "r"(fmv::smem_address(bar))
        : "memory");
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

// The chunk's spectra sp (doubles): frequency q's P columns by 16 right-hand sides, k-step by k-step (columns
// 8 jj .. 8 jj + 7), each k-step a plane of real parts then one of imaginary parts, each plane 4 x 16 pairs:
// pair (t, (k + 2 t) % 16) holds columns 8 jj + t and 8 jj + t + 4 of right-hand side k.  A lane's operand b0, b1
// of mma1688 is one pair (one 16-byte load), and the swizzle puts a quarter warp's pairs in distinct banks.
__device__ __forceinline__ index_t spec_at(int q, int P, int p, int k, int plane) {
    const int col = p % 8, t = col % 4;
    return ((index_t)q * P + p / 8 * 8) * 32 + plane * 128 + (t * 16 + (k + 2 * t) % 16) * 2 + col / 4;
}
// (a, b) at p (16-byte aligned) under the L2 policy pol (createpolicy)
__device__ __forceinline__ void st_pair(double* p, double a, double b, unsigned long long pol) {
    asm volatile("st.global.L2::cache_hint.v2.f64 [%0], {%1, %2}, %3;" ::"l"(p), "d"(a), "d"(b), "l"(pol) : "memory");
}
// v at p, at evict-last priority in the L2 (for what the grid reads back while Fhat's stream passes)
__device__ __forceinline__ void st_evict_last(double* p, double v) {
    asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
                 "st.global.L2::cache_hint.f64 [%0], %1, pol;\n\t}" ::"l"(p), "d"(v)
                 : "memory");
}

// Spectra of parameter p's 16 series (x: (nm, N, 16)) at the sweep's frequencies into column b of sp (spec_at):
// even sweep q <= M (f = 2q), odd sweep q < M (f = 2q + 1).  Zero for p >= nm.
template <int N, int NT, int S, int... Rs>
__device__ void transform(const double* __restrict__ x, double* sp, int P, C* buf0, C* buf1,
                          const C* __restrict__ twp, const C* __restrict__ twl, const C* __restrict__ two, bool odd,
                          int p, int nm) {
    constexpr int M = N / 2, K = 16, ld = fmv::Row<M, S, C>::ld;
    const int b = blockIdx.x;
    const bool live = p < nm;
    const double* xp = x + (index_t)(live ? p : 0) * N * K;
    auto store = [&](int q, int k, C v) {
        st_evict_last(sp + spec_at(q, P, b, k, 0), v.x);
        st_evict_last(sp + spec_at(q, P, b, k, 1), v.y);
    };
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
                store(q, k0 + s, (q & 1) ? fmv::cconj(res[s * ld + (N - 1 - q) / 2]) : res[s * ld + q / 2]);
            }
        } else {
            for (int e = threadIdx.x; e < S * (M + 1); e += NT) {
                const int s = e % S, q = e / S;
                const C zf = res[s * ld + (q == M ? 0 : q)], zmf = res[s * ld + (q == 0 ? 0 : M - q)];
                store(q, k0 + s, fmv::real_spectrum(zf, zmf, __ldg(twl + q)));
            }
        }
        __syncthreads();
    }
}

// How one sweep's tiles fall to the grid's warps: its Q frequencies' rows in groups of 16 (rt a frequency, the
// last one padded), warp gw taking tiles gw T / W .. (gw + 1) T / W - 1 (at most TPW, at most two frequencies:
// rt >= TPW).  The warp's tiles u < us are rows ra + 16 u .. of frequency qa, the others rows 16 (u - us) .. of
// qb; the lane's rows of tile u are rows(u) + g and rows(u) + g + 8 (g = lane / 4).
//
// Fhat packed for the products (k16_pack), in doubles: sweep by sweep (the even one first), block by block,
// k-step by k-step (columns 8 J .. 8 J + 7, NJ = ceil(NM / 8) of them, columns past NM zero), the block's tiles in
// order; a tile's fragment elements e = 0..3 (mma1688's a[e]) in turn, each the real parts of its valid lanes
// then their imaginary parts.  The lanes whose row is valid are a prefix of the warp: element_span of them.  A
// block's k-step is one contiguous run of `step` doubles, and its k-steps follow each other.
template <int ND, int NM> struct Sweep {
    static constexpr int rt = (ND + 15) / 16, NJ = (NM + 7) / 8;
    int tile0, ntiles, qa, ra, us, qb, qlo, nq;  // qlo .. qlo + nq - 1: the block's frequencies
    long long r0, block_base, step;  // the block's rows before its tiles; its run of k-step J: block_base + J step
    __device__ Sweep(int odd, int M, int G, int WPB, int b, int warp) {
        const long long T = (long long)(odd ? M : M + 1) * rt, W = (long long)G * WPB, gw = (long long)b * WPB + warp;
        tile0 = (int)(gw * T / W);
        ntiles = (int)((gw + 1) * T / W) - tile0;
        qa = tile0 / rt;
        ra = tile0 % rt * 16;
        us = min(ntiles, rt - tile0 % rt);
        qb = us < ntiles ? qa + 1 : qa;
        const int tb0 = (int)((long long)b * WPB * T / W), tb1 = (int)((long long)(b + 1) * WPB * T / W);
        qlo = tb0 / rt;
        nq = (tb1 - 1) / rt - qlo + 1;
        r0 = rows_before(tb0);
        step = 16 * (rows_before(tb1) - r0);
        block_base = (odd ? 16LL * NJ * (M + 1) * ND : 0) + 16 * NJ * r0;
    }
    // the sweep's rows in the tiles before tile tau
    __device__ static long long rows_before(int tau) { return (long long)(tau / rt) * ND + min(ND, 16 * (tau % rt)); }
    __device__ int rows(int u) const { return u < us ? ra + 16 * u : 16 * (u - us); }
    __device__ int freq(int u) const { return u < us ? qa : qb; }
    // where tile u's run starts within the block's k-step
    __device__ int tile_at(int u) const { return (int)(16 * (rows_before(tile0 + u) - r0)); }
    // the valid rows of tile u: 16, or ND % 16 for the last tile of a frequency
    __device__ int tile_rows(int u) const { return min(16, ND - 16 * ((tile0 + u) % rt)); }
};
// Fragment element e of a tile with v valid rows, in the tile's run: the lane's real part at element_at(v, e) +
// lane, its imaginary part element_span(v, e) further (the lanes of valid rows: valid when the lane's row is)
__device__ constexpr int element_span(int v, int e) { return e & 1 ? 4 * (v > 8 ? v - 8 : 0) : 4 * (v < 8 ? v : 8); }
__device__ constexpr int element_at(int v, int e) {
    return (e >> 1) * 2 * (element_span(v, 0) + element_span(v, 1)) + (e & 1) * 2 * element_span(v, 0);
}
// The lane's fragments of a tile of V valid rows whose run (the lane's part of it) starts at a: A's real parts ar
// and imaginary parts ai, mma1688's a.  An invalid row's lanes read what the sums of that row only get.
template <int V> __device__ __forceinline__ void load_fragments(const double* a, double (&ar)[4], double (&ai)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        ar[e] = a[element_at(V, e)];
        ai[e] = a[element_at(V, e) + element_span(V, e)];
    }
}
// Where the lane's pair of right-hand side g + 8 h (columns t and t + 4) lies in a frequency's plane of X
// (spec_at's layout)
__device__ __forceinline__ int x_lane(int g, int t, int h) { return (t * 16 + (g + 8 * h + 2 * t) % 16) * 2; }

// acc += A X for one tile of the warp at one k-step, from the lane's fragments ar, ai (A's real and imaginary
// parts, mma1688's a) and its pairs of X in the tile's frequency's real plane, x[h] (x_lane's; the imaginary plane
// 128 doubles on): Re += Ar Xr - Ai Xi, Im += Ar Xi + Ai Xr, the four products with Ar first, then those with Ai
// (a product waits for the one before it on the same sums), each by mma_k8<K4>.
template <bool K4>
__device__ __forceinline__ void tile_product(double (&acc)[2][2][4], const double (&ar)[4], const double (&ai)[4],
                                             const double* const (&x)[2]) {
    double2 xr[2], xi[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        xr[h] = *reinterpret_cast<const double2*>(x[h]);
        xi[h] = *reinterpret_cast<const double2*>(x[h] + 128);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mma_k8<K4>(acc[h][0], ar, xr[h].x, xr[h].y);
        mma_k8<K4>(acc[h][1], ar, xi[h].x, xi[h].y);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mma_k8<K4>(acc[h][0], ai, -xi[h].x, -xi[h].y);
        mma_k8<K4>(acc[h][1], ai, xr[h].x, xr[h].y);
    }
}
// The warp's sums of one sweep into Y (N + 1, ND, 16): tile u's lane holds rows rows(u) + g + 8 (e >> 1), right-hand
// sides 8 h + 2 t + (e & 1).
template <int TPW, int ND, int NM>
__device__ void store_sums(C* __restrict__ Y, const double (&acc)[TPW][2][2][4], const Sweep<ND, NM>& sw, int odd,
                           int g, int t) {
    constexpr int K = 16;
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
        if (u >= sw.ntiles) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = sw.rows(u) + g + 8 * (e >> 1);
                if (i < ND)
                    Y[((index_t)(2 * sw.freq(u) + odd) * ND + i) * K + 8 * h + 2 * t + (e & 1)] =
                        make_double2(acc[u][h][0][e], acc[u][h][1][e]);
            }
    }
}

// P = Fhat (N + 1, ND, NM) packed (Sweep), 16 NJ (N + 1) ND doubles.  The same launch as k16_fused's.
template <int N, int ND, int NM, int NT>
__global__ void __launch_bounds__(NT) k16_pack(const C* __restrict__ A, double* __restrict__ P) {
    constexpr int WPB = NT / 32;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int odd = 0; odd < 2; ++odd) {
        const Sweep<ND, NM> sw(odd, N / 2, gridDim.x, WPB, blockIdx.x, threadIdx.x >> 5);
        for (int J = 0; J < Sweep<ND, NM>::NJ; ++J)
            for (int u = 0; u < sw.ntiles; ++u)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = sw.rows(u) + g + 8 * (e & 1), j = 8 * J + t + 4 * (e >> 1), v = sw.tile_rows(u);
                    const int n = element_span(v, e);
                    double* dst = P + sw.block_base + J * sw.step + sw.tile_at(u) + element_at(v, e) + lane;
                    if (i < ND) {
                        const C a = j < NM ? A[((index_t)(2 * sw.freq(u) + odd) * ND + i) * NM + j] : fmv::czero<C>();
                        dst[0] = a.x;
                        dst[n] = a.y;
                    }
                }
    }
}

// Y[f, i, k] = sum_j A[f, i, j] X[f, j, k] with X the spectra of x (nm, N, 16), for all N + 1 frequencies
// (A: Fhat (N + 1, ND, NM), or packed by k16_pack when BULK; Y: (N + 1, ND, 16), complex128).  phases:
// 1 transforms, 2 products, 3 both; 4 with 2: the products' copies without their arithmetic, 8 with 2: their
// arithmetic without the copies.
// Sweep by sweep, chunk by chunk of P = 8 (G / 8) parameters: block b < P transforms parameter c P + b into
// the chunk's spectra (spec_at).  Block b's tiles (Sweep) span at most XQ frequencies.
// The products' ring in shared memory: NS stages of k-steps, each A's values then X's (the spectra of XQ
// frequencies at the k-step, 256 doubles each, as spec_at).  Without BULK, every thread copies its own entries
// of A into 4 TPW NT slots (slot 4 u + e, thread), and all threads X, by cp.async; with BULK, one thread copies
// the block's k-step of packed A (AST complex values at most) and X in one bulk copy a frequency, counted by the
// stage's mbarrier: thread 0 the first NS k-steps of a chunk, then the last warp done with a stage the k-step NS
// on.
// Launch: gridDim.x = G <= the multiprocessors (one block each: they must all run at once), blockDim.x = NT,
// dynamic shared memory (max(2 S Row<M, S>::ld, NS STAGE) + 32) * 16 + 12 NS bytes; spec 2 (M + 1) P 32 doubles;
// *count zero.
template <int N, int ND, int NM, int NT, int S, int TPW, int XQ, int NS, bool BULK, int AST, int... Rs>
__global__ void __launch_bounds__(NT, 1)
k16_fused(const double* __restrict__ x, const void* __restrict__ Fhat, double* spec, C* __restrict__ Y,
          const C* __restrict__ twp, const C* __restrict__ twl, const C* __restrict__ two, unsigned* count,
          int phases) {
    constexpr int nd = ND, nm = NM, M = N / 2, K = 16, WPB = NT / 32, ld = fmv::Row<M, S, C>::ld;
    // in complex values; the 32 after the ring: where the lanes of invalid rows read (values they never use)
    constexpr int XST = 8 * XQ * K, AS = BULK ? AST : 4 * TPW * NT, STAGE = AS + XST;
    constexpr int SMEM = (2 * S * ld > NS * STAGE ? 2 * S * ld : NS * STAGE) + 32;
    static_assert(N % 2 == 0 && K % S == 0 && NT % 32 == 0 && NS >= 2, "sizes");
    extern __shared__ double2 fmv_smem[];
    C* buf0 = fmv_smem;  // the transform's two buffers, or the product's ring of NS stages
    C* buf1 = buf0 + S * ld;
    // BULK: a stage's copies landed, and the warps done with it (counting up, WPB a k-step)
    unsigned long long* full = reinterpret_cast<unsigned long long*>(fmv_smem + SMEM);
    unsigned* done = reinterpret_cast<unsigned*>(full + NS);
    const C* A = static_cast<const C*>(Fhat);
    const double* Apk = static_cast<const double*>(Fhat);
    const int G = gridDim.x, P = G / 8 * 8, b = blockIdx.x, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nchunks = (nm + P - 1) / P;
    const index_t bufsize = (index_t)(M + 1) * P * 2 * K;
    if (BULK && threadIdx.x == 0) {
        for (int s = 0; s < NS; ++s) {
            fmv::mbar_init(full + s, 1);
            done[s] = 0;
        }
        fmv::mbar_init_fence();
    }
    __syncthreads();
    unsigned target = 0;
    int step = 0, kbase = 0;  // chunks and k-steps done
    for (int odd = 0; odd < 2; ++odd) {
        const Sweep<ND, NM> sw(odd, M, G, WPB, b, threadIdx.x >> 5);
        const int ntiles = sw.ntiles, qlo = sw.qlo, nq = sw.nq;
        // A's rows of tile u, for the lane (rows(u) + g, + 8 NM for the other 8): pa or pb + 16 u NM
        const C* pa = A + ((index_t)(2 * sw.qa + odd) * nd + sw.ra + g) * NM;
        const C* pb = A + ((index_t)(2 * sw.qb + odd) * nd + g - 16 * sw.us) * NM;
        double acc[TPW][2][2][4];  // [tile][right-hand sides 8h ..][Re, Im][fragment element], over all chunks
#pragma unroll
        for (int u = 0; u < TPW; ++u)
#pragma unroll
            for (int e = 0; e < 16; ++e) acc[u][e / 8][e / 4 % 2][e % 4] = 0;
        for (int c = 0; c < nchunks; ++c, ++step) {
            double* sp = spec + (step & 1) * bufsize;
            if ((phases & 1) && b < P)
                transform<N, NT, S, Rs...>(x, sp, P, buf0, buf1, twp, twl, two, odd, c * P + b, nm);
            target += G;
            grid_barrier(count, target);
            if (!(phases & 2)) continue;
            const int j0 = c * P, jn = min(P, nm - j0), nsteps = (jn + 7) / 8;
            // k-step j (columns 8 j .. 8 j + 7 of the chunk) goes to stage (kbase + j) % NS: by cp.async NS - 1
            // k-steps ahead, all threads; with BULK, by the calling thread NS k-steps ahead
            auto issue = [&](int j) {
                C* const stage = buf0 + (kbase + j) % NS * STAGE;
                if constexpr (BULK) {
                    if (j >= nsteps) return;
                    unsigned long long* bar = full + (kbase + j) % NS;
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // after the ring's last reads
                    fmv::mbar_arrive_expect_tx(bar, (unsigned)(8 * sw.step + nq * 8 * K * 16));
                    bulk_copy(stage, Apk + sw.block_base + (c * P / 8 + j) * sw.step, (unsigned)(8 * sw.step), bar,
                              true);
                    for (int qq = 0; qq < nq; ++qq)
                        bulk_copy(stage + AS + qq * 8 * K, sp + spec_at(qlo + qq, P, 8 * j, 0, 0), 8 * K * 16, bar,
                                  false);
                } else {
                    // A's fragments into the lane's own slots (4 u + e: row rows(u) + g + 8 (e & 1), column 8 j + t +
                    // 4 (e >> 1)), which only it reads back
#pragma unroll
                    for (int u = 0; u < TPW; ++u)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int jl = 8 * j + t + 4 * (e >> 1), r = 8 * (e & 1);
                            const bool valid = u < ntiles && jl < jn && sw.rows(u) + g + r < nd;
                            const C* src = (u < sw.us ? pa : pb) + (index_t)(16 * u + r) * NM + j0 + jl;
                            fmv::cp_async<16>(stage + (4 * u + e) * NT + threadIdx.x, valid ? src : A, valid);
                        }
                    for (int p = threadIdx.x; p < nq * 8 * K; p += NT) {
                        const int qq = p / (8 * K), jc = min(8 * j, P - 8);
                        fmv::cp_async<16>(stage + AS + p, sp + spec_at(qlo + qq, P, jc, 0, 0) + 2 * (p % (8 * K)),
                                          true);
                    }
                    fmv::cp_async_commit();
                }
            };
            const bool copies = !(phases & 8);  // (without: the arithmetic alone, on what the ring holds)
            if (copies && (!BULK || threadIdx.x == 0))
                for (int j = 0; j < (BULK ? NS : NS - 1); ++j) issue(j);
            for (int j = 0; j < nsteps; ++j) {
                const int s = (kbase + j) % NS;
                if constexpr (BULK) {
                    if (copies) fmv::mbar_wait(full + s, (kbase + j) / NS & 1);
                } else {
                    if (copies) fmv::cp_async_wait<NS - 2>();
                    __syncthreads();  // every copy of step j is in, and every thread is done with j - 1
                    if (copies) issue(j + NS - 1);  // (into the stage of step j - 1)
                }
                const C* stage = buf0 + s * STAGE;
                const double* stage_d = reinterpret_cast<const double*>(stage);
#pragma unroll
                for (int u = 0; u < TPW; ++u) {
                    if (u >= ntiles || (phases & 4)) continue;  // (the same for the whole warp; 4: the copies alone)
                    double ar[4], ai[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        if constexpr (BULK) {  // an invalid row's lanes read what the sums of that row only get
                            const int v = sw.tile_rows(u), at = sw.tile_at(u) + element_at(v, e) + lane;
                            ar[e] = stage_d[at];
                            ai[e] = stage_d[at + element_span(v, e)];
                        } else {
                            const C a = stage[(4 * u + e) * NT + threadIdx.x];
                            ar[e] = a.x;
                            ai[e] = a.y;
                        }
                    }
                    const double* xq = stage_d + 2 * AS + (sw.freq(u) - qlo) * 16 * K;
                    tile_product<false>(acc[u], ar, ai, {xq + x_lane(g, t, 0), xq + x_lane(g, t, 1)});
                }
                if constexpr (BULK) {  // the last warp done with step j refills its stage with step j + NS
                    __syncwarp();
                    if (lane == 0 && atomicAdd(done + s, 1u) % WPB == WPB - 1 && copies) issue(j + NS);
                    __syncwarp();  // (mma.sync wants the warp converged)
                }
            }
            if (!BULK) fmv::cp_async_wait<0>();
            kbase += nsteps;
            __syncthreads();  // the next transform writes over the ring
        }
        store_sums(Y, acc, sw, odd, g, t);
    }
}

// NT threads (whole warps) wait for each other at named barrier id (bar.sync wants each warp converged).
template <int NT> __device__ __forceinline__ void named_barrier(int id) {
    __syncwarp();
    asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(NT) : "memory");
}

// k16_ws's waits are bounded: one longer than 2^31 cycles (about a second) counts itself in watch[0], notes the
// first such (block, thread, kind, index) in watch[1 .. 4] and gives up, and every wait longer than 2^20 cycles
// after it gives up at once; a stuck pipeline ends the kernel with that record instead of hanging the GPU.  (A
// shorter wait does not read watch: a load from the L2 in every wait held the products up.)
__device__ bool gave_up(long long start, unsigned* watch, unsigned kind, unsigned index) {
    const long long waited = clock64() - start;
    if (waited < (1LL << 20) || (waited < (1LL << 31) && *(volatile unsigned*)watch == 0)) return false;
    if (atomicAdd(watch, 1u) == 0) {
        watch[1] = blockIdx.x;
        watch[2] = threadIdx.x;
        watch[3] = kind;
        watch[4] = index;
    }
    return true;
}
// Spin until counter[index] >= target (one thread; acquire at GPU scope)
__device__ void wait_count(const unsigned* counter, int index, unsigned target, unsigned* watch, unsigned kind) {
    const long long start = clock64();
    unsigned seen;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter + index) : "memory");
    } while (seen < target && !gave_up(start, watch, kind, index));
}
// fmv::mbar_wait, bounded (kind 3, index kk)
__device__ void mbar_wait_bounded(unsigned long long* bar, unsigned parity, unsigned* watch, int kk) {
    const long long start = clock64();
    unsigned done;
    do
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(fmv::smem_address(bar)), "r"(parity)
            : "memory");
    while (!done && !gave_up(start, watch, 3, kk));
}

// w^m for w = exp(-i pi / N), any m >= 0, from the eighth of the circle T[r] = w^r (r <= N / 4) in shared memory:
// w^(N / 2 - r) = -i conj(w^r), w^(m + N / 2) = -i w^m
template <int N> __device__ __forceinline__ C omega(const C* T, int m) {
    constexpr int Q = N / 2, E = N / 4;
    static_assert(N % 4 == 0, "an eighth of the circle");
    m %= 2 * N;
    const int r = m % Q;
    C a = T[r <= E ? r : Q - r];
    if (r > E) a = make_double2(-a.y, -a.x);
    switch (m / Q) {
        case 0: return a;
        case 1: return make_double2(a.y, -a.x);
        case 2: return make_double2(-a.x, -a.y);
        default: return make_double2(-a.y, a.x);
    }
}

// One Stockham pass of radix R over S series of M = N / 2 points, from `in` to `out`, by the TT threads of a team
// (tid its thread), its twiddles from Tp (pass_twiddles' table, in shared memory).
template <int N, int R, int NS, int S, int TT> __device__ void pass_ws(const C* in, C* out, const C* Tp, int tid) {
    constexpr int M = N / 2, H = (R + 1) / 2;
    typedef fmv::Butterfly<R, M, NS, S, C> Item;
    for (int e = tid; e < S * Item::nb; e += TT) {
        const Item b(e);
        C v[R];
        b.load(in, v);
        const C* w = Tp + (NS - 1) + b.k;
        fmv::twiddle_dft<R, -1, NS>(v, fmv::Twiddles<C>{w[0], w[(H - 1) * NS]});
        b.store(out, v);
    }
}
// The passes of radices Rs... from NS on, between two buffers (the team's named barrier id before each, twiddles
// from Tp); returns the buffer holding the result.
template <int N, int NS, int S, int TT, int... Rs> struct ChainWS {
    static __device__ C* run(C* in, C*, const C*, int, int) { return in; }
};
template <int N, int NS, int S, int TT, int R, int... Rest> struct ChainWS<N, NS, S, TT, R, Rest...> {
    static __device__ C* run(C* in, C* out, const C* Tp, int tid, int id) {
        named_barrier<TT>(id);
        pass_ws<N, R, NS, S, TT>(in, out, Tp, tid);
        return ChainWS<N, NS * R, S, TT, Rest...>::run(out, in, Tp, tid, id);
    }
};
// Where sample t of series s (parameter pp = s / KR, right-hand side kk = s % KR) lies in a round's raw buffer:
// (t, s) doubles, or with TMA parameter by parameter, each (t, kk) doubles over RAWP (boxes of 256 time steps).
template <int N, int S, bool TMA> struct Samples {
    static constexpr int KR = S / 2, RAWP = (N + 255) / 256 * 256 * KR, SIZE = TMA ? 2 * RAWP : N * S;
    static __device__ __forceinline__ int at(int s, int t) { return TMA ? s / KR * RAWP + t * KR + s % KR : t * S + s; }
};
// The first pass (radix R, no twiddles) straight from the samples r (Samples): series s's point m is
// x[2m] + i x[2m + 1] (even sweep) or (x[m] - i x[m + M]) w^m (odd sweep, w^m = omega from T).  Its work items
// run series fastest (s = e % S), so that a warp's reads of the samples are contiguous runs and its stores fall in
// distinct banks (Row's padding); butterfly fastest, the reads took 7.7 times their ideal wavefronts.
template <int N, int R, int S, int TT, bool TMA>
__device__ void first_pass_ws(const double* r, C* out, const C* T, bool odd, int tid) {
    constexpr int M = N / 2, nb = M / R, ld = fmv::Row<M, S, C>::ld;
    typedef Samples<N, S, TMA> X;
    for (int e = tid; e < S * nb; e += TT) {
        const int s = e % S, j = e / S;
        C v[R];
#pragma unroll
        for (int q = 0; q < R; ++q) {
            const int m = j + q * nb;
            v[q] = odd ? fmv::cmul(make_double2(r[X::at(s, m)], -r[X::at(s, m + M)]), omega<N>(T, m))
                       : make_double2(r[X::at(s, 2 * m)], r[X::at(s, 2 * m + 1)]);
        }
        fmv::Dft<R, -1>::run(v);
#pragma unroll
        for (int q = 0; q < R; ++q) out[s * ld + j * R + q] = v[q];
    }
}
template <int R, int... Rest> struct First {
    static constexpr int radix = R;
    template <int N, int S, int TT> using rest = ChainWS<N, R, S, TT, Rest...>;
};

// One team of k16_ws's transforms (team of TEAMS, TT threads each, named barrier 1 + team): the spectra of chunk
// ch = odd nchunks + c (P = 8 CK parameters, CK k-steps) at the sweep's frequencies (as transform's) into spec buffer
// ch % NB, by blocks b < 128.  Block b takes the two parameters whose spectra share spec_at's pairs, p0 = c P + 8 (b
// / BG) + b % 4 and p1 = p0 + 4 (BG = 128 / CK blocks a group of 8 parameters), and the CK / 2 right-hand sides from
// h CK / 2 (h = b / 4 % (BG / 4)), so that it stores whole pairs (16 bytes).  A round takes KR = S / 2 of them for
// both parameters (series s = pp KR + kk: parameter p_pp, right-hand side k0 + kk), the team's rounds of a chunk
// those of k0 = h CK / 2 + (i TEAMS + team) KR.  The team's round rr (= ch RPC + i) first has its samples x[p_pp,
// :, k0 .. k0 + KR) copied into raw buffer rr % D (Samples), D rounds ahead: by cp.async, or with TMA by tensor
// copies of xmap (x as rows of 16 doubles, boxes of 256 rows by KR) counted by the team's barrier rbar[rr % D].
// Its first pass reads them, the other passes run between w0 and w1 (twiddles from Tp), and the post-processing
// stores the spectra.  Before its first store into a buffer, chunk ch waits until consumed[ch - NB] = G (every
// block's ring holds chunk ch - NB's spectra); after its last, the team counts itself in ready[ch].
template <int N, int S, int D, int TEAMS, int TT, int NB, bool TMA, int CK, int... Rs>
__device__ void transforms_ws(const double* __restrict__ x, const void* xmap, double* spec, int P, int nchunks, int nm,
                              int team, C* w0, C* w1, double* raw, unsigned long long* rbar, const C* T, const C* Tp,
                              unsigned* ready, const unsigned* consumed, unsigned* watch, int phases) {
    typedef Samples<N, S, TMA> X;
    constexpr int M = N / 2, K = 16, ld = fmv::Row<M, S, C>::ld, KR = S / 2, BG = 128 / CK, RPC = CK / 2 / (KR * TEAMS);
    static_assert(S % 2 == 0 && (CK / 2) % (KR * TEAMS) == 0 && TT % KR == 0 && (KR == 1 || KR == 2) && BG >= 4,
                  "sizes");
    const int b = blockIdx.x, G = gridDim.x, nrounds = 2 * nchunks * RPC, tid = threadIdx.x % TT, id = 1 + team;
    const int col = 8 * (b / BG) + b % 4;  // p0's column in the chunk
    const index_t bufsize = (index_t)(M + 1) * P * 2 * K;
    auto first_k = [&](int rr) { return CK / 2 * (b / 4 % (BG / 4)) + (rr % RPC * TEAMS + team) * KR; };
    unsigned long long keep;  // the spectra's stores stay in the L2 while Fhat's stream passes
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
    auto fetch = [&](int rr) {
        const int p0 = rr / RPC % nchunks * P + col;
        double* dst = raw + (index_t)(rr % D) * X::SIZE;
        if constexpr (TMA) {  // (parameters past nm: zeros, outside the tensor; a round not fetched still arrives)
            if (rr >= nrounds || tid != 0) return;
            unsigned long long* bar = rbar + rr % D;
            if (phases & 32) return fmv::mbar_arrive(bar);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // after the round's reads of the buffer
            fmv::mbar_arrive_expect_tx(bar, (unsigned)(X::SIZE * 8));
            for (int pp = 0; pp < 2; ++pp)
                for (int t0 = 0; t0 < N; t0 += 256)
                    tensor_copy(dst + pp * X::RAWP + t0 * KR, xmap, first_k(rr), (p0 + 4 * pp) * N + t0, bar);
        } else {
            if (rr < nrounds && p0 < nm && !(phases & 32))
                for (int i = tid; i < 2 * N; i += TT) {  // sample t = i / 2 of parameter p0 + 4 (i % 2)
                    const int pp = i % 2;
                    const bool valid = p0 + 4 * pp < nm;
                    const double* src = x + ((index_t)(valid ? p0 + 4 * pp : p0) * N + i / 2) * K + first_k(rr);
                    fmv::cp_async<8 * KR>(dst + X::at(pp * KR, i / 2), src, valid);
                }
            fmv::cp_async_commit();  // (empty past the last round: the groups stay one a round)
        }
    };
    for (int rr = 0; rr < D; ++rr) fetch(rr);
#pragma unroll 1
    for (int rr = 0; rr < nrounds; ++rr) {
        const int ch = rr / RPC, k0 = first_k(rr);
        const bool odd = ch >= nchunks, live = ch % nchunks * P + col < nm;
        double* sp = spec + ch % NB * bufsize;
        if constexpr (TMA)
            mbar_wait_bounded(rbar + rr % D, rr / D & 1, watch, rr);
        else
            fmv::cp_async_wait<D - 1>();
        named_barrier<TT>(id);  // every thread's copies of round rr are in
        if (live)
            first_pass_ws<N, First<Rs...>::radix, S, TT, TMA>(raw + (index_t)(rr % D) * X::SIZE, w0, T, odd, tid);
        named_barrier<TT>(id);  // raw buffer rr % D is free
        fetch(rr + D);
        const C* res = live ? First<Rs...>::template rest<N, S, TT>::run(w0, w1, Tp, tid, id) : w0;
        if (rr % RPC == 0 && ch >= NB && (phases & 10) == 2 && tid == 0) wait_count(consumed, ch - NB, G, watch, 1);
        named_barrier<TT>(id);
        if (live) {  // the thread's right-hand side k0 + kk, frequencies q = tid / KR, + TT / KR, ...: both
            // parameters' values (series kk and KR + kk) make one pair, and spec_at steps by a stride
            const int kk = tid % KR;
            const C* z0 = res + kk * ld;
            const C* z1 = res + (KR + kk) * ld;
            double* at = sp + spec_at(tid / KR, P, col, k0 + kk, 0);
            const index_t stride = (index_t)(TT / KR) * 32 * P;
            auto store = [&](C v0, C v1) {
                if (!(phases & 16)) {
                    st_pair(at, v0.x, v1.x, keep);
                    st_pair(at + 128, v0.y, v1.y, keep);
                }
                at += stride;
            };
            if (odd) {
                for (int q = tid / KR; q < M; q += TT / KR) {
                    const int f = (q & 1) ? (N - 1 - q) / 2 : q / 2;
                    store((q & 1) ? fmv::cconj(z0[f]) : z0[f], (q & 1) ? fmv::cconj(z1[f]) : z1[f]);
                }
            } else {
                for (int q = tid / KR; q <= M; q += TT / KR) {
                    const int f = q == M ? 0 : q, mf = q == 0 ? 0 : M - q;
                    const C w = omega<N>(T, 2 * q);
                    store(fmv::real_spectrum(z0[f], z0[mf], w), fmv::real_spectrum(z1[f], z1[mf], w));
                }
            }
        }
        if (rr % RPC == RPC - 1) {  // the team's last round of the chunk
            named_barrier<TT>(id);  // every thread's stores are in
            if (tid == 0) {
                asm volatile("fence.proxy.async.global;" ::: "memory");
                __threadfence();
                atomicAdd(ready + ch, 1u);
            }
        }
    }
    if constexpr (!TMA) fmv::cp_async_wait<0>();
}

// Y as k16_fused's with BULK, with the transforms beside the products (warp specialisation): the first TW threads
// transform, in TEAMS teams of whole warpgroups (transforms_ws, at RT registers a thread: setmaxnreg), the
// next 256 multiply (at RP).  The launch bound caps every thread at 168 registers (TW = 128) or 128 (TW = 256);
// setmaxnreg moves them from the warpgroups that transform to those that multiply (TW RT + 256 RP <= what the bound
// gives in all).  The products are k16_fused's with BULK (Sweep with 8 warps a block) as one stream of k-steps over
// both sweeps (kk = odd NJ + J), copied NS ahead by the last warp done with a stage, whose copies of chunk ch's
// spectra wait for ready[ch] = 128 TEAMS; with PF > 0 each copy of A also has the L2 fetch the run PF k-steps
// after it; with K4 the tile products are pairs of 16 x 8 x 4 ones.  Chunks of P = 8 CK parameters.  sync (4 nchunks
// + 5, zero; the last 5 the waits' watch): ready[ch] (sync[ch]), consumed[ch] (sync[2 nchunks + ch]: the blocks
// whose ring has all of chunk ch's spectra, counted by the first warp past the wait for its last k-step).  phases:
// 1 transforms, 2 products (without one, the other does not wait for it; nor do the transforms wait for products
// without copies, 8), 4 and 8 as k16_fused's; 16 the transforms without their stores, 32 without their copies of
// the samples (both measurements only: the results are wrong).
// Launch: 128 <= G <= the multiprocessors blocks of TW + 256 threads, dynamic shared memory (RING + TEAMS TEAM_SIZE +
// N / 4 + M) * 16 + 16 NS + 8 TEAMS D + 48 bytes, sm_90a; xmap (TMA) the tensor map of x as rows of 16 doubles,
// boxes of 256 x KR; twp pass_twiddles(Rs); spec NB (M + 1) P 32 doubles; sync zero.
template <int N, int ND, int NM, int S, int D, int TPW, int XQ, int NS, int AST, int TW, int TEAMS, int RT, int RP,
          int NB, bool TMA, int CK, int PF, bool K4, int... Rs>
__global__ void __launch_bounds__(TW + 256, 1)
k16_ws(const double* __restrict__ x, const void* xmap, const double* __restrict__ Apk, double* spec,
       C* __restrict__ Y, const C* __restrict__ twp, unsigned* sync, int phases) {
    constexpr int M = N / 2, K = 16, NP = 256, WPB = NP / 32, ld = fmv::Row<M, S, C>::ld;
    constexpr int NJ = Sweep<ND, NM>::NJ, STAGE = AST + 8 * XQ * K, RING = (NS * STAGE + 32 + 7) / 8 * 8;
    // (the registers a launch bound of TW + NP threads gives, in all)
    constexpr int POOL = TW == 128 ? 384 * 168 : 65536;
    static_assert(N % 2 == 0 && NS >= 2 && (TW == 128 || TW == 256) && TW % (128 * TEAMS) == 0 &&
                  TW * RT + NP * RP <= POOL, "sizes");
    extern __shared__ double2 fmv_smem[];
    C* ring = fmv_smem;
    C* w0 = ring + RING;
    // each team's buffers (D raw buffers of Samples, w0, w1; 128-byte aligned), then the transforms' twiddles: T
    // (omega's) and Tp (the passes', twp's M - 1)
    constexpr int TT = TW / TEAMS, RAW = Samples<N, S, TMA>::SIZE / 2, TEAM_SIZE = (D * RAW + 2 * S * ld + 7) / 8 * 8;
    C* T = w0 + TEAMS * TEAM_SIZE;
    C* Tp = T + N / 4 + 1;
    unsigned long long* full = reinterpret_cast<unsigned long long*>(Tp + M - 1);
    unsigned long long* rbar = full + NS;  // TMA: each team's raw buffers' barriers
    unsigned* done = reinterpret_cast<unsigned*>(rbar + TEAMS * D);
    unsigned* landed = done + NS;  // the warps past the wait for a stage (counting up, WPB a k-step)
    // the block's run of packed A in each sweep, and its frequencies (Sweep's, computed once: its divisions in
    // 64 bits on the way to every copy held the products up)
    struct BlockRun {
        long long base, step;
        int qlo, nq;
    }* runs = reinterpret_cast<BlockRun*>(landed + NS);
    const int G = gridDim.x, P = 8 * CK, b = blockIdx.x, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nchunks = (NM + P - 1) / P;
    const index_t bufsize = (index_t)(M + 1) * P * 2 * K;
    unsigned* ready = sync;
    unsigned* consumed = sync + 2 * nchunks;
    unsigned* watch = sync + 4 * nchunks;
    if (threadIdx.x < TW) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(RT));
        if (!(phases & 1) || b >= 128) return;
        for (int r = threadIdx.x; r <= N / 4; r += TW) {
            double sn, cs;
            sincospi((double)r / N, &sn, &cs);
            T[r] = make_double2(cs, -sn);
        }
        for (int r = threadIdx.x; r < M - 1; r += TW) Tp[r] = twp[r];
        if (TMA && threadIdx.x == 0) {
            for (int i = 0; i < TEAMS * D; ++i) fmv::mbar_init(rbar + i, 1);
            fmv::mbar_init_fence();
        }
        named_barrier<TW>(4);
        const int team = threadIdx.x / TT;
        C* const mine = w0 + team * TEAM_SIZE;
        transforms_ws<N, S, D, TEAMS, TT, NB, TMA, CK, Rs...>(x, xmap, spec, P, nchunks, NM, team, mine + D * RAW,
                                                          mine + D * RAW + S * ld, reinterpret_cast<double*>(mine),
                                                          rbar + team * D, T, Tp, ready, consumed, watch, phases);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(RP));
    if (!(phases & 2)) return;
    const int pt = threadIdx.x - TW, warp = pt >> 5;
    const bool copies = !(phases & 8);  // (without: the arithmetic alone, on what the ring holds)
    // k-step kk's copies into stage kk % NS, by one thread: the block's run of packed A and its frequencies' spectra
    auto issue = [&](int kk) {
        if (kk >= 2 * NJ || !copies) return;
        if (PF > 0 && kk + PF < 2 * NJ) {  // k-step kk + PF's run of A into the L2, PF copies ahead
            const BlockRun ahead = runs[(kk + PF) / NJ];
            prefetch_l2(Apk + ahead.base + (kk + PF) % NJ * ahead.step, (unsigned)(8 * ahead.step));
        }
        const int odd = kk / NJ, J = kk % NJ, ch = odd * nchunks + J / (P / 8);
        const BlockRun blk = runs[odd];
        C* const stage = ring + kk % NS * STAGE;
        unsigned long long* bar = full + kk % NS;
        if (phases & 1) wait_count(ready, ch, 128 * TEAMS, watch, 2);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // after the ring's last reads
        fmv::mbar_arrive_expect_tx(bar, (unsigned)(8 * blk.step + blk.nq * 8 * K * 16));
        bulk_copy(stage, Apk + blk.base + J * blk.step, (unsigned)(8 * blk.step), bar, true);
        const double* sp = spec + ch % NB * bufsize;
        for (int qq = 0; qq < blk.nq; ++qq)
            bulk_copy(stage + AST + qq * 8 * K, sp + spec_at(blk.qlo + qq, P, J % (P / 8) * 8, 0, 0), 8 * K * 16, bar,
                      false);
    };
    if (pt == 0) {
        for (int odd = 0; odd < 2; ++odd) {
            const Sweep<ND, NM> blk(odd, M, G, WPB, b, 0);
            runs[odd] = {blk.block_base, blk.step, blk.qlo, blk.nq};
        }
        for (int s = 0; s < NS; ++s) {
            fmv::mbar_init(full + s, 1);
            done[s] = landed[s] = 0;
        }
        fmv::mbar_init_fence();
        for (int kk = 0; kk < NS; ++kk) issue(kk);
    }
    named_barrier<NP>(3);  // (the products' threads alone) the barriers are ready
    for (int odd = 0; odd < 2; ++odd) {
        const Sweep<ND, NM> sw(odd, M, G, WPB, b, warp);
        // where the lane's operands of tile u lie in every stage, computed once (Sweep's arithmetic at every k-step
        // took as many instructions as the products): its part of A's run a_at[u] doubles in (of tile_rows 16, or
        // ND % 16 where partial's bit u is set); its pairs of X qa_at[h] doubles in for frequency qa (tiles u < us),
        // qb_at[h] for qb
        int a_at[TPW], qa_at[2], qb_at[2];
        unsigned partial = 0;
#pragma unroll
        for (int u = 0; u < TPW; ++u) {
            a_at[u] = sw.tile_at(u) + lane;
            if (sw.tile_rows(u) < 16) partial |= 1u << u;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            qa_at[h] = 2 * AST + (sw.qa - sw.qlo) * 16 * K + x_lane(g, t, h);
            qb_at[h] = 2 * AST + (sw.qb - sw.qlo) * 16 * K + x_lane(g, t, h);
        }
        double acc[TPW][2][2][4];  // [tile][right-hand sides 8h ..][Re, Im][fragment element], over the sweep
#pragma unroll
        for (int u = 0; u < TPW; ++u)
#pragma unroll
            for (int e = 0; e < 16; ++e) acc[u][e / 8][e / 4 % 2][e % 4] = 0;
        for (int J = 0; J < NJ; ++J) {
            const int kk = odd * NJ + J, s = kk % NS;
            if (copies) mbar_wait_bounded(full + s, kk / NS & 1, watch, kk);
            const bool last = (J + 1) % (P / 8) == 0 || J == NJ - 1;  // of its chunk
            if (lane == 0 && last && atomicAdd(landed + s, 1u) % WPB == 0) {  // the first warp: chunk's spectra in
                __threadfence();
                atomicAdd(consumed + odd * nchunks + J / (P / 8), 1u);
            }
            __syncwarp();
            const double* stage = reinterpret_cast<const double*>(ring + s * STAGE);
#pragma unroll
            for (int u = 0; u < TPW; ++u) {
                if (u >= sw.ntiles || (phases & 4)) continue;  // (the same for the whole warp; 4: the copies alone)
                double ar[4], ai[4];
                const double* a = stage + a_at[u];
                if (partial >> u & 1)
                    load_fragments<ND % 16>(a, ar, ai);
                else
                    load_fragments<16>(a, ar, ai);
                const bool of_qa = u < sw.us;
                tile_product<K4>(acc[u], ar, ai,
                                 {stage + (of_qa ? qa_at[0] : qb_at[0]), stage + (of_qa ? qa_at[1] : qb_at[1])});
            }
            __syncwarp();
            if (lane == 0 && atomicAdd(done + s, 1u) % WPB == WPB - 1) issue(kk + NS);  // the last warp done
            __syncwarp();  // (mma.sync wants the warp converged)
        }
        store_sums(Y, acc, sw, odd, g, t);
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

// The float64 tensor cores' rate alone: every warp runs `reps` rounds of 8 independent products of shape MD x 8 x
// KD (16 x 8 x 8, 8 x 8 x 4 or 16 x 8 x 4) on values in registers; out gets one sum a warp (keeps the products).
template <int MD, int KD> __global__ void dmma_rate(double* out, int reps) {
    double d[8][4] = {}, a[4];
    for (int e = 0; e < 4; ++e) a[e] = 1e-3 * (threadIdx.x + e);
    const double b0 = 1e-3 * threadIdx.x, b1 = 2e-3;
    for (int r = 0; r < reps; ++r)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if constexpr (KD == 8)
                k16::mma1688(d[i], a, b0, b1);
            else if constexpr (MD == 16)
                k16::mma1684(d[i], a[0], a[1], b0);
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
PHASES = {"both": 3, "product": 2, "transform": 1, "barriers": 0, "copies": 6, "math": 10}
# k16_ws's transforms in parts (results wrong): without their stores, without their copies of the samples, without
# either; the transforms beside the products' copies alone, or beside their arithmetic alone; the products beside
# the transforms in those parts
WS_PHASES = {"unstored": 17, "unfetched": 33, "computed": 49, "with_copies": 7, "with_math": 11, "with_unstored": 19,
             "with_unfetched": 35, "with_computed": 51}
# dmma_rate's instantiations: the shape and the multiply-adds of one product
DMMA_SHAPES = {"dmma_rate<16, 8>": ("m16n8k8", 16 * 8 * 8), "dmma_rate<8, 4>": ("m8n8k4", 8 * 8 * 4),
               "dmma_rate<16, 4>": ("m16n8k4", 16 * 8 * 4)}
# the kernels: k16_fused reading Fhat's rows as the engine holds them, each lane by cp.async ("rows"), or packed
# by k16_pack, a bulk copy a k-step ("bulk"); k16_ws, packed, its transforms beside its products ("ws")
KERNELS = ("rows", "bulk", "ws")
# rows_read's orders: (columns a row visit, loads in flight a thread, threads a block)
READ_ORDERS = ((8, 8, 256), (32, 8, 256), (128, 8, 256), (32, 16, 256), (32, 8, 512), (32, 16, 512), (8, 16, 512),
               (16, 16, 512))


def source() -> str:
    """The kernels' text: native/fft.cu (its passes and helpers, includes expanded) and FUSED."""
    from fftmatvec.backend import kernels

    return kernels.source("fft.cu") + FUSED


def small_radices(M: int) -> list[int] | None:
    """M as a product of radices of at most 5 (fives first, then fours, threes and twos), or None: k16_ws's
    transforms hold a butterfly's values in the few registers of their warpgroup."""
    radices = []
    for r in (5, 4, 3, 2):
        while M % r == 0:
            radices.append(r)
            M //= r
    return radices if M == 1 else None


class Layout:
    """How the kernels split one size over `blocks` multiprocessors (as their comments say), and their
    instantiations.  Each of k16_ws's `ws` settings (series a round, rounds of samples in flight, stages of its
    ring, threads that transform, teams they form, registers a thread that transforms and that multiplies, chunk
    buffers, tensor copies of the samples or not, k-steps a chunk, k-steps of L2 prefetch ahead of the products'
    copies (0 for none), the products as 16 x 8 x 4 tensor-core products (1) or 16 x 8 x 8 (0); optionally a
    thirteenth, its transforms' radices, small_radices' by default) is a kernel of its own, named "ws" with the
    first, "ws1", "ws2", ... with the others.

    Raises SystemExit for a size it does not take: Nt not a multiple of 4, Nt/2 with a prime factor above 5, or more
    tiles a warp than a frequency has (a warp's tiles would span three frequencies); and for radices whose product is
    not Nt/2 or that fft.cu has no butterfly for.
    """

    def __init__(self, Nt: int, Nd: int, Nm: int, blocks: int, threads: int, series: int, stages: int,
                 ws: tuple[tuple[int, ...], ...] = ((4, 1, 2, 256, 1, 64, 192, 2, 1, 8, 0, 0),
                                                    (4, 1, 2, 128, 1, 104, 200, 2, 1, 16, 0, 0))
                 ) -> None:
        from fftmatvec.backend.fused_fft import FFT_BUTTERFLIES, fft_radices

        self.radices = fft_radices(Nt // 2)
        if Nt % 4 or self.radices is None or small_radices(Nt // 2) is None:
            raise SystemExit(f"Nt = {Nt}: needs Nt a multiple of 4 and Nt/2 of factors 2, 3, 5")
        self.Nt, self.Nd, self.Nm, self.blocks, self.threads, self.series, self.stages = (
            Nt, Nd, Nm, blocks, threads, series, stages)
        self.ws = {f"ws{i or ''}": tuple(setting[:12]) for i, setting in enumerate(ws)}
        self.ws_radices = {label: list(setting[12]) if len(setting) > 12 else small_radices(Nt // 2)
                           for label, setting in zip(self.ws, ws)}
        for label, radices in self.ws_radices.items():
            if math.prod(radices) != Nt // 2 or not set(radices) <= FFT_BUTTERFLIES:
                raise SystemExit(f"{label}: radices {radices} do not make Nt/2 = {Nt // 2} of fft.cu's butterflies")
        rt = math.ceil(Nd / 16)  # tiles of 16 rows a frequency

        def tiles_per_warp(threads: int) -> int:  # (the even sweep has Nt/2 + 1 frequencies)
            most = math.ceil((Nt // 2 + 1) * rt / (blocks * threads // 32))
            if rt < most:
                raise SystemExit(f"Nd = {Nd}: a warp's {most} tiles would span more than two frequencies")
            return most

        self.tiles_per_warp = tiles_per_warp(threads)
        self.ws_tiles_per_warp = tiles_per_warp(256)  # (k16_ws: 8 warps multiply)
        self.block_frequencies = self.block_step = 0  # the most frequencies, and packed entries a k-step, a block

        def rows_before(tile: int) -> int:
            return tile // rt * Nd + min(Nd, 16 * (tile % rt))

        warps = blocks * threads // 32
        for Q in (Nt // 2 + 1, Nt // 2):
            T = Q * rt
            for b in range(blocks):
                first, end = b * (threads // 32) * T // warps, (b + 1) * (threads // 32) * T // warps
                self.block_frequencies = max(self.block_frequencies, (end - 1) // rt - first // rt + 1)
                self.block_step = max(self.block_step, 8 * (rows_before(end) - rows_before(first)))

    def shared_bytes(self, kernel: str) -> int:
        """The dynamic shared memory of KERNELS' `kernel` (its launch comment)."""
        from fftmatvec.backend.fused_fft import fused_row_stride

        x = 8 * self.block_frequencies * K
        if kernel in self.ws:
            S, D, NS, TW, TEAMS, *_, TMA, CK, _, _ = self.ws[kernel]
            M, up8 = self.Nt // 2, lambda n: -(-n // 8) * 8
            raw = 2 * math.ceil(self.Nt / 256) * 256 * (S // 2) if TMA else self.Nt * S  # (doubles: Samples::SIZE)
            team = up8(D * raw // 2 + 2 * S * fused_row_stride(M, S, 16))
            return ((up8(NS * (self.block_step + x) + 32) + TEAMS * team + self.Nt // 4 + M) * 16 + 16 * NS
                    + 8 * TEAMS * D + 48)
        transform = 2 * self.series * fused_row_stride(self.Nt // 2, self.series, 16)
        a = self.block_step if kernel == "bulk" else 4 * self.tiles_per_warp * self.threads
        return (max(transform, self.stages * (a + x)) + 32) * 16 + 12 * self.stages

    def launch_threads(self, kernel: str) -> int:
        return self.ws[kernel][3] + 256 if kernel in self.ws else self.threads

    @property
    def packed_size(self) -> int:
        """Complex entries of `Fhat` packed (k16_pack): its columns in k-steps of 8, the last one padded."""
        return 8 * math.ceil(self.Nm / 8) * (self.Nt + 1) * self.Nd

    def name(self, kernel: str) -> str:
        """The instantiation of KERNELS' `kernel`."""
        if kernel in self.ws:
            S, D, NS, TW, TEAMS, RT, RP, NB, TMA, CK, PF, K4 = self.ws[kernel]
            return (f"k16::k16_ws<{self.Nt}, {self.Nd}, {self.Nm}, {S}, {D}, {self.ws_tiles_per_warp}, "
                    f"{self.block_frequencies}, {NS}, {self.block_step}, {TW}, {TEAMS}, {RT}, {RP}, {NB}, "
                    f"{str(bool(TMA)).lower()}, {CK}, {PF}, {str(bool(K4)).lower()}, "
                    f"{', '.join(map(str, self.ws_radices[kernel]))}>")
        bulk = kernel == "bulk"
        return (f"k16::k16_fused<{self.Nt}, {self.Nd}, {self.Nm}, {self.threads}, {self.series}, "
                f"{self.tiles_per_warp}, {self.block_frequencies}, {self.stages}, {str(bulk).lower()}, "
                f"{self.block_step if bulk else 0}, {', '.join(map(str, self.radices))}>")

    @property
    def pack_name(self) -> str:
        return f"k16::k16_pack<{self.Nt}, {self.Nd}, {self.Nm}, 256>"

    def labels(self, which=KERNELS) -> list[str]:
        """The kernels of `which` (of KERNELS), "ws" standing for every setting of k16_ws."""
        return [label for kernel in which for label in (self.ws if kernel == "ws" else (kernel,))]

    def kernels(self, which=KERNELS) -> tuple[str, ...]:
        """Every instantiation the script launches, with `which` of KERNELS."""
        reads = sorted({f"rows_read<{w}, {u}>" for w, u, _ in READ_ORDERS})
        return (*map(self.name, self.labels(which)), self.pack_name, *DMMA_SHAPES, *reads)


def ws_setting(text: str) -> tuple:
    """One --ws setting: twelve integers, then optionally the radices as ``10x10x5``."""
    fields = text.split(",")
    ints = tuple(map(int, fields[:12]))
    return ints + (tuple(map(int, fields[12].split("x"))),) if len(fields) > 12 else ints


def tensor_map(address: int, rows: int, cols: int, box_rows: int, box_cols: int) -> np.ndarray:
    """The 128-byte tensor map (``CUtensorMap``, through the driver's ``cuTensorMapEncodeTiled``) of a
    row-major float64 array of ``rows x cols`` at device ``address``, in boxes of ``box_rows x box_cols``,
    zeros outside it."""
    import ctypes

    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    encode.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(u64),
                       ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    raw = np.zeros(128 + 64, np.uint8)  # the map must be 64-byte aligned
    start = -raw.ctypes.data % 64
    float64, none = 8, 0  # CU_TENSOR_MAP_DATA_TYPE_FLOAT64; no interleave, swizzle, L2 promotion; zero fill
    rc = encode(raw.ctypes.data + start, float64, 2, address, (u64 * 2)(cols, rows), (u64 * 1)(cols * 8),
                (u32 * 2)(box_cols, box_rows), (u32 * 2)(1, 1), none, none, none, none)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed (CUresult {rc})")
    return raw[start:start + 128].copy()


def main(argv=None) -> int:
    from gpu_probe import json_lines, size_parser

    ap = size_parser(__doc__)
    ap.add_argument("--threads", type=int, default=256, help="threads a block (k16_fused)")
    ap.add_argument("--series", type=int, default=8, choices=(2, 4, 8, 16), help="series a block transforms at once")
    ap.add_argument("--stages", type=int, default=3, help="k-steps in the ring in shared memory")
    ap.add_argument("--ws", nargs="+", default=["4,1,2,256,1,64,192,2,1,8,0,0", "4,1,2,128,1,104,200,2,1,16,0,0"],
                    help="k16_ws's settings, each a kernel: series a round, rounds of samples in flight, stages, "
                         "threads that transform, teams they form, registers a thread that transforms and that "
                         "multiplies, chunk buffers, whether tensor copies bring the samples (1) or cp.async (0), "
                         "k-steps a chunk, how many k-steps ahead of its copies `Fhat` is fetched into the L2 "
                         "(0: not), whether the products are 16 x 8 x 4 tensor-core products (1) or 16 x 8 x 8 (0), "
                         "and optionally the transforms' radices (as 10x10x5)")
    ap.add_argument("--phases", default=",".join(PHASES),
                    help="which kernels to time, of " + ",".join(PHASES) + " (and for k16_ws " + ",".join(WS_PHASES)
                    + ")")
    ap.add_argument("--kernels", default=",".join(KERNELS), help="which to time, of " + ",".join(KERNELS))
    ap.add_argument("-N", "--reps", type=int, default=10, help="waited-for calls per median")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds")
    args = ap.parse_args(argv)

    import cupy as cp

    from fftmatvec import BTTOperator
    from fftmatvec.backend import kernels
    from fftmatvec.backend.fused_fft import pass_twiddles
    from fftmatvec.bench import _median_time, random_slab

    emit = json_lines(args.out)
    Nm, Nd, Nt = args.Nm, args.Nd, args.Nt
    M = Nt // 2
    device = cp.cuda.Device()
    blocks = device.attributes["MultiProcessorCount"]
    lay = Layout(Nt, Nd, Nm, blocks, args.threads, args.series, args.stages,
                 tuple(ws_setting(w) for w in args.ws))
    names = lay.labels(args.kernels.split(","))
    for kernel in names:
        if lay.shared_bytes(kernel) > device.attributes["MaxSharedMemoryPerBlockOptin"]:
            raise SystemExit(f"{kernel}: {lay.shared_bytes(kernel)} bytes of shared memory a block, more than the "
                             "device has: fewer stages, series or rounds in flight")
    # (sm_90a: k16_ws's setmaxnreg)
    mod = cp.RawModule(code=source(), options=(*kernels.options(), "-arch=sm_90a"),
                       name_expressions=lay.kernels(args.kernels.split(",")))
    fns = {kernel: mod.get_function(lay.name(kernel)) for kernel in names}
    for kernel, fn in fns.items():
        fn.max_dynamic_shared_size_bytes = lay.shared_bytes(kernel)

    f = random_slab(0, Nd, Nm, Nt, (0, Nd), (0, Nm))
    op = BTTOperator(f, device="gpu", precision="ddddd")
    be = op.backend
    Fhat = op.engine.Fhat[np.dtype(np.complex128)]
    rng = np.random.default_rng(2)
    x1 = be.asarray(rng.standard_normal((Nm, Nt)))
    xK = be.asarray(rng.standard_normal((Nm, Nt, K)))
    twp = cp.asarray(pass_twiddles(lay.radices))
    twp_ws = {kernel: cp.asarray(pass_twiddles(radices)) for kernel, radices in lay.ws_radices.items()}
    twl = cp.asarray(np.exp(-2j * np.pi * np.arange(M + 1) / Nt))
    two = cp.asarray(np.exp(-1j * np.pi * np.arange(M) / Nt))
    buffers = max([2] + [setting[7] for setting in lay.ws.values()])  # chunk buffers (k16_fused uses 2)
    spec = cp.zeros((buffers, M + 1, blocks, K), np.complex128)
    chunk = min([blocks // 8 * 8] + [8 * setting[9] for setting in lay.ws.values()])  # the fewest parameters a chunk
    count = cp.zeros(4 * math.ceil(Nm / chunk) + 5, np.uint32)  # (k16_fused uses the first)
    Yhat = cp.zeros((Nt + 1, Nd, K), np.complex128)
    y = cp.empty((Nd, Nt, K), np.float64)
    sink = cp.empty(blocks * 16, np.float64)
    # k16_ws's samples as a tensor: rows of 16 doubles (a parameter's time step), boxes of 256 rows by S / 2 columns
    xmaps = {kernel: cp.asarray(tensor_map(xK.data.ptr, Nm * Nt, K, 256, setting[0] // 2))
             for kernel, setting in lay.ws.items() if kernel in names}
    sync = device.synchronize
    packed = None
    if any(kernel != "rows" for kernel in names):  # every entry written once: none left NaN
        packed = cp.full(lay.packed_size, np.nan, np.complex128)
        mod.get_function(lay.pack_name)((blocks,), (256,), (Fhat, packed))
        if cp.isnan(packed).any():
            raise SystemExit("k16_pack left entries unwritten")

    def fused(kernel: str, phases: int = 3):
        count.fill(0)
        if kernel in lay.ws:  # (k16_ws makes its other tables)
            args = (xK, xmaps[kernel], packed, spec, Yhat, twp_ws[kernel], count, np.int32(phases))
        else:
            args = (xK, Fhat if kernel == "rows" else packed, spec, Yhat, twp, twl, two, count, np.int32(phases))
        fns[kernel]((blocks,), (lay.launch_threads(kernel),), args, shared_mem=lay.shared_bytes(kernel))
        be.irfft_unpad(Yhat, y, np.float64)

    y_ref = op.matvec(xK)
    fields = dict(Nm=Nm, Nd=Nd, Nt=Nt, K=K, blocks=blocks, threads=args.threads, tiles_per_warp=lay.tiles_per_warp,
                  stages=args.stages, series=args.series, device=be.device_name)
    for kernel, fn in fns.items():
        Yhat.fill(np.nan)
        fused(kernel)
        err = float(cp.abs(y - y_ref).max() / cp.abs(y_ref).max())
        check = dict(label=kernel, kernel=lay.name(kernel), rel_error=err, registers=fn.num_regs,
                     local_bytes=fn.local_size_bytes)
        if kernel in lay.ws:  # its waits that gave up: how many, and the first (block, thread, kind, index)
            check.update(gave_up=[int(v) for v in count[-5:].get()])
        if not err < 1e-12:  # which frequencies are wrong: Yhat against cupy's transform and batched product
            pad = cp.concatenate([xK, cp.zeros_like(xK)], axis=1)
            ref = cp.matmul(Fhat, cp.fft.rfft(pad, axis=1).transpose(1, 0, 2))
            scale = float(cp.abs(ref).max())
            check.update(yhat_error_even=float(cp.abs(Yhat[0::2] - ref[0::2]).max()) / scale,
                         yhat_error_odd=float(cp.abs(Yhat[1::2] - ref[1::2]).max()) / scale)
            ref = pad = None
        emit(what="check", **fields, **check)
        if check.get("gave_up", [0])[0]:
            raise SystemExit(f"{kernel}: its waits gave up (a stuck pipeline): {check['gave_up']}")

    for name, (shape, fma) in DMMA_SHAPES.items():  # 8 warps a multiprocessor
        rate, reps = mod.get_function(name), 20000
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
    for kernel in names:
        for name in args.phases.split(","):
            if name in WS_PHASES and kernel not in lay.ws:
                continue
            variants[f"{'fused' if kernel == 'rows' else kernel}_{name}"] = (lambda k, p: lambda: fused(k, p))(
                kernel, {**PHASES, **WS_PHASES}[name])
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
