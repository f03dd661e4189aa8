// kernels/cuda/matmul_f16_kernels.cu compiled as plain C++ for the SIMT emulator (the target defines
// BMAD_SIMT_EMULATION, so kernels/cuda/cuda_compat.h maps the CUDA spellings onto simt.h).
#include "kernels/cuda/matmul_f16_kernels.cu"
