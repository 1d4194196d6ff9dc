// fft.cu -- fused real transforms of zero-padded series (stages 1-2 and 4-5).
//
// rfft_pad    : x (series, Nt) real  -> zero-padded to L = 2 Nt -> rfft -> X (Nf = Nt + 1, series) complex
// irfft_unpad : Y (Nf, series) complex -> irfft of length L, scaled -> first Nt samples -> (series, Nt) real
//
// One thread block transforms S consecutive series (S a power of two) in
// shared memory, so each stage reads its input once and writes its output once:
// the padding, the casts, the transposes between series-major vectors and the
// frequency-major layout of the per-frequency product, and the 1/L are all
// fused (cuFFT needs separate pad, transpose and scale passes around it).
//
// The real transform of length L = 2M (M = Nt) is a complex transform of
// length M of z[m] = x[2m] + i x[2m+1] (zero for 2m >= Nt) plus one
// post-processing pass (pre-processing for the inverse):
//   X[f] = E[f] + W^f O[f],  E = (Z[f] + conj Z[M-f]) / 2,  O = (Z[f] - conj Z[M-f]) / 2i,  W = exp(-2 pi i / L).
// The complex transform is an iterative Stockham autosort FFT over the radices
// Rs... (template arguments, product M; radices 2, 3, 4, 5, 7, 8, 10), ping-ponging
// between two shared buffers; M, the radices and S are compile-time constants
// (one NVRTC instantiation per length, made on first use and cached).
// Global memory is read or written inside the passes where it can be, since
// shared-memory traffic bounds these kernels (each element goes through
// shared memory once per pass): rfft_pad's first pass reads its butterflies'
// samples from x (never the zero half), and irfft_unpad's last pass writes
// the samples y keeps.
// Twiddles come from tables made on the host in float64 and rounded to the
// transform's precision:
//   twp: per pass (NS = product of the earlier radices, R its radix), from
//        offset NS - 1, exp(-2 pi i k r / (NS R)) at (r - 1) NS + k for
//        k < NS, 1 <= r < R (M - 1 entries in all; the threads of a warp
//        have consecutive k, so each of their R - 1 loads reads one
//        contiguous run: with k (R - 1) + r - 1, r fastest, every load
//        touched R - 1 times as many cache lines, and the twiddles were most
//        of the kernel's L1 traffic);
//   twl[f] = exp(-2 pi i f / L), f <= M.
//
// Series index s = p * K + k for the SOTI layout (n, Nt, K): sample t of series
// s is x[(p * Nt + t) * K + k]; the frequency-major side is (Nf, n, K), i.e.
// X[f * B + s] with B = n * K series.  As numpy.fft, the inverse ignores the
// imaginary parts of Y[0] and Y[M].
//
// Launch: gridDim.x = ceil(B / S) with S = 2^LOGS (a divisor of K when K > 1),
// blockDim.x = NT (a multiple of 32), dynamic shared memory 2 * S * Row<M, S, TC>::ld * sizeof(TC).
#include "fftmatvec_common.cuh"

using fmv::index_t;

