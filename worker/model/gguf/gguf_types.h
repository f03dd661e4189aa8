// GGUF's value types and ggml's tensor types (facts of the format: see the GGUF specification
// in ggml's docs/gguf.md). Which of the tensor types bmad computes with is the model loader's
// business (MatrixWeightType); the others are known by name and size only, so a file holding
// them gets a precise error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bmad::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view ValueTypeName(ValueType type);
// Bytes of one scalar of this type; 0 for string and array.
size_t ValueTypeSize(ValueType type);
bool IsValidValueType(uint32_t raw);

// ggml tensor type ids (ggml.h `enum ggml_type`).
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct TensorTypeTraits {
  std::string_view name;     // "f32", "q8_0", ...
  int64_t block_elements;    // elements per block (1 for plain types)
  int64_t block_bytes;       // bytes per block
};

// Traits of a ggml type id, or nullopt for ids this build does not know.
std::optional<TensorTypeTraits> GetTensorTypeTraits(uint32_t raw_type);

// The Q8_0 block layout is in kernels/q8_0.h (the kernels read it in place).

}  // namespace bmad::gguf
