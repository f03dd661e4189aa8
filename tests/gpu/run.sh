#!/usr/bin/env bash
# The GPU checks of the CUDA backend, in one bounded run on a machine with an NVIDIA GPU (sized
# for one H200: under 8 minutes including the build). CI has no GPU and never runs this.
#
#   1. programs: build-gpu/bundle/ (or build-gpu/bundle.tar.xz) when it exists and was built
#      from these sources (tests/gpu/source_fingerprint.sh; a stale bundle is refused before
#      anything runs) (packed by
#      tests/gpu/package.sh on a machine with the project's Debian packages, for GPU machines
#      that have the driver and CUDA libraries but cannot build the project); otherwise build
#      them here: CMake with
#      -DBMAD_CUDA=ON in build-gpu/ (reused between runs), only the needed targets, -j$(nproc).
#   2. backend consistency: bmad_cuda_backend_test, every op on the GPU against the CPU backend.
#   3. greedy parity with the CPU (and llama.cpp's reference ids) on the models in
#      ../shared/models (or $BMAD_SHARED_MODELS, or the bundle's copies), through the worker's
#      own model in a device arena, and through `bmad generate --backend cuda`.
#   4. benchmarks: decode attention bandwidth, GEMM against cuBLAS, end-to-end decode tokens/s
#      at batch 1, 32 and 256 on a synthesized ~0.9B-parameter F16 Llama, and the whole replica
#      serving that model (`bmad bench serve --backend cuda`, steps overlapped and not, and a
#      sampled workload), and continuous against static batching on a decode-heavy mix.
#   5. with BMAD_GPU_PROFILE=1: each kernel's GPU time over a few decode steps (Nsight Compute).
#
# Results: one Markdown file, $OUT/gpu-results.md ($OUT defaults to build-gpu/results), and the
# full log beside it ($OUT/gpu-log.txt). Every step has its own time limit; a failed step is
# recorded and the rest still run. Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out=${OUT:-$root/build-gpu/results}
mkdir -p "$out"
results=$out/gpu-results.md
log=$out/gpu-log.txt
: >"$log"
start=$(date +%s)
failures=()

say() { printf '==> %s (%ds)\n' "$*" "$(( $(date +%s) - start ))" | tee -a "$log" >&2; }
# step NAME SECONDS COMMAND...: runs with a time limit, appends its stdout to the results and
# its stderr to the log, records a failure.
step() {
  local name=$1 limit=$2
  shift 2
  say "$name"
  local section
  section=$(mktemp)
  timeout --kill-after=10 "$limit" "$@" >"$section" 2>>"$log"
  local rc=$?
  cat "$section" >>"$results"
  rm -f "$section"
  if [ $rc -ne 0 ]; then
    failures+=("$name (exit $rc$([ $rc -eq 124 ] && echo ", timed out after ${limit}s"))")
    printf '\n**%s failed** (exit %d); see gpu-log.txt.\n\n' "$name" "$rc" >>"$results"
  fi
  return 0
}

{
  echo "# bmad GPU checks"
  echo
  echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)."
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 || echo "nvidia-smi failed"
  echo '```'
  echo
} >"$results"

# ---- 1. programs ----
bundle=$root/build-gpu/bundle
if [ -f "$bundle.tar.xz" ] && { [ ! -x "$bundle/bin/bmad_gpu_bench" ] || [ "$bundle.tar.xz" -nt "$bundle" ]; }; then
  say "unpacking build-gpu/bundle.tar.xz"
  rm -rf "$bundle"
  tar -C "$root/build-gpu" -xJf "$bundle.tar.xz"
