// glue.cu -- the layout changes around the FFTs, with the precision casts
// (and the 1/L scaling of the inverse FFT) fused into the same pass.
//
//   pad   : x (n, Nt, K) SOTI, real TI   ->  out[t, j, k] = x[j, t, k],  out (L, n, K) real TO, t < Nt
//   unpad : x (L, n, K) time-major, TI   ->  out[j, t, k] = scale * x[t, j, k],  out (n, Nt, K) TO
//   ccast : complex (or real) cast with a scale factor, element-wise
//
// pad/unpad swap the two outer axes of arrays with a contiguous inner axis
// of K values.  A block moves a tile of 32 rows j by TC = K * TT columns of
// the (n, Nt*K) view (TT whole time steps), through shared memory, so that
// both the reads and the writes are contiguous runs (of TC values on the
// SOTI side, of 32 * K values on the time-major side).
// Launch: blockDim (32, 8), gridDim (ceil(Nt / TT), ceil(n / 32)),
// dynamic shared memory 32 * (TC + 1) * sizeof(TI).
#include "fftmatvec_common.cuh"

using fmv::index_t;

template <typename TI, typename TO>
__global__ void pad_kernel(const TI* __restrict__ x, TO* __restrict__ out, int n, int nt, int K, int TT) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    TI* tile = reinterpret_cast<TI*>(fmv_smem);
    const int TC = TT * K, ld = TC + 1;
    const int t0 = blockIdx.x * TT, j0 = blockIdx.y * 32;
    const int tx = threadIdx.x, ty = threadIdx.y, lin = ty * 32 + tx, nthr = 32 * blockDim.y;
    const index_t rowlen = (index_t)nt * K;
    const index_t c0 = (index_t)t0 * K;
    const int ncol = (int)((rowlen - c0) < TC ? (rowlen - c0) : TC);
    for (int jr = ty; jr < 32; jr += blockDim.y) {
        const int j = j0 + jr;
        if (j < n)
            for (int cc = tx; cc < ncol; cc += 32) tile[jr * ld + cc] = x[(index_t)j * rowlen + c0 + cc];
    }
    __syncthreads();
    const int run = 32 * K;  // (j, k) values of one time step in the tile
    for (int e = lin; e < TT * run; e += nthr) {
        const int tr = e / run, rem = e % run, jr = rem / K, k = rem % K;
        const int t = t0 + tr, j = j0 + jr;
        if (t < nt && j < n) out[((index_t)t * n + j) * K + k] = fmv::rcast<TO>(tile[jr * ld + tr * K + k]);
    }
}

template <typename TI, typename TO>
__global__ void unpad_kernel(const TI* __restrict__ x, TO* __restrict__ out, int n, int nt, int K, int TT,
                             typename fmv::real_of<TO>::type scale) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    TI* tile = reinterpret_cast<TI*>(fmv_smem);
    const int TC = TT * K, ld = TC + 1;
    const int t0 = blockIdx.x * TT, j0 = blockIdx.y * 32;
    const int tx = threadIdx.x, ty = threadIdx.y, lin = ty * 32 + tx, nthr = 32 * blockDim.y;
    const int run = 32 * K;
    for (int e = lin; e < TT * run; e += nthr) {
        const int tr = e / run, rem = e % run, jr = rem / K, k = rem % K;
        const int t = t0 + tr, j = j0 + jr;
        if (t < nt && j < n) tile[jr * ld + tr * K + k] = x[((index_t)t * n + j) * K + k];
    }
    __syncthreads();
    const index_t rowlen = (index_t)nt * K;
    const index_t c0 = (index_t)t0 * K;
    const int ncol = (int)((rowlen - c0) < TC ? (rowlen - c0) : TC);
    for (int jr = ty; jr < 32; jr += blockDim.y) {
        const int j = j0 + jr;
        if (j < n)
            for (int cc = tx; cc < ncol; cc += 32)
                out[(index_t)j * rowlen + c0 + cc] = scale * fmv::rcast<TO>(tile[jr * ld + cc]);
    }
}

// out[i] = scale * x[i] for complex (float2/double2) TI, TO; grid-stride.
template <typename TI, typename TO>
__global__ void ccast_kernel(const TI* __restrict__ x, TO* __restrict__ out, index_t n,
                             typename fmv::real_of<TO>::type scale) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (index_t)gridDim.x * blockDim.x) {
        const TO v = fmv::ccast<TO>(x[i]);
        out[i] = fmv::cmake<TO>(scale * v.x, scale * v.y);
    }
}

