// A GGUF file (v2 or v3, little-endian), memory-mapped and validated once when opened.
//
// Opening checks everything a later reader relies on: the magic and version, every length and
// count against the bytes that remain, value and tensor types, tensor shapes, alignment, and that
// every tensor's data lies inside the file. Any violation is one Status whose message names the
// file and the problem (never a crash, never a partial object). Afterwards all access is plain
// reads of validated data: strings are views into the mapping and live as long as the GgufFile.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_types.h"

namespace bmad::gguf {

// One scalar: every integer type widens to int64 or uint64, floats to double.
using Scalar = std::variant<int64_t, uint64_t, double, bool, std::string_view>;

struct MetadataValue {
  ValueType type;                 // kArray for arrays
  Scalar scalar;                  // when type != kArray
  ValueType array_type = ValueType::kUint8;  // when type == kArray
  std::vector<Scalar> array;      // when type == kArray
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;     // ggml order: shape[0] is the contiguous dimension
  uint32_t type = 0;              // ggml type id (see GetTensorTypeTraits)
  uint64_t offset = 0;            // from the start of the data section
  const uint8_t* data = nullptr;  // into the mapping
  uint64_t nbytes = 0;

  int64_t elements() const;
  std::string_view type_name() const;
  std::string ShapeString() const;  // "[64, 172]"
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: kNotFound / kIoError (cannot open or map),
  // kDataLoss (bad magic, truncated, inconsistent), kUnimplemented (unsupported version,
  // unknown tensor type).
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Same, over bytes held in memory (tests and fuzzing); `name` is used in messages.
  static Result<std::unique_ptr<GgufFile>> FromBytes(std::string bytes, std::string name);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, MetadataValue>>& metadata() const { return metadata_; }
  const MetadataValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed getters; kNotFound when absent, kInvalidArgument naming the key on a type mismatch.
  Result<int64_t> GetInt(std::string_view key) const;         // any integer type
  Result<double> GetFloat(std::string_view key) const;        // any float or integer type
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<double>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;       // mmap'd region (or null for FromBytes)
  std::string owned_bytes_;       // FromBytes storage
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, MetadataValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace bmad::gguf
