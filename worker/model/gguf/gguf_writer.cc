#include "worker/model/gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>

namespace bmad::gguf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer copies host integers as little-endian bytes");

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = 1u << 20;  // the reader's limit
constexpr size_t kMaxDims = 4;
constexpr size_t kMaxTensorNameBytes = 63;  // ggml's GGML_MAX_NAME (64) includes the NUL
constexpr char kAlignmentKey[] = "general.alignment";

template <typename T>
void Append(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

void AppendString(std::string* out, std::string_view s) {
  Append<uint64_t>(out, s.size());
  out->append(s);
}

void AppendType(std::string* out, ValueType type) { Append(out, static_cast<uint32_t>(type)); }

std::string ArrayHeader(ValueType element_type, uint64_t count) {
  std::string out;
  AppendType(&out, ValueType::kArray);
  AppendType(&out, element_type);
  Append<uint64_t>(&out, count);
  return out;
}

// Appends `s` as `type`; false when the variant alternative or its value does not fit the type.
bool AppendScalar(std::string* out, ValueType type, const Scalar& s) {
  // GgufFile widens integers to int64 or uint64; either must lie in the target type's range.
  auto as_signed = [&](int64_t lo, int64_t hi, int64_t* v) {
    if (const auto* i = std::get_if<int64_t>(&s)) {
      *v = *i;
    } else if (const auto* u = std::get_if<uint64_t>(&s)) {
      if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *v = static_cast<int64_t>(*u);
    } else {
      return false;
    }
    return *v >= lo && *v <= hi;
  };
  auto as_unsigned = [&](uint64_t hi, uint64_t* v) {
    if (const auto* u = std::get_if<uint64_t>(&s)) {
      *v = *u;
    } else if (const auto* i = std::get_if<int64_t>(&s)) {
      if (*i < 0) return false;
      *v = static_cast<uint64_t>(*i);
    } else {
      return false;
    }
    return *v <= hi;
  };
  int64_t i = 0;
  uint64_t u = 0;
  switch (type) {
    case ValueType::kUint8:
      if (!as_unsigned(UINT8_MAX, &u)) return false;
      Append(out, static_cast<uint8_t>(u));
      return true;
    case ValueType::kInt8:
      if (!as_signed(INT8_MIN, INT8_MAX, &i)) return false;
      Append(out, static_cast<int8_t>(i));
      return true;
    case ValueType::kUint16:
      if (!as_unsigned(UINT16_MAX, &u)) return false;
      Append(out, static_cast<uint16_t>(u));
      return true;
    case ValueType::kInt16:
      if (!as_signed(INT16_MIN, INT16_MAX, &i)) return false;
      Append(out, static_cast<int16_t>(i));
      return true;
    case ValueType::kUint32:
      if (!as_unsigned(UINT32_MAX, &u)) return false;
      Append(out, static_cast<uint32_t>(u));
      return true;
    case ValueType::kInt32:
      if (!as_signed(INT32_MIN, INT32_MAX, &i)) return false;
      Append(out, static_cast<int32_t>(i));
      return true;
    case ValueType::kUint64:
      if (!as_unsigned(UINT64_MAX, &u)) return false;
      Append(out, u);
      return true;
    case ValueType::kInt64:
      if (!as_signed(INT64_MIN, INT64_MAX, &i)) return false;
      Append(out, i);
      return true;
    case ValueType::kFloat32: {
      const auto* d = std::get_if<double>(&s);
      if (!d) return false;
      // A float32 read by GgufFile widens exactly, so this narrowing restores its bits.
      Append(out, static_cast<float>(*d));
      return true;
    }
    case ValueType::kFloat64: {
      const auto* d = std::get_if<double>(&s);
      if (!d) return false;
      Append(out, *d);
      return true;
    }
    case ValueType::kBool: {
      const auto* b = std::get_if<bool>(&s);
      if (!b) return false;
      Append<uint8_t>(out, *b ? 1 : 0);
      return true;
    }
    case ValueType::kString: {
      const auto* str = std::get_if<std::string_view>(&s);
      if (!str) return false;
      AppendString(out, *str);
      return true;
    }
    case ValueType::kArray:
      return false;
  }
  return false;
}

template <typename T>
bool ReadNonNegative(const char* p, uint64_t* out) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::is_signed_v<T>) {
    if (v < 0) return false;
  }
  *out = static_cast<uint64_t>(v);
  return true;
}

