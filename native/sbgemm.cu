// sbgemm.cu -- per-frequency products with several right-hand sides (stage 3).
// Forward: sbgemm_fwd (Fhat through registers, X staged; any number of rows),
// sbgemm_staged (Fhat and X staged by asynchronous copies; up to 64 TM rows),
// sbgemm_tc (on the tensor cores, staged as sbgemm_staged; up to 256 rows;
// CUDA only), sbgemm_tc_pipe (sbgemm_tc in complex64 with warps and the copy
// engine that bring its chunks in; compute capability 9.0) and sbgemm_wg_pipe
// (complex64, 9-16 right-hand sides, 65-128 rows, on Hopper's warpgroup MMA,
// fed as sbgemm_tc_pipe), which the backend takes first where they can run.
// Adjoint: sbgemm_adj_tc (on the tensor cores; CUDA only), at the end of the
// file.
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
// Measured on an H200 (docs/gpu-kernels.md): 1.5-2.0x the memory floor for
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
    // the share of piece = f S + split (a block that takes more than one, sbgemm_wg_pipe); not the constructor
    // above delegating here, which changes the code of every kernel using it (blockIdx.x is unsigned)
    FMV_DEV BlockShare(int S, int cw, int nm, int K, int piece)
        : split(piece % S), f(piece / S), k0(blockIdx.y * KB), kn(min_(KB, K - k0)), jbeg(split * cw),
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
template <typename TA, int BK, int KB, int VA, int VX, int AS, int XS> struct ChunkCopies {
    static constexpr int CPR = BK / VA;  // copies per row of a chunk of A
    static constexpr int XPR = KB / VX;  // copies per row of a chunk of X
    const TA *af, *xf, *asrc, *xsrc;
    index_t astep, xstep, xchunk;
    int jbeg, jend, acol, arows, adst, RPS, xj, XR, xrows, xdst, XRS;
    bool xok;

    // A: rows of Fhat (lda rows a frequency, row stride nm), X: (nf, nm, K)
    FMV_DEV ChunkCopies(const TA* A, const TA* X, int nd, int nm, int K, int lda, const BlockShare<BK, KB>& b,
                        int tid, int nthreads)
        : af(A + (index_t)b.f * lda * nm), xf(X + (index_t)b.f * nm * K + b.k0), jbeg(b.jbeg), jend(b.jend) {
        const int RP = nthreads / CPR, arow = tid / CPR;
        acol = tid % CPR * VA;
        arows = arow < nd ? (nd - arow + RP - 1) / RP : 0;
        asrc = af + (index_t)arow * nm + jbeg + acol;
        astep = (index_t)RP * nm;
        adst = arow * AS + acol;
        RPS = RP * AS;
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
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
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
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
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
// Forward product on the tensor cores, KB = 8 or 16 right-hand sides a block,
// in the 3M form of sbgemm_fwd: three real products T1 = Ar Xr, T2 = Ai Xi and
// T3 = (Ar + Ai)(Xr + Xi), Re Y = T1 - T2 and Im Y = T3 - T1 - T2, so three
// tensor-core products where the complex product as one real product of
// twice the size takes four.  A k-step is complex columns j0 .. j0 + 7 of an
// m16n8k8 product, k slot t column j0 + t and slot t + 4 column j0 + t + 4, so
// a lane's values of A for its two rows are four complex values in shared
// memory (real parts, imaginary parts and their sums make the three A
// fragments), and two complex values of X make its B fragments of the three
// products (TensorProduct):
// * complex64: mma.sync.m16n8k8 in TF32 with float32 sums (compute capability
//   8.0), as 3xTF32: each float v = big + small, big = tf32(v) (rounded for A,
//   truncated for X, tf32_split_trunc), small = v - big; a product sums
//   big*small, small*big and big*big, and drops small*small (2^-21 relative).
//   The tensor core's float32 sums lose a little on every addition, in one
//   direction (measured: an error growing with the number of columns, 2.4e-5
//   at 10000 against float32's 2e-6), so its sums start from zero each chunk
//   and are added to the kept Re Y and Im Y in float32 arithmetic: about
//   float32's accuracy.
// * complex128: mma.sync.m16n8k8 in float64 (compute capability 9.0), whose
//   sums are float64 additions: the three products go on over all chunks.
// Block (f, column split) as in sbgemm_staged, blockIdx.y the chunk of KB
// right-hand sides, chunks of BK columns of A (rows < nd) and of X copied in
// by cp.async, NS deep.  Warp w takes rows 16 (w % MT) .. + 15 (MT =
// ceil(nd / 16) row tiles; rows past nd read row nd - 1 and are not kept)
// and the k-steps ph, ph + P, ... of each chunk (ph = w / MT); the P phases
// are summed through shared memory at the end.
// MAXT, MINB: launch bounds (blockDim.x <= MAXT; registers capped for MINB blocks a multiprocessor).
// Launch: blockDim.x = 32 MT P <= MAXT, gridDim.x = nf * S, gridDim.y = ceil(K / KB),
// dynamic shared memory max(NS (nd AS + BK XS) sizeof(TA), (P - 1) 32 MT KB sizeof(real)) bytes,
// AS = BK + 4, XS = KB + 4 (complex64) or KB + 2 (complex128): the lanes of a load in distinct banks.
// ---------------------------------------------------------------------------
namespace fmv {

// v = big + small as TF32 operands: big is v rounded to TF32's 10 mantissa bits (to nearest, ties away;
// integer arithmetic, as cvt.rna.tf32 takes several instructions), small = v - big exactly, of which the
// tensor core reads the top 10 mantissa bits
FMV_DEV void tf32_split(float v, unsigned& big, unsigned& small) {
    big = (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(v - __uint_as_float(big));
}

// v = big + small as TF32 operands with big = v's own bits, which the tensor core truncates to TF32, and
// small = v - trunc(v) exactly: two instructions where tf32_split takes three, for X's values, which every
// warp of a block splits again.  Truncation leaves small up to 2^-10 |v| (rounding: 2^-11), and the tensor
// core's truncation of small errs by up to 2^-20 |v| (2^-21).
FMV_DEV void tf32_split_trunc(float v, unsigned& big, unsigned& small) {
    big = __float_as_uint(v);
    small = __float_as_uint(v - __uint_as_float(big & 0xffffe000u));
}

// d += a b for one 16 x 8 x 8 tile (fragments as in the PTX ISA's m16n8k8 layouts, TF32 or float64)
FMV_DEV void mma_m16n8k8(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
FMV_DEV void mma_m16n8k8(double (&d)[4], const double (&a)[4], double b0, double b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b0), "d"(b1));
}

// The three products of one k-step for one tile of 8 right-hand sides: A's fragments from its four values
// a[e] (row g, + 8 for odd e; column t, + 4 for e >= 2), then t1 += Ar Xr, t2 += Ai Xi, t3 += (Ar + Ai)(Xr + Xi)
// with X's values v0 (row t) and v1 (row t + 4) of column g.  `fold`: the tensor core's sums drift (float32) and
// must restart from zero every few k-steps, added to sums kept in the threads.
template <typename TA> struct TensorProduct;
template <> struct TensorProduct<float2> {
    static constexpr bool fold = true;
    struct AFragments {
        unsigned rbig[4], rsmall[4], ibig[4], ismall[4], sbig[4], ssmall[4];
    };
    static FMV_DEV AFragments a_fragments(const float2 (&a)[4]) {
        AFragments f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            tf32_split(a[e].x, f.rbig[e], f.rsmall[e]);
            tf32_split(a[e].y, f.ibig[e], f.ismall[e]);
            tf32_split(a[e].x + a[e].y, f.sbig[e], f.ssmall[e]);
        }
        return f;
    }
    static FMV_DEV void products(float (&t1)[4], float (&t2)[4], float (&t3)[4], const AFragments& f, float2 v0,
                                 float2 v1) {
        unsigned rb0, rs0, rb1, rs1, ib0, is0, ib1, is1, sb0, ss0, sb1, ss1;
        tf32_split_trunc(v0.x, rb0, rs0);
        tf32_split_trunc(v1.x, rb1, rs1);
        tf32_split_trunc(v0.y, ib0, is0);
        tf32_split_trunc(v1.y, ib1, is1);
        tf32_split_trunc(v0.x + v0.y, sb0, ss0);
        tf32_split_trunc(v1.x + v1.y, sb1, ss1);
        mma_m16n8k8(t1, f.rbig, rs0, rs1);
        mma_m16n8k8(t2, f.ibig, is0, is1);
        mma_m16n8k8(t3, f.sbig, ss0, ss1);
        mma_m16n8k8(t1, f.rsmall, rb0, rb1);
        mma_m16n8k8(t2, f.ismall, ib0, ib1);
        mma_m16n8k8(t3, f.ssmall, sb0, sb1);
        mma_m16n8k8(t1, f.rbig, rb0, rb1);
        mma_m16n8k8(t2, f.ibig, ib0, ib1);
        mma_m16n8k8(t3, f.sbig, sb0, sb1);
    }
};
template <> struct TensorProduct<double2> {
    static constexpr bool fold = false;
    struct AFragments {
        double r[4], i[4], s[4];
    };
    static FMV_DEV AFragments a_fragments(const double2 (&a)[4]) {
        AFragments f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            f.r[e] = a[e].x;
            f.i[e] = a[e].y;
            f.s[e] = a[e].x + a[e].y;
        }
        return f;
    }
    static FMV_DEV void products(double (&t1)[4], double (&t2)[4], double (&t3)[4], const AFragments& f,
                                 double2 v0, double2 v1) {
        mma_m16n8k8(t1, f.r, v0.x, v1.x);
        mma_m16n8k8(t2, f.i, v0.y, v1.y);
        mma_m16n8k8(t3, f.s, v0.x + v0.y, v1.x + v1.y);
    }
};

// One lane's sums of the 3M form over NH tiles of 8 right-hand sides: the tensor core's terms T1 (tiles h <
// NH), T2 (NH + h) and T3 (2 NH + h), and the kept Re Y (tiles h < NH) and Im Y (NH + h), all zero at first.
template <typename R, int NH> struct Sums3M {
    R sum[2 * NH][4], terms[3 * NH][4];
    FMV_DEV Sums3M() {
#pragma unroll
        for (int n = 0; n < 3 * NH; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) terms[n][e] = sum[n % (2 * NH)][e] = 0;
    }
    // Re Y += T1 - T2, Im Y += T3 - T1 - T2, and the terms restart from zero
    FMV_DEV void add_terms() {
#pragma unroll
        for (int h = 0; h < NH; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                sum[h][e] += terms[h][e] - terms[NH + h][e];
                sum[NH + h][e] += terms[2 * NH + h][e] - terms[h][e] - terms[NH + h][e];
                terms[h][e] = terms[NH + h][e] = terms[2 * NH + h][e] = 0;
            }
    }
};

// One chunk's products of a warp of sbgemm_tc or sbgemm_tc_pipe: its k-steps ph, ph + P, ... of the chunk's BK
// columns; a_at(u, e, j) is the lane's element e of A's fragment at its u-th k-step, in column j of the chunk and
// row g (e even) or g + 8 (e odd) of its tile, xb the chunk's stage [BK][XS] of X; g, t: the lane's place in the
// fragments.
template <typename TA, int KB, int BK, int P, int XS, typename AAt>
FMV_DEV void tc_chunk_products(Sums3M<typename real_of<TA>::type, KB / 8>& acc, const AAt& a_at, const TA* xb,
                               int g, int t, int ph) {
    typedef TensorProduct<TA> Product;
    constexpr int NH = KB / 8;
    xb += g;
#pragma unroll
    for (int u = 0; u < BK / (8 * P); ++u) {
        const int j = 8 * (ph + u * P) + t;
        const TA a[4] = {a_at(u, 0, j), a_at(u, 1, j), a_at(u, 2, j + 4), a_at(u, 3, j + 4)};
        const typename Product::AFragments af = Product::a_fragments(a);
#pragma unroll
        for (int h = 0; h < NH; ++h)
            Product::products(acc.terms[h], acc.terms[NH + h], acc.terms[2 * NH + h], af, xb[j * XS + 8 * h],
                              xb[(j + 4) * XS + 8 * h]);
    }
}

// The end of sbgemm_tc and sbgemm_tc_pipe, for every thread of the block once its shared memory red is free: the
// sums of warp (mt, ph) go to Y.  Phases 1 .. P-1 leave theirs in red, phase 0 adds them in order and writes its
// rows; a warp of phase P or more (sbgemm_tc_pipe's producer) takes no part but the barrier.
template <typename TA, int KB, int BK, int P>
FMV_DEV void tc_store(const Sums3M<typename real_of<TA>::type, KB / 8>& acc, typename real_of<TA>::type* red,
                      TA* __restrict__ Y, const BlockShare<BK, KB>& b, int nf, int nd, int K, int MT) {
    constexpr int NH = KB / 8;
    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int mt = (tid >> 5) % MT, ph = (tid >> 5) / MT, slot = tid % (32 * MT);
    if (ph > 0 && ph < P) {
        typename real_of<TA>::type* r = red + ((ph - 1) * 32 * MT + slot) * 8 * NH;
#pragma unroll
        for (int n = 0; n < 2 * NH; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) r[n * 4 + e] = acc.sum[n][e];
    }
    __syncthreads();
    if (ph == 0) {
        TA* ys = Y + (index_t)b.split * nf * nd * K;
#pragma unroll
        for (int h = 0; h < NH; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // fragment element e: row g (+8 for e >= 2), column 2t + (e & 1)
                typename real_of<TA>::type re = acc.sum[h][e], im = acc.sum[NH + h][e];
#pragma unroll
                for (int p = 1; p < P; ++p) {
                    re += red[((p - 1) * 32 * MT + slot) * 8 * NH + h * 4 + e];
                    im += red[((p - 1) * 32 * MT + slot) * 8 * NH + (NH + h) * 4 + e];
                }
                const int i = 16 * mt + g + 8 * (e >> 1), k = 8 * h + 2 * t + (e & 1);
                if (i < nd && k < b.kn) ys[((index_t)b.f * nd + i) * K + b.k0 + k] = cmake<TA>(re, im);
            }
    }
}

// The ring of stages of sbgemm_tc_pipe and sbgemm_wg_pipe in dynamic shared memory, after nbar mbarriers: stage s
// at base + s stage, BK / 16 boxes of A's rows (abox bytes each, 1024-byte aligned, the swizzle's period; abytes
// in all), then BK rows of X XS complex64 apart, the stage rounded up to 1024 bytes.
template <int BK> struct PipeStages {
    int abox, abytes, stage;
    char* base;
    FMV_DEV PipeStages(void* smem, int nbar, int nd, int XS)
        : abox((nd * 128 + 1023) & ~1023), abytes(BK / 16 * abox), stage((abytes + BK * XS * 8 + 1023) & ~1023) {
        base = reinterpret_cast<char*>(smem) + 8 * nbar;
        base += (1024 - smem_address(base) % 1024) % 1024;
    }
};

// One step of the producer warps of sbgemm_tc_pipe and sbgemm_wg_pipe, thread pt: chunk c of piece b (BlockShare)
// into stage i % NS of ring, the block's i-th chunk, once the phase of empty[s] before has completed: A's rows
// (< nd) by BK / 16 tensor copies of boxes 16 columns wide (thread 0; amap, backend/tensormap.py) and X by
// `copies` (b's ChunkCopies); each thread arrives at full[s] once its copies have landed.
template <int KB, int BK, int NS, int VX, int XS>
FMV_DEV void pipe_chunk_in(const void* amap, int nd, const BlockShare<BK, KB>& b,
                           const ChunkCopies<float2, BK, KB, 1, VX, BK, XS>& copies, int c, int i, int pt,
                           const PipeStages<BK>& ring, unsigned long long* full, unsigned long long* empty) {
    constexpr int BC = 16;  // columns of a box: 128-byte rows
    const int s = i % NS;
    char* st = ring.base + s * ring.stage;
    if (i >= NS) mbar_wait(empty + s, (i / NS - 1) & 1);
    if (pt == 0) {
        mbar_arrive_expect_tx(full + s, (unsigned)(BK / BC * nd * 128));
#pragma unroll
        for (int q = 0; q < BK / BC; ++q)
            tensor_copy_3d(st + q * ring.abox, amap, b.jbeg + c * BK + q * BC, 0, b.f, full + s);
    }
    copies.issue(c, reinterpret_cast<float2*>(st), reinterpret_cast<float2*>(st + ring.abytes));
    cp_async_arrive(full + s);
}

// The producer warps of sbgemm_tc_pipe, thread pt of np: the block's piece b, chunk c into stage c % NS.
template <int KB, int BK, int NS, int VX, int XS>
FMV_DEV void pipe_chunks_in(const float2* A, const float2* X, const void* amap, int nd, int nm, int K, int lda,
                            const BlockShare<BK, KB>& b, int pt, int np, const PipeStages<BK>& ring,
                            unsigned long long* full, unsigned long long* empty) {
    const ChunkCopies<float2, BK, KB, 1, VX, BK, XS> copies(A, X, 0, nm, K, lda, b, pt, np);  // X's alone
    for (int c = 0; c < b.nchunks; ++c) pipe_chunk_in<KB, BK, NS, VX, XS>(amap, nd, b, copies, c, c, pt, ring, full,
                                                                            empty);
}

// The producer warp of sbgemm_wg_pipe, thread pt of np: units u0 .. u1 - 1 (unit u chunk u % ncs of piece u /
// ncs), through one ring of stages; the last split's chunks past nm are skipped.
template <int KB, int BK, int NS, int VX, int XS>
FMV_DEV void pipe_units_in(const float2* A, const float2* X, const void* amap, int nd, int nm, int K, int lda, int S,
                           int cw, int u0, int u1, int ncs, int pt, int np, const PipeStages<BK>& ring,
                           unsigned long long* full, unsigned long long* empty) {
    BlockShare<BK, KB> b(S, cw, nm, K, u0 / ncs);
    ChunkCopies<float2, BK, KB, 1, VX, BK, XS> copies(A, X, 0, nm, K, lda, b, pt, np);  // X's alone
    for (int u = u0, i = 0; u < u1; ++u) {
        const int c = u % ncs;
        if (c == 0 && u > u0) {  // the next piece
            b = BlockShare<BK, KB>(S, cw, nm, K, u / ncs);
            copies = ChunkCopies<float2, BK, KB, 1, VX, BK, XS>(A, X, 0, nm, K, lda, b, pt, np);
        }
        if (c < b.nchunks) pipe_chunk_in<KB, BK, NS, VX, XS>(amap, nd, b, copies, c, i++, pt, ring, full, empty);
    }
}

}  // namespace fmv

