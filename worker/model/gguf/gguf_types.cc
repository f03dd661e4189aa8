#include "worker/model/gguf/gguf_types.h"

namespace bmad::gguf {

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "?";
}

size_t ValueTypeSize(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    case ValueType::kString:
    case ValueType::kArray: return 0;
  }
  return 0;
}

bool IsValidValueType(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::kFloat64); }

std::optional<TensorTypeTraits> GetTensorTypeTraits(uint32_t raw_type) {
  switch (static_cast<TensorType>(raw_type)) {
    case TensorType::kF32: return TensorTypeTraits{"f32", 1, 4};
    case TensorType::kF16: return TensorTypeTraits{"f16", 1, 2};
    case TensorType::kQ4_0: return TensorTypeTraits{"q4_0", 32, 18};
    case TensorType::kQ4_1: return TensorTypeTraits{"q4_1", 32, 20};
    case TensorType::kQ5_0: return TensorTypeTraits{"q5_0", 32, 22};
    case TensorType::kQ5_1: return TensorTypeTraits{"q5_1", 32, 24};
    case TensorType::kQ8_0: return TensorTypeTraits{"q8_0", 32, 34};
    case TensorType::kQ8_1: return TensorTypeTraits{"q8_1", 32, 36};
    case TensorType::kQ2_K: return TensorTypeTraits{"q2_K", 256, 84};
    case TensorType::kQ3_K: return TensorTypeTraits{"q3_K", 256, 110};
    case TensorType::kQ4_K: return TensorTypeTraits{"q4_K", 256, 144};
    case TensorType::kQ5_K: return TensorTypeTraits{"q5_K", 256, 176};
    case TensorType::kQ6_K: return TensorTypeTraits{"q6_K", 256, 210};
    case TensorType::kQ8_K: return TensorTypeTraits{"q8_K", 256, 292};
    case TensorType::kI8: return TensorTypeTraits{"i8", 1, 1};
    case TensorType::kI16: return TensorTypeTraits{"i16", 1, 2};
    case TensorType::kI32: return TensorTypeTraits{"i32", 1, 4};
    case TensorType::kI64: return TensorTypeTraits{"i64", 1, 8};
    case TensorType::kF64: return TensorTypeTraits{"f64", 1, 8};
    case TensorType::kBF16: return TensorTypeTraits{"bf16", 1, 2};
  }
  return std::nullopt;
}

}  // namespace bmad::gguf