// Reads the non-negative integer an encoded scalar entry holds (for general.alignment).
bool DecodeInteger(const std::string& encoded, uint64_t* out) {
  uint32_t raw_type = 0;
  std::memcpy(&raw_type, encoded.data(), sizeof raw_type);
  const char* p = encoded.data() + sizeof raw_type;
  switch (static_cast<ValueType>(raw_type)) {
    case ValueType::kUint8: return ReadNonNegative<uint8_t>(p, out);
    case ValueType::kInt8: return ReadNonNegative<int8_t>(p, out);
    case ValueType::kUint16: return ReadNonNegative<uint16_t>(p, out);
    case ValueType::kInt16: return ReadNonNegative<int16_t>(p, out);
    case ValueType::kUint32: return ReadNonNegative<uint32_t>(p, out);
    case ValueType::kInt32: return ReadNonNegative<int32_t>(p, out);
    case ValueType::kUint64: return ReadNonNegative<uint64_t>(p, out);
    case ValueType::kInt64: return ReadNonNegative<int64_t>(p, out);
    default: return false;
  }
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t PaddingFor(uint64_t offset, uint64_t alignment) {
  return (alignment - offset % alignment) % alignment;
}

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
bool WriteAll(int fd, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

void GgufWriter::Put(const std::string& key, std::string encoded) {
  auto it = key_index_.find(key);
  if (it != key_index_.end()) {
    entries_[it->second].encoded = std::move(encoded);
    return;
  }
  key_index_.emplace(key, entries_.size());
  entries_.push_back({key, std::move(encoded)});
}

void GgufWriter::SetString(const std::string& key, std::string_view value) {
  std::string e;
  AppendType(&e, ValueType::kString);
  AppendString(&e, value);
  Put(key, std::move(e));
}

void GgufWriter::SetUint32(const std::string& key, uint32_t value) {
  std::string e;
  AppendType(&e, ValueType::kUint32);
  Append(&e, value);
  Put(key, std::move(e));
}

void GgufWriter::SetInt32(const std::string& key, int32_t value) {
  std::string e;
  AppendType(&e, ValueType::kInt32);
  Append(&e, value);
  Put(key, std::move(e));
}

void GgufWriter::SetFloat32(const std::string& key, float value) {
  std::string e;
  AppendType(&e, ValueType::kFloat32);
  Append(&e, value);
  Put(key, std::move(e));
}

void GgufWriter::SetBool(const std::string& key, bool value) {
  std::string e;
  AppendType(&e, ValueType::kBool);
  Append<uint8_t>(&e, value ? 1 : 0);
  Put(key, std::move(e));
}

void GgufWriter::SetUint64(const std::string& key, uint64_t value) {
  std::string e;
  AppendType(&e, ValueType::kUint64);
  Append(&e, value);
  Put(key, std::move(e));
}

void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  std::string e = ArrayHeader(ValueType::kString, values.size());
  for (const std::string& v : values) AppendString(&e, v);
  Put(key, std::move(e));
}

void GgufWriter::SetFloat32Array(const std::string& key, const std::vector<float>& values) {
  std::string e = ArrayHeader(ValueType::kFloat32, values.size());
  for (float v : values) Append(&e, v);
  Put(key, std::move(e));
}

void GgufWriter::SetInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  std::string e = ArrayHeader(ValueType::kInt32, values.size());
  for (int32_t v : values) Append(&e, v);
  Put(key, std::move(e));
}

Status GgufWriter::SetValue(const std::string& key, const MetadataValue& value) {
  std::string e;
  if (value.type == ValueType::kArray) {
    if (value.array_type == ValueType::kArray) {
      return InvalidArgument("metadata '" + key + "': arrays of arrays are not supported");
    }
    e = ArrayHeader(value.array_type, value.array.size());
    for (size_t i = 0; i < value.array.size(); ++i) {
      if (!AppendScalar(&e, value.array_type, value.array[i])) {
        return InvalidArgument("metadata '" + key + "': element " + std::to_string(i) +
                               " does not fit type " +
                               std::string(ValueTypeName(value.array_type)));
      }
    }
  } else {
    AppendType(&e, value.type);
    if (!AppendScalar(&e, value.type, value.scalar)) {
      return InvalidArgument("metadata '" + key + "': value does not fit type " +
                             std::string(ValueTypeName(value.type)));
    }
  }
  Put(key, std::move(e));
  return Status::Ok();
}

