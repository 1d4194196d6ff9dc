export PYTHONPATH=$PWD/src CUPY_CACHE_DIR=/tmp/cupy-cache
for dt in complex128 complex64; do
timeout 150 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis -k regex:sbgemm_adj -c 1 python3 benchmarks/gemm_run.py 264 100 5000 16 $dt 1 adjoint > $OUT/h200-ncu-sbgemm-adj-staged-$dt-stop33.txt 2>&1; echo ncu rc=$?
grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Block Limit|Stall|L1/TEX Hit|Mem Busy|Max Bandwidth" $OUT/h200-ncu-sbgemm-adj-staged-$dt-stop33.txt | head -40
done
