// Builds a GGUF v3 file (little-endian): metadata in insertion order, tensor infos, then each
// tensor's data padded to the alignment (`general.alignment`, 32 unless set), the layout
// llama.cpp and gguf-py write.
//
// The writer owns the metadata (small) and either owns each tensor's bytes or a function that
// produces them at write time, so a generated model never has to be held in memory at once.
// WriteFile streams header and tensors to disk one piece at a time: no copy of the file is ever
// assembled. Not thread-safe; one writer builds one file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_types.h"

namespace bmad::gguf {

// Fills `out` (exactly the tensor's size in bytes) with the tensor's data.
using TensorFill = std::function<Status(std::span<uint8_t> out)>;

class GgufWriter {
 public:
  GgufWriter() = default;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata setters. Keys keep the position of their first Set; setting a key again replaces
  // its value (so a file never holds a key twice).
  void SetString(const std::string& key, std::string_view value);
  void SetUint32(const std::string& key, uint32_t value);
  void SetInt32(const std::string& key, int32_t value);
  void SetFloat32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetUint64(const std::string& key, uint64_t value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  void SetFloat32Array(const std::string& key, const std::vector<float>& values);
  void SetInt32Array(const std::string& key, const std::vector<int32_t>& values);
  // Copies a value read by GgufFile with its exact GGUF type (uint8 stays uint8, an int32 array
  // stays an int32 array). kInvalidArgument naming the key when the value does not fit its
  // declared type (only possible for hand-built values).
  Status SetValue(const std::string& key, const MetadataValue& value);

  bool HasKey(const std::string& key) const { return key_index_.count(key) != 0; }
  size_t key_count() const { return entries_.size(); }

  // Adds a tensor. `shape` is in ggml order (shape[0] contiguous), 1 to 4 positive dimensions;
  // `data` must hold exactly the bytes that `type` and `shape` need. kInvalidArgument naming
  // the tensor on a bad name (empty, over 63 bytes, or already added), shape or size;
  // kUnimplemented for a type id ggml does not define.
  Status AddTensor(const std::string& name, std::vector<int64_t> shape, TensorType type,
                   std::vector<uint8_t> data);
  // Same, but the bytes are produced by `fill` when the file is written (called once per
  // write, into a buffer of the tensor's size). Its error aborts the write and is returned.
  Status AddTensor(const std::string& name, std::vector<int64_t> shape, TensorType type,
                   TensorFill fill);

  size_t tensor_count() const { return tensors_.size(); }

  // Writes the file: to `path`.partial, then renamed over `path`, so a failed write never
  // leaves a truncated file under the final name. A symbolic link is followed (the file it
  // names is written, the link stays); anything at `path` that is not a regular file (a
  // directory, a FIFO, a device) is refused with kFailedPrecondition, not replaced. kIoError
  // naming the path when the OS refuses; kInvalidArgument for a bad general.alignment; a
  // fill's own error.
  Status WriteFile(const std::string& path) const;
  // The whole file in memory (tests, small files).
  Result<std::string> WriteToString() const;

  // Bytes one tensor of this type and shape takes, or an error naming `what` when the shape is
  // invalid for the type (see AddTensor).
  static Result<uint64_t> TensorBytes(const std::string& what, const std::vector<int64_t>& shape,
                                      TensorType type);

 private:
  struct Entry {
    std::string key;
    std::string encoded;  // the value type (u32) and the value, as they appear in the file
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    TensorType type;
    uint64_t nbytes;
    std::vector<uint8_t> data;  // when fill is empty
    TensorFill fill;
  };
  // Receives the file piece by piece (a file or a string).
  using Sink = std::function<Status(std::span<const uint8_t>)>;

  void Put(const std::string& key, std::string encoded);
  // The tensor's size in bytes, or why it cannot be added.
  Result<uint64_t> CheckNewTensor(const std::string& name, const std::vector<int64_t>& shape,
                                  TensorType type) const;
  Result<uint64_t> Alignment() const;
  Status Write(const Sink& sink) const;

  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace bmad::gguf
