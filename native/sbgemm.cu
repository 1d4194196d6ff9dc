// sbgemm.cu -- forward per-frequency product with several right-hand sides (stage 3):
// sbgemm_fwd (Fhat through registers, X staged; any number of rows),
// sbgemm_staged (Fhat and X staged by asynchronous copies; up to 64 TM rows)
// and sbgemm_tc (complex64 on the tensor cores, staged as sbgemm_staged; up
// to 256 rows; CUDA only), which the backend takes first where it can.
//
//   A : rows of Fhat, row i of frequency f at A + (f * lda + i) * nm (lda >= nd), complex TA
//   X : (nf, nm, K) complex TX (cast to TA when staged)
//   Y[f, i, k] = sum_j A[f, i, j] * X[f, j, k]       Y : (S, nf, nd, K), one slice per column split
//
// With K right-hand sides the product does K complex multiply-adds per
// element of A, and at K = 16 the usual four real multiply-adds each take as
// long as reading A (complex64: 64 GFLOP at the big size, about the time of
// reading its 4 GB).  So the kernel uses the 3M form: per (i, j, k) three
// real multiply-adds into T1 += Ar Xr, T2 += Ai Xi, T3 += (Ar + Ai)(Xr + Xi),
// and at the end Re Y = T1 - T2, Im Y = T3 - T1 - T2.  Xr + Xi is formed once
// when X is staged, Ar + Ai once per element of A.
//
// Work split.  Block (f, row block, column split), blockIdx.y the chunk of KB
// right-hand sides.  A warp owns RL * TR consecutive rows; its 32 lanes are
// CL column lanes x RL row lanes x KL right-hand-side lanes, and a lane owns
// TR rows x KT = KB / KL right-hand sides.  Every element of A is read by one
// load instruction (the KL lanes that need it read the same address) and
// feeds KT accumulators per row.  A step is BK = CL * U columns: each lane
// loads U columns of its TR rows from global memory, the next step's loads in
// flight while this step is summed.  X is staged in shared memory, with its
// Xr + Xi, in chunks of V steps (double buffered, the next chunk's loads held
// in registers during the sums).  Column lanes are summed by shuffles at the end.
// MINB: blocks of 256 threads per multiprocessor the registers are capped for.
// Launch: blockDim.x = 32 * warps (4 <= warps <= 8), gridDim.x = nf * nrb * S,
// gridDim.y = ceil(K / KB), dynamic shared memory
// 2 * CL * U * V * (XS * sizeof(TA) + SS * sizeof(real)) bytes (GemmStage).
//
// Measured on an H200 (docs/benchmarks.md): 1.5-2.0x the memory floor for
// K = 3-8 in complex64; with K = 16 it is bound by L1 traffic (32-byte row
// pieces of A per load, shared-memory reads of X), 3.7x, where sbgemm_staged
// takes 2.05x and sbgemm_tc 1.6x.
// ---------------------------------------------------------------------------
#include "fftmatvec_common.cuh"

using fmv::index_t;

namespace fmv {

// Row strides (elements) of the staged X and of its sums: 16 bytes of padding
// put the CL columns read by one instruction in distinct banks.
template <typename TA, int KB> struct GemmStage {
    typedef typename real_of<TA>::type R;
    static constexpr int XS = KB + 16 / (int)sizeof(TA);
    static constexpr int SS = KB + 16 / (int)sizeof(R);
};

// a pair of adjacent complex values from shared memory (16-byte aligned), as one access for float2
FMV_DEV void lds_pair(const float2* p, float2& a, float2& b) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    a = cmake<float2>(v.x, v.y);
    b = cmake<float2>(v.z, v.w);
}
FMV_DEV void lds_pair(const double2* p, double2& a, double2& b) {
    a = p[0];
    b = p[1];
}

// The share of the product of block (blockIdx.x, blockIdx.y) in sbgemm_staged
// and sbgemm_tc: frequency f and column split `split` of S (blockIdx.x = f S +
// split; columns jbeg .. jend - 1 of width cw, nchunks chunks of BK), right-hand
// sides k0 .. k0 + kn - 1 (chunk blockIdx.y of KB).
template <int BK, int KB> struct BlockShare {
    int split, f, k0, kn, jbeg, jend, nchunks;
    FMV_DEV BlockShare(int S, int cw, int nm, int K)
        : split(blockIdx.x % S), f(blockIdx.x / S), k0(blockIdx.y * KB), kn(min_(KB, K - k0)), jbeg(split * cw),
          jend(min_(nm, jbeg + cw)), nchunks(jend > jbeg ? (jend - jbeg + BK - 1) / BK : 0) {}
};

