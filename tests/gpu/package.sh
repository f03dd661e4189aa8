#!/usr/bin/env bash
# Packs the GPU test programs for tests/gpu/run.sh on a GPU machine that cannot build the
# project (it has the NVIDIA driver and CUDA libraries but not the project's Debian packages).
# Run it here, where the project builds (a GPU is not needed): it builds the targets with CUDA
# on, then copies into build-gpu/bundle/
#   bin/     bmad_cuda_backend_test, bmad_gpu_bench, bmad (stripped)
#   lib/     the shared libraries they need beyond glibc, libstdc++ and cuBLAS (OpenBLAS,
#            gfortran, yaml-cpp, the CUDA runtime), which a bare CUDA machine lacks
#   models/  the shared model files (../shared/models does not travel with the checkout)
#   SOURCE_FINGERPRINT  tests/gpu/source_fingerprint.sh of the sources it was built from
# and packs that into build-gpu/bundle.tar.xz (what travels to the GPU machine; run.sh unpacks
# it), and prints the sizes. cuBLAS is left to the GPU machine (its toolkit or PyTorch's wheels):
# libcublasLt alone is over 500 MB.
#   BMAD_GPU_BUILD  the build directory (default build-gpu; `build` reuses the Release build when
#                   it was configured with CUDA)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BMAD_GPU_BUILD:-build-gpu}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBMAD_CUDA=ON -DBMAD_BUILD_BENCH=OFF
fi
cmake --build "$build" -j"${BMAD_JOBS:-$(nproc)}" --target bmad_gpu_tests

bundle=build-gpu/bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/models"
for p in bmad_cuda_backend_test bmad_gpu_bench bmad; do
  cp "$build/bin/$p" "$bundle/bin/"
  strip "$bundle/bin/$p"
done
for p in "$bundle"/bin/*; do
  ldd "$p" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    libcublas.so*|libcublasLt.so*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
models=${BMAD_SHARED_MODELS:-../shared/models}
cp "$models/stories260K.gguf" "$models/llama-2-tiny-random.gguf" "$bundle/models/"
echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname) from $build, $("$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" --version 2>/dev/null | tail -n 1)" \
  >"$bundle/BUILD_INFO"
tests/gpu/source_fingerprint.sh >"$bundle/SOURCE_FINGERPRINT"
# The device tool carries at most 64 MiB with the checkout; compressed, the bundle is ~14 MB.
tar -C build-gpu -cJf build-gpu/bundle.tar.xz bundle
du -sh "$bundle" build-gpu/bundle.tar.xz
ls -la "$bundle/lib"
