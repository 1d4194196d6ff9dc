// adjoint.cu -- the adjoint product and its inverse transform in one kernel (stages 3-5, one right-hand side).
//
//   Yhat[f, j] = sum_i conj(A[f, i, j]) X[f, i]   (sbgemv_adj's work, Yhat in tiles of S series)
//   y[j, t]    = irfft(Yhat[:, j])[t], t < M      (irfft_unpad's work, S series a group)
//
// As two kernels the inverse runs alone after the product: at the big size about 33-40 us in which Fhat is not
// read.  Here a grid of resident blocks takes units of work from one sequence.  Product units (one frequency of
// one tile of CT * VEC columns) come segment by segment, G tiles a segment, frequency-major in it; the inverse
// groups of a segment (S series each) are interleaved with the next segment's product units, one after every k
// of them from its L-th on; the last segment's groups follow the product.  So only those run after Fhat has
// been read.  A group waits until all of its segment's product units are counted in ready[segment].
//
// A block takes its first unit by its index and each later one by a ticket, an atomic add that it asks for at
// the start of the unit before so that the add's latency hides behind that unit's work.  A unit waits only for
// units earlier in the sequence and each block takes its units in increasing order, so the earliest unfinished
// unit can always go on: no deadlock, given that every block of the grid can be resident at once (the host
// launches at most as many blocks as fit).  The last block to leave resets the counters for the next launch.
// (Stop 57's first form claimed the groups one at a time through one compare-and-swap counter after a
// sequentially consistent fence, and was twice as slow: docs/gpu-kernels.md.)
//
//   sync : unsigned [2 + segments], zero before the first launch: tickets taken, blocks left, then ready[segment]
//          (product units of the segment done, Q = nf * G each).
//
// Launch: gridDim.x <= the blocks that fit at once; blockDim.x = NT, the inverse's block, NT % RS == 0,
// (NT / RS * VEC) % S == 0; 0 <= L <= nf * G, k = (nf * G - L) / (G * groups of a tile); dynamic shared memory =
// the larger of the two parts' (sbgemv_adj's with KB = 1, irfft_unpad's).  K = 1 only.  Not on HIP: FMV_LDCG is
// a plain load there, which may hit a stale cache.
#include "sbgemv.cu"
#include "fft.cu"

namespace fmv {
// *p += v, a release at the device's scope: the writes that happen before it (this block's, through its
// barrier) are visible to whoever reads the sum with an acquire.
FMV_DEV void add_release(unsigned* p, unsigned v) {
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
    __threadfence();
    atomicAdd(p, v);
#endif
}

// *p, an acquire at the device's scope.
FMV_DEV unsigned load_acquire(const unsigned* p) {
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else
    const unsigned v = *(const volatile unsigned*)p;
    __threadfence();
    return v;
#endif
}

// Unit u of the sequence: inverse group `index` of segment s (job), else product unit `index` of segment s.
struct AdjUnit {
    bool job;
    int s, index;
};
FMV_DEV AdjUnit adj_unit(int u, int Q, int J, int L, int k, int segments) {
    if (u < Q) return {false, 0, u};
    const int s = 1 + (u - Q) / (Q + J), p = (u - Q) % (Q + J);
    if (s == segments) return {true, s - 1, p};  // the last segment's groups
    if (p < L) return {false, s, p};
    const int r = p - L;
    if (r < J * (k + 1)) {
        const int i = r / (k + 1), m = r - i * (k + 1);
        return m == k ? AdjUnit{true, s - 1, i} : AdjUnit{false, s, L + i * k + m};
    }
    return {false, s, p - J};
}
}  // namespace fmv

template <typename TA, typename TX, typename TC, typename TO, int U, int VEC, int LOGS, int NT, int IP, int M,
          int... Rs>
__global__ void __launch_bounds__(NT, fmv::blocks_of<sizeof(TC) == 16 ? 768 : 1024, NT>())
    sbgemv_adj_irfft(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Yhat, TO* __restrict__ y,
                     const TC* __restrict__ twp, const TC* __restrict__ twl, int nf, int nd, int nm, int RS, int CH,
                     int G, int L, int k, typename fmv::real_of<TC>::type scale, int release,
                     unsigned* __restrict__ sync) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    __shared__ int next_unit;
    constexpr int S = 1 << LOGS;
    const int CT = NT / RS;
    const int tiles = (nm + CT * VEC - 1) / (CT * VEC);
    const int segments = (tiles + G - 1) / G;
    const int groups = (nm + S - 1) / S;
    const int Q = nf * G, J = G * (CT * VEC / S);  // product units and inverse groups a segment
    const int units = segments * (Q + J);
    unsigned* ready = sync + 2;
    int u = blockIdx.x;
    while (u < units) {
        unsigned ticket = 0;  // the next unit's, read after this unit (gridDim.x on)
        if (threadIdx.x == 0) ticket = atomicAdd(sync, 1u);
        const fmv::AdjUnit w = fmv::adj_unit(u, Q, J, L, k, segments);
        if (!w.job) {
            const int tile = w.s * G + w.index % G;
            if (tile < tiles)
                fmv::adj_tile<TA, TX, U, VEC, 1>(A, X, Yhat, nf, nd, nm, 1, RS, CH, 0, nm, 1, S, w.index / G, tile,
                                                 0, reinterpret_cast<TA*>(fmv_smem));
            __syncthreads();  // the block's spectra are stored before they are counted
            if (threadIdx.x == 0) fmv::add_release(ready + w.s, 1u);
        } else if (w.s * J + w.index < groups) {
            if (threadIdx.x == 0)
                while (fmv::load_acquire(ready + w.s) < (unsigned)Q) fmv::backoff();
            __syncthreads();
            fmv::inverse_group<TA, TC, TO, LOGS, NT, IP, true, M, Rs...>(
                Yhat, y, twp, twl, nm, 1, scale, 1, release, (w.s * J + w.index) * S, reinterpret_cast<TC*>(fmv_smem));
        }
        if (threadIdx.x == 0) next_unit = (int)(gridDim.x + ticket);
        __syncthreads();
        u = next_unit;
        __syncthreads();  // before the shared memory and next_unit are written again
    }
    if (threadIdx.x == 0 && atomicAdd(sync + 1, 1u) == gridDim.x - 1) {  // the last block: no other touches sync
        for (int t = 0; t < 2 + segments; ++t) sync[t] = 0;
    }
}

#ifdef FFTMATVEC_INSTANTIATE
// The big size's instantiations (Nt = 1000): complex64 from a complex128 vector into float64 samples (ddssd),
// and complex128 (ddddd).
template __global__ void sbgemv_adj_irfft<float2, double2, float2, double, 8, 2, 2, 512, 0, 1000, 10, 10, 10>(
    const float2*, const double2*, float2*, double*, const float2*, const float2*, int, int, int, int, int, int, int,
    int, float, int, unsigned*);
template __global__ void sbgemv_adj_irfft<double2, double2, double2, double, 8, 1, 1, 256, 1, 1000, 10, 10, 10>(
    const double2*, const double2*, double2*, double*, const double2*, const double2*, int, int, int, int, int, int,
    int, int, double, int, unsigned*);
#endif
