// GgufWriter: what it writes, GgufFile reads back, exactly.
#include "worker/model/gguf/gguf_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/half.h"
#include "kernels/q8_0.h"
#include "tests/support/paths.h"

namespace bmad::gguf {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<GgufFile> ReadBack(const GgufWriter& writer) {
  auto bytes = writer.WriteToString();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  auto file = GgufFile::FromBytes(std::move(bytes).value(), "written.gguf");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

template <typename T>
std::vector<uint8_t> AsBytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GgufWriterTest, EmptyWriterWritesAValidHeader) {
  GgufWriter writer;
  auto bytes = writer.WriteToString();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->substr(0, 4), "GGUF");
  EXPECT_EQ(bytes->size(), 32u);  // 24 header bytes padded to the alignment
  auto file = GgufFile::FromBytes(*bytes, "empty.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->version(), 3u);
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST(GgufWriterTest, TypedSettersRoundTrip) {
  GgufWriter writer;
  writer.SetString("s", "hello \xe2\x96\x81world");
  writer.SetUint32("u32", 4000000000u);
  writer.SetInt32("i32", -123456);
  writer.SetFloat32("f32", 1e-5f);
  writer.SetBool("yes", true);
  writer.SetBool("no", false);
  writer.SetUint64("u64", 0xfedcba9876543210ull);
  writer.SetStringArray("sa", {"a", "", "\xe2\x96\x81" "b"});
  writer.SetFloat32Array("fa", {0.5f, -2.25f, 1e30f});
  writer.SetInt32Array("ia", {1, -2, 2147483647});
  writer.SetStringArray("empty", {});
  auto file = ReadBack(writer);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(*file->GetString("s"), "hello \xe2\x96\x81world");
  EXPECT_EQ(file->Find("u32")->type, ValueType::kUint32);
  EXPECT_EQ(*file->GetInt("u32"), 4000000000);
  EXPECT_EQ(file->Find("i32")->type, ValueType::kInt32);
  EXPECT_EQ(*file->GetInt("i32"), -123456);
  EXPECT_EQ(file->Find("f32")->type, ValueType::kFloat32);
  EXPECT_EQ(*file->GetFloat("f32"), static_cast<double>(1e-5f));
  EXPECT_TRUE(*file->GetBool("yes"));
  EXPECT_FALSE(*file->GetBool("no"));
  EXPECT_EQ(file->Find("u64")->type, ValueType::kUint64);
  EXPECT_EQ(std::get<uint64_t>(file->Find("u64")->scalar), 0xfedcba9876543210ull);
  EXPECT_EQ(*file->GetStringArray("sa"),
            (std::vector<std::string_view>{"a", "", "\xe2\x96\x81" "b"}));
  EXPECT_EQ(file->Find("fa")->array_type, ValueType::kFloat32);
  EXPECT_EQ(*file->GetFloatArray("fa"),
            (std::vector<double>{0.5, -2.25, static_cast<double>(1e30f)}));
  EXPECT_EQ(file->Find("ia")->array_type, ValueType::kInt32);
  EXPECT_EQ(*file->GetIntArray("ia"), (std::vector<int64_t>{1, -2, 2147483647}));
  EXPECT_TRUE(file->GetStringArray("empty")->empty());
  // Metadata stays in insertion order.
  ASSERT_EQ(file->metadata().size(), 11u);
  EXPECT_EQ(file->metadata()[0].first, "s");
  EXPECT_EQ(file->metadata()[10].first, "empty");
}

TEST(GgufWriterTest, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter writer;
  writer.SetUint32("first", 1);
  writer.SetUint32("second", 2);
  writer.SetString("first", "now a string");
  EXPECT_EQ(writer.key_count(), 2u);
  auto file = ReadBack(writer);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->metadata()[0].first, "first");
  EXPECT_EQ(*file->GetString("first"), "now a string");
}

TEST(GgufWriterTest, SetValueKeepsEveryExactType) {
  const std::vector<std::pair<ValueType, Scalar>> scalars = {
      {ValueType::kUint8, uint64_t{255}},
      {ValueType::kInt8, int64_t{-128}},
      {ValueType::kUint16, uint64_t{65535}},
      {ValueType::kInt16, int64_t{-32768}},
      {ValueType::kUint32, uint64_t{4294967295u}},
      {ValueType::kInt32, int64_t{-2147483647 - 1}},
      {ValueType::kUint64, uint64_t{18446744073709551615ull}},
      {ValueType::kInt64, int64_t{-9223372036854775807ll - 1}},
      {ValueType::kFloat32, double{-3.5f}},
      {ValueType::kFloat64, 0.1},
      {ValueType::kBool, true},
      {ValueType::kString, std::string_view("text")},
  };
  GgufWriter writer;
  for (const auto& [type, scalar] : scalars) {
    const std::string name(ValueTypeName(type));
    ASSERT_TRUE(writer.SetValue("scalar." + name, {type, scalar}).ok()) << name;
    MetadataValue array{ValueType::kArray, {}, type, {scalar, scalar}};
    ASSERT_TRUE(writer.SetValue("array." + name, array).ok()) << name;
  }
  auto file = ReadBack(writer);
  ASSERT_NE(file, nullptr);
  for (const auto& [type, scalar] : scalars) {
    const std::string name(ValueTypeName(type));
    const MetadataValue* s = file->Find("scalar." + name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->type, type) << name;
    EXPECT_EQ(s->scalar, scalar) << name;
    const MetadataValue* a = file->Find("array." + name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->type, ValueType::kArray);
    EXPECT_EQ(a->array_type, type) << name;
    EXPECT_EQ(a->array, (std::vector<Scalar>{scalar, scalar})) << name;
  }
}

TEST(GgufWriterTest, SetValueRejectsValuesThatDoNotFitTheirType) {
  GgufWriter writer;
  Status s = writer.SetValue("k", {ValueType::kUint8, uint64_t{256}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'k'"));
  EXPECT_THAT(s.message(), HasSubstr("uint8"));
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kInt8, int64_t{-129}}).ok());
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kUint32, int64_t{-1}}).ok());
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kInt64, uint64_t{1ull << 63}}).ok());
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kString, 1.0}).ok());
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kFloat32, std::string_view("x")}).ok());
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kBool, int64_t{1}}).ok());
  EXPECT_FALSE(writer.SetValue("k", {ValueType::kArray, {}, ValueType::kArray, {}}).ok());
  Status element = writer.SetValue(
      "arr", {ValueType::kArray, {}, ValueType::kInt16, {int64_t{1}, int64_t{40000}}});
  EXPECT_THAT(element.message(), HasSubstr("element 1"));
  EXPECT_EQ(writer.key_count(), 0u);
}

