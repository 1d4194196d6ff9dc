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
// between two shared buffers, or in one (IP) where each thread has at most one
// butterfly per pass; M, the radices and S are compile-time constants
// (one NVRTC instantiation per length, made on first use and cached).
// Global memory is read or written inside the passes where it can be, since
// shared-memory traffic bounds these kernels (each element goes through
// shared memory once per pass): rfft_pad's first pass reads its butterflies'
// samples from x (never the zero half); irfft_unpad's first pass reads Y and
// does the pre-processing (the two lanes holding Y[f] and Y[M - f] swap them
// by shuffles, PairItem), and its last pass writes the samples y keeps.
// Twiddles come from tables made on the host in float64 and rounded to the
// transform's precision:
//   twp: per pass (NS = product of the earlier radices, R its radix), from
//        offset NS - 1, exp(-2 pi i k r / (NS R)) at (r - 1) NS + k for
//        k < NS, 1 <= r < R (M - 1 entries in all; the threads of a warp
//        have consecutive k, so each of their R - 1 loads reads one
//        contiguous run: with k (R - 1) + r - 1, r fastest, every load
//        touched R - 1 times as many cache lines, and the twiddles were most
//        of the kernel's L1 traffic);
//   twl[f] = exp(-2 pi i f / L), f <= M (the forward reads f <= M / 2 only).
//
// Series index s = p * K + k for the SOTI layout (n, Nt, K): sample t of series
// s is x[(p * Nt + t) * K + k]; the frequency-major side is (Nf, n, K), i.e.
// X[f * B + s] with B = n * K series.  As numpy.fft, the inverse ignores the
// imaginary parts of Y[0] and Y[M].
//
// rfft_pad with STAGED (K = 1; the engine takes it from float64 samples into
// complex64) launches only the blocks that fit at once: each loops over groups
// of S series and copies the next group's samples into shared memory
// (cp.async) while it transforms the current one.
//
// Launch: gridDim.x = ceil(B / S) (STAGED: at most that) with S = 2^LOGS <= 16 (with K > 1 the series of a
// block may belong to more than one p), blockDim.x = NT (a multiple of 32), dynamic shared memory
// n * S * Row<M, S, TC>::ld * sizeof(TC) with n = 1 buffer when the template argument IP is 1 (in place: allowed
// when every pass has at most one butterfly per thread, InPlace), else 2; STAGED adds S * M samples of TI from
// StagingOffset on.
#include "fftmatvec_common.cuh"

using fmv::index_t;

