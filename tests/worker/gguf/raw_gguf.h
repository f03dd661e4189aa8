// Hand-assembled GGUF bytes for tests that need files the writer refuses to produce
// (bad magic, wrong versions, duplicate keys, lengths past the end, misaligned offsets...).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "worker/model/gguf/gguf_types.h"

namespace bmad::gguf::testing {

class RawGguf {
 public:
  template <typename T>
  RawGguf& Put(T value) {
    char b[sizeof(T)];
    std::memcpy(b, &value, sizeof(T));
    bytes_.append(b, sizeof(T));
    return *this;
  }
  RawGguf& Raw(std::string_view s) {
    bytes_.append(s);
    return *this;
  }
  RawGguf& Str(std::string_view s) {
    Put<uint64_t>(s.size());
    return Raw(s);
  }
  RawGguf& Header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    Raw("GGUF");
    Put(version);
    Put(tensors);
    return Put(kvs);
  }
  RawGguf& KvUint32(std::string_view key, uint32_t value) {
    Str(key);
    Put(static_cast<uint32_t>(ValueType::kUint32));
    return Put(value);
  }
  RawGguf& KvString(std::string_view key, std::string_view value) {
    Str(key);
    Put(static_cast<uint32_t>(ValueType::kString));
    return Str(value);
  }
  RawGguf& Tensor(std::string_view name, const std::vector<uint64_t>& shape, uint32_t type,
                  uint64_t offset) {
    Str(name);
    Put(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) Put(d);
    Put(type);
    return Put(offset);
  }
  RawGguf& PadTo(size_t alignment) {
    bytes_.append((alignment - bytes_.size() % alignment) % alignment, '\0');
    return *this;
  }
  RawGguf& Zeros(size_t n) {
    bytes_.append(n, '\0');
    return *this;
  }
  const std::string& str() const { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace bmad::gguf::testing
