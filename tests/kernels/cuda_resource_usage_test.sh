#!/usr/bin/env bash
# Checks what the SIMT emulator cannot: that every CUDA kernel, at the largest block its launcher
# uses, fits one block's register file (64K 32-bit registers on sm_80 and sm_90) and the static
# shared memory a block may have (48 KiB). A kernel over either limit compiles but fails every
# launch on a GPU (cudaErrorLaunchOutOfResources); ptxas reports the figures (--resource-usage).
#
# usage: cuda_resource_usage_test.sh NVCC SOURCE_DIR "ARCH;ARCH..."
# Compiles kernels/cuda/*.cu as the build does (-O3, the same architectures) into a scratch
# directory; about 10 s.
set -euo pipefail
nvcc=$1 src=$2 archs=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The largest block each kernel is launched with (the BMAD_LAUNCH calls in kernels/cuda/*.cu and
# the constants of kernels/cuda/launch_params.h). A kernel missing here fails the test: add it.
declare -A max_threads=(
  [SampleRowsKernel]=1024     # RowReductionThreads: up to 1024
  [RmsNormKernel]=1024
  [SoftmaxKernel]=1024
  [ArgmaxKernel]=1024
  [EmbeddingKernel]=256
  [StoreKvKernel]=256
  [ConvertToHalfKernel]=256   # kElementwiseThreads
  [RoundToQ8_0Kernel]=256
  [RopeKernel]=256
  [SwiGluKernel]=256
  [AddKernel]=256
  [Q8GemvKernel]=128          # kQ8GemvWarpsPerBlock warps
  [Q8TiledKernel]=256         # kQ8TileThreads
  [F16GemvKernel]=128         # kF16GemvWarpsPerBlock warps
  [PrefillKernel]=128         # kPrefillThreads
  [DecodeKernel]=128          # kDecodeThreads
  [DecodeKernelVec]=128
  [DecodeReduceKernel]=128
)
kRegisters=65536
kStaticShared=49152

gencode=()
IFS=';' read -ra arch_list <<< "$archs"
for a in "${arch_list[@]}"; do
  a=${a%%-*}  # "90-real" -> "90"
  gencode+=(-gencode "arch=compute_${a},code=sm_${a}")
done

failures=0 checked=0
for cu in "$src"/kernels/cuda/*.cu; do
  log="$scratch/$(basename "$cu").log"
  "$nvcc" -std=c++17 -O3 -I"$src" "${gencode[@]}" --resource-usage -c "$cu" \
    -o "$scratch/$(basename "$cu").o" > "$log" 2>&1 || { cat "$log"; exit 1; }
  # ptxas prints, per kernel and architecture:
  #   ptxas info : Compiling entry function '<mangled>' for 'sm_90'
  #   ptxas info : Used 64 registers, used 1 barriers, 25640 bytes smem, ...
  while IFS='|' read -r kernel arch regs smem; do
    base=""
    for name in "${!max_threads[@]}"; do
      if [[ $kernel == *"${#name}${name}"* ]]; then base=$name; fi
    done
    if [[ -z $base ]]; then
      echo "FAIL: $(basename "$cu"): kernel $kernel has no entry in this test's table of block sizes"
      failures=$((failures + 1))
      continue
    fi
    threads=${max_threads[$base]}
    checked=$((checked + 1))
    need=$(((regs + 7) / 8 * 8 * threads))  # registers are allocated 8 a thread at a time
    printf '%-20s %-6s %4d registers x %4d threads = %6d of %d; %6d bytes static shared\n' \
      "$base" "$arch" "$regs" "$threads" "$need" "$kRegisters" "$smem"
    if ((need > kRegisters)); then
      echo "FAIL: $base on $arch: $regs registers x $threads threads is over the block's $kRegisters (add __launch_bounds__($threads) or launch fewer threads)"
      failures=$((failures + 1))
    fi
    if ((smem > kStaticShared)); then
      echo "FAIL: $base on $arch: $smem bytes of static shared memory, over $kStaticShared"
      failures=$((failures + 1))
    fi
  done < <(awk '
    /Compiling entry function/ {
      match($0, /function \x27[^\x27]+\x27/); kernel = substr($0, RSTART + 10, RLENGTH - 11)
      match($0, /for \x27sm_[0-9]+\x27/); arch = substr($0, RSTART + 5, RLENGTH - 6)
    }
    /Used [0-9]+ registers/ {
      match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15)
      smem = 0
      if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11)
      print kernel "|" arch "|" regs "|" smem
    }' "$log")
done

if ((checked == 0)); then
  echo "FAIL: ptxas reported no kernel (did its output format change?)"
  exit 1
fi
echo "$checked kernel builds checked, $failures failures"
((failures == 0))