// ---------------------------------------------------------------------------
// Series-major helpers for the contiguous (fast) cuFFT layouts.
// conv/scale work on real (float/double) and complex (float2/double2) values.
// ---------------------------------------------------------------------------
namespace fmv {
template <typename TO, typename TI> struct Conv {
    static FMV_DEV TO run(const TI v, typename real_of<TO>::type s) { return static_cast<TO>(s * static_cast<TO>(v)); }
};
template <typename TI> struct Conv<float2, TI> {
    static FMV_DEV float2 run(const TI v, float s) { return cmake<float2>(s * (float)v.x, s * (float)v.y); }
};
template <typename TI> struct Conv<double2, TI> {
    static FMV_DEV double2 run(const TI v, double s) { return cmake<double2>(s * (double)v.x, s * (double)v.y); }
};
}  // namespace fmv

// out[b * obs + c] = scale * in[b * ibs + c],  b < B, c < C  (rows copied, cast and scaled).
// Launch: 1-D blocks, any grid (rows are grid-strided).
template <typename TI, typename TO>
__global__ void rowcopy_kernel(const TI* __restrict__ in, TO* __restrict__ out, int B, int C, index_t ibs, index_t obs,
                               typename fmv::real_of<TO>::type scale) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        const TI* src = in + (index_t)b * ibs;
        TO* dst = out + (index_t)b * obs;
        for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = fmv::Conv<TO, TI>::run(src[c], scale);
    }
}

// Batched 2-D transpose: out[b * obs + c * ldo + r] = scale * in[b * ibs + r * ldi + c],  r < R, c < C.
// Launch: blockDim (32, 8), gridDim (ceil(C / 32), ceil(R / 32), B).
template <typename TI, typename TO>
__global__ void btranspose_kernel(const TI* __restrict__ in, TO* __restrict__ out, int R, int C, index_t ldi,
                                  index_t ldo, index_t ibs, index_t obs, typename fmv::real_of<TO>::type scale) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    __shared__ TO tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    const TI* src = in + (index_t)blockIdx.z * ibs;
    TO* dst = out + (index_t)blockIdx.z * obs;
    const int tx = threadIdx.x;
    for (int rr = threadIdx.y; rr < 32; rr += blockDim.y) {
        const int r = r0 + rr, c = c0 + tx;
        if (r < R && c < C) tile[rr][tx] = fmv::Conv<TO, TI>::run(src[(index_t)r * ldi + c], scale);
    }
    __syncthreads();
    for (int cc = threadIdx.y; cc < 32; cc += blockDim.y) {
        const int c = c0 + cc, r = r0 + tx;
        if (r < R && c < C) dst[(index_t)c * ldo + r] = tile[tx][cc];
    }
}

#ifdef FFTMATVEC_INSTANTIATE
#define FMV_PAD(TI, TO) template __global__ void pad_kernel<TI, TO>(const TI*, TO*, int, int, int, int);
#define FMV_UNPAD(TI, TO)                                                                  \
    template __global__ void unpad_kernel<TI, TO>(const TI*, TO*, int, int, int, int, \
                                                  typename fmv::real_of<TO>::type);
#define FMV_CCAST(TI, TO) \
    template __global__ void ccast_kernel<TI, TO>(const TI*, TO*, index_t, typename fmv::real_of<TO>::type);
FMV_PAD(double, double)
FMV_PAD(double, float)
FMV_PAD(float, double)
FMV_PAD(float, float)
FMV_UNPAD(double, double)
FMV_UNPAD(double, float)
FMV_UNPAD(float, double)
FMV_UNPAD(float, float)
FMV_CCAST(double2, float2)
FMV_CCAST(float2, double2)
FMV_CCAST(double2, double2)
FMV_CCAST(float2, float2)
#define FMV_ROWCOPY(TI, TO)                                                                                 \
    template __global__ void rowcopy_kernel<TI, TO>(const TI*, TO*, int, int, index_t, index_t, \
                                                    typename fmv::real_of<TO>::type);
#define FMV_BTRANSPOSE(TI, TO)                                                                                \
    template __global__ void btranspose_kernel<TI, TO>(const TI*, TO*, int, int, index_t, index_t, index_t, \
                                                       index_t, typename fmv::real_of<TO>::type);
FMV_ROWCOPY(double, double)
FMV_ROWCOPY(double, float)
FMV_ROWCOPY(float, double)
FMV_ROWCOPY(float, float)
FMV_BTRANSPOSE(double, float)
FMV_BTRANSPOSE(float, double)
FMV_BTRANSPOSE(double2, double2)
FMV_BTRANSPOSE(float2, double2)
FMV_BTRANSPOSE(double2, float2)
FMV_BTRANSPOSE(float2, float2)
#endif
