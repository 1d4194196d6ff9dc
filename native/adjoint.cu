// adjoint.cu -- the adjoint product and its inverse transform in one kernel (stages 3-5, one right-hand side).
//
//   Yhat[f, j] = sum_i conj(A[f, i, j]) X[f, i]   (sbgemv_adj's work, Yhat in tiles of S series)
//   y[j, t]    = irfft(Yhat[:, j])[t], t < M      (irfft_unpad's work, S series a group)
//
// Run as two kernels, the inverse waits for the whole product and then runs alone: at the big size about 33 us
// (complex64) in which Fhat is not read.  Here each block first computes one (product tile, frequency) of the
// product, in groups of G tiles, frequency-major in a group (blockIdx.x = (group * nf + f) * G + tile in the
// group, the last group narrower), so that the groups of tiles are done one after another while the kernel runs.  When a block has stored its part, it counts it in ready[tile]; it then takes inverse
// groups (S series each, all in one product tile) whose tile is complete, in order, while the blocks after it
// stream Fhat.  Only the last tile's inverse follows the product.  The spectra of a tile are read back soon after
// they are written, from the L2 (stored at evict-last priority, read past the L1, dropped unwritten after).
//
// A block never waits for a tile while some block of the grid has not started (`started` < gridDim.x): those
// blocks might need the multiprocessor it holds.  Once all have started, waiting is safe, and the blocks of the
// last wave wait for the last tile.  The last block to finish resets the counters for the next launch.
//
//   sync : unsigned [3 + tiles], zero before the first launch: next group, blocks started, blocks finished,
//          then ready[tile] (blocks of the tile done).
//
// Launch: gridDim.x = nf * tiles, tiles = ceil(nm / (CT * VEC)), CT = NT / RS; (CT * VEC) % S == 0; 1 <= G <= tiles;
// blockDim.x = NT, the inverse's block; dynamic shared memory = the larger of the two parts' (sbgemv_adj's with
// KB = 1, irfft_unpad's).  K = 1 only.  Not on HIP: FMV_LDCG is a plain load there, which may hit a stale cache.
#include "sbgemv.cu"
#include "fft.cu"

namespace fmv {
// *p += v with release semantics at the device's scope: the writes that happen before it (this block's, through
// its barrier) are visible to whoever reads the sum and then acquires.
FMV_DEV void add_release(unsigned* p, unsigned v) {
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
    __threadfence();
    atomicAdd(p, v);
#endif
}

// The next inverse group to run, or -1: thread 0 of a block claims it (in order) once its product tile is done.
FMV_DEV int claim_group(unsigned* sync, int groups, int group_tile, unsigned nf, unsigned blocks) {
    volatile unsigned* v = sync;
    for (;;) {
        const unsigned g = v[0];
        if (g >= (unsigned)groups) return -1;
        if (v[3 + g / group_tile] < nf) {  // its tile is not done
            if (v[1] < blocks) return -1;  // blocks not yet started may need this block's room
            backoff();
            continue;
        }
        __threadfence();  // the tile's spectra are read after its count
        if (atomicCAS(sync, g, g + 1) == g) return (int)g;
    }
}
}  // namespace fmv

template <typename TA, typename TX, typename TC, typename TO, int U, int VEC, int LOGS, int NT, int IP, int M,
          int... Rs>
__global__ void __launch_bounds__(NT, fmv::blocks_of<sizeof(TC) == 16 ? 768 : 1024, NT>())
    sbgemv_adj_irfft(const TA* __restrict__ A, const TX* __restrict__ X, TA* __restrict__ Yhat, TO* __restrict__ y,
                     const TC* __restrict__ twp, const TC* __restrict__ twl, int nf, int nd, int nm, int RS, int CH,
                     int G, typename fmv::real_of<TC>::type scale, int release, unsigned* __restrict__ sync,
                     int fence) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    __shared__ int claimed;
    constexpr int S = 1 << LOGS;
    const unsigned blocks = gridDim.x;
    if (threadIdx.x == 0) atomicAdd(sync + 1, 1u);
    const int tiles = (int)(blocks / nf);
    const int group = blockIdx.x / (nf * G), in_group = blockIdx.x - group * nf * G;
    const int width = fmv::min_(G, tiles - group * G);  // tiles in this group
    const int tile = group * G + in_group % width;
    fmv::adj_tile<TA, TX, U, VEC, 1>(A, X, Yhat, nf, nd, nm, 1, RS, CH, 0, nm, 1, S, in_group / width, tile, 0,
                                     reinterpret_cast<TA*>(fmv_smem));
    if (fence == 0) __threadfence();  // this thread's spectra before the tile's count
    __syncthreads();
    if (threadIdx.x == 0) {
        if (fence == 1) __threadfence();
        if (fence == 2)
            fmv::add_release(sync + 3 + tile, 1u);
        else
            atomicAdd(sync + 3 + tile, 1u);
    }
    const int group_tile = NT / RS * VEC / S;  // inverse groups per product tile
    const int groups = (nm + S - 1) / S;
    for (;;) {
        if (threadIdx.x == 0) claimed = fmv::claim_group(sync, groups, group_tile, nf, blocks);
        __syncthreads();
        const int g = claimed;
        if (g < 0) break;
        fmv::inverse_group<TA, TC, TO, LOGS, NT, IP, true, M, Rs...>(Yhat, y, twp, twl, nm, 1, scale, 1, release,
                                                                     g * S, reinterpret_cast<TC*>(fmv_smem));
        __syncthreads();  // before the shared memory and `claimed` are used again
    }
    if (threadIdx.x == 0 && atomicAdd(sync + 2, 1u) == blocks - 1) {  // the last block: no other touches sync now
        for (int t = 0; t < 3 + tiles; ++t) sync[t] = 0;
    }
}

#ifdef FFTMATVEC_INSTANTIATE
// The big size's instantiations (Nt = 1000): complex64 from a complex128 vector into float64 samples (ddssd),
// and complex128 (ddddd).
template __global__ void sbgemv_adj_irfft<float2, double2, float2, double, 8, 2, 2, 512, 0, 1000, 10, 10, 10>(
    const float2*, const double2*, float2*, double*, const float2*, const float2*, int, int, int, int, int, int,
    float, int, unsigned*, int);
template __global__ void sbgemv_adj_irfft<double2, double2, double2, double, 8, 1, 1, 256, 1, 1000, 10, 10, 10>(
    const double2*, const double2*, double2*, double*, const double2*, const double2*, int, int, int, int, int,
    int, double, int, unsigned*, int);
#endif
