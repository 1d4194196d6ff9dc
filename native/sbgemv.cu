// sbgemv.cu -- per-frequency products with Fhat (stage 3), read in place.
//
//   Fhat : A (nf, nd, nm) complex TA, frequency-major, rows contiguous
//   forward : Y[f, i, k] = sum_j A[f, i, j] * X[f, j, k]         X (nf, nm, K), Y (nf, nd, K)
//   adjoint : Y[f, j, k] = sum_i conj(A[f, i, j]) * X[f, i, k]   X (nf, nd, K), Y (nf, nm, K)
//
// TA is the storage and arithmetic type (float2 / double2); TX, the type of
// the input vector, is a separate template parameter so that a mixed-precision
// cast is fused into the load.  Every element of A is read exactly once, with
// 16-byte coalesced streaming loads (VEC = 2 pairs of float2, or one double2),
// several loads in flight per thread (U).  K right-hand sides are handled KB at
// a time (blockIdx.y selects the chunk): with K <= KB, A is read once for all.
//
// Tuned for short-wide matrices (nd << nm); correct for every shape.
#include "fftmatvec_common.cuh"

using fmv::index_t;

// ---------------------------------------------------------------------------
// Forward.  A group of G threads (G a power of two dividing blockDim.x) owns R
// consecutive rows of one frequency and strides over the columns; X is loaded
// once per column and used for the R rows.  Partial sums are reduced with
// shuffles inside each warp, then, when the group spans several warps (G > 32),
// through shared memory.  Only columns [col0, col1) are summed (a chunk of a pipelined
// product).  With S > 1 these are split into S blocks of cw columns (more,
// smaller work items: no idle tail when there are few rows); group g handles
// split g % S and writes its partial sums to the S slices of Y (S * nf * nd * K
// values), which sum_splits adds up in a fixed order.
// A may be a block of rows of a larger Fhat: row i of frequency f is at
// A + (f * lda + i) * nm (lda >= nd; lda == nd for a whole Fhat), so that a
// chunk of block rows is computed in place (Y always has nd rows).
// Launch: 1-D blocks of a multiple of 32 threads, enough groups to cover
// nf * ceil(nd / R) * S, gridDim.y = ceil(K / KB), dynamic shared memory
// (G > 32 only) = blockDim.x / 32 * R * KB * sizeof(TA).
// Requirements: VEC == 2 only with nm, col0, cw even (16-byte aligned loads);
// KB == 1 only with K == 1.
// Each lane asks the L2 for its first `early` loads of A before it waits for
// the kernel before it (fmv::wait_for_prior_grids): launched programmatically,
// these overlap the end of the forward transform.
// ---------------------------------------------------------------------------
template <typename TA, typename TX, int R, int U, int VEC, int KB>
__global__ void sbgemv_fwd(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Y,
                           int nf, int nd, int nm, int K, int G, int S, int cw, int col0, int col1, int lda,
                           int early) {
    fmv::let_next_grid_start();
    const int sub = threadIdx.x & (G - 1);
    const index_t group = ((index_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int gpf = (nd + R - 1) / R;  // row groups per frequency
    const bool active = group < (index_t)nf * gpf * S;
    const int split = active ? (int)(group % S) : 0;
    const index_t rg = active ? group / S : 0;
    const int f = (int)(rg / gpf);
    const int i0 = (int)(rg % gpf) * R;
    const int rows = fmv::min_(R, nd - i0);
    const int jbeg = col0 + split * cw;
    const int jend = fmv::min_(col1, jbeg + cw);
    const int k0 = blockIdx.y * KB;
    const int kn = fmv::min_(KB, K - k0);

    TA acc[R][KB];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int b = 0; b < KB; ++b) acc[r][b] = fmv::czero<TA>();

    if (active)  // Fhat is no kernel's output: this lane's first `early` loads of it are asked for before the wait
        for (int e = 0; e < early; ++e) {
            const int j = jbeg + sub * VEC + e * G * VEC;
            if (j < jend)
#pragma unroll
                for (int r = 0; r < R; ++r)
                    fmv::prefetch_l2(A + ((index_t)f * lda + i0 + fmv::min_(r, rows - 1)) * nm + j);
        }
    fmv::wait_for_prior_grids();
    if (active) {
        const TA* a[R];
#pragma unroll
        for (int r = 0; r < R; ++r) a[r] = A + ((index_t)f * lda + i0 + fmv::min_(r, rows - 1)) * nm;
        const TX* x = X + (index_t)f * nm * K + k0;
        const int step = G * VEC;
        // U * VEC columns per lane per iteration, loads predicated (zero outside
        // the split) so that short splits still have U loads in flight.
        // (nm % VEC == 0 and cw % VEC == 0 when VEC == 2.)
        for (int j = jbeg + sub * VEC; j < jend; j += U * step) {
            TA av[U][R][VEC];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const bool in = j + u * step < jend;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    if (in) {
                        fmv::Loader<VEC, true>::load(a[r] + j + u * step, av[u][r]);
                    } else {
#pragma unroll
                        for (int v = 0; v < VEC; ++v) av[u][r][v] = fmv::czero<TA>();
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int ju = fmv::min_(j + u * step, jend - VEC);  // clamped: av is zero beyond jend
                if (KB == 1) {  // K == 1: X[f] is contiguous, load VEC values at once
                    TX xr[VEC];
                    fmv::Loader<VEC, false>::load(x + ju, xr);
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        const TA xv = fmv::ccast<TA>(xr[v]);
#pragma unroll
                        for (int r = 0; r < R; ++r) fmv::cmac(acc[r][0], av[u][r][v], xv);
                    }
                } else {
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        const TX* xj = x + (index_t)(ju + v) * K;
#pragma unroll
                        for (int b = 0; b < KB; ++b) {
                            if (b < kn) {
                                const TA xv = fmv::cload<TA>(xj + b);
#pragma unroll
                                for (int r = 0; r < R; ++r) fmv::cmac(acc[r][b], av[u][r][v], xv);
                            }
                        }
                    }
                }
            }
        }
    }
    // reduce inside each warp's part of the group (all lanes take part: no divergent shuffles)
    const int width = fmv::min_(G, 32);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int b = 0; b < KB; ++b)
            for (int off = width >> 1; off > 0; off >>= 1) {
                acc[r][b].x += FMV_SHFL_XOR(acc[r][b].x, off, width);
                acc[r][b].y += FMV_SHFL_XOR(acc[r][b].y, off, width);
            }
    if (G > 32) {  // the group's first warp adds the sums of its other warps
        extern __shared__ double2 fmv_smem[];  // 16-byte aligned
        TA* red = reinterpret_cast<TA*>(fmv_smem);  // [blockDim.x / 32][R][KB]
        const int w = threadIdx.x >> 5;
        if ((threadIdx.x & 31) == 0)
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int b = 0; b < KB; ++b) red[(w * R + r) * KB + b] = acc[r][b];
        __syncthreads();
        if (sub == 0)
            for (int q = 1; q < G / 32; ++q)
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int b = 0; b < KB; ++b) fmv::cadd(acc[r][b], red[((w + q) * R + r) * KB + b]);
    }
    if (active && sub == 0) {
        // S > 1: partial sums of column block `split` go to Y + split * nf * nd * K (see sum_splits)
        TA* Ys = Y + (index_t)split * nf * nd * K;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (r < rows) {
                TA* y = Ys + ((index_t)f * nd + i0 + r) * K + k0;
#pragma unroll
                for (int b = 0; b < KB; ++b)
                    if (b < kn) y[b] = acc[r][b];
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Adjoint.  Each thread owns VEC consecutive columns j of one frequency and
// loops over the rows i, so that a warp reads 32 * 16 contiguous bytes of a
// row per load.  The block is CT column threads x RS row slices
// (blockDim.x = CT * RS); slices split the rows and are summed through shared
// memory at the end (RS > 1 for tall-narrow matrices).  X[f, i, k0:k0+KB] is
// staged in shared memory CH rows at a time (cast to TA there).
// Only columns [col0, col1) are computed (col0 % VEC == 0).
// With `keep`, Y is stored at evict-last priority in the L2 (fmv::st_keep); with spectra_tile > 0 (K == 1, a
// multiple of VEC), in tiles of that many columns (fmv::spectrum_index), the layout the inverse transform reads
// fastest.
// Launch: gridDim.x = nf * ceil((col1 - col0) / (CT * VEC)), gridDim.y = ceil(K / KB),
// dynamic shared memory = (CH * KB + (RS > 1 ? CT * RS * VEC * KB : 0)) * sizeof(TA).
// ---------------------------------------------------------------------------
template <typename TA, typename TX, int U, int VEC, int KB>
__global__ void sbgemv_adj(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Y,
                           int nf, int nd, int nm, int K, int RS, int CH, int col0, int col1, int keep,
                           int spectra_tile) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    TA* xs = reinterpret_cast<TA*>(fmv_smem);  // [CH][KB]
    TA* red = xs + CH * KB;                   // [RS][CT][VEC][KB]

    const int CT = blockDim.x / RS;
    const int tid = threadIdx.x;
    const int c = tid % CT;
    const int s = tid / CT;
    const int tiles = (col1 - col0 + CT * VEC - 1) / (CT * VEC);
    const int f = blockIdx.x / tiles;
    const int tile = blockIdx.x % tiles;
    const int j = col0 + (tile * CT + c) * VEC;
    const bool active = j < col1;
    const int k0 = blockIdx.y * KB;
    const int kn = fmv::min_(KB, K - k0);

    TA acc[VEC][KB];
#pragma unroll
    for (int v = 0; v < VEC; ++v)
#pragma unroll
        for (int b = 0; b < KB; ++b) acc[v][b] = fmv::czero<TA>();

    const TA* a = A + (index_t)f * nd * nm + (active ? j : 0);
    const TX* x = X + (index_t)f * nd * K + k0;
    for (int ib = 0; ib < nd; ib += CH) {
        const int n = fmv::min_(CH, nd - ib);
        __syncthreads();
        for (int t = tid; t < n * KB; t += blockDim.x) {
            const int i = t / KB, b = t % KB;
            xs[t] = (b < kn) ? fmv::cload<TA>(x + (index_t)(ib + i) * K + b) : fmv::czero<TA>();
        }
        __syncthreads();
        if (active) {
            const TA* ai = a + (index_t)ib * nm;
            int i = s;
            for (; i + (U - 1) * RS < n; i += U * RS) {
                TA av[U][VEC];
#pragma unroll
                for (int u = 0; u < U; ++u) fmv::Loader<VEC, true>::load(ai + (index_t)(i + u * RS) * nm, av[u]);
#pragma unroll
                for (int u = 0; u < U; ++u)
#pragma unroll
                    for (int b = 0; b < KB; ++b) {
                        const TA xv = xs[(i + u * RS) * KB + b];
#pragma unroll
                        for (int v = 0; v < VEC; ++v) fmv::cmac_conj(acc[v][b], av[u][v], xv);
                    }
            }
            for (; i < n; i += RS) {
                TA av[VEC];
                fmv::Loader<VEC, true>::load(ai + (index_t)i * nm, av);
#pragma unroll
                for (int b = 0; b < KB; ++b) {
                    const TA xv = xs[i * KB + b];
#pragma unroll
                    for (int v = 0; v < VEC; ++v) fmv::cmac_conj(acc[v][b], av[v], xv);
                }
            }
        }
    }
    if (RS > 1) {
        // sum the row slices: slice s stores, slice 0 adds
        __syncthreads();
#pragma unroll
        for (int v = 0; v < VEC; ++v)
#pragma unroll
            for (int b = 0; b < KB; ++b) red[((s * CT + c) * VEC + v) * KB + b] = acc[v][b];
        __syncthreads();
        if (s == 0) {
            for (int q = 1; q < RS; ++q)
#pragma unroll
                for (int v = 0; v < VEC; ++v)
#pragma unroll
                    for (int b = 0; b < KB; ++b) fmv::cadd(acc[v][b], red[((q * CT + c) * VEC + v) * KB + b]);
        }
    }
    if (active && s == 0) {
        if (KB == 1) {  // K == 1: the VEC columns are contiguous in Y
            TA yv[VEC];
#pragma unroll
            for (int v = 0; v < VEC; ++v) yv[v] = acc[v][0];
            fmv::Storer<VEC>::store(Y + fmv::spectrum_index(f, j, nf, nm, spectra_tile), yv, keep);
        } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                TA* y = Y + ((index_t)f * nm + j + v) * K + k0;
#pragma unroll
                for (int b = 0; b < KB; ++b)
                    if (b < kn) fmv::st_keep(y + b, acc[v][b], keep);
            }
        }
    }
}