namespace fmv {

// i * a
template <typename C> FMV_DEV C times_i(const C a) { return cmake<C>(-a.y, a.x); }
template <typename C> FMV_DEV C cconj(const C a) { return cmake<C>(a.x, -a.y); }
template <typename C> FMV_DEV C csub(const C a, const C b) { return cmake<C>(a.x - b.x, a.y - b.y); }
template <typename C> FMV_DEV C csum(const C a, const C b) { return cmake<C>(a.x + b.x, a.y + b.y); }
template <typename C> FMV_DEV C cscale(const C a, typename real_of<C>::type s) { return cmake<C>(s * a.x, s * a.y); }

// In-place DFT of R values, sign DIR of the exponent (-1 forward, +1 inverse), unnormalised.
template <int R, int DIR> struct Dft;

// M = 1: the transform is one pass of radix 1
template <int DIR> struct Dft<1, DIR> {
    template <typename C> static FMV_DEV void run(C*) {}
};

template <int DIR> struct Dft<2, DIR> {
    template <typename C> static FMV_DEV void run(C* v) {
        const C a = v[0], b = v[1];
        v[0] = csum(a, b);
        v[1] = csub(a, b);
    }
};

template <int DIR> struct Dft<4, DIR> {
    template <typename C> static FMV_DEV void run(C* v) {
        const C t0 = csum(v[0], v[2]), t1 = csub(v[0], v[2]);
        const C t2 = csum(v[1], v[3]);
        const C t3 = cscale(times_i(csub(v[1], v[3])), (typename real_of<C>::type)DIR);  // DIR * i * (b - d)
        v[0] = csum(t0, t2);
        v[2] = csub(t0, t2);
        v[1] = csum(t1, t3);
        v[3] = csub(t1, t3);
    }
};

template <int DIR> struct Dft<8, DIR> {
    template <typename C> static FMV_DEV void run(C* v) {
        typedef typename real_of<C>::type T;
        C e[4] = {v[0], v[2], v[4], v[6]}, o[4] = {v[1], v[3], v[5], v[7]};
        Dft<4, DIR>::run(e);
        Dft<4, DIR>::run(o);
        const T h = (T)0.70710678118654752440;  // exp(DIR i pi / 4) = h (1 + DIR i)
        o[1] = cmake<C>(h * (o[1].x - DIR * o[1].y), h * (o[1].y + DIR * o[1].x));
        o[2] = cscale(times_i(o[2]), (T)DIR);
        o[3] = cmake<C>(-h * (o[3].x + DIR * o[3].y), h * (DIR * o[3].x - o[3].y));  // exp(3 DIR i pi / 4)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            v[q] = csum(e[q], o[q]);
            v[q + 4] = csub(e[q], o[q]);
        }
    }
};

// Odd R: X[q] = v0 + sum_{r=1}^{(R-1)/2} cos(2 pi q r / R) (v_r + v_{R-r}) + DIR i sin(2 pi q r / R) (v_r - v_{R-r}).
template <int R> struct Roots;
template <> struct Roots<3> {
    static FMV_DEV double c(int m) { return m == 0 ? 1.0 : -0.5; }
    static FMV_DEV double s(int m) { return m == 0 ? 0.0 : (m == 1 ? 0.86602540378443864676 : -0.86602540378443864676); }
};
template <> struct Roots<5> {
    static FMV_DEV double c(int m) {
        return m == 0 ? 1.0 : (m == 1 || m == 4) ? 0.30901699437494742410 : -0.80901699437494742410;
    }
    static FMV_DEV double s(int m) {
        return m == 0 ? 0.0 : m == 1 ? 0.95105651629515357212 : m == 2 ? 0.58778525229247312917
                            : m == 3 ? -0.58778525229247312917 : -0.95105651629515357212;
    }
};
template <> struct Roots<7> {
    static FMV_DEV double c(int m) {
        return m == 0 ? 1.0 : (m == 1 || m == 6) ? 0.62348980185873353053
                            : (m == 2 || m == 5) ? -0.22252093395631440429 : -0.90096886790241912624;
    }
    static FMV_DEV double s(int m) {
        return m == 0 ? 0.0 : m == 1 ? 0.78183148246802980871 : m == 2 ? 0.97492791218182360702
                            : m == 3 ? 0.43388373911755812048 : m == 4 ? -0.43388373911755812048
                            : m == 5 ? -0.97492791218182360702 : -0.78183148246802980871;
    }
};

