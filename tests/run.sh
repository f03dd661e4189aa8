#!/usr/bin/env bash
# Builds bmad and runs every test; exits non-zero on any failure.
#   1. installs missing Debian packages (silent when none are missing)
#   2. Release build (CUDA kernels too when nvcc is found) and every test: unit and integration
#   3. AddressSanitizer + UBSan build (clang) of the unit tests, run; then the protocol fuzzer
#      for a bounded time
# Knobs: BMAD_JOBS (parallel jobs, default nproc), BMAD_CUDA (AUTO|ON|OFF),
#        BMAD_FUZZ_SECONDS (default 30), BMAD_SKIP_SANITIZERS=1 (local iteration only; CI never sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${BMAD_JOBS:-$(nproc)}
start=$(date +%s)
step() { printf '\n==> %s (%ds)\n' "$*" "$(( $(date +%s) - start ))"; }

step "dependencies"
./deploy/install-deps.sh

step "release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBMAD_CUDA="${BMAD_CUDA:-AUTO}" >build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
cmake --build build -j"$jobs"

step "tests (unit + integration)"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

if [ "${BMAD_SKIP_SANITIZERS:-0}" != "1" ]; then
  step "sanitizer build (clang, ASan + UBSan)"
  CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBMAD_SANITIZE=ON -DBMAD_FUZZ=ON -DBMAD_CUDA=OFF -DBMAD_BUILD_BENCH=OFF \
    >build-asan-configure.log 2>&1 || { cat build-asan-configure.log; exit 1; }
  cmake --build build-asan -j"$jobs" --target bmad_unit_tests proto_decode_fuzz proto_fuzz_seeds

  step "unit tests under sanitizers"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  (cd build-asan && ctest --output-on-failure -j"$jobs" -L unit --timeout 900)

  step "protocol fuzzer (${BMAD_FUZZ_SECONDS:-30} s)"
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
  build-asan/bin/proto_fuzz_seeds "$corpus"
  (cd build-asan && ./bin/proto_decode_fuzz -max_total_time="${BMAD_FUZZ_SECONDS:-30}" \
     -rss_limit_mb=4096 -print_final_stats=1 "$corpus" 2>&1 | tail -n 8)
fi

rm -f "$root/build-configure.log" "$root/build-asan-configure.log"
step "all tests passed"
