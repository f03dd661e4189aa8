#include "worker/model/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/utf8.h"

namespace bmad::gguf {
namespace {

constexpr uint64_t kMaxDims = 4;
// Sanity bounds: far above any real model, low enough that a corrupt count fails fast.
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxKeyValues = 1u << 20;
// Metadata arrays (vocabularies, merges) hold at most a few hundred thousand entries, under
// 1.5M in all for the largest vocabularies (256K tokens with scores, types and merges). Each
// element costs ~24 bytes here, so the total is bounded: a corrupt count must not make us
// allocate gigabytes, nor may a file of one-byte elements spread over many keys (24x its size).
constexpr uint64_t kMaxTotalArrayElements = 1u << 23;
// ggml's GGML_MAX_NAME: tensor names are shorter than 64 bytes.
constexpr size_t kMaxTensorName = 63;
constexpr size_t kMaxKeyLength = 65535;

// A bounds-checked little-endian reader over the mapped bytes.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  bool Read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool ReadString(std::string_view* out) {
    uint64_t len = 0;
    if (!Read(&len) || len > remaining()) return false;
    *out = std::string_view(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return true;
  }

  bool Skip(uint64_t n) {
    if (n > remaining()) return false;
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

bool ReadScalar(Cursor& c, ValueType type, Scalar* out) {
  switch (type) {
    case ValueType::kUint8: { uint8_t v; if (!c.Read(&v)) return false; *out = uint64_t{v}; return true; }
    case ValueType::kInt8: { int8_t v; if (!c.Read(&v)) return false; *out = int64_t{v}; return true; }
    case ValueType::kUint16: { uint16_t v; if (!c.Read(&v)) return false; *out = uint64_t{v}; return true; }
    case ValueType::kInt16: { int16_t v; if (!c.Read(&v)) return false; *out = int64_t{v}; return true; }
    case ValueType::kUint32: { uint32_t v; if (!c.Read(&v)) return false; *out = uint64_t{v}; return true; }
    case ValueType::kInt32: { int32_t v; if (!c.Read(&v)) return false; *out = int64_t{v}; return true; }
    case ValueType::kUint64: { uint64_t v; if (!c.Read(&v)) return false; *out = v; return true; }
    case ValueType::kInt64: { int64_t v; if (!c.Read(&v)) return false; *out = v; return true; }
    case ValueType::kFloat32: { float v; if (!c.Read(&v)) return false; *out = double{v}; return true; }
    case ValueType::kFloat64: { double v; if (!c.Read(&v)) return false; *out = v; return true; }
    case ValueType::kBool: {
      uint8_t v;
      if (!c.Read(&v)) return false;
      *out = v != 0;
      return true;
    }
    case ValueType::kString: {
      std::string_view s;
      if (!c.ReadString(&s)) return false;
      *out = s;
      return true;
    }
    case ValueType::kArray: return false;
  }
  return false;
}

bool IsIntegerType(ValueType t) {
  switch (t) {
    case ValueType::kUint8: case ValueType::kInt8: case ValueType::kUint16:
    case ValueType::kInt16: case ValueType::kUint32: case ValueType::kInt32:
    case ValueType::kUint64: case ValueType::kInt64: return true;
    default: return false;
  }
}

bool ScalarToInt(const Scalar& s, int64_t* out) {
  if (const auto* i = std::get_if<int64_t>(&s)) { *out = *i; return true; }
  if (const auto* u = std::get_if<uint64_t>(&s)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(*u);
    return true;
  }
  return false;
}

bool ScalarToDouble(const Scalar& s, double* out) {
  if (const auto* d = std::get_if<double>(&s)) { *out = *d; return true; }
  if (const auto* i = std::get_if<int64_t>(&s)) { *out = static_cast<double>(*i); return true; }
  if (const auto* u = std::get_if<uint64_t>(&s)) { *out = static_cast<double>(*u); return true; }
  return false;
}

}  // namespace

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string_view TensorInfo::type_name() const {
  auto traits = GetTensorTypeTraits(type);
  return traits ? traits->name : "unknown";
}

std::string TensorInfo::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

GgufFile::~GgufFile() {
  if (mapping_) munmap(mapping_, size_);
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a named pipe would otherwise wait for a writer, before the check below
  // could say it is no file (it changes nothing for a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path + ": not a regular file");
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError(path + ": cannot map: " + std::strerror(err));
    }
    file->mapping_ = p;
    file->base_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  BMAD_RETURN_IF_ERROR(file->Parse());
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string bytes, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(name);
  file->owned_bytes_ = std::move(bytes);
  file->base_ = reinterpret_cast<const uint8_t*>(file->owned_bytes_.data());
  file->size_ = file->owned_bytes_.size();
  BMAD_RETURN_IF_ERROR(file->Parse());
  return file;
}

Status GgufFile::Parse() {
  Cursor c(base_, size_);
  auto truncated = [&](const std::string& what) {
    return DataLoss(path_ + ": truncated GGUF file: " + what + " at byte " +
                    std::to_string(c.offset()) + " runs past the end (" +
                    std::to_string(size_) + " bytes)");
  };
  char magic[4];
  if (!c.Read(&magic)) return DataLoss(path_ + ": not a GGUF file (shorter than its header)");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return DataLoss(path_ + ": not a GGUF file (bad magic; expected 'GGUF')");
  }
  if (!c.Read(&version_)) return truncated("the version");
  if (version_ == 1) {
    return Unimplemented(path_ + ": unsupported GGUF version 1 (GGUFv1 is no longer supported; "
                                 "convert the file to GGUF v3)");
  }
  if (version_ != 2 && version_ != 3) {
    return Unimplemented(path_ + ": unsupported GGUF version " + std::to_string(version_) +
                         " (bmad reads versions 2 and 3)");
  }
  uint64_t tensor_count = 0, kv_count = 0;
  if (!c.Read(&tensor_count)) return truncated("the tensor count");
  if (!c.Read(&kv_count)) return truncated("the metadata count");
  if (tensor_count > kMaxTensors) {
    return DataLoss(path_ + ": implausible tensor count " + std::to_string(tensor_count));
  }
  if (tensor_count > size_) {  // each tensor needs bytes of its own: the file ends too soon
    return truncated("the tensor infos (" + std::to_string(tensor_count) + " tensors)");
  }
  if (kv_count > kMaxKeyValues) {
    return DataLoss(path_ + ": implausible metadata count " + std::to_string(kv_count));
  }
  if (kv_count > size_) return truncated("the metadata (" + std::to_string(kv_count) + " keys)");