template <typename TA, int KB, int BK, int NS, int P, int VA, int VX, int MAXT, int MINB>
__global__ void __launch_bounds__(MAXT, MINB)
sbgemm_tc(const TA* __restrict__ A, const TA* __restrict__ X, TA* __restrict__ Y, int nf, int nd, int nm, int K,
          int S, int cw, int lda) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    typedef typename fmv::real_of<TA>::type R;
    constexpr int NH = KB / 8;  // tiles of 8 output columns per half (Re, Im)
    constexpr int AS = BK + 4;
    constexpr int XS = KB + (sizeof(TA) == 16 ? 2 : 4);
    static_assert((KB == 8 || KB == 16) && BK % 16 == 0 && (BK / 8) % P == 0 && 32 % (BK / VA) == 0 && NS >= 2,
                  "tile");
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    TA* as = reinterpret_cast<TA*>(fmv_smem);  // [NS][nd][AS]
    TA* xs = as + NS * nd * AS;                // [NS][BK][XS]

    const int tid = threadIdx.x, nthreads = blockDim.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int MT = (nd + 15) / 16;
    const int mt = warp % MT, ph = warp / MT;
    const fmv::BlockShare<BK, KB> b(S, cw, nm, K);
    const fmv::ChunkCopies<TA, BK, KB, VA, VX, AS, XS> copies(A, X, nd, nm, K, lda, b, tid, nthreads);
    auto issue = [&](int c) { copies.issue(c, as + (c % NS) * nd * AS, xs + (c % NS) * BK * XS); };

    fmv::Sums3M<R, NH> acc;
    const int r0 = fmv::min_(16 * mt + g, nd - 1) * AS, r1 = fmv::min_(16 * mt + g + 8, nd - 1) * AS;
    fmv::for_each_staged_chunk<NS>(b.nchunks, issue, [&](int c) {
        const TA* ab = as + (c % NS) * nd * AS;
        fmv::tc_chunk_products<TA, KB, BK, P, XS>(
            acc, [&](int, int e, int j) { return ab[(e & 1 ? r1 : r0) + j]; }, xs + (c % NS) * BK * XS, g, t, ph);
        if (fmv::TensorProduct<TA>::fold) acc.add_terms();
    });
    if (!fmv::TensorProduct<TA>::fold) acc.add_terms();
    fmv::tc_store<TA, KB, BK, P>(acc, reinterpret_cast<R*>(fmv_smem), Y, b, nf, nd, K, MT);
}