TEST(GgufWriterTest, TensorsRoundTripInEveryComputeType) {
  std::vector<float> f32(12);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.25f * static_cast<float>(i) - 1.0f;
  std::vector<uint16_t> f16(16);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = FloatToHalf(static_cast<float>(i) / 3.0f);
  std::vector<float> q_source(64);
  for (size_t i = 0; i < q_source.size(); ++i) q_source[i] = std::sin(static_cast<float>(i));
  std::vector<kernels::BlockQ8_0> q8(2);
  kernels::QuantizeRowQ8_0(q_source.data(), 64, q8.data());

  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  ASSERT_TRUE(writer.AddTensor("f32", {4, 3}, TensorType::kF32, AsBytes(f32)).ok());
  ASSERT_TRUE(writer.AddTensor("f16", {8, 2}, TensorType::kF16, AsBytes(f16)).ok());
  ASSERT_TRUE(writer.AddTensor("q8_0", {32, 2}, TensorType::kQ8_0, AsBytes(q8)).ok());
  ASSERT_TRUE(writer.AddTensor("filled", {5}, TensorType::kF32, [](std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(writer.tensor_count(), 4u);
  auto file = ReadBack(writer);
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(file->tensors().size(), 4u);

  const TensorInfo* t = file->FindTensor("f32");
  EXPECT_EQ(t->ShapeString(), "[4, 3]");
  ASSERT_EQ(t->nbytes, 48u);
  EXPECT_EQ(std::memcmp(t->data, f32.data(), 48), 0);
  t = file->FindTensor("f16");
  EXPECT_EQ(t->type_name(), "f16");
  ASSERT_EQ(t->nbytes, 32u);
  EXPECT_EQ(std::memcmp(t->data, f16.data(), 32), 0);
  t = file->FindTensor("q8_0");
  EXPECT_EQ(t->type_name(), "q8_0");
  ASSERT_EQ(t->nbytes, 68u);
  std::vector<kernels::BlockQ8_0> blocks(2);
  std::memcpy(blocks.data(), t->data, 68);
  std::vector<float> restored(64);
  kernels::DequantizeRowQ8_0(blocks.data(), 64, restored.data());
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(restored[i], q_source[i], 1.0 / 254 + 1e-3) << i;
  t = file->FindTensor("filled");
  ASSERT_EQ(t->nbytes, 20u);
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(t->data[i], i);
  for (const TensorInfo& info : file->tensors()) EXPECT_EQ(info.offset % 32, 0u) << info.name;
  EXPECT_EQ(file->file_size() % 32, 0u);  // every tensor, the last included, is padded
}

TEST(GgufWriterTest, UsesGeneralAlignmentWhenSet) {
  GgufWriter writer;
  writer.SetUint32("general.alignment", 64);
  ASSERT_TRUE(writer.AddTensor("a", {3}, TensorType::kF32, std::vector<uint8_t>(12, 1)).ok());
  ASSERT_TRUE(writer.AddTensor("b", {3}, TensorType::kF32, std::vector<uint8_t>(12, 2)).ok());
  auto file = ReadBack(writer);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->FindTensor("b")->offset, 64u);
  EXPECT_EQ(file->FindTensor("b")->data[0], 2);

  GgufWriter bad;
  bad.SetUint32("general.alignment", 48);
  EXPECT_EQ(bad.WriteToString().status().code(), StatusCode::kInvalidArgument);
  bad.SetUint32("general.alignment", 4);  // a power of two, but below the reader's 8
  EXPECT_THAT(bad.WriteToString().status().message(), HasSubstr("from 8"));
  bad.SetString("general.alignment", "32");
  EXPECT_THAT(bad.WriteToString().status().message(), HasSubstr("general.alignment"));
}

TEST(GgufWriterTest, AddTensorChecksNameShapeTypeAndSize) {
  GgufWriter writer;
  Status s = writer.AddTensor("w", {4, 3}, TensorType::kF32, std::vector<uint8_t>(47));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w': 47 bytes given, but shape [4, 3] of type f32 "
                                     "needs 48"));
  EXPECT_THAT(writer.AddTensor("q", {33}, TensorType::kQ8_0, std::vector<uint8_t>(34)).message(),
              HasSubstr("not a multiple of 32"));
  EXPECT_THAT(writer.AddTensor("e", {}, TensorType::kF32, std::vector<uint8_t>()).message(),
              HasSubstr("0 dimensions"));
  EXPECT_FALSE(writer.AddTensor("5d", {1, 1, 1, 1, 1}, TensorType::kF32,
                                std::vector<uint8_t>(4)).ok());
  EXPECT_THAT(writer.AddTensor("z", {4, 0}, TensorType::kF32, std::vector<uint8_t>()).message(),
              HasSubstr("invalid dimension 0"));
  EXPECT_FALSE(writer.AddTensor("n", {-1}, TensorType::kF32, std::vector<uint8_t>()).ok());
  EXPECT_EQ(writer.AddTensor("u", {4}, static_cast<TensorType>(99), std::vector<uint8_t>(4))
                .code(),
            StatusCode::kUnimplemented);
  EXPECT_FALSE(writer.AddTensor("", {1}, TensorType::kF32, std::vector<uint8_t>(4)).ok());
  EXPECT_THAT(writer.AddTensor(std::string(64, 'x'), {1}, TensorType::kF32,
                               std::vector<uint8_t>(4)).message(),
              HasSubstr("1 to 63 bytes"));
  EXPECT_FALSE(writer.AddTensor("f", {1}, TensorType::kF32, TensorFill()).ok());
  EXPECT_EQ(writer.tensor_count(), 0u);

  ASSERT_TRUE(writer.AddTensor(std::string(63, 'x'), {1}, TensorType::kF32,
                               std::vector<uint8_t>(4)).ok());
  EXPECT_THAT(writer.AddTensor(std::string(63, 'x'), {1}, TensorType::kF32,
                               std::vector<uint8_t>(4)).message(),
              HasSubstr("added twice"));
  EXPECT_EQ(writer.tensor_count(), 1u);
}