namespace fmv {

// i * a
template <typename C> FMV_DEV C times_i(const C a) { return cmake<C>(-a.y, a.x); }
template <typename C> FMV_DEV C cconj(const C a) { return cmake<C>(a.x, -a.y); }
template <typename C> FMV_DEV C csub(const C a, const C b) { return cmake<C>(a.x - b.x, a.y - b.y); }
template <typename C> FMV_DEV C csum(const C a, const C b) { return cmake<C>(a.x + b.x, a.y + b.y); }
template <typename C> FMV_DEV C cscale(const C a, typename real_of<C>::type s) { return cmake<C>(s * a.x, s * a.y); }
// a of lane (lane ^ m) of the same group of 32 lanes
template <typename C> FMV_DEV C cshfl_xor(const C a, int m) {
    return cmake<C>(FMV_SHFL_XOR(a.x, m, 32), FMV_SHFL_XOR(a.y, m, 32));
}

// The real transform's post-processing, X[f] = E + w O from Z[f] and Z[M - f] (w = W^f, E and O above).
template <typename C> FMV_DEV C real_spectrum(const C zf, const C zmf, const C w) {
    typedef typename real_of<C>::type T;
    const C z2 = cconj(zmf);
    const C E = cscale(csum(zf, z2), (T)0.5), D = cscale(csub(zf, z2), (T)0.5);
    return csum(E, cmul(w, cmake<C>(D.y, -D.x)));  // O = D / i
}
// Its inverse (twice, unscaled): z[f] = Y[f] + conj Y[M - f] + i conj(w) (Y[f] - conj Y[M - f]).
template <typename C> FMV_DEV C complex_sample(const C yf, const C ymf, const C w) {
    const C b = cconj(ymf);
    return csum(csum(yf, b), times_i(cmul(csub(yf, b), cconj(w))));
}

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
    static FMV_DEV double s(int m) {
        return m == 0 ? 0.0 : (m == 1 ? 0.86602540378443864676 : -0.86602540378443864676);
    }
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
// memory (K > 1: one time step of them is one contiguous run per parameter),
// butterfly fastest otherwise (K == 1: a series is contiguous).
template <int S, int LOGS, int nb> FMV_DEV void work_item(int e, int K, int& s, int& j) {
    if (K == 1) {
        s = e / nb;
        j = e - s * nb;
    } else {
        s = e & (S - 1);
        j = e >> LOGS;
    }
}

// Work item e of the inverse's first pass (nb butterflies), whose butterflies
// pair up by the real transform's symmetry: butterfly j needs Y[f] and
// Y[M - f] for f = j + r nb, and M - (j + r nb) = (nb - j) + (R - 1 - r) nb
// are the inputs of butterfly nb - j.  e = sl + S (h + 2 p): series sl,
// butterfly j = p (h = 0) or nb - p (h = 1) for p <= nb / 2, so the two of a
// pair are lanes e and e ^ S of one warp and swap values by shuffles instead
// of a round trip through shared memory.  Butterfly 0's partner lane (p = 0,
// h = 1) only supplies values (first_pass_from_spectrum); butterfly nb / 2
// (even nb) pairs with itself, and one of its two lanes stores it.  `count`
// rounds the items up to whole groups of 64, so that every lane of a warp
// reaches the shuffles: lanes past the end compute butterfly nb / 2 and store
// nothing.
template <int S, int LOGS, int nb> struct PairItem {
    static_assert(S <= 16, "the two lanes of a pair must be in one group of 32");
    static constexpr int count = (2 * S * (nb / 2 + 1) + 63) / 64 * 64;
    int sl, h, p, j;
    FMV_DEV explicit PairItem(int e) : sl(e & (S - 1)), h((e >> LOGS) & 1), p(e >> (LOGS + 1)) {
        const int q = min_(p, nb / 2);
        j = h == 0 ? q : (nb - q) % nb;
    }
    // an item of a series of the block (ns of them)
    FMV_DEV bool valid(int ns) const { return p <= nb / 2 && sl < ns; }
    // the lane that stores butterfly j
    FMV_DEV bool owner(int ns) const { return valid(ns) && (h == 0 || (j != 0 && 2 * j != nb)); }
};

// The twiddles of butterfly k of a pass (NS = product of the earlier
// radices: w^r, w = exp(-2 pi i k / (NS R)), is entry k of row r - 1 of NS in
// twp), then its DFT.  Only w and w^H (H = (R + 1) / 2) are loaded; the other
// powers are products of at most three of them: twiddle loads were most of
// these kernels' L1 traffic after the shared-memory passes.
template <typename C> struct Twiddles {
    C w1, wH;
};
template <int R, int NS, typename C> FMV_DEV Twiddles<C> load_twiddles(const C* __restrict__ twp, int k) {
    Twiddles<C> t{};
    if constexpr (NS > 1 && R > 1) {
        constexpr int H = (R + 1) / 2;
        const C* tw = twp + (NS - 1) + k;
        t.w1 = FMV_LDG(tw);
        if constexpr (H > 1) t.wH = FMV_LDG(tw + (H - 1) * NS);
    }
    return t;
}
template <int R, int DIR, int NS, typename C> FMV_DEV void twiddle_dft(C* v, const Twiddles<C>& t) {
    if constexpr (NS > 1 && R > 1) {
        constexpr int H = (R + 1) / 2;
        C w[R];
        w[1] = t.w1;
        if (H > 1) w[H] = t.wH;
#pragma unroll
        for (int r = 2; r < R; ++r) {
            if (r < H) w[r] = cmul(w[r / 2], w[r - r / 2]);
            else if (r > H) w[r] = cmul(w[H], w[r - H]);
        }
#pragma unroll
        for (int r = 1; r < R; ++r) v[r] = cmul(v[r], DIR < 0 ? w[r] : cconj(w[r]));
    }
    Dft<R, DIR>::run(v);
}
template <int R, int DIR, int NS, typename C> FMV_DEV void twiddle_dft(C* v, const C* __restrict__ twp, int k) {
    twiddle_dft<R, DIR, NS>(v, load_twiddles<R, NS>(twp, k));
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

// Butterfly e of a Stockham pass of radix R over S series of length M (row
// stride Row::ld; NS = product of the radices of the earlier passes): series
// s, position j, twiddle index k.  It reads R values nb = M / R apart and
// writes them NS apart.
template <int R, int M, int NS, int S, typename C> struct Butterfly {
    static constexpr int nb = M / R, ld = Row<M, S, C>::ld;
    int s, j, k;
    FMV_DEV explicit Butterfly(int e) : s(e / nb), j(e - s * nb), k(j % NS) {}  // (members in this order)
    FMV_DEV void load(const C* in, C* v) const {
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = in[s * ld + j + r * nb];
    }
    FMV_DEV void store(C* out, const C* v) const {
#pragma unroll
        for (int r = 0; r < R; ++r) out[s * ld + (j - k) * R + k + r * NS] = v[r];
    }
};

// The twiddles of a Stockham pass's butterfly threadIdx.x (the first of the
// thread's), loaded before the barrier in front of the pass: every block of a
// wave misses the tables in the L1 at once, so each pass would otherwise
// start with a round trip to the L2 (benchmarks/results/
// h200-ncu-fwd-dssdd-mid-sass-stop36.csv).  The forward transforms of the
// middle size took 5.94 and 5.09 us against 6.28 and 5.32, of 80 000 series
// 774 and 550 us against 802 and 564 (h200-fft-ab-twiddles-forward-stop36-b.jsonl).
template <int R, int M, int NS, int S, typename C> FMV_DEV Twiddles<C> first_twiddles(const C* __restrict__ twp) {
    typedef Butterfly<R, M, NS, S, C> Item;
    return (int)threadIdx.x < S * Item::nb ? load_twiddles<R, NS>(twp, Item(threadIdx.x).k) : Twiddles<C>{};
}

// One Stockham pass of radix R from `in` to `out`.  `ahead`, where given,
// holds the twiddles of the thread's first butterfly, loaded before the
// barrier in front of the pass (first_twiddles); otherwise every butterfly
// loads its own.  With IP (in place: `in` and `out` are one buffer) each
// thread has at most one butterfly (S nb <= NT): it reads its values, the
// block synchronises, then it writes them.  All sizes are compile-time
// constants, so the index arithmetic has no divisions and the loops unroll.
template <int R, int DIR, int M, int NS, int S, int NT, int IP, typename C>
FMV_DEV void stockham_pass(const C* in, C* out, const C* __restrict__ twp, const Twiddles<C>* ahead = nullptr) {
    typedef Butterfly<R, M, NS, S, C> Item;
    constexpr int items = S * Item::nb;
    if constexpr (IP) {
        static_assert(items <= NT, "in place: one butterfly per thread");
        const int e = threadIdx.x;
        const Item b(e);
        C v[R];
        if (e < items) b.load(in, v);
        __syncthreads();
        if (e < items) {
            twiddle_dft<R, DIR, NS>(v, ahead ? *ahead : load_twiddles<R, NS>(twp, b.k));
            b.store(out, v);
        }
    } else {
        int e0 = threadIdx.x;
        if (ahead) {
            if (e0 < items) {
                const Item b(e0);
                C v[R];
                b.load(in, v);
                twiddle_dft<R, DIR, NS>(v, *ahead);
                b.store(out, v);
            }
            e0 += NT;
        }
        constexpr int unroll = R * sizeof(C) > 64 ? 1 : 2;  // two butterflies of 10 complex128 spill (64 registers)
#pragma unroll unroll
        for (int e = e0; e < items; e += NT) {
            const Item b(e);
            C v[R];
            b.load(in, v);
            twiddle_dft<R, DIR, NS>(v, twp, b.k);
            b.store(out, v);
        }
    }
}

// Whether the passes of radices Rs over S series of length M can run in one
// buffer: at most one butterfly per thread (NT) in each (the same rule as
// fused_in_place in backend/gpu.py).  In place costs a synchronisation per pass
// and registers; it pays where shared memory limits the blocks per
// multiprocessor and there are many waves of blocks (GPUBackend._fused_config).
template <int M, int S, int NT, int... Rs> struct InPlace {
    static constexpr bool value = ((S * (M / Rs) <= NT) && ... && true);
};

template <typename T> struct pair_of;
template <> struct pair_of<float> { typedef float2 type; };
template <> struct pair_of<double> { typedef double2 type; };

// Series b of the (n, M, K) array x is x[p, :, k] with b = p K + k: its
// sample t is at ((p M + t) K + k).  The S series of a block are b = s0 ..
// s0 + S - 1, which may belong to more than one p.
FMV_DEV index_t series_base(int b, int K, int M) { return (index_t)(b / K) * M * K + b % K; }

// The series of work items e, e + NT, ... of a pass over K > 1 (series
// fastest, work_item): the same for all of them, as NT is a multiple of S.
template <int S> FMV_DEV index_t thread_series_base(int s0, int K, int M) {
    return series_base(s0 + (threadIdx.x & (S - 1)), K, M);
}

// Samples 2m and 2m + 1 go as one pair (one 2 * sizeof(T) access) when the
// series are contiguous (K == 1), M is even and x is aligned to a pair (a
// caller's view may not be).
template <int M, typename T> FMV_DEV bool pairs_aligned(const T* x, int K) {
    return M % 2 == 0 && K == 1 && reinterpret_cast<unsigned long long>(x) % (2 * sizeof(T)) == 0;
}

// A sample of x: from global memory through the read-only path (GLOBAL),
// else from the staging buffer in shared memory.
template <bool GLOBAL, typename T> FMV_DEV T load_sample(const T* p) {
    if constexpr (GLOBAL)
        return FMV_LDG(p);
    else
        return *p;
}

// The first pass of the forward transform (NS = 1), from x in global memory
// (GLOBAL) or staged in shared memory: butterfly j of series s takes
// z[j + r nb] = x[2 (j + r nb)] + i x[2 (j + r nb) + 1] for r < R, zero from
// sample M on; the r whose samples are all padding (2 r nb >= M) are zero at
// compile time and never loaded.
template <int R, int M, int S, int LOGS, int NT, bool GLOBAL, typename TI, typename C>
FMV_DEV void first_pass_from_samples(const TI* __restrict__ x, int s0, int ns, int K, C* out) {
    typedef typename real_of<C>::type TR;
    typedef typename pair_of<TI>::type TP;
    constexpr int nb = M / R, ld = Row<M, S, C>::ld;
    const bool pairs = pairs_aligned<M>(x, K);
    const TI* xk = x + thread_series_base<S>(s0, K, M);
#pragma unroll 1
    for (int e = threadIdx.x; e < S * nb; e += NT) {
        int s, j;
        work_item<S, LOGS, nb>(e, K, s, j);
        const TI* xs = K == 1 ? x + (index_t)(s0 + s) * M : xk;
        C v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int t = 2 * (j + r * nb);
            v[r] = czero<C>();
            if (2 * r * nb >= M || s >= ns) continue;
            if (2 * (r + 1) * nb <= M) {  // both samples of every j are data
                if (pairs) {
                    const TP p = load_sample<GLOBAL>(reinterpret_cast<const TP*>(xs + t));
                    v[r] = cmake<C>((TR)p.x, (TR)p.y);
                } else {
                    v[r] = cmake<C>((TR)load_sample<GLOBAL>(xs + (index_t)t * K),
                                    (TR)load_sample<GLOBAL>(xs + (index_t)(t + 1) * K));
                }
            } else {
                if (t < M) v[r].x = (TR)load_sample<GLOBAL>(xs + (index_t)t * K);
                if (t + 1 < M) v[r].y = (TR)load_sample<GLOBAL>(xs + (index_t)(t + 1) * K);
            }
        }
        twiddle_dft<R, -1, 1>(v, (const C*)nullptr, 0);
        C* dst = out + s * ld + j * R;
#pragma unroll
        for (int r = 0; r < R; ++r) dst[r] = v[r];
    }
}

// The n samples from src (global memory) to dst (shared memory), copied
// asynchronously by the block's NT threads (cp_async; the caller commits and
// waits): in 16-byte pieces where src and n allow, else one sample a copy.
template <int NT, typename T> FMV_DEV void stage_samples(T* dst, const T* __restrict__ src, int n) {
    if (reinterpret_cast<unsigned long long>(src) % 16 == 0 && (n * sizeof(T)) % 16 == 0) {
        char* d = reinterpret_cast<char*>(dst);
        const char* g = reinterpret_cast<const char*>(src);
        for (int i = threadIdx.x; i < (int)(n * sizeof(T) / 16); i += NT) cp_async<16>(d + 16 * i, g + 16 * i, true);
    } else {
        for (int i = threadIdx.x; i < n; i += NT) cp_async<(int)sizeof(T)>(dst + i, src + i, true);
    }
}

// The first pass of the inverse transform (NS = 1) with the pre-processing
// (complex_sample), from Y[f * B + s] (Yb = Y + s0), f <= M.  As numpy.fft,
// the imaginary parts of Y[0] and Y[M] are ignored.
template <int R, int M, int S, int LOGS, int NT, typename TI, typename C>
FMV_DEV void first_pass_from_spectrum(const TI* __restrict__ Yb, const C* __restrict__ twl, int ns, int B, C* out) {
    constexpr int nb = M / R, ld = Row<M, S, C>::ld;
#pragma unroll 1
    for (int e = threadIdx.x; e < PairItem<S, LOGS, nb>::count; e += NT) {
        const PairItem<S, LOGS, nb> it(e);
        const bool valid = it.valid(ns);
        // butterfly 0's partner lane loads Y[nb + r nb] (j = nb), so its values are Y[M - r nb] for lane 0 as
        // well: Y[0] of one lane and Y[M] of the other are the only values whose imaginary part is dropped
        const int jl = it.j == 0 && it.h == 1 ? nb : it.j;
        const TI* Ys = Yb + it.sl;
        C v[R];
#pragma unroll
        // (the address outside the select: the compiler then predicates the loads alone; the inverse of 5000
        // series took 2.3-5.7% less device time with one and with 16 right-hand sides, 1-3% at the middle
        // size, 0.2 us more for 100 series: benchmarks/results/h200-fft-ab-loadptr{,-b}-stop57.jsonl)
        for (int r = 0; r < R; ++r) {
            const TI* p = Ys + (index_t)(jl + r * nb) * B;
            v[r] = valid ? cload<C>(p) : czero<C>();
        }
        if (jl == 0) v[0].y = 0;
        if (jl == nb) v[R - 1].y = 0;
        const C wj = FMV_LDG(twl + it.j);  // W^f = W^j W^(r nb): the second factor is the same for all lanes
        // z[f] needs Y[M - f], f = j + r nb: the partner's value R - 1 - r.  Values r and R - 1 - r go
        // together, so that z replaces Y in place.
#pragma unroll
        for (int r = 0; r <= (R - 1) / 2; ++r) {
            const int q = R - 1 - r;
            const C theirs_q = cshfl_xor(v[q], S), theirs_r = cshfl_xor(v[r], S);
            const C zr = complex_sample(v[r], theirs_q, cmul(wj, FMV_LDG(twl + r * nb)));
            if (q != r) v[q] = complex_sample(v[q], theirs_r, cmul(wj, FMV_LDG(twl + q * nb)));
            v[r] = zr;
        }
        twiddle_dft<R, 1, 1>(v, (const C*)nullptr, 0);
        if (!it.owner(ns)) continue;
        C* dst = out + it.sl * ld + it.j * R;
#pragma unroll
        for (int r = 0; r < R; ++r) dst[r] = v[r];
    }
}

// The last pass of the inverse transform (NS R = M), to global memory:
// butterfly k of series s gives z[m] = (y[2m], y[2m+1]), m = k + r NS, of
// which the samples below M are scaled, cast and stored.
template <int R, int M, int S, int LOGS, int NT, typename TO, typename C>
FMV_DEV void last_pass_to_global(const C* in, const C* __restrict__ twp, TO* y, int s0, int ns, int K,
                                 typename real_of<C>::type scale) {
    constexpr int NS = M / R, ld = Row<M, S, C>::ld;
    const bool pairs = pairs_aligned<M>(y, K);
    TO* yk = y + thread_series_base<S>(s0, K, M);
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
        TO* ys = K == 1 ? y + (index_t)(s0 + s) * M : yk;
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

// The passes of radices Rs... from NS on, ping-ponging between the two
// buffers (or in one, IP: the kernels then pass the same buffer as both);
// `last` runs the last one, fused with what follows it.
template <int DIR, int M, int NS, int S, int NT, int IP, typename C, int... Rs> struct Passes;
template <int DIR, int M, int NS, int S, int NT, int IP, typename C, int R> struct Passes<DIR, M, NS, S, NT, IP, C, R> {
    template <typename Last> static FMV_DEV void run(C* in, C* out, const C* twp, const Last& last) {
        if constexpr (DIR < 0) {  // (as in the passes before it)
            const Twiddles<C> first = last.template ahead<R>(twp);
            __syncthreads();
            last.template run<R>(in, out, twp, first);
        } else {
            __syncthreads();
            last.template run<R>(in, out, twp);
        }
    }
};
template <int DIR, int M, int NS, int S, int NT, int IP, typename C, int R, int R2, int... Rest>
struct Passes<DIR, M, NS, S, NT, IP, C, R, R2, Rest...> {
    template <typename Last> static FMV_DEV void run(C* in, C* out, const C* twp, const Last& last) {
        // The forward loads its twiddles before the barrier; the inverse measured slower that way (a few tenths
        // of a microsecond a transform, benchmarks/results/h200-fft-ab-twiddles-ahead-stop36.jsonl).
        if constexpr (DIR < 0) {
            const Twiddles<C> first = first_twiddles<R, M, NS, S>(twp);
            __syncthreads();
            stockham_pass<R, DIR, M, NS, S, NT, IP>(in, out, twp, &first);
        } else {
            __syncthreads();
            stockham_pass<R, DIR, M, NS, S, NT, IP>(in, out, twp);
        }
        Passes<DIR, M, NS * R, S, NT, IP, C, R2, Rest...>::run(out, in, twp, last);
    }
};

// The first radix of a transform (its pass reads global memory) and the
// passes after it.  With one radix (or none: M = 1) a radix-1 pass follows,
// which only carries the last step.
template <int... Rs> struct Split;
template <int R> struct Split<R> {
    static constexpr int first = R;
    template <int DIR, int M, int S, int NT, int IP, typename C> using rest = Passes<DIR, M, R, S, NT, IP, C, 1>;
};
template <int R, int R2, int... Rest> struct Split<R, R2, Rest...> {
    static constexpr int first = R;
    template <int DIR, int M, int S, int NT, int IP, typename C>
    using rest = Passes<DIR, M, R, S, NT, IP, C, R2, Rest...>;
};
template <> struct Split<> : Split<1> {};

// The forward's last step: its last Stockham pass (NS R = M), then the
// post-processing X[f] = E + W^f O from Z[f] and Z[M - f] in shared memory,
// stored to X[f * B + s] (Xb = X + s0).  (The inverse's pairing of butterflies
// by shuffles, done here, was slower: benchmarks/results/h200-fft-pairs-ab.jsonl.)
template <int M, int S, int LOGS, int NT, int IP, typename C, typename TO> struct ToSpectrum {
    const C* __restrict__ twl;
    TO* __restrict__ Xb;
    int ns, B, keep;
    static constexpr int items = (M / 2 + 1) * S;
    // the last pass's first twiddles, loaded before the barrier in front of it (first_twiddles)
    template <int R> FMV_DEV Twiddles<C> ahead(const C* __restrict__ twp) const {
        return first_twiddles<R, M, M / R, S>(twp);
    }
    template <int R> FMV_DEV void run(const C* in, C* out, const C* __restrict__ twp, const Twiddles<C>& first) const {
        constexpr int ld = Row<M, S, C>::ld;
        const C* Z = in;
        if constexpr (R > 1) stockham_pass<R, -1, M, M / R, S, NT, IP>(in, out, twp, &first);
        // W^f of an item is loaded one item ahead, the first before the barrier; W^(M - f) = -conj(W^f)
        // (L = 2 M), so an item loads one twiddle for its two frequencies: 5000 x 16 series in complex128
        // took 705.8 and 707.1 us against 741.7 (benchmarks/results/h200-fft-ab-{wmf,twiddles}-stop51.jsonl)
        C wf = czero<C>();
        if ((int)threadIdx.x < items) wf = FMV_LDG(twl + (threadIdx.x >> LOGS));
        if constexpr (R > 1) {  // (not the radix-1 pass of a one-radix transform)
            __syncthreads();
            Z = out;
        }
        // X[f] and X[M - f] need the same Z[f] and Z[M - f]: one item computes both (X[M] with X[0])
#pragma unroll 2
        for (int e = threadIdx.x; e < items; e += NT) {
            const int f = e >> LOGS, sl = e & (S - 1);
            C wfn = wf;
            if (items > NT && e + NT < items) wfn = FMV_LDG(twl + ((e + NT) >> LOGS));
            if (sl < ns) {
                const C zf = Z[sl * ld + f], zmf = Z[sl * ld + (f == 0 ? 0 : M - f)];
                const C wmf = cmake<C>(-wf.x, wf.y);
                st_keep(Xb + (index_t)f * B + sl, ccast<TO>(real_spectrum(zf, zmf, wf)), keep);
                if (2 * f != M) st_keep(Xb + (index_t)(M - f) * B + sl, ccast<TO>(real_spectrum(zmf, zf, wmf)), keep);
            }
            wf = wfn;
        }
    }
};

// The inverse's last step: last_pass_to_global.
template <int M, int S, int LOGS, int NT, typename C, typename TO> struct ToSamples {
    TO* __restrict__ y;
    int s0, ns, K;
    typename real_of<C>::type scale;
    template <int R> FMV_DEV void run(const C* in, C*, const C* __restrict__ twp) const {
        last_pass_to_global<R, M, S, LOGS, NT>(in, twp, y, s0, ns, K, scale);
    }
};

// Where rfft_pad's staging buffer starts in the dynamic shared memory, in
// 16-byte units: after the transform's one or two buffers (IP) of S rows,
// rounded up so that the 16-byte copies are aligned (the rule that
// GPUBackend._fused_transform sizes the shared memory by).
template <int M, int S, int IP, typename C> struct StagingOffset {
    static constexpr int value = ((IP ? 1 : 2) * S * Row<M, S, C>::ld * (int)sizeof(C) + 15) / 16;
};

// Blocks of NT threads per multiprocessor that the register budget is set for,
// for THREADS resident threads.
template <int THREADS, int NT> constexpr int blocks_of() { return THREADS / NT > 0 ? THREADS / NT : 1; }

}  // namespace fmv

// Stages 1-2: X[f * B + s] = sum_{t < M} x_s[t] exp(-2 pi i f t / L), f = 0..M (TI -> TC arithmetic -> TO);
// with `keep`, X is stored at evict-last priority in the L2 (fmv::st_keep).
// In complex64 the register budget is set for 1536 threads (42 registers), so that three blocks of 512 share a
// multiprocessor (two by registers at 48): the big size's forward transform from float64 took 38.8 against
// 43.4 us, 540 against 660 us with K = 16 (benchmarks/results/h200-fft-ab-c64regs-stop21.jsonl; the inverse
// gained nothing that way, h200-fft-ab-regs-stop21.jsonl, and keeps 1024).
// STAGED (K = 1 only): as many blocks as fit at once, each looping over groups of S series; a group's samples are
// copied into a staging buffer in shared memory behind the transform's buffers (StagingOffset) while the block
// transforms the group before it.  Kept where the samples are wider than the transform's reals (float64 into
// complex64): the big size's 5000 series took 34.6-35.1 against 40.8-41.5 us; from float32, in complex128 and
// with K = 16 the loop gained nothing or lost (benchmarks/results/h200-fft-ab-staged-stop27.jsonl,
// h200-probe-fftsweep-staged-stop27.jsonl; docs/gpu-kernels.md, stop 27).
template <typename TI, typename TC, typename TO, int LOGS, int NT, int IP, int STAGED, int M, int... Rs>
__global__ void __launch_bounds__(NT, fmv::blocks_of<sizeof(TC) == 8 ? 1536 : 1024, NT>())
    rfft_pad(const TI* __restrict__ x, TO* __restrict__ X, const TC* __restrict__ twp, const TC* __restrict__ twl,
             int B, int K, int keep) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    constexpr int S = 1 << LOGS, ld = fmv::Row<M, S, TC>::ld;
    typedef fmv::Split<Rs...> Radices;
    typedef typename Radices::template rest<-1, M, S, NT, IP, TC> Later;
    typedef fmv::ToSpectrum<M, S, LOGS, NT, IP, TC, TO> Last;
    extern __shared__ double2 fmv_smem[];  // 16-byte aligned
    static_assert(!IP || fmv::InPlace<M, S, NT, Rs...>::value, "in place needs one butterfly per thread and pass");
    TC* buf0 = reinterpret_cast<TC*>(fmv_smem);
    TC* buf1 = IP ? buf0 : buf0 + S * ld;
    if constexpr (STAGED) {
        TI* stg = reinterpret_cast<TI*>(fmv_smem + fmv::StagingOffset<M, S, IP, TC>::value);
        const int groups = (B + S - 1) / S;
        for (int g = blockIdx.x; g < groups + (int)gridDim.x; g += gridDim.x) {
            // the samples of group g - gridDim.x are in stg: transform them, then stage group g's
            const int prev = g - (int)gridDim.x, s0 = prev * S;
            if (prev >= 0) {
                fmv::cp_async_wait<0>();
                __syncthreads();
                fmv::first_pass_from_samples<Radices::first, M, S, LOGS, NT, false>(stg, 0, fmv::min_(S, B - s0), 1,
                                                                                     buf0);
                __syncthreads();
            }
            if (g < groups) fmv::stage_samples<NT>(stg, x + (fmv::index_t)g * S * M, fmv::min_(S, B - g * S) * M);
            fmv::cp_async_commit();
            if (prev >= 0) Later::run(buf0, buf1, twp, Last{twl, X + s0, fmv::min_(S, B - s0), B, keep});
        }
    } else {
        const int s0 = blockIdx.x * S;
        const int ns = fmv::min_(S, B - s0);
        fmv::first_pass_from_samples<Radices::first, M, S, LOGS, NT, true>(x, s0, ns, K, buf0);
        Later::run(buf0, buf1, twp, Last{twl, X + s0, ns, B, keep});
    }
}