Result<uint64_t> GgufWriter::TensorBytes(const std::string& what,
                                          const std::vector<int64_t>& shape, TensorType type) {
  const auto traits = GetTensorTypeTraits(static_cast<uint32_t>(type));
  if (!traits) {
    return Unimplemented(what + ": unknown ggml tensor type " +
                         std::to_string(static_cast<uint32_t>(type)));
  }
  if (shape.empty() || shape.size() > kMaxDims) {
    return InvalidArgument(what + ": has " + std::to_string(shape.size()) +
                           " dimensions (1 to 4 allowed)");
  }
  // The same limits as the reader, so whatever is written can be read back.
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0 || static_cast<uint64_t>(d) > (1ull << 40) ||
        elements > (1ull << 62) / static_cast<uint64_t>(d)) {
      return InvalidArgument(what + ": invalid dimension " + std::to_string(d));
    }
    elements *= static_cast<uint64_t>(d);
  }
  if (shape[0] % traits->block_elements != 0) {
    return InvalidArgument(what + ": first dimension " + std::to_string(shape[0]) +
                           " is not a multiple of " + std::to_string(traits->block_elements) +
                           " (the " + std::string(traits->name) + " block size)");
  }
  const uint64_t blocks = elements / static_cast<uint64_t>(traits->block_elements);
  if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(traits->block_bytes)) {
    return InvalidArgument(what + ": too large");
  }
  return blocks * static_cast<uint64_t>(traits->block_bytes);
}

Result<uint64_t> GgufWriter::CheckNewTensor(const std::string& name,
                                            const std::vector<int64_t>& shape,
                                            TensorType type) const {
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    return InvalidArgument("tensor name '" + name + "' must be 1 to " +
                           std::to_string(kMaxTensorNameBytes) + " bytes");
  }
  if (tensor_index_.count(name)) return InvalidArgument("tensor '" + name + "' added twice");
  return TensorBytes("tensor '" + name + "'", shape, type);
}

Status GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape,
                             TensorType type, std::vector<uint8_t> data) {
  BMAD_ASSIGN_OR_RETURN(const uint64_t nbytes, CheckNewTensor(name, shape, type));
  if (data.size() != nbytes) {
    const std::string type_name(GetTensorTypeTraits(static_cast<uint32_t>(type))->name);
    return InvalidArgument("tensor '" + name + "': " + std::to_string(data.size()) +
                           " bytes given, but shape " + ShapeText(shape) + " of type " +
                           type_name + " needs " + std::to_string(nbytes));
  }
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({name, std::move(shape), type, nbytes, std::move(data), nullptr});
  return Status::Ok();
}

Status GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape,
                             TensorType type, TensorFill fill) {
  if (!fill) return InvalidArgument("tensor '" + name + "': no fill function");
  BMAD_ASSIGN_OR_RETURN(const uint64_t nbytes, CheckNewTensor(name, shape, type));
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({name, std::move(shape), type, nbytes, {}, std::move(fill)});
  return Status::Ok();
}

Result<uint64_t> GgufWriter::Alignment() const {
  auto it = key_index_.find(std::string_view(kAlignmentKey));
  if (it == key_index_.end()) return kDefaultAlignment;
  uint64_t a = 0;
  // As GgufFile reads them: at least 8, the specification's minimum.
  if (!DecodeInteger(entries_[it->second].encoded, &a) || a < 8 || a > kMaxAlignment ||
      (a & (a - 1)) != 0) {
    return InvalidArgument(std::string(kAlignmentKey) +
                           " must be an integer power of two from 8 to " +
                           std::to_string(kMaxAlignment));
  }
  return a;
}