TEST(GgufWriterTest, TensorBytesFollowsTheTypeTraits) {
  EXPECT_EQ(*GgufWriter::TensorBytes("t", {768, 32000}, TensorType::kF16), 49152000u);
  EXPECT_EQ(*GgufWriter::TensorBytes("t", {64, 3}, TensorType::kQ8_0), 204u);
  EXPECT_EQ(*GgufWriter::TensorBytes("t", {256, 2}, TensorType::kQ4_K), 288u);
  EXPECT_FALSE(GgufWriter::TensorBytes("t", {1ll << 31, 1ll << 31}, TensorType::kF64).ok());
}

TEST(GgufWriterTest, WriteFileMatchesWriteToStringAndLeavesNoPartialFile) {
  const std::string dir = bmad::testing::MakeTempDir("gguf_writer_");
  GgufWriter writer;
  writer.SetString("general.name", "file test");
  ASSERT_TRUE(writer.AddTensor("a", {7}, TensorType::kF32, std::vector<uint8_t>(28, 9)).ok());
  const std::string path = dir + "/out.gguf";
  ASSERT_TRUE(writer.WriteFile(path).ok());
  EXPECT_EQ(ReadWholeFile(path), *writer.WriteToString());
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*(*file)->GetString("general.name"), "file test");
  std::filesystem::remove_all(dir);
}

TEST(GgufWriterTest, WriteFileErrorsNameThePath) {
  GgufWriter writer;
  Status s = writer.WriteFile("/nonexistent-dir/model.gguf");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir/model.gguf"));
}