// The asynchronous copies of one chunk of BK columns of A (rows < nd) and of
// X into a stage of shared memory (row strides AS and XS), for thread tid of
// nthreads: VA columns of A's rows arow, arow + RP, ... and VX right-hand
// sides of X's rows xj, xj + XR, ... (RP = nthreads / (BK / VA), XR =
// nthreads / (KB / VX)).  A thread copies the same rows and columns of every
// chunk, so its addresses are worked out once, a chunk adds a constant and the
// sources step by a 64-bit stride (with 32-bit row offsets recomputed per
// copy, sbgemm_tc took 1.94 against 1.72x the floor).  Columns past jend are
// zero-filled: such a copy reads nothing and keeps pointing at row 0.
// SW128: A's stage in wgmma's K-major layout with the 128-byte swizzle instead,
// for R rows: 16-byte piece q of row r at (q / 8) R 128 + r 128 + (q % 8 ^ r % 8) 16
// bytes (RP a multiple of 8).
template <typename TA, int BK, int KB, int VA, int VX, int AS, int XS, bool SW128 = false> struct ChunkCopies {
    static constexpr int CPR = BK / VA;  // copies per row of a chunk of A
    static constexpr int XPR = KB / VX;  // copies per row of a chunk of X
    const TA *af, *xf, *asrc, *xsrc;
    index_t astep, xstep, xchunk;
    int jbeg, jend, acol, arows, adst, RPS, xj, XR, xrows, xdst, XRS;
    bool xok;

    // A: rows of Fhat (lda rows a frequency, row stride nm), X: (nf, nm, K)
    FMV_DEV ChunkCopies(const TA* A, const TA* X, int nd, int nm, int K, int lda, const BlockShare<BK, KB>& b,
                        int tid, int nthreads, int R = 0)
        : af(A + (index_t)b.f * lda * nm), xf(X + (index_t)b.f * nm * K + b.k0), jbeg(b.jbeg), jend(b.jend) {
        const int RP = nthreads / CPR, arow = tid / CPR;
        acol = tid % CPR * VA;
        arows = arow < nd ? (nd - arow + RP - 1) / RP : 0;
        asrc = af + (index_t)arow * nm + jbeg + acol;
        astep = (index_t)RP * nm;
        adst = SW128 ? ((acol >> 4) * R + arow) * 16 + ((acol >> 1 & 7) ^ (arow & 7)) * 2 + (acol & 1)
                     : arow * AS + acol;
        RPS = SW128 ? RP * 16 : RP * AS;
        XR = nthreads / XPR;
        xj = tid / XPR;
        const int xk = tid % XPR * VX;
        xrows = xj < BK ? (BK - xj + XR - 1) / XR : 0;
        xok = xk < b.kn;
        xsrc = xf + (index_t)(jbeg + xj) * K + xk;
        xstep = (index_t)XR * K;
        xchunk = (index_t)BK * K;
        xdst = xj * XS + xk;
        XRS = XR * XS;
    }

    // chunk c (columns jbeg + c BK ..) into the stage buffers ab [rows][AS] and xb [BK][XS]
    FMV_DEV void issue(int c, TA* ab, TA* xb) const {
        const int j0 = jbeg + c * BK;
        const bool last = j0 + BK > jend;
        const bool colok = !last || j0 + acol < jend;
        const TA* src = colok ? asrc + c * BK : af;
        const index_t step = colok ? astep : 0;
        ab += adst;
#pragma unroll 4
        for (int q = 0; q < arows; ++q, src += step, ab += RPS) cp_async<VA * (int)sizeof(TA)>(ab, src, colok);
        const TA* xsc = xsrc + c * xchunk;
        xb += xdst;
        for (int q = 0; q < xrows; ++q, xsc += xstep, xb += XRS) {
            const bool ok = xok && (!last || j0 + xj + q * XR < jend);
            cp_async<VX * (int)sizeof(TA)>(xb, ok ? xsc : xf, ok);
        }
    }
};

// Chunks 0 .. nchunks - 1 through NS stages of shared memory: issue(c) starts
// the asynchronous copies of chunk c into stage c % NS, body(c) sums chunk c
// once it is in for every thread; NS - 1 chunks are in flight meanwhile.
template <int NS, typename Issue, typename Body>
FMV_DEV void for_each_staged_chunk(int nchunks, const Issue& issue, const Body& body) {
#pragma unroll
    for (int c = 0; c < NS - 1; ++c) {
        if (c < nchunks) issue(c);
        cp_async_commit();
    }
    for (int c = 0; c < nchunks; ++c) {
        cp_async_wait<NS - 2>();
        __syncthreads();  // chunk c is in for every thread, and chunk c - 1's stage is free
        if (c + NS - 1 < nchunks) issue(c + NS - 1);
        cp_async_commit();
        body(c);
    }
    cp_async_wait<0>();
    __syncthreads();
}

}  // namespace fmv

template <typename TA, typename TX, int KB, int KL, int CL, int TR, int U, int V, int MINB>
__global__ void __launch_bounds__(256, MINB)
sbgemm_fwd(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Y, int nf, int nd, int nm, int K,
           int nrb, int S, int cw, int lda) {
    typedef typename fmv::real_of<TA>::type R;
    constexpr int RL = 32 / (KL * CL);
    constexpr int KT = KB / KL;
    constexpr int BK = CL * U;  // columns of one step of the lanes
    constexpr int BX = BK * V;  // columns of one staged chunk of X
    constexpr int XS = fmv::GemmStage<TA, KB>::XS;
    constexpr int SS = fmv::GemmStage<TA, KB>::SS;
    constexpr int QS = (BX * KB + 127) / 128;  // staged elements per thread (blockDim.x >= 128)
    static_assert(KL * CL * RL == 32 && KT * KL == KB && KT % 2 == 0, "lane layout");

    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    TA* xs = reinterpret_cast<TA*>(fmv_smem);            // [2][BX][XS]
    R* xsum = reinterpret_cast<R*>(xs + 2 * BX * XS);    // [2][BX][SS]

    const int lane = threadIdx.x & 31;
    const int cl = lane % CL, rl = (lane / CL) % RL, kh = lane / (CL * RL);
    const int split = blockIdx.x % S;
    const int rb = (blockIdx.x / S) % nrb;
    const int f = blockIdx.x / (S * nrb);
    const int i0 = (rb * (int)(blockDim.x >> 5) + (int)(threadIdx.x >> 5)) * (RL * TR) + rl * TR;
    const int k0 = blockIdx.y * KB;
    const int kn = fmv::min_(KB, K - k0);
    const int jbeg = split * cw;
    const int jend = fmv::min_(nm, jbeg + cw);
    const int nchunks = (jend - jbeg + BX - 1) / BX;

    const TA* a[TR];
#pragma unroll
    for (int t = 0; t < TR; ++t) a[t] = A + ((index_t)f * lda + fmv::min_(i0 + t, nd - 1)) * nm;
    const TX* x = X + (index_t)f * nm * K + k0;

    // X chunk c held in registers, then stored (cast, with its sums) into buffer c & 1
    TX xr[QS];
    auto load_x = [&](int c) {
#pragma unroll
        for (int q = 0; q < QS; ++q) {
            const int e = threadIdx.x + q * blockDim.x;
            const int jj = e / KB, k = e % KB;
            const int j = jbeg + c * BX + jj;
            xr[q] = (e < BX * KB && k < kn && j < jend) ? FMV_LDG(x + (index_t)j * K + k) : fmv::cmake<TX>(0, 0);
        }
    };
    auto store_x = [&](int c) {
        TA* xb = xs + (c & 1) * BX * XS;
        R* sb = xsum + (c & 1) * BX * SS;
#pragma unroll
        for (int q = 0; q < QS; ++q) {
            const int e = threadIdx.x + q * blockDim.x;
            if (e < BX * KB) {
                const TA v = fmv::ccast<TA>(xr[q]);
                xb[(e / KB) * XS + e % KB] = v;
                sb[(e / KB) * SS + e % KB] = v.x + v.y;
            }
        }
    };
    // A step g: columns jbeg + g * BK + u * CL + cl of the TR rows (zero beyond jend)
    auto load_a = [&](int g, TA (&av)[U][TR]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = jbeg + g * BK + u * CL + cl;
#pragma unroll
            for (int t = 0; t < TR; ++t) av[u][t] = j < jend ? FMV_LDCS(a[t] + j) : fmv::czero<TA>();
        }
    };

    R t1[TR][KT], t2[TR][KT], t3[TR][KT];
