// GgufFile on damaged input: every truncation and bounded random mutations of valid files.
// Nothing may crash (the sanitizer build runs these too); every failure is a Status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"

namespace bmad::gguf {
namespace {

using ::testing::HasSubstr;

// A small file with every kind of value and three tensors. The last tensor's size is a
// multiple of the alignment, so the file ends where its data ends: every shorter prefix is
// missing something the reader needs.
std::string SmallValidFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.block_count", 2);
  w.SetInt32("i32", -7);
  w.SetFloat32("f32", 0.5f);
  w.SetBool("b", true);
  w.SetUint64("u64", 1ull << 40);
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "bc"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -2});
  w.SetInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  EXPECT_TRUE(w.SetValue("u8s", {ValueType::kArray, {}, ValueType::kUint8,
                                 {uint64_t{1}, uint64_t{2}, uint64_t{3}}}).ok());
  EXPECT_TRUE(w.AddTensor("norm", {3}, TensorType::kF32, std::vector<uint8_t>(12, 0x3f)).ok());
  EXPECT_TRUE(w.AddTensor("q", {32, 1}, TensorType::kQ8_0, std::vector<uint8_t>(34, 1)).ok());
  EXPECT_TRUE(w.AddTensor("last", {8, 2}, TensorType::kF16, std::vector<uint8_t>(32, 2)).ok());
  auto bytes = w.WriteToString();
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::string();
}

// Reads everything a caller could read from a file that opened. Every byte of every tensor is
// read, so a tensor reaching past the buffer is caught (by AddressSanitizer in that build).
void TouchEverything(const GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    (void)file.GetInt(key);
    (void)file.GetFloat(key);
    (void)file.GetBool(key);
    (void)file.GetString(key);
    (void)file.GetStringArray(key);
    (void)file.GetFloatArray(key);
    (void)file.GetIntArray(key);
    if (value.type == ValueType::kString) (void)std::get<std::string_view>(value.scalar).size();
  }
  for (const TensorInfo& t : file.tensors()) {
    ASSERT_NE(t.data, nullptr);
    ASSERT_LE(t.nbytes, file.file_size()) << t.name;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    EXPECT_LE(sum, 255 * t.nbytes);
    (void)t.ShapeString();
    (void)t.type_name();
  }
}

TEST(GgufRobustnessTest, EveryTruncationFailsCleanly) {
  const std::string bytes = SmallValidFile();
  auto whole = GgufFile::FromBytes(bytes, "small.gguf");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  // The file ends with the 32 data bytes of "last" (no trailing padding).
  ASSERT_EQ(bytes.substr(bytes.size() - 32), std::string(32, '\2'));

  for (size_t len = 0; len < bytes.size(); ++len) {
    auto file = GgufFile::FromBytes(bytes.substr(0, len), "small.gguf");
    ASSERT_FALSE(file.ok()) << "a " << len << "-byte prefix parsed";
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss)
        << len << ": " << file.status().ToString();
    if (len >= 4) {
      EXPECT_THAT(file.status().message(), HasSubstr("truncated")) << len;
    } else {
      EXPECT_THAT(file.status().message(), HasSubstr("shorter than its header")) << len;
    }
    EXPECT_THAT(file.status().message(), HasSubstr("small.gguf"));
  }
}

// Overwrites 1-4 spots with random bytes, boundary values, or an 8-byte random length.
void Mutate(std::string& bytes, size_t limit, std::mt19937_64& rng) {
  const int spots = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < spots; ++i) {
    const size_t pos = rng() % limit;
    switch (rng() % 4) {
      case 0:
        bytes[pos] = static_cast<char>(rng());
        break;
      case 1:
        bytes[pos] = static_cast<char>(rng() % 2 ? 0xff : 0x00);
        break;
      case 2: {
        bytes[pos] = static_cast<char>(bytes[pos] + (rng() % 2 ? 1 : -1));
        break;
      }
      default: {
        const uint64_t value = rng() >> (rng() % 64);
        const size_t n = std::min<size_t>(8, bytes.size() - pos);
        std::memcpy(&bytes[pos], &value, n);
        break;
      }
    }
  }
}

TEST(GgufRobustnessTest, RandomMutationsOfASmallFileNeverCrash) {
  const std::string original = SmallValidFile();
  std::mt19937_64 rng(20261129);
  int opened = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string bytes = original;
    Mutate(bytes, bytes.size(), rng);
    auto file = GgufFile::FromBytes(bytes, "mutated.gguf");
    if (file.ok()) {
      ++opened;
      TouchEverything(**file);
    } else {
      EXPECT_FALSE(file.status().message().empty());
      EXPECT_NE(file.status().code(), StatusCode::kOk);
    }
  }
  // Mutations of tensor data and of values keep the file valid: both paths are exercised.
  EXPECT_GT(opened, 100);
  EXPECT_LT(opened, 20000);
}

TEST(GgufRobustnessTest, RandomMutationsOfARealHeaderNeverCrash) {
  const std::string path = bmad::testing::SharedModelsDir() + "/stories260K.gguf";
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string original = ss.str();
  auto whole = GgufFile::FromBytes(original, "stories260K.gguf");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  // The metadata (512 tokens) and the tensor infos end near byte 14,100: mutate the first
  // 16 KiB, mostly header, a little tensor data.
  std::mt19937_64 rng(42);
  for (int iteration = 0; iteration < 400; ++iteration) {
    std::string bytes = original;
    Mutate(bytes, 16 * 1024, rng);
    auto file = GgufFile::FromBytes(bytes, "mutated.gguf");
    if (file.ok()) TouchEverything(**file);
  }
}

}  // namespace
}  // namespace bmad::gguf
