// The CUDA spellings the kernels need beyond plain C++ (dynamic shared memory, launches), so the
// same .cu source compiles with nvcc (the real thing) or, with BMAD_SIMT_EMULATION defined, as
// plain C++ run by the CPU emulator in tests/kernels/simt/, which checks the kernels' logic
// against the CPU backend on machines without a GPU. Production builds never define it.
#pragma once

#if defined(BMAD_SIMT_EMULATION)
#include "tests/kernels/simt/simt.h"
#else
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#define BMAD_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
// The emulator checks a 16-byte load's address (x86 would read a misaligned one that a GPU
// faults on); here the launchers' alignment checks guarantee it.
#define BMAD_CHECK_ALIGNED16(p) ((void)0)
#define BMAD_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)
#endif