#pragma unroll
    for (int t = 0; t < TR; ++t)
#pragma unroll
        for (int q = 0; q < KT; ++q) t1[t][q] = t2[t][q] = t3[t][q] = 0;

    TA av[U][TR], an[U][TR];
    if (nchunks > 0) {
        load_x(0);
        store_x(0);
        load_a(0, av);
    }
    __syncthreads();
    for (int c = 0; c < nchunks; ++c) {
        const bool more = c + 1 < nchunks;
        if (more) load_x(c + 1);
        const TA* xb = xs + (c & 1) * BX * XS + kh * KT;
        const R* sb = xsum + (c & 1) * BX * SS + kh * KT;
#pragma unroll
        for (int v = 0; v < V; ++v) {
            load_a(c * V + v + 1, an);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int jj = v * BK + u * CL + cl;
                R as[TR];
#pragma unroll
                for (int t = 0; t < TR; ++t) as[t] = av[u][t].x + av[u][t].y;
#pragma unroll
                for (int q = 0; q < KT; q += 2) {
                    TA x0, x1;
                    fmv::lds_pair(xb + jj * XS + q, x0, x1);
                    const R s0 = sb[jj * SS + q], s1 = sb[jj * SS + q + 1];
#pragma unroll
                    for (int t = 0; t < TR; ++t) {
                        t1[t][q] += av[u][t].x * x0.x;
                        t2[t][q] += av[u][t].y * x0.y;
                        t3[t][q] += as[t] * s0;
                        t1[t][q + 1] += av[u][t].x * x1.x;
                        t2[t][q + 1] += av[u][t].y * x1.y;
                        t3[t][q + 1] += as[t] * s1;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int t = 0; t < TR; ++t) av[u][t] = an[u][t];
        }
        if (more) store_x(c + 1);
        __syncthreads();
    }

    // Y = (T1 - T2, T3 - T1 - T2), summed over the column lanes (lowest lane bits)
    TA* ys = Y + (index_t)split * nf * nd * K;
#pragma unroll
    for (int t = 0; t < TR; ++t) {
        const int i = i0 + t;
#pragma unroll
        for (int q = 0; q < KT; ++q) {
            R re = t1[t][q] - t2[t][q];
            R im = t3[t][q] - t1[t][q] - t2[t][q];
#pragma unroll
            for (int off = CL >> 1; off > 0; off >>= 1) {
                re += FMV_SHFL_XOR(re, off, 32);
                im += FMV_SHFL_XOR(im, off, 32);
            }
            const int k = kh * KT + q;
            if (q % CL == cl && i < nd && k < kn) ys[((index_t)f * nd + i) * K + k0 + k] = fmv::cmake<TA>(re, im);
        }
    }
}