Status GgufWriter::Write(const Sink& sink) const {
  BMAD_ASSIGN_OR_RETURN(const uint64_t alignment, Alignment());
  std::string header;
  header.append("GGUF", 4);
  Append(&header, kVersion);
  Append<uint64_t>(&header, tensors_.size());
  Append<uint64_t>(&header, entries_.size());
  for (const Entry& e : entries_) {
    AppendString(&header, e.key);
    header.append(e.encoded);
  }
  uint64_t offset = 0;  // from the start of the data section
  for (const Tensor& t : tensors_) {
    AppendString(&header, t.name);
    Append<uint32_t>(&header, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Append<uint64_t>(&header, static_cast<uint64_t>(d));
    Append<uint32_t>(&header, static_cast<uint32_t>(t.type));
    Append<uint64_t>(&header, offset);
    offset += t.nbytes + PaddingFor(t.nbytes, alignment);
  }
  header.append(PaddingFor(header.size(), alignment), '\0');
  BMAD_RETURN_IF_ERROR(sink({reinterpret_cast<const uint8_t*>(header.data()), header.size()}));

  const std::vector<uint8_t> zeros(alignment, 0);
  std::vector<uint8_t> buffer;  // reused by every filled tensor
  for (const Tensor& t : tensors_) {
    std::span<const uint8_t> bytes(t.data);
    if (t.fill) {
      buffer.resize(t.nbytes);
      std::span<uint8_t> out(buffer.data(), t.nbytes);
      BMAD_RETURN_IF_ERROR(t.fill(out).WithContext("tensor '" + t.name + "'"));
      bytes = out;
    }
    BMAD_RETURN_IF_ERROR(sink(bytes));
    BMAD_RETURN_IF_ERROR(sink({zeros.data(), PaddingFor(t.nbytes, alignment)}));
  }
  return Status::Ok();
}

Result<std::string> GgufWriter::WriteToString() const {
  std::string out;
  BMAD_RETURN_IF_ERROR(Write([&out](std::span<const uint8_t> bytes) {
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return Status::Ok();
  }));
  return out;
}

namespace {

// Where writing `path` must land: `path` itself when nothing is there or a regular file is,
// the end of the chain when it is a symbolic link; an error for anything else, which renaming
// over it would destroy (a FIFO, a device node, a directory), and for a read-only file (a
// rename ignores the file's mode, and root ignores it anyway: someone's reference model).
Result<std::string> RegularFileAt(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path at = path;
  for (int hops = 0; hops <= 40; ++hops) {
    std::error_code error;
    const fs::file_status status = fs::symlink_status(at, error);
    if (status.type() == fs::file_type::not_found) return at.string();
    if (error) return IoError(path + ": " + error.message());
    if (status.type() == fs::file_type::regular) {
      if ((status.permissions() & (fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write)) ==
          fs::perms::none) {
        return FailedPrecondition(path + (at.string() == path ? "" : " (" + at.string() + ")") +
                                  " is read-only; refusing to replace it (remove it first, or write elsewhere)");
      }
      return at.string();
    }
    if (status.type() != fs::file_type::symlink) {
      const char* kind = status.type() == fs::file_type::directory ? "a directory"
                         : status.type() == fs::file_type::fifo    ? "a FIFO"
                         : status.type() == fs::file_type::block || status.type() == fs::file_type::character
                             ? "a device"
                             : "not a regular file";
      return FailedPrecondition(path + (at.string() == path ? "" : " (" + at.string() + ")") +
                                " is " + kind + "; refusing to replace it with a model file");
    }
    const fs::path target = fs::read_symlink(at, error);
    if (error) return IoError(path + ": " + error.message());
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  return FailedPrecondition(path + ": too many levels of symbolic links");
}

}  // namespace

Status GgufWriter::WriteFile(const std::string& requested_path) const {
  BMAD_ASSIGN_OR_RETURN(const std::string path, RegularFileAt(requested_path));
  const std::string partial = path + ".partial";
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return IoError(path + ": cannot create " + partial + ": " + std::strerror(errno));
  }
  Status status = Write([&](std::span<const uint8_t> bytes) {
    if (WriteAll(fd, bytes)) return Status::Ok();
    return IoError(path + ": write failed: " + std::strerror(errno));
  });
  if (::close(fd) != 0 && status.ok()) {
    status = IoError(path + ": close failed: " + std::strerror(errno));
  }
  if (status.ok() && std::rename(partial.c_str(), path.c_str()) != 0) {
    status = IoError(path + ": cannot rename " + partial + " to it: " + std::strerror(errno));
  }
  if (!status.ok()) ::unlink(partial.c_str());
  return status;
}

}  // namespace bmad::gguf