// ---------------------------------------------------------------------------
// Forward product in complex64 on the tensor cores as in sbgemm_tc, its
// chunks brought in by warps of their own (compute capability 9.0).  Warps 0
// .. MT P - 1 compute as sbgemm_tc's do.  The CW warps after them, the
// producers, bring each chunk of BK columns into a stage of shared memory:
// A's rows (< nd) by tensor copies (the copy engine; thread 32 MT P issues
// them, amap a 3-D tensor map of A, backend/tensormap.py), BC = 16 columns a
// box, 128-byte rows swizzled (16-byte piece q of row r at q ^ r % 8: a
// fragment load's lanes fall in distinct banks), and X by the producers'
// asynchronous copies (ChunkCopies), each thread of which arrives at the
// stage's `full` barrier once its copies have landed.  A computing warp waits
// there, takes the chunk's products and arrives at the stage's `empty`
// barrier, which the producers wait on before they refill the stage.  So no
// barrier holds the block together between chunks, the computing warps spend
// no instruction on copies (in sbgemm_tc about a sixth of their
// instructions, where the issue slots bind), and with chunks of 64 columns
// each row of A is read in runs of 512 bytes (BK = 32, 256 bytes: the copies
// alone took 1.38 against 1.19x the floor at K = 16; docs/gpu-kernels.md,
// stop 44).  A split's columns end on a chunk (cw a multiple of BK), and the
// last split's columns past nm are zeros: A's by the tensor copy, X's by
// ChunkCopies.  Needs A 16-byte aligned and nm even (the tensor map's rows).
// Launch: blockDim.x = 32 (MT P + CW) <= MAXT, gridDim as sbgemm_tc, dynamic
// shared memory 16 NS + 1024 + max(NS stage, (P - 1) 32 MT KB 4) bytes, stage
// = BK / 16 boxes of ceil(nd 128 / 1024) 1024 bytes, then BK XS 8 bytes of X,
// rounded up to 1024 bytes; XS as in sbgemm_tc, VX as in sbgemm_tc.
// ---------------------------------------------------------------------------
template <int KB, int BK, int NS, int P, int CW, int VX, int MAXT, int MINB>
__global__ void __launch_bounds__(MAXT, MINB)
sbgemm_tc_pipe(const float2* __restrict__ A, const float2* __restrict__ X, float2* __restrict__ Y, const void* amap,
               int nf, int nd, int nm, int K, int S, int cw, int lda) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    typedef float2 TA;
    constexpr int NH = KB / 8;
    constexpr int XS = KB + 4;
    constexpr int BC = 16;  // columns of a box: 128-byte rows
    static_assert((KB == 8 || KB == 16) && BK % BC == 0 && (BK / 8) % P == 0 && NS >= 2, "tile");
    extern __shared__ double2 fmv_smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(fmv_smem);  // [NS]
    unsigned long long* empty = full + NS;                                       // [NS]
    const fmv::PipeStages<BK> ring(fmv_smem, 2 * NS, nd, XS);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int MT = (nd + 15) / 16, workers = MT * P;
    const fmv::BlockShare<BK, KB> b(S, cw, nm, K);
    if (tid < NS) {
        fmv::mbar_init(full + tid, 32 * CW + 1);
        fmv::mbar_init(empty + tid, workers);
    }
    fmv::mbar_init_fence();
    __syncthreads();

    fmv::Sums3M<float, NH> acc;
    if (warp >= workers) {  // the producers
        fmv::pipe_chunks_in<KB, BK, NS, VX, XS>(A, X, amap, nd, nm, K, lda, b, tid - 32 * workers, 32 * CW, ring, full,
                                                empty);
    } else {
        const int g = lane >> 2, t = lane & 3, mt = warp % MT, ph = warp / MT;
        const int ra = fmv::min_(16 * mt + g, nd - 1), rb = fmv::min_(16 * mt + g + 8, nd - 1);
        // where in a stage the lane's values of A lie, worked out once: element e of its fragment at its u-th
        // k-step, column j, at box j / BC, row r, 16-byte piece (j % BC) / 2 ^ r % 8 (the swizzle), half j % 2
        int aoff[BK / (8 * P)][4];
#pragma unroll
        for (int u = 0; u < BK / (8 * P); ++u)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = e & 1 ? rb : ra, j = 8 * (ph + u * P) + t + 4 * (e >> 1);
                aoff[u][e] = j / BC * ring.abox + r * 128 + (((j % BC / 2) ^ (r & 7)) << 4) + (j & 1) * 8;
            }
        for (int c = 0; c < b.nchunks; ++c) {
            const int s = c % NS;
            const char* st = ring.base + s * ring.stage;
            fmv::mbar_wait(full + s, (c / NS) & 1);
            fmv::tc_chunk_products<TA, KB, BK, P, XS>(
                acc, [&](int u, int e, int) { return *reinterpret_cast<const TA*>(st + aoff[u][e]); },
                reinterpret_cast<const TA*>(st + ring.abytes), g, t, ph);
            __syncwarp();
            if (lane == 0) fmv::mbar_arrive(empty + s);  // this warp is done with the stage
            acc.add_terms();
        }
    }
    __syncthreads();  // every chunk has landed and been used: the stages are free for the phases' sums
    fmv::tc_store<TA, KB, BK, P>(acc, reinterpret_cast<float*>(ring.base), Y, b, nf, nd, K, MT);
}