// Stages 4-5: y_s[t] = scale * sum_f' Y[f * B + s] exp(2 pi i f t / L), t < M = Nt (Hermitian extension of
// f = 0..M, TI -> TC arithmetic -> TO).  With `tiled` (K = 1), Y is laid out in tiles of S series instead
// (fmv::spectrum_index with tile = S): a block's spectra are one contiguous run, and with `release` the block
// drops that run from the L2 once it has read it (fmv::discard_l2): the big ddssd adjoint took 971.3-971.8
// against 980.7-980.9 us back to back (benchmarks/results/h200-launch-ab-release-stop35.jsonl).
// With drop_bytes > 0 the blocks first drop the drop_bytes at `drop` from the L2 (the forward's input spectra,
// which the product before has read: GPUTransforms.irfft_unpad).
// In complex128 the register budget is set for 768 threads: shared memory holds three blocks of 256 threads at
// the big size (two rows of 1008 values for each of two series), and the first pass's butterfly of radix 10
// with its partner's values needs more than the 64 registers of 1024.
template <typename TI, typename TC, typename TO, int LOGS, int NT, int IP, int M, int... Rs>
__global__ void __launch_bounds__(NT, fmv::blocks_of<sizeof(TC) == 16 ? 768 : 1024, NT>())
    irfft_unpad(const TI* __restrict__ Y, TO* __restrict__ y, const TC* __restrict__ twp, const TC* __restrict__ twl,
                int B, int K, typename fmv::real_of<TC>::type scale, int tiled, int release,
                const void* __restrict__ drop, fmv::index_t drop_bytes) {
    fmv::let_next_grid_start();
    fmv::wait_for_prior_grids();
    if (drop_bytes > 0)
        fmv::discard_l2(drop, drop_bytes, (fmv::index_t)blockIdx.x * NT + threadIdx.x, (fmv::index_t)gridDim.x * NT);
    constexpr int S = 1 << LOGS, ld = fmv::Row<M, S, TC>::ld;
    typedef fmv::Split<Rs...> Radices;
    extern __shared__ double2 fmv_smem[];
    static_assert(!IP || fmv::InPlace<M, S, NT, Rs...>::value, "in place needs one butterfly per thread and pass");
    TC* buf0 = reinterpret_cast<TC*>(fmv_smem);
    TC* buf1 = IP ? buf0 : buf0 + S * ld;
    const int s0 = blockIdx.x * S;
    const int ns = fmv::min_(S, B - s0);
    const TI* Yb = Y + fmv::spectrum_index(0, s0, M + 1, B, tiled ? S : 0);  // a tile's stride: its series
    fmv::first_pass_from_spectrum<Radices::first, M, S, LOGS, NT>(Yb, twl, ns, tiled ? ns : B, buf0);
    if (release && tiled) {  // every load of the tile has returned once the block has passed the barrier
        __syncthreads();
        fmv::discard_l2(Yb, (fmv::index_t)ns * (M + 1) * sizeof(TI), threadIdx.x, NT);
    }
    Radices::template rest<1, M, S, NT, IP, TC>::run(
        buf0, buf1, twp, fmv::ToSamples<M, S, LOGS, NT, TC, TO>{y, s0, ns, K, scale});
}

