// fftmatvec_common.cuh -- self-contained helpers shared by the native kernels.
//
// Single source for CUDA (nvcc / NVRTC) and HIP (hipcc / hipRTC).  Complex
// numbers are float2 / double2 with explicit .x/.y arithmetic in named
// helpers (cmul, cmul_conj, cmac, cmac_conj): HIP's float2 has an
// element-wise operator* that compiles but is not a complex product.
// No standard-library, thrust or CuPy headers, so that `nvcc -c` checks the
// files without CuPy installed and NVRTC needs no include path.
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_DEVICE_COMPILE__)
#define FMV_HIP 1
#endif

#ifdef FMV_HIP
// 64-wide wavefronts: the kernels only use shuffles inside groups of at most
// 32 lanes (width argument), which behave the same on both.
#define FMV_SHFL_XOR(v, m, w) __shfl_xor((v), (m), (w))
#define FMV_LDG(p) (*(p))
#define FMV_LDCS(p) (*(p))
#else
#define FMV_SHFL_XOR(v, m, w) __shfl_xor_sync(0xffffffffu, (v), (m), (w))
#define FMV_LDG(p) __ldg(p)
// streaming (evict-first) loads for data read exactly once (Fhat)
#define FMV_LDCS(p) __ldcs(p)
#endif

#define FMV_DEV __device__ __forceinline__