// ---------------------------------------------------------------------------
// Forward product in complex64 with 9-16 right-hand sides and 65-128 rows on
// Hopper's warpgroup MMA (wgmma.mma_async: built for sm_90a, elsewhere the
// kernel is empty and the backend does not take it), its chunks of BK = 64
// columns brought in as sbgemm_tc_pipe's (pipe_chunks_in).  The complex
// product is one real product of twice the depth: row i of A's chunk read as
// it lies (Re, Im, Re, Im, ...) times B = [Xr | Xi ; -Xi | Xr] (rows 2j and 2j
// + 1 of B from X[j]; 32 columns, Re Y then Im Y), in 3xTF32: A B_big + A
// B_small + A_small B_big.  The tensor core reads float32 as TF32 by dropping
// the low 13 bits, which makes A's big part with no instruction; a warp loads
// its fragment of A from the stage (4 words a k-step, the tensor copy's
// 128-byte swizzle keeps them in distinct banks) and forms A_small = A - big,
// which the tensor core truncates in turn (rounded first, one instruction a
// value more, the kernel took 1.3-7.3% longer, at an error of 3.7e-7 against
// 4.5-4.6e-7; cuBLAS's cgemm 1.8e-6: docs/gpu.md, stop 48).
// A k-step, 8 columns of the real product, is three m64n32k8 products of a
// warpgroup's 64 rows with A from registers, each into its own sums: one
// chain of products waits for each one's latency (60 cycles, where the
// tensor core takes 16 a product; benchmarks/wgmma_rate.py), and a single
// m64n64k8 for A [B_big | B_small] was 2-6% slower in separate runs
// (docs/gpu-kernels.md, stop 45).  A computing warp of sbgemm_tc_pipe issues
// about 16 instructions per column of a chunk for its 16 rows (518 for 32
// columns, most of them TF32 splits), one of these about 8 (551 for 64 in
// stop 45, 64 fewer since stop 48).
// Warps 0-7 compute, two warpgroups: warp w takes rows 16 w .. 16 w + 15;
// rows past nd read what follows the stage's rows and are not kept.  Warp 8
// brings the chunks in.  Warps 9 .. 8 + SW split B: each quarter chunk of 16
// columns of X into a slot of bsplit (NQ = 4 slots of 8 KB, [64 rows][32
// words] K-major in core matrices of 8 rows x 16 bytes without swizzle, big
// in rows 0-31 and small in rows 32-63), handed to the computing warps
// through the mbarriers bfull and bempty as the stages are through full and
// empty: the splitters run up to three quarters ahead of the products.  The
// tensor core's sums start from zero each chunk and are added to kept
// float32 sums, as in sbgemm_tc.
// Work split.  A piece is a frequency's split (f S + split, as sbgemm_tc_pipe's
// blocks), a unit one chunk of a piece: unit u is chunk u % ncs of piece u /
// ncs (ncs = cw / 64).  Block b takes units b per .. (b + 1) per - 1, through
// one ring of stages across pieces, and stores a piece's sums once its last
// unit in the block is done (wg_store): per = ncs is a block a piece; more
// spreads the chunks evenly over fewer blocks (at the big size the last of
// 7.6 waves of a block a frequency left 42% of the multiprocessors idle),
// with per >= ncs so that two blocks share a piece at most and add to a Y
// zeroed before.
// Launch: blockDim.x = 32 (9 + SW), gridDim.x = ceil(nf S ncs / per),
// gridDim.y = ceil(K / 16) (cw a multiple of 64; A 16-byte aligned, nm even),
// dynamic shared memory 8 (2 NS + 8) + 1024 + NS stage + 32768 bytes, stage
// as sbgemm_tc_pipe's for BK = 64, KB = 16; VX as in sbgemm_tc.
// ---------------------------------------------------------------------------
namespace fmv {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The shared-memory matrix descriptor of wgmma: start address, byte offsets between core matrices along K (lbo)
// and along M or N (sbo), for core matrices without swizzle (layout bits 62-63 zero)
FMV_DEV unsigned long long wgmma_desc(const void* p, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((smem_address(p) & 0x3ffffu) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
           (unsigned long long)(sbo >> 4) << 32;
}
FMV_DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FMV_DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wait until at most N committed groups of this warpgroup's products are in flight
template <int N> FMV_DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// this thread's shared-memory stores made visible to the tensor core's reads (the async proxy)
FMV_DEV void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

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
// The sums of warp w's rows 16 w .. 16 w + 15 (and their right-hand sides, as tc_store's fragments) of piece b
// into Y: stored when the block took the whole piece, else added (Y zeroed before the launch; a piece is shared
// by two blocks at most, whose two additions to zero give the same sum in either order).
FMV_DEV void wg_store(const Sums3M<float, 2>& acc, float2* __restrict__ Y, const BlockShare<64, 16>& b, int nf,
                      int nd, int K, bool whole) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, w = threadIdx.x >> 5;
    float2* ys = Y + (index_t)b.split * nf * nd * K;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // fragment element e: row g (+8 for e >= 2), column 2t + (e & 1)
            const int i = 16 * w + g + 8 * (e >> 1), k = 8 * h + 2 * t + (e & 1);
            if (i >= nd || k >= b.kn) continue;
            float2* y = ys + ((index_t)b.f * nd + i) * K + b.k0 + k;
            if (whole) {
                *y = make_float2(acc.sum[h][e], acc.sum[2 + h][e]);
            } else {
                atomicAdd(&y->x, acc.sum[h][e]);
                atomicAdd(&y->y, acc.sum[2 + h][e]);
            }
        }
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

template <int NS, int SW, int VX>
__global__ void __launch_bounds__(32 * (9 + SW), 1)
sbgemm_wg_pipe(const float2* __restrict__ A, const float2* __restrict__ X, float2* __restrict__ Y, const void* amap,
               int nf, int nd, int nm, int K, int S, int cw, int lda, int per) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    constexpr int KB = 16, BK = 64, NQ = 4, QK = BK / NQ, XS = KB + 4;
    constexpr int KS = QK / 4;             // k-steps of a slot (4 columns of A, 8 of the real product, each)
    constexpr int SLOT = 64 * 2 * QK * 4;  // bytes of a slot of bsplit: 64 rows of 2 QK words
    static_assert(NS >= 2 && SW >= 1, "tile");
    extern __shared__ double2 fmv_smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(fmv_smem);  // [NS]
    unsigned long long* empty = full + NS;                                       // [NS]
    unsigned long long* bfull = empty + NS;                                      // [NQ]
    unsigned long long* bempty = bfull + NQ;                                     // [NQ]
    const fmv::PipeStages<BK> ring(fmv_smem, 2 * NS + 2 * NQ, nd, XS);
    char* bsplit = ring.base + NS * ring.stage;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // the block's units u0 .. u1 - 1: chunk u % ncs of piece u / ncs (f S + split)
    const int ncs = cw / BK, u0 = blockIdx.x * per, u1 = fmv::min_(nf * S * ncs, u0 + per);
    if (tid < NS) {
        fmv::mbar_init(full + tid, 33);
        fmv::mbar_init(empty + tid, 8 + SW);
    }
    if (tid < NQ) {
        fmv::mbar_init(bfull + tid, 32 * SW);
        fmv::mbar_init(bempty + tid, 8);
    }
    fmv::mbar_init_fence();
    __syncthreads();

