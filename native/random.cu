// random.cu -- NumPy's PCG64 stream on the device: the doubles that
// numpy.random.Generator(PCG64(...)).random() draws, bit for bit.
//
// PCG64 is a 128-bit linear congruential generator, state <- state * MULT + inc
// (mod 2^128); a draw is the XSL-RR permutation of the new state (the high and
// low halves xor-ed, rotated right by the top six bits), and random() keeps
// its top 53 bits: (draw >> 11) * 2^-53.
//
//   pcg64_uniforms : out[i] = the double of draw offset + i, i < n, counted
//                    from the state (state_hi, state_lo) the host read off a
//                    numpy.random.PCG64.
//
// The threads take the draws in turn (thread g: g, g + G, g + 2G, ... for G
// threads in all), so the stores are contiguous across a warp.  A thread jumps
// once to the state of its first draw, by square and multiply over the bits of
// the distance (what PCG64.advance does); after that the host's constants
// (jump_mult, jump_plus), the map of G steps, take it from one of its draws to
// the next in one multiply-add.
// Launch: any 1-D grid; G = gridDim.x * blockDim.x.
#include "fftmatvec_common.cuh"

namespace {

struct u128 {
    unsigned long long hi, lo;
};

FMV_DEV u128 make_u128(unsigned long long hi, unsigned long long lo) {
    u128 r;
    r.hi = hi;
    r.lo = lo;
    return r;
}

// a * b + c mod 2^128
FMV_DEV u128 mul_add(u128 a, u128 b, u128 c) {
    const unsigned long long lo = a.lo * b.lo;
    const unsigned long long hi = __umul64hi(a.lo, b.lo) + a.hi * b.lo + a.lo * b.hi;
    u128 r;
    r.lo = lo + c.lo;
    r.hi = hi + c.hi + (r.lo < lo ? 1ull : 0ull);
    return r;
}

// PCG's default 128-bit multiplier, 0x2360ED051FC65DA44385DF649FCCF645
FMV_DEV u128 pcg_mult() { return make_u128(0x2360ED051FC65DA4ull, 0x4385DF649FCCF645ull); }

// the state `delta` steps after `state` (pcg_advance_lcg_128)
FMV_DEV u128 advance(u128 state, unsigned long long delta, u128 inc) {
    u128 acc_mult = make_u128(0, 1), acc_plus = make_u128(0, 0);
    u128 cur_mult = pcg_mult(), cur_plus = inc;
    const u128 zero = make_u128(0, 0), one = make_u128(0, 1);
    while (delta) {
        if (delta & 1ull) {
            acc_mult = mul_add(acc_mult, cur_mult, zero);
            acc_plus = mul_add(acc_plus, cur_mult, cur_plus);
        }
        cur_plus = mul_add(mul_add(cur_mult, one, one), cur_plus, zero);  // (cur_mult + 1) * cur_plus
        cur_mult = mul_add(cur_mult, cur_mult, zero);
        delta >>= 1;
    }
    return mul_add(acc_mult, state, acc_plus);
}

FMV_DEV double uniform_of(u128 state) {
    const unsigned long long x = state.hi ^ state.lo;
    const unsigned rot = (unsigned)(state.hi >> 58);
    const unsigned long long draw = (x >> rot) | (x << ((64u - rot) & 63u));
    return (double)(draw >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace

__global__ void pcg64_uniforms(double* __restrict__ out, long long n, unsigned long long offset,
                               unsigned long long state_hi, unsigned long long state_lo,
                               unsigned long long inc_hi, unsigned long long inc_lo,
                               unsigned long long jump_mult_hi, unsigned long long jump_mult_lo,
                               unsigned long long jump_plus_hi, unsigned long long jump_plus_lo) {
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long G = (long long)gridDim.x * blockDim.x;
    if (g >= n) return;
    const u128 inc = make_u128(inc_hi, inc_lo);
    const u128 jump_mult = make_u128(jump_mult_hi, jump_mult_lo), jump_plus = make_u128(jump_plus_hi, jump_plus_lo);
    // the state after draw offset + g: offset + g + 1 steps from the host's
    u128 state = advance(make_u128(state_hi, state_lo), offset + (unsigned long long)g + 1ull, inc);
    for (long long i = g; i < n; i += G) {
        out[i] = uniform_of(state);
        state = mul_add(jump_mult, state, jump_plus);
    }
}