#ifdef FFTMATVEC_INSTANTIATE
// A few of the instantiations the Python side asks NVRTC for (by name
// expression), for a standalone `nvcc -c` check: Nt = 1000, 500, 10, 1, 21.
#define FMV_RFFT(TI, TC, TO, ...) \
    template __global__ void rfft_pad<TI, TC, TO, __VA_ARGS__>(const TI*, TO*, const TC*, const TC*, int, int, int);
#define FMV_IRFFT(TI, TC, TO, ...)                                                                                \
    template __global__ void irfft_unpad<TI, TC, TO, __VA_ARGS__>(const TI*, TO*, const TC*, const TC*, int, int, \
                                                                   typename fmv::real_of<TC>::type, int, int,  \
                                                                   const void*, fmv::index_t);
FMV_RFFT(double, double2, double2, 1, 512, 0, 0, 1000, 10, 10, 10)
FMV_RFFT(double, double2, double2, 1, 512, 0, 0, 1000, 5, 5, 5, 8)
FMV_RFFT(double, float2, float2, 2, 256, 0, 1, 500, 4, 5, 5, 5)
FMV_RFFT(float, double2, double2, 3, 64, 0, 0, 10, 2, 5)
FMV_RFFT(double, double2, double2, 0, 32, 0, 0, 1)
FMV_RFFT(double, double2, double2, 1, 256, 1, 0, 1000, 10, 10, 10)
FMV_RFFT(double, float2, float2, 2, 512, 0, 1, 1000, 10, 10, 10)
FMV_IRFFT(double2, double2, double, 1, 512, 0, 1000, 10, 10, 10)
FMV_IRFFT(double2, double2, double, 1, 256, 1, 1000, 10, 10, 10)
FMV_IRFFT(double2, double2, double, 2, 512, 0, 500, 5, 10, 10)
FMV_IRFFT(float2, float2, double, 2, 512, 0, 1000, 10, 10, 10)
FMV_IRFFT(float2, float2, float, 2, 512, 0, 500, 5, 10, 10)
FMV_IRFFT(float2, double2, double, 0, 32, 0, 21, 3, 7)
FMV_IRFFT(float2, float2, float, 2, 256, 0, 500, 4, 5, 5, 5)
#endif