    if (warp == 8) {
        fmv::pipe_units_in<KB, BK, NS, VX, XS>(A, X, amap, nd, nm, K, lda, S, cw, u0, u1, ncs, lane, 32, ring, full,
                                               empty);
    } else if (warp > 8) {  // the splitters
        fmv::BlockShare<BK, KB> b(S, cw, nm, K, u0 / ncs);
        for (int u = u0, i = 0; u < u1; ++u) {
            const int c = u % ncs;
            if (c == 0 && u > u0) b = fmv::BlockShare<BK, KB>(S, cw, nm, K, u / ncs);
            if (c >= b.nchunks) continue;  // (the last split's chunks past nm)
            const int s = i % NS;
            fmv::mbar_wait(full + s, (i / NS) & 1);
            const float2* xb = reinterpret_cast<const float2*>(ring.base + s * ring.stage + ring.abytes);
            for (int q = 0; q < NQ; ++q) {
                if (i > 0) fmv::mbar_wait(bempty + q, (i - 1) & 1);
                unsigned* bs = reinterpret_cast<unsigned*>(bsplit + q * SLOT);
#pragma unroll 4
                for (int id = tid - 32 * 9; id < 16 * QK; id += 32 * SW) {
                    // X[j, n] -> B's rows n (Xr in column 2j, -Xi in 2j + 1) and 16 + n (Xi, Xr); + 32: small
                    const int j = (id >> 4) % (QK / 2) * 2 + (id & 1), n = (id >> 4) / (QK / 2) * 8 + (id >> 1 & 7);
                    const float2 v = xb[(QK * q + j) * XS + n];
                    unsigned rb, rs, ib, is;
                    fmv::tf32_split(v.x, rb, rs);
                    fmv::tf32_split(v.y, ib, is);
                    constexpr int SBO = 16 * QK, IM = 2 * SBO, SMALL = 4 * SBO;  // words on to 8, 16 and 32 rows on
                    const int w = (n >> 3) * SBO + (j >> 1) * 32 + (n & 7) * 4 + (j & 1) * 2;
                    *reinterpret_cast<uint2*>(bs + w) = make_uint2(rb, ib ^ 0x80000000u);
                    *reinterpret_cast<uint2*>(bs + w + IM) = make_uint2(ib, rb);
                    *reinterpret_cast<uint2*>(bs + w + SMALL) = make_uint2(rs, is ^ 0x80000000u);
                    *reinterpret_cast<uint2*>(bs + w + SMALL + IM) = make_uint2(is, rs);
                }
                fmv::fence_proxy_async();
                fmv::mbar_arrive(bfull + q);
            }
            __syncwarp();
            if (lane == 0) fmv::mbar_arrive(empty + s);  // this warp is done with the stage's X
            ++i;
        }
    } else {
        const int g = lane >> 2, t = lane & 3;
        // slot 0 of bsplit (K-major core matrices 128 bytes apart along K, 8 rows 64 QK bytes apart); B_small's
        // rows, 32 on, at + BSMALL
        const unsigned long long bdesc = fmv::wgmma_desc(bsplit, 128, 64 * QK);
        constexpr unsigned BSMALL = 4 * 64 * QK / 16;
        // the lane's words of A in a stage at k-step ks of the chunk: word t of row 16 warp + g (row + 8: 256
        // words on) in box ks / 4, in the row's 16-byte pieces 2 (ks % 4) and + 1 swizzled by the row (g)
        const unsigned* a0 = reinterpret_cast<const unsigned*>(ring.base) + (16 * warp + g) * 32 + t;
        const int abw = ring.abox / 4;
        fmv::BlockShare<BK, KB> b(S, cw, nm, K, u0 / ncs);
        fmv::Sums3M<float, 2> acc;  // its kept sums: Re Y (tiles 0, 1) and Im Y (2, 3); its terms are not used
        int p0 = u0;                // the first unit of the piece in this block
        for (int u = u0, i = 0; u < u1; ++u) {
            const int c = u % ncs;
            if (c == 0 && u > u0) {
                b = fmv::BlockShare<BK, KB>(S, cw, nm, K, u / ncs);
                p0 = u;
            }
            if (c < b.nchunks) {
                const int s = i % NS;
                fmv::mbar_wait(full + s, (i / NS) & 1);
                const unsigned* as = a0 + s * (ring.stage / 4);
                auto a_words = [&](int ks, unsigned (&a)[4]) {
                    const unsigned* ak = as + (ks >> 2) * abw;
                    const int q0 = ((2 * (ks & 3)) ^ g) * 4, q1 = ((2 * (ks & 3) + 1) ^ g) * 4;
                    a[0] = ak[q0];
                    a[1] = ak[q0 + 256];
                    a[2] = ak[q1];
                    a[3] = ak[q1 + 256];
                };
                // this chunk's A B_big, A B_small and A_small B_big, in the tensor core: three chains of products,
                // as a chain waits for each product's latency (benchmarks/wgmma_rate.py: m64n32k8 60 cycles alone)
                float big[4][4], small_b[4][4], small_a[4][4];
                unsigned a[4];
                a_words(0, a);
#pragma unroll
                for (int ks = 0; ks < NQ * KS; ++ks) {
                    const int q = ks / KS, kp = ks % KS;
                    if (kp == 0) fmv::mbar_wait(bfull + q, i & 1);
                    // A - big exactly, which the tensor core truncates in turn
                    unsigned small[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        small[e] = __float_as_uint(__uint_as_float(a[e]) - __uint_as_float(a[e] & 0xffffe000u));
                    const unsigned long long bd = bdesc + q * (SLOT / 16) + 16 * kp;
                    fmv::wgmma_fence();
                    fmv::wgmma_rs_n32(big, a, bd, ks > 0);
                    fmv::wgmma_rs_n32(small_b, a, bd + BSMALL, ks > 0);
                    fmv::wgmma_rs_n32(small_a, small, bd, ks > 0);
                    fmv::wgmma_commit();
                    if (ks + 1 < NQ * KS) a_words(ks + 1, a);  // the next k-step's loads, in flight during the wait
                    fmv::wgmma_wait<1>();  // the k-step before is done: its registers of A are free
                    if (kp == 0 && q > 0) {  // and so is every product of the slot before: it is free
                        __syncwarp();
                        if (lane == 0) fmv::mbar_arrive(bempty + q - 1);
                    }
                }
                fmv::wgmma_wait<0>();
                fmv::wgmma_fence_operands(big);
                fmv::wgmma_fence_operands(small_b);
                fmv::wgmma_fence_operands(small_a);
                __syncwarp();
                if (lane == 0) {  // this warp is done with the stage and the last slot
                    fmv::mbar_arrive(empty + s);
                    fmv::mbar_arrive(bempty + NQ - 1);
                }
                // tiles q of each chain's 32 columns: Re Y (q = 0, 1) and Im Y (2, 3)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        acc.sum[h][e] += (big[h][e] + small_b[h][e]) + small_a[h][e];
                        acc.sum[2 + h][e] += (big[h + 2][e] + small_b[h + 2][e]) + small_a[h + 2][e];
                    }
                ++i;
            }
            if (c + 1 == ncs || u + 1 == u1) {  // the piece ends here for this block: its sums out
                fmv::wg_store(acc, Y, b, nf, nd, K, p0 == u - c && c + 1 == ncs);
                acc = fmv::Sums3M<float, 2>();
            }
        }
    }
#endif
}