TEST(GgufWriterTest, WriteFileFollowsSymlinksAndRefusesWhatIsNotARegularFile) {
  // It used to rename the new file over whatever the path named: a link lost its target, and
  // (run as root) /dev/full became a regular file.
  const std::string dir = bmad::testing::MakeTempDir("gguf_writer_");
  GgufWriter writer;
  writer.SetString("general.name", "through a link");
  std::filesystem::create_directory(dir + "/real");
  std::filesystem::create_symlink("real/target.gguf", dir + "/link.gguf");  // dangling for now
  ASSERT_TRUE(writer.WriteFile(dir + "/link.gguf").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.gguf"));
  EXPECT_EQ(ReadWholeFile(dir + "/real/target.gguf"), *writer.WriteToString());
  ASSERT_TRUE(writer.WriteFile(dir + "/link.gguf").ok());  // and over the existing target
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/real/target.gguf.partial"));

  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  Status s = writer.WriteFile(dir + "/fifo");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is a FIFO; refusing to replace it"));
  EXPECT_TRUE(std::filesystem::is_fifo(dir + "/fifo"));
  std::filesystem::create_symlink("fifo", dir + "/to-fifo");
  s = writer.WriteFile(dir + "/to-fifo");
  EXPECT_THAT(s.message(), HasSubstr("is a FIFO"));
  s = writer.WriteFile(dir + "/real");
  EXPECT_THAT(s.message(), HasSubstr("is a directory"));
  s = writer.WriteFile("/dev/null");
  EXPECT_THAT(s.message(), HasSubstr("/dev/null is a device"));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  std::filesystem::create_symlink("loop-b", dir + "/loop-a");
  std::filesystem::create_symlink("loop-a", dir + "/loop-b");
  s = writer.WriteFile(dir + "/loop-a");
  EXPECT_THAT(s.message(), HasSubstr("too many levels of symbolic links"));

  // A read-only file (a shared reference model, say) is not replaced, even by root, whom its
  // mode does not stop; through a link neither. A writable one is.
  const std::string kept = dir + "/reference.gguf";
  { std::ofstream(kept) << "the original"; }
  std::filesystem::permissions(kept, std::filesystem::perms::owner_read | std::filesystem::perms::group_read |
                                         std::filesystem::perms::others_read);
  s = writer.WriteFile(kept);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("reference.gguf is read-only; refusing to replace it"));
  std::filesystem::create_symlink("reference.gguf", dir + "/to-reference");
  EXPECT_THAT(writer.WriteFile(dir + "/to-reference").message(), HasSubstr("is read-only"));
  EXPECT_EQ(ReadWholeFile(kept), "the original");
  std::filesystem::permissions(kept, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  EXPECT_TRUE(writer.WriteFile(kept).ok());
  std::filesystem::remove_all(dir);
}

TEST(GgufWriterTest, AFailingFillAbortsTheWriteAndRemovesThePartialFile) {
  const std::string dir = bmad::testing::MakeTempDir("gguf_writer_");
  GgufWriter writer;
  ASSERT_TRUE(writer.AddTensor("bad", {4}, TensorType::kF32, [](std::span<uint8_t>) {
    return Internal("generator broke");
  }).ok());
  const std::string path = dir + "/out.gguf";
  Status s = writer.WriteFile(path);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'bad': generator broke"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  std::filesystem::remove_all(dir);
}

// Copying every key (SetValue) and tensor of a real model reproduces the file byte for byte:
// the writer's layout is the one gguf-py and llama.cpp write.
void ExpectRewriteIsIdentical(const std::string& name) {
  const std::string path = bmad::testing::SharedModelsDir() + "/" + name;
  auto source = GgufFile::Open(path);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  GgufWriter writer;
  for (const auto& [key, value] : (*source)->metadata()) {
    ASSERT_TRUE(writer.SetValue(key, value).ok()) << key;
  }
  for (const TensorInfo& t : (*source)->tensors()) {
    ASSERT_TRUE(writer.AddTensor(t.name, t.shape, static_cast<TensorType>(t.type),
                                 std::vector<uint8_t>(t.data, t.data + t.nbytes)).ok())
        << t.name;
  }
  auto bytes = writer.WriteToString();
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(*bytes == ReadWholeFile(path)) << name << ": rewrite differs";
}

TEST(GgufWriterTest, RewritesStories260KByteForByte) {
  ExpectRewriteIsIdentical("stories260K.gguf");
}

TEST(GgufWriterTest, RewritesLlama2TinyRandomByteForByte) {
  ExpectRewriteIsIdentical("llama-2-tiny-random.gguf");
}

}  // namespace
}  // namespace bmad::gguf