// Y[i] = sum_s P[s * n + i], s = 0 .. S-1 in order (deterministic).
template <typename TA>
__global__ void sum_splits(const TA* __restrict__ P, TA* __restrict__ Y, index_t n, int S) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (index_t)gridDim.x * blockDim.x) {
        TA acc = P[i];
        for (int s = 1; s < S; ++s) fmv::cadd(acc, P[(index_t)s * n + i]);
        Y[i] = acc;
    }
}

// ---------------------------------------------------------------------------
// Adjoint, one right-hand side, balanced.  The nf * nm output columns are
// numbered frequency-major and cut into gridDim.x equal contiguous ranges, one
// per block, so that every block (launched all at once: gridDim.x = resident
// blocks) does the same work and none idles in a last partial wave.  A thread
// owns VEC consecutive columns at a time and loops over the nd rows with U
// 16-byte loads in flight; X[f, i] is the same for a whole warp (L1 broadcast).
// Only columns [col0, col1) are computed; with `keep`, Y is stored at evict-last priority in the L2; with
// spectra_tile > 0 (a multiple of VEC), in tiles of that many columns (fmv::spectrum_index).
// A thread asks the L2 for its first column's first `early` rows before it waits for the kernel before it.
// Requirements: nm, col0, col1 multiples of VEC.
// ---------------------------------------------------------------------------
template <typename TA, typename TX, int U, int VEC>
__global__ void sbgemv_adj_flat(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Y, int nf,
                                int nd, int nm, index_t per_block, int col0, int col1, int early, int keep,
                                int spectra_tile) {
    fmv::let_next_grid_start();
    const int w = col1 - col0;  // columns computed per frequency, a multiple of VEC
    const index_t units = (index_t)nf * (w / VEC);
    const index_t beg = (index_t)blockIdx.x * per_block;
    const index_t end = beg + per_block < units ? beg + per_block : units;
    if (beg + threadIdx.x < end) {  // Fhat is no kernel's output: the first `early` rows are asked for before the wait
        const index_t c = (beg + threadIdx.x) * VEC;
        const int f = (int)(c / w);
        const TA* a = A + (index_t)f * nd * nm + col0 + (int)(c - (index_t)f * w);
        for (int i = 0; i < fmv::min_(early, nd); ++i) fmv::prefetch_l2(a + (index_t)i * nm);
    }
    fmv::wait_for_prior_grids();
    for (index_t u = beg + threadIdx.x; u < end; u += blockDim.x) {
        const index_t c = u * VEC;
        const int f = (int)(c / w);
        const int j = col0 + (int)(c - (index_t)f * w);
        const TA* a = A + (index_t)f * nd * nm + j;
        const TX* x = X + (index_t)f * nd;
        TA acc[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] = fmv::czero<TA>();
        int i = 0;
        for (; i + U <= nd; i += U) {
            TA av[U][VEC];
#pragma unroll
            for (int q = 0; q < U; ++q) fmv::Loader<VEC, true>::load(a + (index_t)(i + q) * nm, av[q]);
#pragma unroll
            for (int q = 0; q < U; ++q) {
                const TA xv = fmv::cload<TA>(x + i + q);
#pragma unroll
                for (int v = 0; v < VEC; ++v) fmv::cmac_conj(acc[v], av[q][v], xv);
            }
        }
        for (; i < nd; ++i) {
            TA av[VEC];
            fmv::Loader<VEC, true>::load(a + (index_t)i * nm, av);
            const TA xv = fmv::cload<TA>(x + i);
#pragma unroll
            for (int v = 0; v < VEC; ++v) fmv::cmac_conj(acc[v], av[v], xv);
        }
        fmv::Storer<VEC>::store(Y + fmv::spectrum_index(f, j, nf, nm, spectra_tile), acc, keep);
    }
}