template <int R, int DIR> struct DftOdd {
    template <typename C> static FMV_DEV void run(C* v) {
        typedef typename real_of<C>::type T;
        constexpr int H = (R - 1) / 2;
        C p[H], m[H];
        C out0 = v[0];
#pragma unroll
        for (int r = 1; r <= H; ++r) {
            p[r - 1] = csum(v[r], v[R - r]);
            m[r - 1] = csub(v[r], v[R - r]);
            out0 = csum(out0, p[r - 1]);
        }
        C res[R];
        res[0] = out0;
#pragma unroll
        for (int q = 1; q <= H; ++q) {
            C re = v[0], im = czero<C>();
#pragma unroll
            for (int r = 1; r <= H; ++r) {
                const T c = (T)Roots<R>::c((q * r) % R), s = (T)(DIR * Roots<R>::s((q * r) % R));
                re = csum(re, cscale(p[r - 1], c));
                im = csum(im, cscale(m[r - 1], s));
            }
            res[q] = csum(re, times_i(im));
            res[R - q] = csub(re, times_i(im));
        }
#pragma unroll
        for (int q = 0; q < R; ++q) v[q] = res[q];
    }
};
template <int DIR> struct Dft<3, DIR> : DftOdd<3, DIR> {};
template <int DIR> struct Dft<5, DIR> : DftOdd<5, DIR> {};
template <int DIR> struct Dft<7, DIR> : DftOdd<7, DIR> {};

// Radix 10 as 2 x 5 in registers (one pass where a 2 and a 5 would take two):
// X[q] = E[q] + w^q O[q], X[q + 5] = E[q] - w^q O[q], w = exp(DIR 2 pi i / 10), E and O the
// 5-point DFTs of the even and odd inputs.
template <int DIR> struct Dft<10, DIR> {
    template <typename C> static FMV_DEV void run(C* v) {
        typedef typename real_of<C>::type T;
        C e[5] = {v[0], v[2], v[4], v[6], v[8]}, o[5] = {v[1], v[3], v[5], v[7], v[9]};
        Dft<5, DIR>::run(e);
        Dft<5, DIR>::run(o);
        const T c[5] = {1, 0.80901699437494742410, 0.30901699437494742410, -0.30901699437494742410,
                        -0.80901699437494742410};  // cos(2 pi q / 10)
        const T sn[5] = {0, 0.58778525229247312917, 0.95105651629515357212, 0.95105651629515357212,
                         0.58778525229247312917};  // sin(2 pi q / 10)
#pragma unroll
        for (int q = 0; q < 5; ++q) {
            const C wo = q == 0 ? o[0] : cmul(o[q], cmake<C>(c[q], DIR * sn[q]));
            v[q] = csum(e[q], wo);
            v[q + 5] = csub(e[q], wo);
        }
    }
};

// Work item e of a pass over S series of nb butterflies: series s, butterfly
// j.  Series fastest when the S series of a block are adjacent in global
// memory (K > 1: one time step of them is one contiguous run), butterfly
// fastest otherwise (K == 1: a series is contiguous).
template <int S, int LOGS, int nb> FMV_DEV void work_item(int e, int K, int& s, int& j) {
    if (K == 1) {
        s = e / nb;
        j = e - s * nb;
    } else {
        s = e & (S - 1);
        j = e >> LOGS;
    }
}

// The twiddles of butterfly k of a pass (NS = product of the earlier
// radices: entry k of R - 1 rows of NS in twp), then its DFT.
template <int R, int DIR, int NS, typename C> FMV_DEV void twiddle_dft(C* v, const C* __restrict__ twp, int k) {
    if (NS > 1) {
        const C* tw = twp + (NS - 1) + k;
#pragma unroll
        for (int r = 1; r < R; ++r) {
            const C w = FMV_LDG(tw + (r - 1) * NS);
            v[r] = cmul(v[r], DIR < 0 ? w : cconj(w));
        }
    }
    Dft<R, DIR>::run(v);
}

// Row stride (elements) of a series in shared memory: M + 1, padded when the
// S < P series of a block meet in one warp access (the forward's
// post-processing, the inverse's load: series fastest; P = 128 / sizeof(C)
// lanes per shared-memory wavefront) so that the S rows start in distinct
// banks, ld % P == P / S: with ld = M + 1 = 1001 (big size, S = 2 in complex128)
// lanes 1 and 2 hit the same bank.  GPUBackend._fused_config sizes the shared
// memory by the same rule (fused_row_stride in backend/gpu.py).
template <int M, int S, typename C> struct Row {
    static constexpr int P = 128 / (int)sizeof(C);
    static constexpr int ld = (S == 1 || S >= P) ? M + 1 : M + 1 + ((P / S - (M + 1) % P) % P + P) % P;
};