namespace fmv {

typedef long long index_t;

template <typename C> struct real_of;
template <> struct real_of<float2> { typedef float type; };
template <> struct real_of<double2> { typedef double type; };
template <> struct real_of<float> { typedef float type; };
template <> struct real_of<double> { typedef double type; };

template <typename C> FMV_DEV C cmake(typename real_of<C>::type re, typename real_of<C>::type im);
template <> FMV_DEV float2 cmake<float2>(float re, float im) {
    float2 r;
    r.x = re;
    r.y = im;
    return r;
}
template <> FMV_DEV double2 cmake<double2>(double re, double im) {
    double2 r;
    r.x = re;
    r.y = im;
    return r;
}

template <typename C> FMV_DEV C czero() { return cmake<C>(0, 0); }

// complex (or real) cast between precisions
template <typename To, typename From> FMV_DEV To ccast(const From& a) {
    typedef typename real_of<To>::type R;
    return cmake<To>(static_cast<R>(a.x), static_cast<R>(a.y));
}
template <typename To, typename From> FMV_DEV To rcast(const From a) { return static_cast<To>(a); }

// a * b
template <typename C> FMV_DEV C cmul(const C a, const C b) {
    return cmake<C>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// conj(a) * b
template <typename C> FMV_DEV C cmul_conj(const C a, const C b) {
    return cmake<C>(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}
// acc += a * b   (four fused multiply-adds)
template <typename C> FMV_DEV void cmac(C& acc, const C a, const C b) {
    acc.x += a.x * b.x;
    acc.x -= a.y * b.y;
    acc.y += a.x * b.y;
    acc.y += a.y * b.x;
}
// acc += conj(a) * b
template <typename C> FMV_DEV void cmac_conj(C& acc, const C a, const C b) {
    acc.x += a.x * b.x;
    acc.x += a.y * b.y;
    acc.y += a.x * b.y;
    acc.y -= a.y * b.x;
}
template <typename C> FMV_DEV void cadd(C& acc, const C a) {
    acc.x += a.x;
    acc.y += a.y;
}

// Load VEC consecutive complex values of type C from p (p aligned to
// VEC * sizeof(C) when VEC == 2): one 16-byte access for float2 pairs and
// for double2.  STREAM selects the evict-first load for read-once data.
template <int VEC, bool STREAM> struct Loader;
template <bool STREAM> struct Loader<1, STREAM> {
    template <typename C> static FMV_DEV void load(const C* p, C* out) {
        out[0] = STREAM ? FMV_LDCS(p) : FMV_LDG(p);
    }
};
template <bool STREAM> struct Loader<2, STREAM> {
    static FMV_DEV void load(const float2* p, float2* out) {
        const float4* q = reinterpret_cast<const float4*>(p);
        float4 v = STREAM ? FMV_LDCS(q) : FMV_LDG(q);
        out[0] = cmake<float2>(v.x, v.y);
        out[1] = cmake<float2>(v.z, v.w);
    }
    static FMV_DEV void load(const double2* p, double2* out) {
        out[0] = STREAM ? FMV_LDCS(p) : FMV_LDG(p);
        out[1] = STREAM ? FMV_LDCS(p + 1) : FMV_LDG(p + 1);
    }
};

// Store v at p; with `keep`, at evict-last priority in the L2 (a cache policy
// made by createpolicy, sm_80 and later): for a result that the next kernel
// reads while a stream of read-once data (Fhat, evict-first) passes through
// the L2.  Without sm_80, and on HIP, a plain store.
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FMV_ST_KEEP(T, PTX, ...)                                                                               \
    FMV_DEV void st_keep(T* p, const T v, bool keep) {                                                         \
        if (!keep) {                                                                                            \
            *p = v;                                                                                             \
            return;                                                                                             \
        }                                                                                                       \
        asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t" \
                     "st.global.L2::cache_hint" PTX ", pol;\n\t}" ::"l"(p), __VA_ARGS__                      \
                     : "memory");                                                                               \
    }
#else
#define FMV_ST_KEEP(T, PTX, ...) \
    FMV_DEV void st_keep(T* p, const T v, bool) { *p = v; }
#endif
FMV_ST_KEEP(float2, ".v2.f32 [%0], {%1, %2}", "f"(v.x), "f"(v.y))
FMV_ST_KEEP(double2, ".v2.f64 [%0], {%1, %2}", "d"(v.x), "d"(v.y))
FMV_ST_KEEP(float4, ".v4.f32 [%0], {%1, %2, %3, %4}", "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w))
#undef FMV_ST_KEEP

// Store VEC consecutive complex values through st_keep (p aligned to
// VEC * sizeof(C) when VEC == 2: one 16-byte store for a float2 pair).
template <int VEC> struct Storer;
template <> struct Storer<1> {
    template <typename C> static FMV_DEV void store(C* p, const C* v, bool keep) { st_keep(p, v[0], keep); }
};
template <> struct Storer<2> {
    static FMV_DEV void store(float2* p, const float2* v, bool keep) {
        st_keep(reinterpret_cast<float4*>(p), make_float4(v[0].x, v[0].y, v[1].x, v[1].y), keep);
    }
    static FMV_DEV void store(double2* p, const double2* v, bool keep) {
        st_keep(p, v[0], keep);
        st_keep(p + 1, v[1], keep);
    }
};

// a value of type From read through the read-only path and cast to To
template <typename To, typename From> FMV_DEV To cload(const From* p) { return ccast<To>(FMV_LDG(p)); }

template <typename T> FMV_DEV T min_(T a, T b) { return a < b ? a : b; }
template <typename T> FMV_DEV T max_(T a, T b) { return a < b ? b : a; }

// Where value (f, s) of a spectrum of n series and nf frequencies lies (one right-hand side): frequency-major,
// f * n + s, or with tile > 0 in tiles of `tile` consecutive series, each all nf frequencies of its series in one
// run (the last tile narrower when tile does not divide n): the layout in which native/fft.cu's inverse reads a
// block's series with one contiguous load per frequency pass.
FMV_DEV index_t spectrum_index(int f, int s, int nf, int n, int tile) {
    if (!tile) return (index_t)f * n + s;
    const int s0 = s - s % tile;
    return (index_t)s0 * nf + (index_t)f * min_(tile, n - s0) + (s - s0);
}

// Programmatic dependent launch (compute capability 9.0 and later; no-ops
// elsewhere and on HIP).  A kernel launched programmatically (backend/launch.py)
// may be scheduled once every block of the kernel before it in the stream has
// called let_next_grid_start(); wait_for_prior_grids() returns once that kernel
// has finished and its writes are visible (at once for a plain launch).  Every
// kernel calls both first, and touches no memory an earlier kernel may write
// before its wait: completion then stays in stream order along a chain of
// programmatic launches.  What a kernel does before its wait (prefetch_l2 of
// data no kernel writes, as Fhat) overlaps the end of the kernel before it.
FMV_DEV void let_next_grid_start() {
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
FMV_DEV void wait_for_prior_grids() {
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// ask the L2 for the 32-byte sector holding p (a hint: nothing waits for it)
FMV_DEV void prefetch_l2(const void* p) {
#ifndef FMV_HIP
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// Drop from the L2, without writing them back, the 128-byte lines that lie wholly in [p, p + bytes): lines
// first, first + step, ... of them.  Their contents become undefined, so only for scratch that nothing reads
// again; it saves the write-back of lines still dirty in the L2 and frees the room they hold there while the
// next product streams Fhat.  A no-op before compute capability 8.0 and on HIP.
FMV_DEV void discard_l2(const void* p, index_t bytes, index_t first, index_t step) {
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned long long begin = ((unsigned long long)p + 127) & ~127ull;
    const unsigned long long end = ((unsigned long long)p + (unsigned long long)bytes) & ~127ull;
    for (unsigned long long q = begin + 128ull * (unsigned long long)first; q < end;
         q += 128ull * (unsigned long long)step)
        asm volatile("discard.global.L2 [%0], 128;" ::"l"(q) : "memory");
#endif
}

// Asynchronous copy of BYTES (4, 8 or 16) from global to shared memory
// (cp.async, no register holds them on the way; both addresses aligned to
// BYTES), zero-filled when !valid (src is then not read).  Copies issued
// since the last cp_async_commit() form a group; cp_async_wait<N>() returns
// once at most N of this thread's groups are still in flight, and a
// __syncthreads() after it makes all threads' copies visible.  HIP: a plain
// load and store.
template <int BYTES> FMV_DEV void cp_async(void* dst, const void* src, bool valid) {
#ifdef FMV_HIP
    for (int w = 0; w < BYTES / 4; ++w)
        reinterpret_cast<int*>(dst)[w] = valid ? reinterpret_cast<const int*>(src)[w] : 0;
#else
    unsigned long long sdst;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(sdst) : "l"(dst));
    if (BYTES == 16)  // streamed once: past L1 (.cg takes 16-byte copies only)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)sdst), "l"(src),
                     "r"(valid ? 16 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"((unsigned)sdst), "l"(src), "n"(BYTES),
                     "r"(valid ? BYTES : 0));
#endif
}
FMV_DEV void cp_async_commit() {
#ifndef FMV_HIP
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> FMV_DEV void cp_async_wait() {
#ifndef FMV_HIP
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Shared-memory barriers (mbarrier) that asynchronous copies arrive on (compute capability 9.0, CUDA only: the
// kernels that use them are not launched elsewhere, and elsewhere these compile to nothing).  A barrier's phase
// completes once `count` arrivals were made; mbar_wait(bar, parity) returns once the phase of that parity (0 for
// the first, 1 for the second, ...) has completed, and the writes made before those arrivals are visible then.
#if !defined(FMV_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FMV_MBARRIER 1
#endif
FMV_DEV unsigned smem_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
FMV_DEV void mbar_init(unsigned long long* bar, unsigned count) {
#ifdef FMV_MBARRIER
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
#endif
}
// after the barriers' initialisation, before the __syncthreads() that publishes them to the block
FMV_DEV void mbar_init_fence() {
#ifdef FMV_MBARRIER
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
FMV_DEV void mbar_arrive(unsigned long long* bar) {
#ifdef FMV_MBARRIER
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
#endif
}
// one arrival of this thread at bar, made once every cp_async it issued before has landed
FMV_DEV void cp_async_arrive(unsigned long long* bar) {
#ifdef FMV_MBARRIER
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_address(bar)) : "memory");
#endif
}
// one arrival at bar that announces `bytes` more to land before its phase completes
FMV_DEV void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
#ifdef FMV_MBARRIER
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
#endif
}
// The box at coordinates (c0, c1, c2) of the 3-D tensor map `map` (a CUtensorMap in global memory) into dst
// (aligned as the map's swizzle needs), done by the copy engine; its bytes, zeros outside the tensor included,
// count down bar's transactions.
FMV_DEV void tensor_copy_3d(void* dst, const void* map, int c0, int c1, int c2, unsigned long long* bar) {
#ifdef FMV_MBARRIER
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::
            "r"(smem_address(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_address(bar))
        : "memory");
#endif
}
FMV_DEV void mbar_wait(unsigned long long* bar, unsigned parity) {
#ifdef FMV_MBARRIER
    unsigned done = 0;
    while (!done)
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_address(bar)), "r"(parity)
            : "memory");
#endif
}

}  // namespace fmv