fi
if [ -x "$bundle/bin/bmad_gpu_bench" ]; then
  # A bundle built from other sources would measure other code: refuse it (rebuild it with
  # tests/gpu/package.sh, or remove it to build here).
  want=$(tests/gpu/source_fingerprint.sh)
  have=$(cat "$bundle/SOURCE_FINGERPRINT" 2>/dev/null || echo none)
  if [ "$want" != "$have" ]; then
    say "the bundle was built from other sources (fingerprint $have, this checkout $want)"
    printf '\n**The prebuilt bundle was built from other sources** (fingerprint %s; this checkout %s). Rebuild it with `tests/gpu/package.sh`. Nothing was run.\n' \
      "$have" "$want" >>"$results"
    cat "$results"
    exit 1
  fi
  say "using the prebuilt bundle in build-gpu/bundle"
  bin=$bundle/bin
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "Programs: prebuilt bundle ($(cat "$bundle/BUILD_INFO" 2>/dev/null || echo 'no build info'))." >>"$results"
else
  say "building with CUDA in build-gpu/"
  jobs=$(nproc)
  if ! timeout 420 bash -c "
      cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBMAD_CUDA=ON -DBMAD_BUILD_BENCH=OFF \
        ${BMAD_CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$BMAD_CUDA_ARCHS} &&
      cmake --build build-gpu -j$jobs --target bmad_gpu_tests" >>"$log" 2>&1; then
    echo "**Build failed**: see gpu-log.txt (a machine without the project's packages needs the bundle from tests/gpu/package.sh)." >>"$results"
    tail -n 30 "$log" >&2
    exit 1
  fi
  bin=$root/build-gpu/bin
  echo "Programs: built here in $(( $(date +%s) - start )) s." >>"$results"
fi
# cuBLAS comes from the machine: the CUDA toolkit, or the pip wheels PyTorch brings.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt.so.13'; then
  for lib in $(find /usr/local /usr/lib /usr/lib64 /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -n 3); do
    export LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}"
  done
fi
for p in "$bin/bmad_gpu_bench" "$bin/bmad_cuda_backend_test" "$bin/bmad"; do
  if ldd "$p" 2>&1 | grep -q 'not found'; then
    echo "**Missing libraries** for $(basename "$p"):" >>"$results"
    ldd "$p" 2>&1 | grep 'not found' | sed 's/^/    /' >>"$results"
    failures+=("libraries of $(basename "$p")")
  fi
done
echo >>"$results"

# ---- 2. backend consistency ----
echo "## Backend consistency (every op, GPU vs CPU backend)" >>"$results"
echo >>"$results"
step "backend consistency" 180 bash -c "
  '$bin/bmad_cuda_backend_test' --gtest_brief=1 2>&1 | tee -a '$log' |
    grep -E '^\[  (PASSED|FAILED) |^\[==========\]|Failure|error|gpu .* cpu|cannot|CUDA backend on' |
    sed 's/^/    /'; exit \${PIPESTATUS[0]}"

# ---- 3. greedy parity ----
models=${BMAD_SHARED_MODELS:-$root/../shared/models}
[ -f "$models/stories260K.gguf" ] || models=$bundle/models
echo "## Greedy parity (CUDA backend vs CPU backend; models from $models)" >>"$results"
echo >>"$results"
step "parity stories260K" 60 "$bin/bmad_gpu_bench" parity --model "$models/stories260K.gguf" \
  --prompt 1,403,407,261,378 --tokens 32 --strict 32 --batch 4 \
  --expected 432,383,286,261,376,298,315,421,395,317,426,338,401,396,267,337,410,408,419,292,411,322,265,282,295,433,426,385,328,432,358,394
# Random weights and n_embd 8: near-ties, so only the first tokens are a strict check (README).
step "parity llama-2-tiny-random" 60 "$bin/bmad_gpu_bench" parity --model "$models/llama-2-tiny-random.gguf" \
  --prompt 1,9038,2501,263,931 --tokens 32 --strict 4 --batch 4 \
  --expected 17196,5211,21440,25431,7455,3285,29710,4660,29509,31364,19741,8021,29710,4660,29509,31364,28253,12321,12681,14340,1189,30070,29182,9645,20945,16138,2451,19209,19982,8317,15492,19741

# The worker's start-up path end to end: `bmad generate --backend cuda` (the backend factory, the
# device arena, LlamaModel in device memory, logits copied out for the sampler) against the CPU.
step "generate --backend cuda, stories260K" 60 bash -c '
  ids() { "$1" generate --backend "$2" --model "$3" --prompt "Once upon a time" --max-tokens 32 \
            --temperature 0 --ids --quiet 2>&1 >/dev/null | tail -n 1; }
  cpu=$(ids "$0" cpu "$1"); gpu=$(ids "$0" cuda "$1")
  printf "bmad generate, greedy ids:\n\n    cpu  %s\n    cuda %s\n\n" "$cpu" "$gpu"
  [ -n "$cpu" ] && [ "$cpu" = "$gpu" ]' "$bin/bmad" "$models/stories260K.gguf"