  // Room for what the rest of the file can hold at the least bytes per entry (a key/value:
  // 8-byte key length, 4-byte type, a 1-byte value; a tensor: 8 + 4 + 8 + 4 + 8), so a header
  // claiming a million entries in a small file reserves nothing like it.
  metadata_.reserve(std::min<uint64_t>(kv_count, c.remaining() / 13));
  uint64_t array_elements = 0;
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string_view key;
    if (!c.ReadString(&key)) return truncated("metadata key #" + std::to_string(i));
    // Checked before the key is copied: the specification caps keys at 65535 bytes, and a
    // corrupt length would otherwise copy gigabytes.
    if (key.size() > kMaxKeyLength) {
      return DataLoss(path_ + ": metadata key #" + std::to_string(i) + " is " +
                      std::to_string(key.size()) + " bytes long (at most " +
                      std::to_string(kMaxKeyLength) + ")");
    }
    // The specification's keys are ASCII; a control byte (a NUL would end the message that
    // quotes the key early) or invalid UTF-8 is a corrupt file.
    if (!IsPrintableText(key)) {
      return DataLoss(path_ + ": metadata key #" + std::to_string(i) + " is not printable text: " + QuotedText(key));
    }
    const std::string key_str(key);
    uint32_t raw_type = 0;
    if (!c.Read(&raw_type)) return truncated("the type of '" + key_str + "'");
    if (!IsValidValueType(raw_type)) {
      return DataLoss(path_ + ": metadata '" + key_str + "' has unknown value type " +
                      std::to_string(raw_type));
    }
    MetadataValue value;
    value.type = static_cast<ValueType>(raw_type);
    if (value.type == ValueType::kArray) {
      uint32_t raw_elem = 0;
      uint64_t count = 0;
      if (!c.Read(&raw_elem) || !c.Read(&count)) return truncated("the array header of '" + key_str + "'");
      if (!IsValidValueType(raw_elem) || static_cast<ValueType>(raw_elem) == ValueType::kArray) {
        return DataLoss(path_ + ": metadata array '" + key_str + "' has unsupported element type " +
                        std::to_string(raw_elem));
      }
      value.array_type = static_cast<ValueType>(raw_elem);
      const size_t elem_size = ValueTypeSize(value.array_type);
      // Every element takes at least its fixed size (strings: their 8-byte length).
      const uint64_t min_bytes = elem_size ? elem_size : 8;
      if (count > c.remaining() / min_bytes) return truncated("array '" + key_str + "'");
      array_elements += count;
      if (array_elements > kMaxTotalArrayElements) {
        return DataLoss(path_ + ": metadata arrays hold an implausible " +
                        std::to_string(array_elements) + " elements by '" + key_str +
                        "' (at most " + std::to_string(kMaxTotalArrayElements) +
                        " in all; no model's metadata is that large)");
      }
      value.array.resize(count);
      for (uint64_t j = 0; j < count; ++j) {
        if (!ReadScalar(c, value.array_type, &value.array[j])) {
          return truncated("element " + std::to_string(j) + " of '" + key_str + "'");
        }
      }
    } else if (!ReadScalar(c, value.type, &value.scalar)) {
      return truncated("the value of '" + key_str + "'");
    }
    if (metadata_index_.count(key_str)) {
      return DataLoss(path_ + ": metadata key '" + key_str + "' appears twice");
    }
    metadata_index_.emplace(key_str, metadata_.size());
    metadata_.emplace_back(key_str, std::move(value));
  }

  if (const MetadataValue* align = Find("general.alignment")) {
    int64_t a = 0;
    if (align->type == ValueType::kArray || !ScalarToInt(align->scalar, &a) || a <= 0 ||
        (a & (a - 1)) != 0 || a < 8 || a > (1 << 20)) {
      // At least 8 (the specification: a multiple of 8), so F32 and F16 data stay aligned.
      return DataLoss(path_ + ": general.alignment must be a power of two from 8 to 2^20");
    }
    alignment_ = static_cast<uint64_t>(a);
  }

  tensors_.reserve(std::min<uint64_t>(tensor_count, c.remaining() / 32));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t;
    std::string_view name;
    if (!c.ReadString(&name)) return truncated("the name of tensor #" + std::to_string(i));
    if (name.size() > kMaxTensorName) {  // before copying it: see the keys above
      return DataLoss(path_ + ": tensor name '" + std::string(name.substr(0, 80)) +
                      "...' is longer than " + std::to_string(kMaxTensorName) + " bytes");
    }
    if (!IsPrintableText(name)) {
      return DataLoss(path_ + ": the name of tensor #" + std::to_string(i) + " is not printable text: " +
                      QuotedText(name));
    }
    t.name = std::string(name);
    uint32_t n_dims = 0;
    if (!c.Read(&n_dims)) return truncated("the shape of '" + t.name + "'");
    if (n_dims == 0 || n_dims > kMaxDims) {
      return DataLoss(path_ + ": tensor '" + t.name + "' has " + std::to_string(n_dims) +
                      " dimensions (1 to 4 allowed)");
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      if (!c.Read(&dim)) return truncated("the shape of '" + t.name + "'");
      if (dim == 0 || dim > (1ull << 40) || elements > (1ull << 62) / dim) {
        return DataLoss(path_ + ": tensor '" + t.name + "' has an invalid dimension " +
                        std::to_string(dim));
      }
      elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    if (!c.Read(&t.type)) return truncated("the type of '" + t.name + "'");
    if (!c.Read(&t.offset)) return truncated("the offset of '" + t.name + "'");
    const auto traits = GetTensorTypeTraits(t.type);
    if (!traits) {
      return Unimplemented(path_ + ": tensor '" + t.name + "' has unknown ggml type " +
                           std::to_string(t.type));
    }
    if (t.shape[0] % traits->block_elements != 0) {
      return DataLoss(path_ + ": tensor '" + t.name + "' of type " + std::string(traits->name) +
                      " has a first dimension " + std::to_string(t.shape[0]) +
                      " that is not a multiple of " + std::to_string(traits->block_elements));
    }
    const uint64_t blocks = elements / static_cast<uint64_t>(traits->block_elements);
    // A byte size that wrapped around would pass the bounds check below while the shape still
    // promises 2^62 elements: reject it here.
    if (blocks > UINT64_MAX / static_cast<uint64_t>(traits->block_bytes)) {
      return DataLoss(path_ + ": tensor '" + t.name + "' is too large (" +
                      std::to_string(elements) + " elements of " + std::string(traits->name) + ")");
    }
    t.nbytes = blocks * static_cast<uint64_t>(traits->block_bytes);
    if (t.offset % alignment_ != 0) {
      return DataLoss(path_ + ": tensor '" + t.name + "' data offset " +
                      std::to_string(t.offset) + " is not aligned to " +
                      std::to_string(alignment_));
    }
    if (tensor_index_.count(t.name)) {
      return DataLoss(path_ + ": tensor '" + t.name + "' appears twice");
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  const uint64_t data_start = (c.offset() + alignment_ - 1) / alignment_ * alignment_;
  for (TensorInfo& t : tensors_) {
    if (t.offset > size_ || data_start > size_ - t.offset ||
        t.nbytes > size_ - data_start - t.offset) {
      return DataLoss(path_ + ": truncated GGUF file: the data of tensor '" + t.name + "' (" +
                      std::to_string(t.nbytes) + " bytes at " +
                      std::to_string(data_start + t.offset) + ") runs past the end (" +
                      std::to_string(size_) + " bytes)");
    }
    t.data = base_ + data_start + t.offset;
  }
  // No two tensors share bytes (llama.cpp wants each at the padded end of the one before): a
  // small file of tensors all pointing at one block of data would have the loader prepare (and
  // allocate) each as a tensor of its own.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& before = *by_offset[i - 1];
    if (by_offset[i]->offset < before.offset + before.nbytes) {
      return DataLoss(path_ + ": the data of tensor '" + by_offset[i]->name + "' (at " +
                      std::to_string(by_offset[i]->offset) + ") overlaps that of tensor '" + before.name +
                      "' (" + std::to_string(before.nbytes) + " bytes at " + std::to_string(before.offset) + ")");
    }
  }
  // Writers end the file with the last tensor's data and its padding. More after it means tensor
  // infos were read as data: a tensor count one too low puts the data section's start inside the
  // last info, and every tensor would be read from the wrong bytes, silently.
  uint64_t data_end = data_start;
  for (const TensorInfo& t : tensors_) data_end = std::max(data_end, data_start + t.offset + t.nbytes);
  if (size_ > data_end && size_ - data_end >= alignment_) {
    return DataLoss(path_ + ": " + std::to_string(size_ - data_end) + " bytes follow the data of the last of its " +
                    std::to_string(tensors_.size()) + " tensors (which ends at byte " + std::to_string(data_end) +
                    "), more than its padding to " + std::to_string(alignment_) +
                    ": the header's tensor count is too low, or the file holds data no tensor names");
  }
  return Status::Ok();
}

const MetadataValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status Missing(const std::string& path, std::string_view key) {
  return NotFound(path + ": metadata key '" + std::string(key) + "' is missing");
}
Status WrongType(const std::string& path, std::string_view key, const MetadataValue& v,
                 const char* wanted) {
  std::string got(ValueTypeName(v.type));
  if (v.type == ValueType::kArray) got += " of " + std::string(ValueTypeName(v.array_type));
  return InvalidArgument(path + ": metadata key '" + std::string(key) + "' is " + got +
                         ", expected " + wanted);
}
}  // namespace

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  int64_t out = 0;
  if (v->type == ValueType::kArray || !ScalarToInt(v->scalar, &out)) {
    if (const auto* u = std::get_if<uint64_t>(&v->scalar); u != nullptr && v->type != ValueType::kArray) {
      return InvalidArgument(path_ + ": metadata key '" + std::string(key) + "' is " + std::to_string(*u) +
                             ", past the largest value it can have (2^63 - 1)");
    }
    return WrongType(path_, key, *v, "an integer");
  }
  return out;
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  double out = 0;
  if (v->type == ValueType::kArray || !ScalarToDouble(v->scalar, &out)) {
    return WrongType(path_, key, *v, "a number");
  }
  return out;
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kBool) return WrongType(path_, key, *v, "a bool");
  return std::get<bool>(v->scalar);
}

Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kString) return WrongType(path_, key, *v, "a string");
  return std::get<std::string_view>(v->scalar);
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kArray || v->array_type != ValueType::kString) {
    return WrongType(path_, key, *v, "an array of strings");
  }
  std::vector<std::string_view> out;
  out.reserve(v->array.size());
  for (const Scalar& s : v->array) out.push_back(std::get<std::string_view>(s));
  return out;
}

Result<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kArray || v->array_type == ValueType::kString ||
      v->array_type == ValueType::kBool) {
    return WrongType(path_, key, *v, "an array of numbers");
  }
  std::vector<double> out(v->array.size());
  for (size_t i = 0; i < out.size(); ++i) ScalarToDouble(v->array[i], &out[i]);
  return out;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kArray || !IsIntegerType(v->array_type)) {
    return WrongType(path_, key, *v, "an array of integers");
  }
  std::vector<int64_t> out(v->array.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!ScalarToInt(v->array[i], &out[i])) return WrongType(path_, key, *v, "int64-sized integers");
  }
  return out;
}

}  // namespace bmad::gguf