// ---------------------------------------------------------------------------
// Adjoint product on the tensor cores, KB = 8 or 16 right-hand sides a block:
//   Y[f, j, k] = sum_i conj(A[f, i, j]) X[f, i, k]     A : (nf, nd, nm) complex TA, C-contiguous
//   X : (nf, nd, K) complex TX (cast to TA),  Y : (nf, nm, K) complex TA
// in the 3M form of sbgemm_tc (TensorProduct, A's fragments made from conj(A)).
// An m16n8k8 tile's 16 rows are 16 columns j of A and its depth 8 rows i.
// Block (f, column split): blockIdx.x = f S + split, columns split cw .. min(nm,
// (split + 1) cw) - 1 in tiles of BJ = 16 W columns; blockIdx.y the chunk of KB
// right-hand sides.  X[f]'s KB right-hand sides are staged once in shared
// memory, rows past nd zero.  A tile of A goes into shared memory in chunks of
// BI = 8 KS rows by cp.async, NS chunks deep, so that the block keeps NS - 1
// chunks in flight without holding them in registers; the block walks its
// tiles in order, and each tile's chunks down its rows, as one stream of
// chunks, so the copies run on across tiles.  Warp w takes columns 16 w .. 16 w
// + 15 of each tile and stores their sums after the tile's last chunk.  (Loads
// of A straight into the fragments, one k-step ahead, kept the warps waiting
// on them: 1.42x the floor in complex128 and 2.15x in complex64 at K = 16,
// 1.31x and 1.71x at K = 8, h200-probe-adjvar-staged-stop33.jsonl; staged,
// 1.30, 1.55-1.63, 1.09 and 1.21x, h200-probe-adjvar-tiles-stop33.jsonl.)
// Float32 tensor sums restart every FOLD k-steps (TensorProduct::fold).  A thread copies VA
// elements at a time (8 or 16 bytes; VA = 2 needs nm and cw even); rows past
// nd and columns past the split's end are zero-filled (a tile of nd = 0 rows
// is one zero chunk).
// Launch: blockDim.x = 32 W, gridDim.x = nf * S, gridDim.y = ceil(K / KB),
// dynamic shared memory (C BI XS + NS BI AS) sizeof(TA) bytes with C =
// max(1, ceil(nd / BI)) chunks a tile, XS = KB + 4 (complex64) or KB + 2
// (complex128), AS = BJ (complex128) or BJ + 8 (complex64: the four rows of a
// fragment load then fall in the two halves of the banks).
// ---------------------------------------------------------------------------
template <typename TA, typename TX, int KB, int W, int KS, int NS, int VA, int MINB>
__global__ void __launch_bounds__(32 * W, MINB)
sbgemm_adj_tc(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Y, int nf, int nd, int nm,
              int K, int S, int cw) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    typedef typename fmv::real_of<TA>::type R;
    typedef fmv::TensorProduct<TA> Product;
    constexpr int NH = KB / 8;  // tiles of 8 output columns per half (Re, Im)
    constexpr int XS = KB + (sizeof(TA) == 16 ? 2 : 4);
    constexpr int BJ = 16 * W, BI = 8 * KS;
    constexpr int AS = BJ + (sizeof(TA) == 16 ? 0 : 8);
    constexpr int CPR = BJ / VA;         // copies per row of a chunk
    constexpr int RP = 32 * W / CPR;     // rows copied at a time by the block
    constexpr int FOLD = 16;
    static_assert((KB == 8 || KB == 16) && NS >= 2 && (VA == 1 || VA == 2) && BI % RP == 0, "tile");
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    const int C = fmv::max_(1, (nd + BI - 1) / BI);
    TA* xs = reinterpret_cast<TA*>(fmv_smem);  // [C BI][XS], rows past nd zero
    TA* as = xs + C * BI * XS;                 // [NS][BI][AS]

    const int split = blockIdx.x % S, f = blockIdx.x / S;
    const int k0 = blockIdx.y * KB, kn = fmv::min_(KB, K - k0);
    const TX* xf = X + (index_t)f * nd * K + k0;
    for (int e = threadIdx.x; e < C * BI * KB; e += blockDim.x) {
        const int i = e / KB, k = e % KB;
        xs[i * XS + k] = i < nd && k < kn ? fmv::cload<TA>(xf + (index_t)i * K + k) : fmv::czero<TA>();
    }

    const int jbeg = split * cw, jend = fmv::min_(nm, jbeg + cw);
    const int ntiles = jend > jbeg ? (jend - jbeg + BJ - 1) / BJ : 0;
    const TA* af = A + (index_t)f * nd * nm;
    const int acol = threadIdx.x % CPR * VA, arow = threadIdx.x / CPR;
    const index_t astep = (index_t)RP * nm;
    // chunk c: rows (c % C) BI .. + BI - 1 of tile c / C into stage c % NS
    auto issue = [&](int c) {
        const int i = (c % C) * BI + arow, j = jbeg + c / C * BJ + acol;
        const bool colok = j < jend;
        const TA* src = af + (index_t)i * nm + j;
        TA* dst = as + (c % NS) * BI * AS + arow * AS + acol;
#pragma unroll
        for (int r = 0; r < BI / RP; ++r, src += astep, dst += RP * AS) {
            const bool ok = colok && i + r * RP < nd;
            fmv::cp_async<VA * (int)sizeof(TA)>(dst, ok ? src : af, ok);
        }
    };

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int steps = (nd + 7) / 8;
    TA* yf = Y + (index_t)f * nm * K + k0;
    fmv::Sums3M<R, NH> acc;
    fmv::for_each_staged_chunk<NS>(ntiles * C, issue, [&](int c) {
        const int rc = c % C;
        // this lane's values of A at k-step q of the chunk, fragment element e: row 8 q + t (+4 for e >= 2),
        // column 16 warp + g (+8 for odd e) of the tile
        const TA* ab = as + (c % NS) * BI * AS + t * AS + 16 * warp + g;
#pragma unroll
        for (int q = 0; q < KS; ++q) {
            const int s = rc * KS + q;
            if (s < steps) {
                TA a[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const TA v = ab[(8 * q + 4 * (e >> 1)) * AS + 8 * (e & 1)];
                    a[e] = fmv::cmake<TA>(v.x, -v.y);
                }
                const typename Product::AFragments frag = Product::a_fragments(a);
                const TA* xb = xs + (8 * s + t) * XS + g;
#pragma unroll
                for (int h = 0; h < NH; ++h)
                    Product::products(acc.terms[h], acc.terms[NH + h], acc.terms[2 * NH + h], frag, xb[8 * h],
                                      xb[4 * XS + 8 * h]);
                if (Product::fold && (s + 1) % FOLD == 0) acc.add_terms();
            }
        }
        if (rc == C - 1) {  // the tile's last chunk: store its sums, start the next tile's from zero
            acc.add_terms();
            const int jt = jbeg + c / C * BJ + 16 * warp;
#pragma unroll
            for (int h = 0; h < NH; ++h)
#pragma unroll
                for (int e = 0; e < 4; ++e) {  // fragment element e: row g (+8 for e >= 2), column 2t + (e & 1)
                    const int j = jt + g + 8 * (e >> 1), k = 8 * h + 2 * t + (e & 1);
                    if (j < jend && k < kn)
                        yf[(index_t)j * K + k] = fmv::cmake<TA>(acc.sum[h][e], acc.sum[NH + h][e]);
                }
            acc = fmv::Sums3M<R, NH>();
        }
    });
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
#define FMV_TC(TA, KB, BK, NS, P, VA, VX, MAXT, MINB)                                                 \
    template __global__ void sbgemm_tc<TA, KB, BK, NS, P, VA, VX, MAXT, MINB>(const TA*, const TA*, TA*, int, int, \
                                                                             int, int, int, int, int);
