// direct.cu -- the whole local product (stages 1-5) in one kernel, for small problems.
//
// btt_direct<.., ADJ=0>: y[o, t] = (F x)[o, t],   o < nd, x (nm, Nt) real, SOTI
// btt_direct<.., ADJ=1>: y[o, t] = (F^T x)[o, t], o < nm, x (nd, Nt) real, SOTI
//
// At the reference fixture's size (Nt = 10, Fhat under 1 MB) the three
// kernels of the staged product each cost more in launch and ramp-up than in
// work.  Here one thread block computes OPB consecutive output series from
// scratch: the transforms are direct DFTs (n_in Nf Nt multiply-adds per block,
// recomputed by every block, which is cheap while Nt is small), the
// per-frequency product reads its rows (forward) or columns (adjoint) of
// Fhat once, and the inverse DFT writes the unpadded output.  Nothing goes
// through global memory between the stages.
//
// Each stage rounds as the staged product does (template types, precision
// codes of fftmatvec.precision):
//   TP  pad precision (the input, real)        TF  FFT arithmetic (complex)
//   TS  Fhat and the product (complex)         TI  inverse FFT arithmetic (complex)
//   TO  the unpadded result (real)
//   x_hat = rfft_L(pad(x)) in TF, rounded to TS; y_hat = Fhat x_hat (or Fhat^H x_hat)
//   accumulated in TS, rounded to TI; y = irfft_L(y_hat)[:Nt] / L in TI, rounded to TO.
// As numpy.fft.irfft, the imaginary parts of y_hat[0] and y_hat[M] are ignored.
//
// Layouts: Fhat (Nf, nd, nm) C-contiguous (Nf = M + 1, M = Nt, L = 2 M); x
// (n_in, M) and y (n_out, M) contiguous.  Twiddles twf[k] = exp(-2 pi i k / L)
// (TF) and twi[k] = exp(+2 pi i k / L) (TI), k < L, made on the host in
// float64 and rounded once.
//
// Launch: gridDim.x = ceil(n_out / OPB), blockDim.x = NTH (a multiple of 32), dynamic shared
// memory the sum of the five arrays below, each start rounded up to 16 bytes (computed the same
// way by GPUBackend._direct_config).  The pointers that change between products come first.
#include "fftmatvec_common.cuh"

using fmv::index_t;

namespace fmv {
FMV_DEV int align16(int bytes) { return (bytes + 15) & ~15; }
}  // namespace fmv

template <typename TP, typename TF, typename TS, typename TI, typename TO, int ADJ, int M, int NTH>
__global__ void __launch_bounds__(NTH) btt_direct(const TP* __restrict__ x, TO* __restrict__ y,
                                                  const TS* __restrict__ Fhat, const TF* __restrict__ twf,
                                                  const TI* __restrict__ twi, int nd, int nm, int OPB) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    typedef typename fmv::real_of<TF>::type RF;
    typedef typename fmv::real_of<TI>::type RI;
    constexpr int L = 2 * M, NF = M + 1, MS = M | 1;  // MS: odd row stride of x in shared memory (no bank conflicts)
    constexpr int PRE = ADJ ? 16 : 1;  // Fhat values of a column prefetched per thread (adjoint)
    const int n_in = ADJ ? nd : nm, n_out = ADJ ? nm : nd;
    const int o0 = blockIdx.x * OPB;
    const int no = fmv::min_(OPB, n_out - o0);

    // shared: x_hat (NF, n_in) TS | y_hat (OPB, NF) TI | twiddles (L) TF and TI | x (n_in, MS) RF
    extern __shared__ double2 fmv_smem[];
    char* base = reinterpret_cast<char*>(fmv_smem);
    TS* xh = reinterpret_cast<TS*>(base);
    int off = fmv::align16(NF * n_in * (int)sizeof(TS));
    TI* yh = reinterpret_cast<TI*>(base + off);
    off += fmv::align16(OPB * NF * (int)sizeof(TI));
    TF* wf = reinterpret_cast<TF*>(base + off);
    off += fmv::align16(L * (int)sizeof(TF));
    TI* wi = reinterpret_cast<TI*>(base + off);
    off += fmv::align16(L * (int)sizeof(TI));
    RF* xs = reinterpret_cast<RF*>(base + off);

    // Adjoint: the first column of Fhat each thread multiplies, loaded before the DFTs so that these loads
    // overlap them instead of following them.  (The same for the forward product's rows made no
    // difference at the fixture's size and cost registers.)
    const TS* A = Fhat;
    TS pre[PRE];
    if (ADJ) {
        const int p = threadIdx.x;  // pair (f, ol) = (p / no, p % no)
        const TS* col = A + (index_t)(p / no) * nd * nm + o0 + p % no;
#pragma unroll
        for (int q = 0; q < PRE; ++q)
            pre[q] = (p < NF * no && q < nd) ? FMV_LDG(col + (index_t)q * nm) : fmv::czero<TS>();
    }
    for (int k = threadIdx.x; k < L; k += NTH) {
        wf[k] = FMV_LDG(twf + k);
        wi[k] = FMV_LDG(twi + k);
    }