// ---------------------------------------------------------------------------
// Forward product with KB = 4 * TN right-hand sides, Fhat staged too.  Block
// (f, column split), all nd <= 64 * TM rows; blockIdx.y the chunk of KB
// right-hand sides.  Chunks of BK columns of A (all rows) and of X go into
// shared memory by asynchronous copies, NS chunks deep, so that the block has
// NS - 1 chunks in flight without holding them in registers.  Thread t is
// right-hand-side group kg = t % 4 (TN of them), row group rg = (t / 4) % RG
// (rows rg + m RG, m < TM) and column phase ph = t / (4 RG) < P = blockDim.x /
// (4 RG) (phases take pairs of columns in turn and are summed through shared
// memory at the end).  So a warp reads 8 rows of A and 4 groups of X per
// shared-memory access, each in distinct banks: one wavefront each.
// 3M products as in sbgemm_fwd; Ar + Ai and Xr + Xi are formed per use.
// A is copied VA elements at a time (VA = 2: 16-byte copies of complex64
// pairs; nm, the split width and A's address even), X VX at a time (VX = 2:
// K even, X's address 16-byte aligned), by ChunkCopies; only the last chunk
// of a split checks its columns.
// MINB: blocks per multiprocessor the registers are capped for.
// Launch: blockDim.x = 256 >= 4 RG, gridDim.x = nf * S, gridDim.y = ceil(K / KB),
// dynamic shared memory max(NS (RG TM AS + BK XS) sizeof(TA), (P - 1) 4 RG TM TN 2 sizeof(real)),
// AS = BK + 16 / sizeof(TA), XS = KB + 16 / sizeof(TA).  X has A's type.
// ---------------------------------------------------------------------------
template <typename TA, int TM, int TN, int BK, int NS, int VA, int VX, int MINB>
__global__ void __launch_bounds__(256, MINB)
sbgemm_staged(const TA* __restrict__ A, const TA* __restrict__ X, TA* __restrict__ Y, int nf, int nd, int nm, int K,
              int S, int cw, int lda) {
    typedef typename fmv::real_of<TA>::type R;
    constexpr int KB = 4 * TN;
    constexpr int AS = BK + 16 / (int)sizeof(TA);
    constexpr int XS = KB + 16 / (int)sizeof(TA);
    static_assert(BK % 2 == 0 && TN % 2 == 0 && NS >= 2 && 256 % (BK / VA) == 0 && KB % VX == 0, "tile");
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    const int RG = (nd + TM - 1) / TM;
    const int rows = RG * TM;
    const int P = (int)blockDim.x / (4 * RG);
    TA* as = reinterpret_cast<TA*>(fmv_smem);  // [NS][rows][AS]
    TA* xs = as + NS * rows * AS;              // [NS][BK][XS]

    const int tid = threadIdx.x;
    const int kg = tid % 4, rg = (tid / 4) % RG, ph = tid / (4 * RG);
    const fmv::BlockShare<BK, KB> b(S, cw, nm, K);
    // rows nd .. rows - 1 of the tile are never read into a kept sum, so never copied
    const fmv::ChunkCopies<TA, BK, KB, VA, VX, AS, XS> copies(A, X, nd, nm, K, lda, b, tid, 256);
    auto issue = [&](int c) { copies.issue(c, as + (c % NS) * rows * AS, xs + (c % NS) * BK * XS); };

    R t1[TM][TN], t2[TM][TN], t3[TM][TN];
#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) t1[m][n] = t2[m][n] = t3[m][n] = 0;

    fmv::for_each_staged_chunk<NS>(b.nchunks, issue, [&](int c) {
        if (ph < P) {
            const TA* ab = as + (c % NS) * rows * AS + rg * AS;
            const TA* xb = xs + (c % NS) * BK * XS + kg * TN;
#pragma unroll 2
            for (int jj = 2 * ph; jj < BK; jj += 2 * P) {
                TA a[2][TM], x[2][TN];
#pragma unroll
                for (int m = 0; m < TM; ++m) fmv::lds_pair(ab + m * RG * AS + jj, a[0][m], a[1][m]);
#pragma unroll
                for (int v = 0; v < 2; ++v)
#pragma unroll
                    for (int n = 0; n < TN; n += 2) fmv::lds_pair(xb + (jj + v) * XS + n, x[v][n], x[v][n + 1]);
#pragma unroll
                for (int v = 0; v < 2; ++v) {
                    R xsum[TN];
#pragma unroll
                    for (int n = 0; n < TN; ++n) xsum[n] = x[v][n].x + x[v][n].y;
#pragma unroll
                    for (int m = 0; m < TM; ++m) {
                        const R asum = a[v][m].x + a[v][m].y;
#pragma unroll
                        for (int n = 0; n < TN; ++n) {
                            t1[m][n] += a[v][m].x * x[v][n].x;
                            t2[m][n] += a[v][m].y * x[v][n].y;
                            t3[m][n] += asum * xsum[n];
                        }
                    }
                }
            }
        }
    });

    // phases 1 .. P-1 leave their sums in shared memory, phase 0 adds them in order and writes Y
    R* red = reinterpret_cast<R*>(fmv_smem);  // [P - 1][4 RG][TM][TN][2]
    const int slot = tid % (4 * RG);
    if (ph > 0 && ph < P) {
        R* r = red + ((ph - 1) * 4 * RG + slot) * TM * TN * 2;
#pragma unroll
        for (int m = 0; m < TM; ++m)
#pragma unroll
            for (int n = 0; n < TN; ++n) {
                r[(m * TN + n) * 2] = t1[m][n] - t2[m][n];
                r[(m * TN + n) * 2 + 1] = t3[m][n] - t1[m][n] - t2[m][n];
            }
    }
    __syncthreads();
    if (ph == 0) {
        TA* ys = Y + (index_t)b.split * nf * nd * K;
#pragma unroll
        for (int m = 0; m < TM; ++m) {
            const int i = rg + m * RG;
#pragma unroll
            for (int n = 0; n < TN; ++n) {
                R re = t1[m][n] - t2[m][n];
                R im = t3[m][n] - t1[m][n] - t2[m][n];
                for (int p = 1; p < P; ++p) {
                    const R* r = red + ((p - 1) * 4 * RG + slot) * TM * TN * 2 + (m * TN + n) * 2;
                    re += r[0];
                    im += r[1];
                }
                const int k = kg * TN + n;
                if (i < nd && k < b.kn) ys[((index_t)b.f * nd + i) * K + b.k0 + k] = fmv::cmake<TA>(re, im);
            }
        }
    }
}