# ---- 4. benchmarks ----
echo "## Benchmarks" >>"$results"
echo >>"$results"
step "attention bandwidth" 90 "$bin/bmad_gpu_bench" attention
step "gemm" 120 "$bin/bmad_gpu_bench" gemm
synth=${BMAD_GPU_SYNTH_MODEL:-/tmp/bmad-synth-llama-0.9b-f16.gguf}
step "end-to-end decode" 240 "$bin/bmad_gpu_bench" decode --model "$synth" --batch 1,32,256 \
  --prompt-len 128 --gen-len 64
# The whole replica on the GPU (Replica::Create's device arena, the engine, tokens drawn on the
# device), with open-loop load: throughput, latencies, and each step's forward pass against its
# host stages; greedy with step n+1 planned while step n runs (the default on cuda) and
# without, then sampled (temperature 0.8, top-p 0.95: the sampling kernel's bisection path).
step "serving on the GPU (bench serve --backend cuda: overlap on and off, sampled)" 270 bash -c '
  for run in "on" "off" "on --temperature 0.8 --top-p 0.95"; do
    out=$("$0" bench serve --backend cuda --model "$1" --rate 0 --requests 256 --max-seqs 64 \
            --prompt-len 32-512 --output-len 32-128 --overlap $run 2>&1) ||
      { echo "$out" | tail -n 20; exit 1; }
    printf "### Serving (bmad bench serve --backend cuda --overlap %s, 256 requests at once, 0.9B F16)\n\n" "$run"
    echo "$out" | grep -v "^{" | sed "s/^/    /"; echo
    echo "$out" | tail -n 1 | sed "s/^/    /"; echo
  done' "$bin/bmad" "$synth"

# Continuous against static batching at saturation on the decode-heavy mix of docs/benchmarks.md
# (issue 4 measured it on 2 CPU cores, where a step is compute-bound; on a GPU a decode step is
# memory-bound, so a batch's idle slots are what static batching wastes).
step "continuous vs static batching on the GPU" 150 bash -c '
  for sched in continuous static; do
    out=$("$0" bench serve --backend cuda --model "$1" --scheduler $sched --rate 0 --requests 256 \
            --max-seqs 64 --prompt-len 32-290 --output-len 16-660 2>&1) ||
      { echo "$out" | tail -n 20; exit 1; }
    printf "### %s batching (bmad bench serve --backend cuda, 256 requests at once, prompts 32-290, outputs 16-660)\n\n" "$sched"
    echo "$out" | grep -v "^{" | grep -v " INFO " | sed "s/^/    /"; echo
  done' "$bin/bmad" "$synth"

# ---- 5. optional: where a decode step's GPU time goes ----
# BMAD_GPU_PROFILE=1: Nsight Compute's per-kernel GPU time over a few decode steps at batch 1
# and 32 (the launches after the prompt's), to set beside the steps' wall time above.
if [ "${BMAD_GPU_PROFILE:-0}" = "1" ]; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
  echo "## Per-kernel GPU time of decode steps (Nsight Compute)" >>"$results"
  echo >>"$results"
  for batch in 1 32; do
    step "profile decode batch $batch" 150 bash -c '
      "$0" --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
        --launch-skip 400 --launch-count 600 "$1" decode --model "$2" --batch "$3" \
        --prompt-len 128 --gen-len 8 2>&1 | grep -vE "^==PROF==" | sed "s/^/    /"
      exit ${PIPESTATUS[0]}' "${ncu:-ncu}" "$bin/bmad_gpu_bench" "$synth" "$batch"
  done
fi

# ---- summary ----
{
  echo "## Summary"
  echo
  echo "Total time: $(( $(date +%s) - start )) s."
  if [ ${#failures[@]} -eq 0 ]; then
    echo "Every check passed."
  else
    echo "Failed:"
    for f in "${failures[@]}"; do echo "- $f"; done
  fi
} >>"$results"
say "done: results in $results"
cat "$results"
[ ${#failures[@]} -eq 0 ]