#ifdef FFTMATVEC_INSTANTIATE
// Explicit instantiations for a standalone `nvcc -c` check (the Python side
// instantiates through NVRTC name expressions instead).
#define FMV_FWD(TA, TX, R, U, VEC, KB)                                                                       \
    template __global__ void sbgemv_fwd<TA, TX, R, U, VEC, KB>(const TA*, const TX*, TA*, int, int, int, int, \
                                                               int, int, int, int, int, int, int);
#define FMV_FLAT(TA, TX, U, VEC) \
    template __global__ void sbgemv_adj_flat<TA, TX, U, VEC>(const TA*, const TX*, TA*, int, int, int, index_t, int, \
                                                             int, int, int, int);
template __global__ void sum_splits<float2>(const float2*, float2*, index_t, int);
template __global__ void sum_splits<double2>(const double2*, double2*, index_t, int);
FMV_FLAT(double2, double2, 8, 1)
FMV_FLAT(float2, float2, 8, 2)
FMV_FLAT(float2, double2, 8, 2)
FMV_FLAT(double2, float2, 8, 1)
#define FMV_ADJ(TA, TX, U, VEC, KB) \
    template __global__ void sbgemv_adj<TA, TX, U, VEC, KB>(const TA*, const TX*, TA*, int, int, int, int, int, int, \
                                                            int, int, int, int);
FMV_FWD(double2, double2, 4, 2, 1, 1)
FMV_FWD(double2, float2, 4, 2, 1, 1)
FMV_FWD(float2, float2, 4, 2, 2, 1)
FMV_FWD(float2, double2, 4, 2, 2, 1)
FMV_FWD(float2, float2, 1, 4, 1, 8)
FMV_FWD(double2, double2, 2, 2, 1, 4)
FMV_ADJ(double2, double2, 8, 1, 1)
FMV_ADJ(float2, double2, 8, 2, 1)
FMV_ADJ(float2, float2, 4, 1, 8)
FMV_ADJ(double2, float2, 4, 1, 4)
#endif