// One Stockham pass of radix R over the S series of length M (row stride
// Row::ld) from `in` to `out`; NS = product of the radices of the earlier
// passes.  All sizes are compile-time constants, so the index arithmetic has
// no divisions and the loops unroll.
template <int R, int DIR, int M, int NS, int S, int NT, typename C>
FMV_DEV void stockham_pass(const C* in, C* out, const C* __restrict__ twp) {
    constexpr int nb = M / R, ld = Row<M, S, C>::ld;
    constexpr int unroll = R * sizeof(C) > 64 ? 1 : 2;  // two butterflies of 10 complex128 spill (64 registers)
#pragma unroll unroll
    for (int e = threadIdx.x; e < S * nb; e += NT) {
        const int s = e / nb, j = e - s * nb;
        const int k = j % NS;
        const C* src = in + s * ld + j;
        C v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = src[r * nb];
        twiddle_dft<R, DIR, NS>(v, twp, k);
        C* dst = out + s * ld + (j - k) * R + k;
#pragma unroll
        for (int r = 0; r < R; ++r) dst[r * NS] = v[r];
    }
}

template <typename T> struct pair_of;
template <> struct pair_of<float> { typedef float2 type; };
template <> struct pair_of<double> { typedef double2 type; };

// Sample t of series s of a block whose series start at xb is xb[s * ss + t * K]
// with ss = M when K == 1, else 1 (the S series of a block are adjacent
// columns of the (n, M, K) array).  Samples 2m and 2m + 1 go as one pair
// (one 2 * sizeof(T) access) when the series are contiguous, M is even and xb
// is aligned to a pair (a caller's view may not be).
template <int M, typename T> FMV_DEV bool pairs_aligned(const T* xb, int K) {
    return M % 2 == 0 && K == 1 && reinterpret_cast<unsigned long long>(xb) % (2 * sizeof(T)) == 0;
}

// The first pass of the forward transform (NS = 1), from global memory:
// butterfly j of series s takes z[j + r nb] = x[2 (j + r nb)] + i x[2 (j + r nb) + 1]
// for r < R, zero from sample M on; the r whose samples are all padding
// (2 r nb >= M) are zero at compile time and never loaded.
template <int R, int M, int S, int LOGS, int NT, typename TI, typename C>
FMV_DEV void first_pass_from_global(const TI* __restrict__ xb, int ns, int K, C* out) {
    typedef typename real_of<C>::type TR;
    constexpr int nb = M / R, ld = Row<M, S, C>::ld;
    const int ss = K == 1 ? M : 1;
    const bool pairs = pairs_aligned<M>(xb, K);
#pragma unroll 1
    for (int e = threadIdx.x; e < S * nb; e += NT) {
        int s, j;
        work_item<S, LOGS, nb>(e, K, s, j);
        const TI* xs = xb + (index_t)s * ss;
        C v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int t = 2 * (j + r * nb);
            v[r] = czero<C>();
            if (2 * r * nb >= M || s >= ns) continue;
            if (2 * (r + 1) * nb <= M) {  // both samples of every j are data
                if (pairs) {
                    const typename pair_of<TI>::type p =
                        FMV_LDG(reinterpret_cast<const typename pair_of<TI>::type*>(xs + t));
                    v[r] = cmake<C>((TR)p.x, (TR)p.y);
                } else {
                    v[r] = cmake<C>((TR)FMV_LDG(xs + (index_t)t * K), (TR)FMV_LDG(xs + (index_t)(t + 1) * K));
                }
            } else {
                if (t < M) v[r].x = (TR)FMV_LDG(xs + (index_t)t * K);
                if (t + 1 < M) v[r].y = (TR)FMV_LDG(xs + (index_t)(t + 1) * K);
            }
        }
        twiddle_dft<R, -1, 1>(v, (const C*)nullptr, 0);
        C* dst = out + s * ld + j * R;
#pragma unroll
        for (int r = 0; r < R; ++r) dst[r] = v[r];
    }
}

