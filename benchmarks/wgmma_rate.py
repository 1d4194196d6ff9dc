"""Throughput of Hopper's warpgroup MMA in TF32 (``wgmma.mma_async``
m64nNk8, A from registers, B from shared memory), the numbers behind the
shapes of stop 19's warpgroup product (docs/gpu-kernels.md, commit
75905d8): cycles per instruction per multiprocessor and
multiply-adds per cycle, for N = 8 .. 64, 1 to 4 independent accumulators
(chains) per warpgroup and 1 or 2 warpgroups per block, one block per
multiprocessor, clocked by ``clock64`` over 2000 instructions per chain.

    python benchmarks/wgmma_rate.py --out benchmarks/results/h200-wgmma-rate.jsonl

Needs compute capability 9.0 (the kernels are built for sm_90a).
"""
from __future__ import annotations

import argparse
import json


def source(N: int, chains: int) -> str:
    """One kernel: each warpgroup runs `chains` accumulators of m64nNk8 products for `iters` rounds."""
    nreg = N // 2  # float32 accumulators per thread
    d_ops = ",".join(f"%{r}" for r in range(nreg))
    a = nreg
    outs = ", ".join(f'"+f"(d[c][{r}])' for r in range(nreg))
    return f"""
extern "C" __global__ void rate(float* out, long long* clocks, int iters) {{
    __shared__ __align__(128) unsigned b[8 * {N}];
    for (int i = threadIdx.x; i < 8 * {N}; i += blockDim.x) b[i] = __float_as_uint(1.0f + (i % 7) * 0.125f);
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
    __syncthreads();
    const unsigned addr = (unsigned)__cvta_generic_to_shared(b);
    const unsigned long long desc = ((addr & 0x3ffffull) >> 4) | (128ull >> 4) << 16 | (256ull >> 4) << 32;
    float d[{chains}][{nreg}];
    for (int c = 0; c < {chains}; ++c)
        for (int r = 0; r < {nreg}; ++r) d[c][r] = 0.f;
    unsigned a[4];
    for (int e = 0; e < 4; ++e) a[e] = __float_as_uint(0.5f + threadIdx.x * 1e-3f + e);
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {{
        asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
        for (int c = 0; c < {chains}; ++c)
            asm volatile("wgmma.mma_async.sync.aligned.m64n{N}k8.f32.tf32.tf32 {{{d_ops}}}, "
                         "{{%{a},%{a + 1},%{a + 2},%{a + 3}}}, %{a + 4}, 1, 1, 1;\\n"
                         : {outs} : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
        asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\\n" ::: "memory");
    }}
    asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
    const long long t1 = clock64();
    float s = 0.f;
    for (int c = 0; c < {chains}; ++c)
        for (int r = 0; r < {nreg}; ++r) s += d[c][r];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON lines appended here")
    ap.add_argument("--iters", type=int, default=2000)
    args = ap.parse_args()

    import cupy as cp
    import numpy as np

    dev = cp.cuda.Device()
    if dev.compute_capability != "90":
        raise SystemExit(f"wgmma needs compute capability 9.0, not {dev.compute_capability}")
    sms = dev.attributes["MultiProcessorCount"]
    with open(args.out, "a") as out:
        for N in (8, 16, 32, 64):
            for chains in (1, 2, 4):
                fn = cp.RawModule(code=source(N, chains), options=("-std=c++17", "-arch=sm_90a")).get_function("rate")
                for groups in (1, 2):
                    res = cp.zeros(sms * 128 * groups, cp.float32)
                    clocks = cp.zeros(sms, cp.int64)
                    for _ in range(2):  # the first launch loads the module
                        fn((sms,), (128 * groups,), (res, clocks, np.int32(args.iters)))
                    cp.cuda.runtime.deviceSynchronize()
                    cycles = float(cp.median(clocks.astype(cp.float64)))
                    n = args.iters * chains * groups  # instructions per multiprocessor
                    rec = dict(what="wgmma-rate", N=N, chains=chains, warpgroups=groups,
                               cycles_per_instruction=cycles / n, mac_per_cycle=n * 64 * N * 8 / cycles,
                               device=cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode())
                    out.write(json.dumps(rec) + "\n")
                    print(f"m64n{N}k8 chains={chains} warpgroups={groups}: {rec['cycles_per_instruction']:6.1f} "
                          f"cycles, {rec['mac_per_cycle']:7.1f} MAC/cycle per multiprocessor")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
