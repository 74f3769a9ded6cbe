#!/usr/bin/env bash
# The H200 device checks and benchmarks of the open issues, in one device call each.
#
# Here (the development machine), from the repository root:
#     scripts/h200-stage.sh          # builds .device/ (xpu, the gpu and vulkan test binaries)
# then on the device machine (the `run` tool, carrying .device and .gl):
#     bash scripts/h200.sh check     # correctness: file tests, hostile corpus, UB, faults, tests
#     bash scripts/h200.sh bench     # the ratio tables against the peers measured in the run
#
# Sections: check, bench, tune, faults, bundles, tests, record, launch, plot, fuzz, vkfuzz, vk_f32 (any
# order).
#
# Every step runs under `timeout` with its log in $OUT/<step>.log; $OUT/summary.txt gets one
# line per step (exit status, seconds, the log's last line) and is printed last.
set -u
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
source .device/env.sh >/dev/null 2>&1
X=$PWD/.device/xpu
SUMMARY=$OUT/summary.txt

# The test binaries name their files by the path they were built in (CARGO_MANIFEST_DIR).
if [ -f .device/manifest_dir ]; then
  built_in=$(cat .device/manifest_dir)
  [ -e "$built_in" ] || { mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; }
fi
# ... and run the CLI where cargo put it (CARGO_BIN_EXE_xpu).
mkdir -p target/release && ln -sf "$X" target/release/xpu
for t in gpu vulkan; do
  [ -f .device/test-$t.gz ] && gunzip -kf .device/test-$t.gz && chmod +x .device/test-$t
done

step() {
  local name=$1 limit=$2
  shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '%-22s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(awk "BEGIN{print $t1 - $t0}")" \
    "$(grep -v '^\s*$' "$OUT/$name.log" | tail -1 | cut -c1-150)" >>"$SUMMARY"
}

check() {
  step smi 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv
  step devices 60 "$X" devices --json
  step ft_cuda 240 "$X" run tests/filetests --backend cuda
  step ft_vulkan 240 "$X" run tests/filetests --backend vulkan
  step hostile_cuda 120 "$X" run tests/hostile --backend cuda
  step hostile_vulkan 120 "$X" run tests/hostile --backend vulkan
  step ub_cuda 120 "$X" run tests/ub --backend cuda
  step ub_vulkan 120 "$X" run tests/ub --backend vulkan
  faults
  step ft_cuda_deferred 240 env CAJETA_XPU_DEFER=all "$X" run tests/filetests --backend cuda
  bundles
  tests
}

faults() {
  step faults_cuda 60 "$X" run tests/gpu_faults --backend cuda --ub-traps off
  step fault_repl_cuda 60 "$X" repl --backend cuda <scripts/h200-fault.repl
}

# Bundles built on the development machine (scripts/h200-stage.sh), run here: the CUDA code is
# the bundle's (0 lowered), the Vulkan code is lowered again where the capability key differs.
bundles() {
  for b in .device/bundles/*.xpub; do
    [ -e "$b" ] || continue
    local n src
    n=$(basename "$b" .xpub)
    src=$(ls examples/"$n".xk tests/filetests/*/"$n".xk 2>/dev/null | head -1)
    for backend in cuda vulkan; do
      step "bundle_${n}_$backend" 60 "$X" run "$src" --bundle "$b" --backend "$backend"
    done
  done
}

# The profiler's and the recorder's cost against the same launches uncaptured (issue 18).
record() {
  if [ -f .device/bench-record.gz ]; then
    gunzip -kf .device/bench-record.gz && chmod +x .device/bench-record
    for b in cuda vulkan; do
      step "record_cost_$b" 200 .device/bench-record --backend "$b" --launches 100000 --rounds 5
    done
  fi
}

# The differential fuzzer's corpus (dumped here: `XPU_FUZZ_DUMP=.device/fuzz XPU_FUZZ_CASES=N
# cargo test --release --test cpu -- --ignored dump_fuzz_corpus`), each case against the
# interpreter, on CUDA and the NVIDIA Vulkan driver.
fuzz() {
  [ -d .device/fuzz5 ] && step fuzz5_vulkan 60 "$X" run .device/fuzz5 --backend vulkan
  [ -d .device/fuzz ] || return 0
  step fuzz_cuda 300 "$X" run .device/fuzz --backend cuda
  step fuzz_vulkan 300 "$X" run .device/fuzz --backend vulkan
}