// The last pass of the inverse transform (NS R = M), to global memory:
// butterfly k of series s gives z[m] = (y[2m], y[2m+1]), m = k + r NS, of
// which the samples below M are scaled, cast and stored.
template <int R, int M, int S, int LOGS, int NT, typename TO, typename C>
FMV_DEV void last_pass_to_global(const C* in, const C* __restrict__ twp, TO* yb, int ns, int K,
                                 typename real_of<C>::type scale) {
    constexpr int NS = M / R, ld = Row<M, S, C>::ld;
    const int ss = K == 1 ? M : 1;
    const bool pairs = pairs_aligned<M>(yb, K);
#pragma unroll 1
    for (int e = threadIdx.x; e < S * NS; e += NT) {
        int s, k;
        work_item<S, LOGS, NS>(e, K, s, k);
        const C* src = in + s * ld + k;
        C v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = src[r * NS];
        twiddle_dft<R, 1, NS>(v, twp, k);
        if (s >= ns) continue;
        TO* ys = yb + (index_t)s * ss;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int t = 2 * (k + r * NS);
            if (2 * r * NS >= M) continue;  // padding: dropped
            if (2 * (r + 1) * NS <= M) {
                if (pairs) {
                    typedef typename pair_of<TO>::type P;
                    *reinterpret_cast<P*>(ys + t) = cmake<P>((TO)(scale * v[r].x), (TO)(scale * v[r].y));
                } else {
                    ys[(index_t)t * K] = (TO)(scale * v[r].x);
                    ys[(index_t)(t + 1) * K] = (TO)(scale * v[r].y);
                }
            } else {
                if (t < M) ys[(index_t)t * K] = (TO)(scale * v[r].x);
                if (t + 1 < M) ys[(index_t)(t + 1) * K] = (TO)(scale * v[r].y);
            }
        }
    }
}

// The passes over the radices Rs..., ping-ponging between the two buffers;
// run() returns the buffer that holds the transform.
template <int DIR, int M, int NS, int S, int NT, typename C, int... Rs> struct Passes;
template <int DIR, int M, int NS, int S, int NT, typename C> struct Passes<DIR, M, NS, S, NT, C> {
    static FMV_DEV C* run(C* in, C*, const C*) {
        __syncthreads();
        return in;
    }
};
template <int DIR, int M, int NS, int S, int NT, typename C, int R, int... Rest>
struct Passes<DIR, M, NS, S, NT, C, R, Rest...> {
    static FMV_DEV C* run(C* in, C* out, const C* twp) {
        __syncthreads();
        stockham_pass<R, DIR, M, NS, S, NT>(in, out, twp);
        return Passes<DIR, M, NS * R, S, NT, C, Rest...>::run(out, in, twp);
    }
};

// The forward transform of the block's series xb into buf0 or buf1 (returned):
// the first pass from global memory, the others in shared memory.
template <int M, int S, int LOGS, int NT, typename C, int... Rs> struct ForwardPasses;
template <int M, int S, int LOGS, int NT, typename C, int R, int... Rest>
struct ForwardPasses<M, S, LOGS, NT, C, R, Rest...> {
    template <typename TI>
    static FMV_DEV C* run(const TI* xb, int ns, int K, C* buf0, C* buf1, const C* twp) {
        first_pass_from_global<R, M, S, LOGS, NT>(xb, ns, K, buf0);
        return Passes<-1, M, R, S, NT, C, Rest...>::run(buf0, buf1, twp);
    }
};
template <int M, int S, int LOGS, int NT, typename C>
struct ForwardPasses<M, S, LOGS, NT, C> : ForwardPasses<M, S, LOGS, NT, C, 1> {};  // M = 1