FMV_TC(float2, 16, 32, 3, 1, 2, 2, 256, 2)
FMV_TC(float2, 16, 32, 3, 2, 1, 1, 512, 1)
FMV_TC(float2, 8, 32, 3, 4, 2, 2, 256, 2)
FMV_TC(float2, 8, 16, 4, 1, 2, 1, 256, 3)
FMV_TC(double2, 16, 16, 3, 1, 1, 1, 256, 2)
FMV_TC(double2, 8, 16, 3, 2, 1, 1, 512, 1)
#define FMV_TC_PIPE(KB, BK, NS, P, CW, VX, MAXT, MINB)                                                            \
    template __global__ void sbgemm_tc_pipe<KB, BK, NS, P, CW, VX, MAXT, MINB>(                                   \
        const float2*, const float2*, float2*, const void*, int, int, int, int, int, int, int);
FMV_TC_PIPE(16, 64, 3, 2, 1, 2, 512, 1)
FMV_TC_PIPE(8, 64, 3, 2, 1, 1, 512, 1)
#define FMV_WG_PIPE(NS, SW, VX)                                                                                  \
    template __global__ void sbgemm_wg_pipe<NS, SW, VX>(const float2*, const float2*, float2*, const void*, int, int, \
                                                       int, int, int, int, int, int);
FMV_WG_PIPE(3, 4, 2)
FMV_WG_PIPE(2, 1, 1)
#define FMV_ADJ_TC(TA, TX, KB, W, KS, NS, VA, MINB)                                                          \
    template __global__ void sbgemm_adj_tc<TA, TX, KB, W, KS, NS, VA, MINB>(const TA*, const TX*, TA*, int, int, int, \
                                                                            int, int, int);
FMV_ADJ_TC(double2, double2, 16, 4, 2, 3, 1, 2)
FMV_ADJ_TC(double2, float2, 8, 4, 2, 3, 1, 2)
FMV_ADJ_TC(float2, float2, 16, 4, 4, 3, 2, 2)
FMV_ADJ_TC(float2, double2, 8, 4, 4, 3, 1, 2)
#endif
#endif