# The GEMM family on Vulkan with f32 arithmetic in f32 (the NVIDIA driver's default computes
# f32 + - * in f64, to keep subnormals the driver flushes), against the default.
vk_f32() {
  step tune_vulkan_f32 200 env CAJETA_XPU_VK_F32_IN_F64=0 "$X" tune examples/gemm_family.xk \
    --family gemm --problem 2048x2048x2048 --store "$OUT/store-f32" --backend vulkan --exhaustive 5
}

tests() {
  [ -x .device/test-gpu ] && step test_gpu 240 .device/test-gpu --test-threads 2
  [ -x .device/test-vulkan ] && step test_vulkan 240 .device/test-vulkan --test-threads 2
}

bench() {
  step bench_cuda_peers 300 python3 benches/peers/cuda/bench.py --xpu "$X"
  step graph_peer 120 python3 benches/peers/cuda/graph_peer.py --xpu "$X"
  step bench_vulkan 200 "$X" bench vulkan
  step bench_cpu 200 "$X" bench cpu
  step bench_launch 120 "$X" bench cuda --launch-only
  step bench_plot 300 "$X" bench all --plot "$OUT/roofline-h200.svg"
  step first_result_cold 120 "$X" bench first-result --on interp,cpu,cuda --kernels 200 --offset 7000
  step first_result_warm 120 "$X" bench first-result --on interp,cpu,cuda --kernels 200 --offset 7000
}

tune() {
  for b in cuda vulkan; do
    step "tune_$b" 200 "$X" tune examples/gemm_family.xk --family gemm --problem 2048x2048x2048 \
      --store "$OUT/store" --backend "$b" --exhaustive 20
    step "tune_${b}_again" 60 "$X" tune examples/gemm_family.xk --family gemm \
      --problem 2048x2048x2048 --store "$OUT/store" --backend "$b"
  done
  step calibrate_cuda 120 "$X" calibrate --backend cuda
  step calibrate_vulkan 120 "$X" calibrate --backend vulkan
  step devices_calibrated 60 "$X" devices
  step profile_cuda 120 "$X" profile --out "$OUT/trace-cuda.json" -- "$X" run tests/filetests/linalg --backend cuda
  step profile_vulkan 120 "$X" profile --out "$OUT/trace-vulkan.json" -- "$X" run tests/filetests/linalg --backend vulkan
  step record_cuda 120 env CAJETA_XPU_RECORD="$OUT/records" "$X" run tests/filetests/ports --backend cuda
  step conform_cuda 120 "$X" conform "$OUT/records"
}

for what in "${@:-check}"; do
  case $what in
    check) check ;;
    bench) bench ;;
    tune) tune ;;
    faults) faults ;;
    bundles) bundles ;;
    tests) tests ;;
    record) record ;;
    fuzz) fuzz ;;
    vkfuzz)
      [ -d .device/fuzz5 ] && step fuzz5_vulkan 60 "$X" run .device/fuzz5 --backend vulkan
      step ft_vulkan 240 "$X" run tests/filetests --backend vulkan
      step fuzz_vulkan 300 "$X" run .device/fuzz --backend vulkan
      ;;
    vk_f32) vk_f32 ;;
    launch) step bench_launch 120 "$X" bench cuda --launch-only ;;
    plot) step bench_plot 300 "$X" bench all --plot "$OUT/roofline-h200.svg" ;;
    *) echo "unknown section $what (check, bench, tune, faults, bundles, tests, record, launch, plot, fuzz, vkfuzz, vk_f32)" >&2 ;;
  esac
done
# Few files come back from a device call: the logs travel as one archive beside the summary.
tar -C "$OUT" -czf /tmp/h200-logs.tgz . && find "$OUT" -mindepth 1 ! -name summary.txt -delete &&
  mv /tmp/h200-logs.tgz "$OUT/"
cat "$SUMMARY"