// The inverse transform of the pre-processed series in `in` into yb: the
// passes in shared memory, the last one to global memory.
template <int M, int NS, int S, int LOGS, int NT, typename C, int... Rs> struct InversePasses;
template <int M, int NS, int S, int LOGS, int NT, typename C, int R>
struct InversePasses<M, NS, S, LOGS, NT, C, R> {
    template <typename TO>
    static FMV_DEV void run(C* in, C*, const C* twp, TO* yb, int ns, int K, typename real_of<C>::type scale) {
        __syncthreads();
        last_pass_to_global<R, M, S, LOGS, NT>(in, twp, yb, ns, K, scale);
    }
};
template <int M, int NS, int S, int LOGS, int NT, typename C, int R, int R2, int... Rest>
struct InversePasses<M, NS, S, LOGS, NT, C, R, R2, Rest...> {
    template <typename TO>
    static FMV_DEV void run(C* in, C* out, const C* twp, TO* yb, int ns, int K, typename real_of<C>::type scale) {
        __syncthreads();
        stockham_pass<R, 1, M, NS, S, NT>(in, out, twp);
        InversePasses<M, NS * R, S, LOGS, NT, C, R2, Rest...>::run(out, in, twp, yb, ns, K, scale);
    }
};
template <int M, int NS, int S, int LOGS, int NT, typename C>
struct InversePasses<M, NS, S, LOGS, NT, C> : InversePasses<M, NS, S, LOGS, NT, C, 1> {};  // M = 1

}  // namespace fmv

// Series s of the block is s0 + sl; for K > 1, S divides K, so the S series
// of a block share p = s0 / K and sample t of series sl is at
// ((p * M + t) * K + k0 + sl), k0 = s0 % K.
FMV_DEV index_t series_base(int s0, int K, int M) { return (index_t)(s0 / K) * M * K + s0 % K; }

// Stages 1-2: X[f * B + s] = sum_{t < M} x_s[t] exp(-2 pi i f t / L), f = 0..M (TI -> TC arithmetic -> TO).
template <typename TI, typename TC, typename TO, int LOGS, int NT, int M, int... Rs>
__global__ void __launch_bounds__(NT, (1024 / NT > 0 ? 1024 / NT : 1)) rfft_pad(const TI* __restrict__ x, TO* __restrict__ X, const TC* __restrict__ twp,
                         const TC* __restrict__ twl, int B, int K) {
    typedef typename fmv::real_of<TC>::type TR;
    constexpr int S = 1 << LOGS, ld = fmv::Row<M, S, TC>::ld;
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    TC* buf0 = reinterpret_cast<TC*>(fmv_smem);
    TC* buf1 = buf0 + S * ld;
    const int s0 = blockIdx.x * S;
    const int ns = fmv::min_(S, B - s0);
    const TC* Z = fmv::ForwardPasses<M, S, LOGS, NT, TC, Rs...>::run(x + series_base(s0, K, M), ns, K, buf0, buf1, twp);
#pragma unroll 2
    for (int e = threadIdx.x; e < (M + 1) * S; e += NT) {
        const int f = e >> LOGS, sl = e & (S - 1);
        if (sl >= ns) continue;
        const TC z1 = Z[sl * ld + (f == M ? 0 : f)];
        const TC z2 = fmv::cconj(Z[sl * ld + (f == 0 ? 0 : M - f)]);
        const TC E = fmv::cscale(fmv::csum(z1, z2), (TR)0.5);
        const TC D = fmv::cscale(fmv::csub(z1, z2), (TR)0.5);
        const TC O = fmv::cmake<TC>(D.y, -D.x);  // D / i
        const TC v = fmv::csum(E, fmv::cmul(FMV_LDG(twl + f), O));
        X[(index_t)f * B + s0 + sl] = fmv::ccast<TO>(v);
    }
}