#pragma unroll 4
    for (int e = threadIdx.x; e < n_in * M; e += NTH) {  // pad: cast to TF
        const int j = e / M;
        xs[j * MS + e - j * M] = (RF)FMV_LDG(x + e);
    }
    __syncthreads();

    // stages 1-2: x_hat[f, j] = sum_{t < M} x[j, t] exp(-2 pi i f t / L).  A thread takes series j and the
    // FQ frequencies f = g + FG q of group g: it reads each x[j, t] once for all of them, and the threads
    // of a warp (one g) read the same twiddles (shared-memory broadcasts).  (A thread per (f, j) would read
    // x and a twiddle per multiply-add: three times the shared-memory traffic.)
    constexpr int FQ = NF < 16 ? (NF + 1) / 2 : 8, FG = (NF + FQ - 1) / FQ;
    for (int e = threadIdx.x; e < FG * n_in; e += NTH) {
        const int g = e / n_in, j = e - g * n_in;
        const RF* xj = xs + j * MS;
        TF acc[FQ];
        int k[FQ];  // f t mod L
#pragma unroll
        for (int q = 0; q < FQ; ++q) {
            acc[q] = fmv::czero<TF>();
            k[q] = 0;
        }
#pragma unroll
        for (int t = 0; t < M; ++t) {
            const RF v = xj[t];
#pragma unroll
            for (int q = 0; q < FQ; ++q) {
                const TF w = wf[k[q]];
                acc[q].x += v * w.x;
                acc[q].y += v * w.y;
                k[q] += g + FG * q;
                k[q] -= k[q] >= L ? L : 0;
            }
        }
#pragma unroll
        for (int q = 0; q < FQ; ++q)
            if (g + FG * q < NF) xh[(g + FG * q) * n_in + j] = fmv::ccast<TS>(acc[q]);
    }
    __syncthreads();

    // stage 3: y_hat[ol, f] for the block's output series.  Fhat is read from L2 at this size, so its
    // loads are issued four at a time (the sums are latency-bound, not bandwidth-bound).
    if (!ADJ) {  // row o of Fhat[f] times x_hat[f]: a warp per (o, f), lanes over the row (coalesced)
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        for (int p = warp; p < no * NF; p += NTH / 32) {
            const int ol = p / NF, f = p - ol * NF;
            const TS* row = A + ((index_t)f * nd + o0 + ol) * nm;
            const TS* xf = xh + f * n_in;
            TS acc = fmv::czero<TS>();
            int j = lane;
            for (; j + 96 < nm; j += 128) {
                const TS a0 = FMV_LDG(row + j), a1 = FMV_LDG(row + j + 32), a2 = FMV_LDG(row + j + 64),
                         a3 = FMV_LDG(row + j + 96);
                fmv::cmac(acc, a0, xf[j]);
                fmv::cmac(acc, a1, xf[j + 32]);
                fmv::cmac(acc, a2, xf[j + 64]);
                fmv::cmac(acc, a3, xf[j + 96]);
            }
            for (; j < nm; j += 32) fmv::cmac(acc, FMV_LDG(row + j), xf[j]);
#pragma unroll
            for (int m = 16; m > 0; m >>= 1) {
                acc.x += FMV_SHFL_XOR(acc.x, m, 32);
                acc.y += FMV_SHFL_XOR(acc.y, m, 32);
            }
            if (lane == 0) yh[ol * NF + f] = fmv::ccast<TI>(acc);
        }
    } else {  // column o of Fhat[f], conjugated, times x_hat[f]: a thread per (f, o), o fastest (coalesced)
        for (int p = threadIdx.x; p < NF * no; p += NTH) {
            const int f = p / no, ol = p - f * no;
            const TS* col = A + (index_t)f * nd * nm + o0 + ol;
            const TS* xf = xh + f * n_in;
            TS acc = fmv::czero<TS>();
            int i = 0;
            if (p == (int)threadIdx.x) {  // the prefetched first rows
#pragma unroll
                for (int q = 0; q < PRE; ++q)
                    if (q < nd) fmv::cmac_conj(acc, pre[q], xf[q]);
                i = PRE;
            }
            for (; i + 3 < nd; i += 4) {
                const TS a0 = FMV_LDG(col + (index_t)i * nm), a1 = FMV_LDG(col + (index_t)(i + 1) * nm),
                         a2 = FMV_LDG(col + (index_t)(i + 2) * nm), a3 = FMV_LDG(col + (index_t)(i + 3) * nm);
                fmv::cmac_conj(acc, a0, xf[i]);
                fmv::cmac_conj(acc, a1, xf[i + 1]);
                fmv::cmac_conj(acc, a2, xf[i + 2]);
                fmv::cmac_conj(acc, a3, xf[i + 3]);
            }
            for (; i < nd; ++i) fmv::cmac_conj(acc, FMV_LDG(col + (index_t)i * nm), xf[i]);
            yh[ol * NF + f] = fmv::ccast<TI>(acc);
        }
    }
    __syncthreads();

    // stages 4-5: y[o, t] = (Re Y0 + (-1)^t Re YM + 2 sum_{0<f<M} Re(Y[f] exp(2 pi i f t / L))) / L, t < M
    for (int e = threadIdx.x; e < no * M; e += NTH) {
        const int ol = e / M, t = e - ol * M;
        const TI* Y = yh + ol * NF;
        RI acc = Y[0].x + ((t & 1) ? -Y[M].x : Y[M].x);
        RI sum = 0;
        int k = t;  // f t mod L, from f = 1
        for (int f = 1; f < M; ++f) {
            const TI w = wi[k];
            sum += Y[f].x * w.x - Y[f].y * w.y;
            k += t;
            k -= k >= L ? L : 0;
        }
        acc += 2 * sum;
        y[(index_t)(o0 + ol) * M + t] = (TO)(acc / (RI)L);
    }
}

#ifdef FFTMATVEC_INSTANTIATE
// Instantiations for a standalone `nvcc -c` check: the fixture's length, forward and adjoint, mixed precisions.
template __global__ void btt_direct<double, double2, double2, double2, double, 0, 10, 352>(
    const double*, double*, const double2*, const double2*, const double2*, int, int, int);
template __global__ void btt_direct<double, double2, float2, float2, float, 1, 10, 256>(
    const double*, float*, const float2*, const double2*, const float2*, int, int, int);
template __global__ void btt_direct<float, float2, float2, double2, double, 0, 1, 128>(
    const float*, double*, const float2*, const float2*, const double2*, int, int, int);
#endif