#ifndef FMV_HIP
// ---------------------------------------------------------------------------
// Forward product in complex64 on the tensor cores (3xTF32), KB = 8 or 16
// right-hand sides a block, in the 3M form of sbgemm_fwd: three real products
// T1 = Ar Xr, T2 = Ai Xi and T3 = (Ar + Ai)(Xr + Xi), Re Y = T1 - T2 and
// Im Y = T3 - T1 - T2, so three tensor-core products where the complex
// product as one real product of twice the size takes four.
// mma.sync.m16n8k8 (TF32 in, float32 sums): a k-step is complex columns
// j0 .. j0 + 7, k slot t column j0 + t and slot t + 4 column j0 + t + 4, so a
// lane's values of A for its two rows are four complex64 in shared memory
// (real parts, imaginary parts and their sums make the three A fragments), and
// two complex64 of X make its B fragments of the three products.
// 3xTF32: each float v = big + small, big = tf32(v), small = v - big; a
// product sums big*small, small*big and big*big, and drops small*small
// (2^-21 relative).  The tensor core's float32 sums lose a little on every
// addition, in one direction (measured: an error growing with the number of
// columns, 2.4e-5 at 10000 against float32's 2e-6), so its sums start from
// zero each chunk and are added to the kept Re Y and Im Y in float32
// arithmetic: about float32's accuracy.
// Block (f, column split) as in sbgemm_staged, blockIdx.y the chunk of KB
// right-hand sides, chunks of BK columns of A (rows < nd) and of X copied in
// by cp.async, NS deep.  Warp w takes rows 16 (w % MT) .. + 15 (MT =
// ceil(nd / 16) row tiles; rows past nd read row nd - 1 and are not kept)
// and the k-steps ph, ph + P, ... of each chunk (ph = w / MT); the P phases
// are summed through shared memory at the end.
// MAXT, MINB: launch bounds (blockDim.x <= MAXT; registers capped for MINB blocks a multiprocessor).
// Launch: blockDim.x = 32 MT P <= MAXT, gridDim.x = nf * S, gridDim.y = ceil(K / KB),
// dynamic shared memory max(NS (nd AS + BK XS) 8, (P - 1) 32 MT KB 4) bytes,
// AS = BK + 4, XS = KB + 4 (complex64 strides: the lanes of a load in distinct banks).
// Needs compute capability 8.0 (TF32 mma.sync).
// ---------------------------------------------------------------------------
namespace fmv {

// v = big + small as TF32 operands: big is v rounded to TF32's 10 mantissa bits (to nearest, ties away;
// integer arithmetic, as cvt.rna.tf32 takes several instructions), small = v - big exactly, of which the
// tensor core reads the top 10 mantissa bits
FMV_DEV void tf32_split(float v, unsigned& big, unsigned& small) {
    big = (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(v - __uint_as_float(big));
}

// Re Y += T1 - T2 (sum[0]) and Im Y += T3 - T1 - T2 (sum[1]) from one chunk's sums part[0 .. 2] = T1 .. T3 of
// sbgemm_tc's m16n8 tiles (sum[.][4 h + e] is element e of tile h)
template <int NH> FMV_DEV void add_chunk_sums(float (&sum)[2][4 * NH], const float (&part)[3][NH][4]) {
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            sum[0][4 * h + e] += part[0][h][e] - part[1][h][e];
            sum[1][4 * h + e] += part[2][h][e] - part[0][h][e] - part[1][h][e];
        }
}

// Y of the tensor-core kernels: each thread's NSUM sums, sum[0] Re and sum[1] Im of Y[place(s)] (row i, right-hand
// side k of the block's chunk), warp phase ph: phases 1 .. P-1 leave their sums in shared memory (red, free after
// the last chunk; slot = the thread's place among the `slots` threads of a phase), phase 0 adds them in order and
// writes Y.
template <int NSUM, int P, int BK, int KB, typename Place>
FMV_DEV void store_sums(float (&sum)[2][NSUM], float* red, int slots, int ph, const Place& place, float2* Y,
                        const BlockShare<BK, KB>& b, int nf, int nd, int K) {
    const int slot = threadIdx.x % slots;
    if (ph > 0) {
        float* r = red + ((ph - 1) * slots + slot) * 2 * NSUM;
#pragma unroll
        for (int s = 0; s < NSUM; ++s) {
            r[2 * s] = sum[0][s];
            r[2 * s + 1] = sum[1][s];
        }
    }
    __syncthreads();
    if (ph == 0) {
        float2* ys = Y + (index_t)b.split * nf * nd * K;
#pragma unroll
        for (int s = 0; s < NSUM; ++s) {
#pragma unroll
            for (int p = 1; p < P; ++p) {
                sum[0][s] += red[((p - 1) * slots + slot) * 2 * NSUM + 2 * s];
                sum[1][s] += red[((p - 1) * slots + slot) * 2 * NSUM + 2 * s + 1];
            }
            const int2 ik = place(s);
            if (ik.x < nd && ik.y < b.kn)
                ys[((index_t)b.f * nd + ik.x) * K + b.k0 + ik.y] = cmake<float2>(sum[0][s], sum[1][s]);
        }
    }
}

// d += a b for one 16 x 8 x 8 tile (fragments as in the PTX ISA's m16n8k8 .tf32 layout)
FMV_DEV void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace fmv

template <int KB, int BK, int NS, int P, int VA, int VX, int MAXT, int MINB>
__global__ void __launch_bounds__(MAXT, MINB)
sbgemm_tc(const float2* __restrict__ A, const float2* __restrict__ X, float2* __restrict__ Y, int nf, int nd, int nm,
          int K, int S, int cw, int lda) {
    constexpr int NH = KB / 8;           // tiles of 8 output columns per half (Re, Im)
    constexpr int AS = BK + 4;
    constexpr int XS = KB + 4;
    static_assert((KB == 8 || KB == 16) && BK % 16 == 0 && (BK / 8) % P == 0 && 32 % (BK / VA) == 0 && NS >= 2,
                  "tile");
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    float2* as = reinterpret_cast<float2*>(fmv_smem);  // [NS][nd][AS]
    float2* xs = as + NS * nd * AS;                    // [NS][BK][XS]

    const int tid = threadIdx.x, nthreads = blockDim.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int MT = (nd + 15) / 16;
    const int mt = warp % MT, ph = warp / MT;
    const fmv::BlockShare<BK, KB> b(S, cw, nm, K);
    const fmv::ChunkCopies<float2, BK, KB, VA, VX, AS, XS> copies(A, X, nd, nm, K, lda, b, tid, nthreads);
    auto issue = [&](int c) { copies.issue(c, as + (c % NS) * nd * AS, xs + (c % NS) * BK * XS); };

    float sum[2][4 * NH];  // Re and Im Y of element e of tile h (columns 8h ..) at 4 h + e
#pragma unroll
    for (int s = 0; s < 4 * NH; ++s) sum[0][s] = sum[1][s] = 0.f;
    const int r0 = fmv::min_(16 * mt + g, nd - 1) * AS, r1 = fmv::min_(16 * mt + g + 8, nd - 1) * AS;

    fmv::for_each_staged_chunk<NS>(b.nchunks, issue, [&](int c) {
        const float2* ab = as + (c % NS) * nd * AS;
        const float2* xb = xs + (c % NS) * BK * XS + g;
        float part[3][NH][4];  // this chunk's T1, T2 and T3, in the tensor core
#pragma unroll
        for (int n = 0; n < 3; ++n)
#pragma unroll
            for (int h = 0; h < NH; ++h)
#pragma unroll
                for (int e = 0; e < 4; ++e) part[n][h][e] = 0.f;
#pragma unroll
        for (int u = 0; u < BK / (8 * P); ++u) {
            const int j = 8 * (ph + u * P) + t;
            // fragment element e: row g (+8 for odd e), column j (+4 for e >= 2)
            const float2 a[4] = {ab[r0 + j], ab[r1 + j], ab[r0 + j + 4], ab[r1 + j + 4]};
            unsigned rbig[4], rsmall[4], ibig[4], ismall[4], sbig[4], ssmall[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                fmv::tf32_split(a[e].x, rbig[e], rsmall[e]);
                fmv::tf32_split(a[e].y, ibig[e], ismall[e]);
                fmv::tf32_split(a[e].x + a[e].y, sbig[e], ssmall[e]);
            }
#pragma unroll
            for (int h = 0; h < NH; ++h) {
                const float2 v0 = xb[j * XS + 8 * h], v1 = xb[(j + 4) * XS + 8 * h];
                unsigned rb0, rs0, rb1, rs1, ib0, is0, ib1, is1, sb0, ss0, sb1, ss1;
                fmv::tf32_split(v0.x, rb0, rs0);
                fmv::tf32_split(v1.x, rb1, rs1);
                fmv::tf32_split(v0.y, ib0, is0);
                fmv::tf32_split(v1.y, ib1, is1);
                fmv::tf32_split(v0.x + v0.y, sb0, ss0);
                fmv::tf32_split(v1.x + v1.y, sb1, ss1);
                fmv::mma_tf32(part[0][h], rbig, rs0, rs1);
                fmv::mma_tf32(part[1][h], ibig, is0, is1);
                fmv::mma_tf32(part[2][h], sbig, ss0, ss1);
                fmv::mma_tf32(part[0][h], rsmall, rb0, rb1);
                fmv::mma_tf32(part[1][h], ismall, ib0, ib1);
                fmv::mma_tf32(part[2][h], ssmall, sb0, sb1);
                fmv::mma_tf32(part[0][h], rbig, rb0, rb1);
                fmv::mma_tf32(part[1][h], ibig, ib0, ib1);
                fmv::mma_tf32(part[2][h], sbig, sb0, sb1);
            }
        }
        fmv::add_chunk_sums(sum, part);
    });

    // fragment element e of tile h: row g (+8 for e >= 2), column 8h + 2t + (e & 1)
    auto place = [&](int s) { return make_int2(16 * mt + g + 8 * (s >> 1 & 1), 8 * (s >> 2) + 2 * t + (s & 1)); };
    fmv::store_sums<4 * NH, P>(sum, reinterpret_cast<float*>(fmv_smem), 32 * MT, ph, place, Y, b, nf, nd, K);
}

// ---------------------------------------------------------------------------
// sbgemm_wg: 9-16 right-hand sides on Hopper's warpgroup MMA (wgmma.mma_async,
// compute capability 9.0 built for sm_90a; elsewhere the kernel is empty and
// the backend does not take it), up to 128 rows.  Blocks, chunks and copies as
// in sbgemm_tc, 3xTF32, and the complex product as one real product of twice
// the depth: row i of Fhat's chunk, read as it lies (Re, Im, Re, Im, ...), times
// B = [Xr | Xi ; -Xi | Xr] (rows 2j and 2j + 1 of B from X[j]: 32 columns, Re Y
// then Im Y).  So A goes to the tensor core straight from the staged chunk,
// which the copies lay out with wgmma's 128-byte swizzle (ChunkCopies, SW128),
// with no instruction of the threads: the tensor core reads float32 as TF32 by
// dropping the low 13 bits, which makes A's big part (big = A truncated).  The
// threads form only A's small part (A - big, registers) and split B once per
// chunk for the block into big (rounded) and small: bsplit, [64][2 BK] words,
// big in rows 0-31 and small in rows 32-63, in core matrices of 8 rows x 16
// bytes without swizzle.  A k-step (8 columns of the real product, 4 of Fhat)
// is two products of a warpgroup's 64 rows: D += A [B_big | B_small]
// (m64n64k8, A from shared memory) and D2 += A_small B_big (m64n32k8, A from
// registers); Re Y and Im Y are their three parts' sums, started from zero in
// the tensor core each chunk and added to the kept sums as in sbgemm_tc.
// Rates (benchmarks/wgmma_rate.py): 32 and 16 cycles of a multiprocessor, the
// tensor core's full TF32 rate, where m64n16k8 runs at 61%.
// Warp w takes the 16 rows 16 (w % MT) .. (MT = 4 ceil(nd / 64), whole
// warpgroups; the rows past nd are zero) and the k-steps ph, ph + P, ... of
// each chunk (ph = w / MT).
// Launch: blockDim.x = 32 MT P <= 256, gridDim.x = nf * S, gridDim.y = ceil(K / 16), dynamic shared
// memory max(1024 + NS (16 MT BK + BK XS) 8 + 512 BK, (P - 1) 32 MT 16 4) bytes, XS = 20.
// ---------------------------------------------------------------------------
namespace fmv {

// The shared-memory matrix descriptor of wgmma for K-major core matrices without swizzle: start address, byte
// offsets between core matrices along K (lbo) and along M or N (sbo)
FMV_DEV unsigned long long wgmma_desc(const void* p, unsigned lbo, unsigned sbo) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(p);  // the builtin: the compiler keeps it uniform
    return (unsigned long long)((addr & 0x3ffffu) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
           (unsigned long long)(sbo >> 4) << 32;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
FMV_DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FMV_DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wait until at most N committed groups of this warpgroup's products are in flight
template <int N> FMV_DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// shared-memory stores made visible to wgmma's reads (the async proxy)
FMV_DEV void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d = a b (+ d when accumulate), a 64 x 8 and b 8 x 64 TF32 at descriptors, d 64 x 64 float32 (this warp's 16
// rows: eight m16n8 tiles)
FMV_DEV void wgmma_ss_n64(float (&d)[8][4], unsigned long long a, unsigned long long b, bool accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
          "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
          "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(a), "l"(b), "r"((int)accumulate));
}
// d = a b (+ d when accumulate), a 64 x 8 TF32 from registers (this warp's 16 rows, m16n8k8's layout), b 8 x 32
// at a descriptor, d 64 x 32 float32 (four m16n8 tiles)
FMV_DEV void wgmma_rs_n32(float (&d)[4][4], const unsigned (&a)[4], unsigned long long b, bool accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,"
        "%15}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
          "+f"(d[3][2]), "+f"(d[3][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"((int)accumulate));
}
// the compiler must not move accesses to d across the wait for the products writing it
template <int N> FMV_DEV void wgmma_fence_operands(float (&d)[N][4]) {
#pragma unroll
    for (int q = 0; q < N; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[q][e])::"memory");
}
#endif

}  // namespace fmv

template <int BK, int NS, int P, int VA, int VX, int MINB>
__global__ void __launch_bounds__(256, MINB)
sbgemm_wg(const float2* __restrict__ A, const float2* __restrict__ X, float2* __restrict__ Y, int nf, int nd, int nm,
          int K, int S, int cw, int lda) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int KB = 16;
    constexpr int XS = KB + 4;
    constexpr int SBO = 64 * BK;  // bytes between bsplit's core matrices 8 rows apart
    static_assert(BK % 4 == 0 && (BK / 4) % P == 0 && 32 % (BK / VA) == 0 && NS >= 2, "tile");
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    const int MT = 4 * ((nd + 63) / 64), R = 16 * MT;  // rows of a stage of A
    // the swizzle repeats every 1024 bytes of the address: stages start at a multiple
    float2* as = reinterpret_cast<float2*>(fmv_smem) + (1024 - (__cvta_generic_to_shared(fmv_smem) & 1023)) % 1024 / 8;
    float2* xs = as + NS * R * BK;                                      // [NS][BK][XS]
    unsigned* bsplit = reinterpret_cast<unsigned*>(xs + NS * BK * XS);  // [64][2 BK], core matrices

    const int tid = threadIdx.x, nthreads = blockDim.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int mt = warp % MT, ph = warp / MT;
    const fmv::BlockShare<BK, KB> b(S, cw, nm, K);
    const fmv::ChunkCopies<float2, BK, KB, VA, VX, 0, XS, true> copies(A, X, nd, nm, K, lda, b, tid, nthreads, R);
    auto issue = [&](int c) { copies.issue(c, as + (c % NS) * R * BK, xs + (c % NS) * BK * XS); };
    // rows nd .. R - 1 of every stage are zero (no copy writes them; where they are is not swizzled)
    for (int q = nd * 2 * BK + tid; q < R * 2 * BK; q += nthreads)
        for (int st = 0; st < NS; ++st)
            reinterpret_cast<float*>(as + st * R * BK)[(q % (2 * BK) / 32 * R + q / (2 * BK)) * 32 + q % 32] = 0.f;
    // this warpgroup's rows of stage 0 (128-byte swizzle, 8 rows 1024 bytes apart) and bsplit (no swizzle);
    // + 16-byte units to move them
    const unsigned long long adesc = fmv::wgmma_desc(as + (mt / 4) * 64 * 16, 16, 1024) | 1ull << 62;
    const unsigned long long bdesc = fmv::wgmma_desc(bsplit, 128, 64 * BK);
    // this thread's words of A's fragments in a stage: rows 16 mt + g (+ 8), columns t (+ 4) of k-step ks at
    // piece 2 (ks % 4) (+ 1) of 16 bytes of the 128 of ks / 4, swizzled by the row (g)
    const int w0 = (16 * mt + g) * 32 + t, w1 = w0 + 8 * 32;

    float sum[2][8];  // Re and Im Y, element e of tile h (right-hand sides 8h ..) at 4 h + e
#pragma unroll
    for (int s = 0; s < 8; ++s) sum[0][s] = sum[1][s] = 0.f;

    fmv::for_each_staged_chunk<NS>(b.nchunks, issue, [&](int c) {
        const float2* xb = xs + (c % NS) * BK * XS;
        for (int id = tid; id < 16 * BK; id += nthreads) {
            // X[j, n] -> B rows n (Xr at 2j, -Xi at 2j + 1) and 16 + n (Xi, Xr), big and 32 rows on small
            const int j = (id >> 4) % (BK / 2) * 2 + (id & 1), n = (id >> 4) / (BK / 2) * 8 + (id >> 1 & 7);
            const float2 v = xb[j * XS + n];
            unsigned rb, rs, ib, is;
            fmv::tf32_split(v.x, rb, rs);
            fmv::tf32_split(v.y, ib, is);
            const int wr = (n >> 3) * (SBO / 4) + (j >> 1) * 32 + (n & 7) * 4 + (j & 1) * 2;  // row n, column 2j
            constexpr int IM = 2 * SBO / 4, SMALL = 4 * SBO / 4;  // words on to rows 16 + n and 32 + n
            *reinterpret_cast<uint2*>(bsplit + wr) = make_uint2(rb, ib ^ 0x80000000u);
            *reinterpret_cast<uint2*>(bsplit + wr + IM) = make_uint2(ib, rb);
            *reinterpret_cast<uint2*>(bsplit + wr + SMALL) = make_uint2(rs, is ^ 0x80000000u);
            *reinterpret_cast<uint2*>(bsplit + wr + SMALL + IM) = make_uint2(is, rs);
        }
        fmv::fence_proxy_async();
        __syncthreads();
        const unsigned* ab = reinterpret_cast<const unsigned*>(as + (c % NS) * R * BK);
        const unsigned long long ad = adesc + (unsigned long long)((c % NS) * R * BK / 2);
        float d[8][4], d2[4][4];  // this chunk's A [B_big | B_small] and A_small B_big, in the tensor core
#pragma unroll 2
        for (int u = 0; u < BK / (4 * P); ++u) {
            const int ks = ph + u * P;
            // A_small's fragment: element e row g (+8 for odd e), column t (+4 for e >= 2)
            const int piece = 2 * (ks & 3), p0 = (ks >> 2) * R * 32 + (piece ^ g) * 4,
                      p1 = (ks >> 2) * R * 32 + ((piece + 1) ^ g) * 4;
            const unsigned a[4] = {ab[w0 + p0], ab[w1 + p0], ab[w0 + p1], ab[w1 + p1]};
            unsigned small[4];
#pragma unroll
            for (int e = 0; e < 4; ++e)
                small[e] = __float_as_uint(__uint_as_float(a[e]) - __uint_as_float(a[e] & 0xffffe000u));
            fmv::wgmma_fence();
            fmv::wgmma_ss_n64(d, ad + (ks >> 2) * R * 8 + (ks & 3) * 2, bdesc + 16 * ks, u > 0);
            fmv::wgmma_rs_n32(d2, small, bdesc + 16 * ks, u > 0);
            fmv::wgmma_commit();
            fmv::wgmma_wait<1>();  // the registers of A_small of the k-step before are free
        }
        fmv::wgmma_wait<0>();
        fmv::wgmma_fence_operands(d);
        fmv::wgmma_fence_operands(d2);
        // tiles q of B's columns: Re Y (q = 0, 1) and Im Y (2, 3) of big; + 4: of small
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                sum[0][4 * h + e] += (d[h][e] + d[h + 4][e]) + d2[h][e];
                sum[1][4 * h + e] += (d[h + 2][e] + d[h + 6][e]) + d2[h + 2][e];
            }
        __syncthreads();  // every warpgroup's products have read bsplit before the next chunk's split
    });

    // fragment element e of tile h: row g (+8 for e >= 2), column 8h + 2t + (e & 1)
    auto place = [&](int s) { return make_int2(16 * mt + g + 8 * (s >> 1 & 1), 8 * (s >> 2) + 2 * t + (s & 1)); };
    fmv::store_sums<8, P>(sum, reinterpret_cast<float*>(fmv_smem), 32 * MT, ph, place, Y, b, nf, nd, K);
#endif
}
#endif  // !FMV_HIP

#ifdef FFTMATVEC_INSTANTIATE
#define FMV_GEMM(TA, TX, KB, KL, CL, TR, U, V, MB)                                                          \
    template __global__ void sbgemm_fwd<TA, TX, KB, KL, CL, TR, U, V, MB>(const TA*, const TX*, TA*, int, int, \
                                                                           int, int, int, int, int, int);
FMV_GEMM(float2, float2, 16, 2, 4, 2, 2, 2, 2)
FMV_GEMM(float2, double2, 16, 2, 4, 2, 2, 2, 2)
FMV_GEMM(float2, float2, 8, 1, 8, 2, 4, 1, 2)
FMV_GEMM(float2, double2, 8, 1, 8, 2, 4, 1, 2)
FMV_GEMM(float2, float2, 4, 1, 8, 2, 4, 2, 2)
FMV_GEMM(float2, float2, 2, 1, 8, 2, 4, 4, 2)
FMV_GEMM(double2, double2, 16, 2, 4, 2, 2, 4, 1)
FMV_GEMM(double2, float2, 16, 2, 4, 2, 2, 4, 1)
FMV_GEMM(double2, double2, 8, 2, 4, 2, 2, 4, 2)
FMV_GEMM(double2, double2, 4, 1, 8, 2, 2, 4, 2)
FMV_GEMM(double2, double2, 2, 1, 8, 2, 2, 8, 2)
#define FMV_STAGED(TA, TM, TN, BK, NS, VA, VX, MINB)                                                     \
    template __global__ void sbgemm_staged<TA, TM, TN, BK, NS, VA, VX, MINB>(const TA*, const TA*, TA*, int, int, \
                                                                             int, int, int, int, int);
FMV_STAGED(float2, 5, 4, 32, 3, 2, 2, 2)
FMV_STAGED(float2, 5, 4, 32, 3, 1, 1, 2)
FMV_STAGED(double2, 2, 4, 16, 3, 1, 1, 2)
#ifndef FMV_HIP
#define FMV_TC(KB, BK, NS, P, VA, VX, MAXT, MINB)                                                     \
    template __global__ void sbgemm_tc<KB, BK, NS, P, VA, VX, MAXT, MINB>(const float2*, const float2*, float2*, int, \
                                                                         int, int, int, int, int, int);
FMV_TC(16, 32, 3, 1, 2, 2, 256, 2)
FMV_TC(16, 32, 3, 2, 1, 1, 512, 1)
FMV_TC(8, 32, 3, 4, 2, 2, 256, 2)
FMV_TC(8, 16, 4, 1, 2, 1, 256, 3)
#define FMV_WG(BK, NS, P, VA, VX, MINB)                                                                         \
    template __global__ void sbgemm_wg<BK, NS, P, VA, VX, MINB>(const float2*, const float2*, float2*, int, int, int, \
                                                                int, int, int, int);
FMV_WG(32, 3, 1, 2, 2, 1)
FMV_WG(32, 2, 2, 1, 1, 2)
FMV_WG(32, 2, 1, 2, 2, 2)
#endif
#endif