// Stages 4-5: y_s[t] = scale * sum_f' Y[f * B + s] exp(2 pi i f t / L), t < M = Nt (Hermitian extension of
// f = 0..M, TI -> TC arithmetic -> TO).  Y is loaded into shared memory first: the pre-processing reads
// Y[f] and Y[M - f], and reading them from global memory (runs of S values, so a warp's load touches 32 / S
// cache lines) twice cost more than a shared-memory round trip: on the H200, 5000 series of Nt = 1000 took
// 88.2 us in float64 (256 threads) and 47.8 us in float32 (512) that way, 83.4 and 45.5 us this way
// (benchmarks/results/h200-probe-fused-io-v1.jsonl and h200-probe-fused-io.jsonl, --parts fftradix).
template <typename TI, typename TC, typename TO, int LOGS, int NT, int M, int... Rs>
__global__ void __launch_bounds__(NT, (1024 / NT > 0 ? 1024 / NT : 1)) irfft_unpad(const TI* __restrict__ Y, TO* __restrict__ y, const TC* __restrict__ twp,
                            const TC* __restrict__ twl, int B, int K, typename fmv::real_of<TC>::type scale) {
    constexpr int S = 1 << LOGS, ld = fmv::Row<M, S, TC>::ld;
    extern __shared__ double2 fmv_smem[];
    TC* buf0 = reinterpret_cast<TC*>(fmv_smem);
    TC* buf1 = buf0 + S * ld;
    const int s0 = blockIdx.x * S;
    const int ns = fmv::min_(S, B - s0);
#pragma unroll 4
    for (int e = threadIdx.x; e < (M + 1) * S; e += NT) {
        const int f = e >> LOGS, sl = e & (S - 1);
        TC v = fmv::czero<TC>();
        if (sl < ns) v = fmv::ccast<TC>(Y[(index_t)f * B + s0 + sl]);
        if (f == 0 || f == M) v.y = 0;
        buf1[sl * ld + f] = v;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < S * M; e += NT) {
        const int sl = e / M, f = e - sl * M;
        const TC a = buf1[sl * ld + f], b = fmv::cconj(buf1[sl * ld + M - f]);
        const TC D = fmv::cmul(fmv::csub(a, b), fmv::cconj(FMV_LDG(twl + f)));
        buf0[sl * ld + f] = fmv::csum(fmv::csum(a, b), fmv::times_i(D));
    }
    fmv::InversePasses<M, 1, S, LOGS, NT, TC, Rs...>::run(buf0, buf1, twp, y + series_base(s0, K, M), ns, K, scale);
}

#ifdef FFTMATVEC_INSTANTIATE
// A few of the instantiations the Python side asks NVRTC for (by name
// expression), for a standalone `nvcc -c` check: Nt = 1000, 500, 10, 1, 21.
#define FMV_RFFT(TI, TC, TO, ...) \
    template __global__ void rfft_pad<TI, TC, TO, __VA_ARGS__>(const TI*, TO*, const TC*, const TC*, int, int);
#define FMV_IRFFT(TI, TC, TO, ...)                                                                                \
    template __global__ void irfft_unpad<TI, TC, TO, __VA_ARGS__>(const TI*, TO*, const TC*, const TC*, int, int, \
                                                                   typename fmv::real_of<TC>::type);
FMV_RFFT(double, double2, double2, 1, 512, 1000, 10, 10, 10)
FMV_RFFT(double, double2, double2, 1, 512, 1000, 5, 5, 5, 8)
FMV_RFFT(double, float2, float2, 2, 256, 500, 4, 5, 5, 5)
FMV_RFFT(float, double2, double2, 3, 64, 10, 2, 5)
FMV_RFFT(double, double2, double2, 0, 32, 1)
FMV_RFFT(double, double2, double2, 1, 256, 1000, 10, 10, 10)
FMV_RFFT(double, float2, float2, 2, 512, 1000, 10, 10, 10)
FMV_IRFFT(double2, double2, double, 1, 512, 1000, 10, 10, 10)
FMV_IRFFT(double2, double2, double, 1, 256, 1000, 10, 10, 10)
FMV_IRFFT(double2, double2, double, 2, 512, 500, 5, 10, 10)
FMV_IRFFT(float2, float2, double, 2, 512, 1000, 10, 10, 10)
FMV_IRFFT(float2, float2, float, 2, 512, 500, 5, 10, 10)
FMV_IRFFT(float2, double2, double, 0, 32, 21, 3, 7)
FMV_IRFFT(float2, float2, float, 2, 256, 500, 4, 5, 5, 5)
#endif
