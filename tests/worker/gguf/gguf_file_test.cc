// GgufFile on the real shared models and on hand-assembled files that break one rule each.
#include "worker/model/gguf/gguf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "tests/support/paths.h"
#include "tests/worker/gguf/raw_gguf.h"
#include "worker/model/gguf/gguf_writer.h"

namespace bmad::gguf {
namespace {

using ::testing::HasSubstr;
using testing::RawGguf;

constexpr uint32_t kF32 = static_cast<uint32_t>(TensorType::kF32);

std::string ModelPath(const std::string& name) {
  return bmad::testing::SharedModelsDir() + "/" + name;
}

std::unique_ptr<GgufFile> OpenOrDie(const std::string& path) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

TEST(GgufFileTest, ReadsStories260K) {
  auto file = OpenOrDie(ModelPath("stories260K.gguf"));
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->file_size(), 1185344u);
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetString("general.name"), "tinyllamas-stories-260k");
  EXPECT_EQ(*file->GetString("llama.tensor_data_layout"), "Meta AI original pth");
  EXPECT_EQ(*file->GetInt("llama.block_count"), 5);
  EXPECT_EQ(*file->GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(*file->GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(*file->GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(*file->GetInt("llama.rope.dimension_count"), 8);
  EXPECT_EQ(*file->GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(*file->GetInt("llama.context_length"), 512);
  EXPECT_NEAR(*file->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_FALSE(file->Has("llama.rope.freq_base"));
  EXPECT_EQ(*file->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*file->GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*file->GetInt("tokenizer.ggml.eos_token_id"), 2);

  auto tokens = file->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[403], "\xe2\x96\x81Once");
  auto types = file->GetIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  std::map<int64_t, int> type_counts;
  for (int64_t t : *types) ++type_counts[t];
  EXPECT_EQ(type_counts, (std::map<int64_t, int>{{1, 253}, {2, 1}, {3, 2}, {6, 256}}));
  EXPECT_EQ(file->GetFloatArray("tokenizer.ggml.scores")->size(), 512u);

  ASSERT_EQ(file->tensors().size(), 48u);
  int64_t elements = 0;
  for (const TensorInfo& t : file->tensors()) {
    EXPECT_EQ(t.type, kF32) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(t.elements()) * 4) << t.name;
    elements += t.elements();
  }
  EXPECT_EQ(elements, 292800);
  const std::map<std::string, std::string> shapes = {
      {"blk.0.attn_q.weight", "[64, 64]"},   {"blk.0.attn_k.weight", "[64, 32]"},
      {"blk.0.attn_v.weight", "[64, 32]"},   {"blk.4.attn_output.weight", "[64, 64]"},
      {"blk.2.ffn_gate.weight", "[64, 172]"}, {"blk.2.ffn_up.weight", "[64, 172]"},
      {"blk.3.ffn_down.weight", "[172, 64]"}, {"blk.1.attn_norm.weight", "[64]"},
      {"blk.1.ffn_norm.weight", "[64]"},      {"token_embd.weight", "[64, 512]"},
      {"output.weight", "[64, 512]"},          {"output_norm.weight", "[64]"}};
  for (const auto& [name, shape] : shapes) {
    const TensorInfo* t = file->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ShapeString(), shape) << name;
    EXPECT_EQ(t->type_name(), "f32");
  }
  // llama2.c ties the output to the embedding: the two tensors hold the same bytes.
  const TensorInfo* embd = file->FindTensor("token_embd.weight");
  const TensorInfo* out = file->FindTensor("output.weight");
  ASSERT_EQ(embd->nbytes, out->nbytes);
  EXPECT_EQ(std::memcmp(embd->data, out->data, embd->nbytes), 0);
  EXPECT_NE(embd->data, out->data);
}

TEST(GgufFileTest, ReadsLlama2TinyRandom) {
  auto file = OpenOrDie(ModelPath("llama-2-tiny-random.gguf"));
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->file_size(), 1750560u);
  EXPECT_EQ(*file->GetString("general.name"), "LLaMA v2");
  EXPECT_EQ(*file->GetInt("general.file_type"), 1);
  EXPECT_EQ(*file->GetInt("llama.block_count"), 1);
  EXPECT_EQ(*file->GetInt("llama.embedding_length"), 8);
  EXPECT_EQ(*file->GetInt("llama.attention.head_count"), 2);
  EXPECT_EQ(*file->GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(*file->GetInt("llama.rope.dimension_count"), 4);
  EXPECT_EQ(*file->GetInt("llama.feed_forward_length"), 32);
  EXPECT_EQ(*file->GetInt("llama.context_length"), 4096);
  EXPECT_EQ(*file->GetInt("tokenizer.ggml.unknown_token_id"), 0);
  auto tokens = file->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 32000u);
  // "Once upon a time" -> [1, 9038, 2501, 263, 931] in the Llama-2 vocabulary.
  EXPECT_EQ((*tokens)[9038], "\xe2\x96\x81Once");
  EXPECT_EQ((*tokens)[2501], "\xe2\x96\x81upon");
  EXPECT_EQ((*tokens)[263], "\xe2\x96\x81" "a");
  EXPECT_EQ((*tokens)[931], "\xe2\x96\x81time");

  ASSERT_EQ(file->tensors().size(), 12u);
  int64_t elements = 0;
  for (const TensorInfo& t : file->tensors()) {
    const bool is_norm = t.name.find("norm") != std::string::npos;
    EXPECT_EQ(t.type_name(), is_norm ? "f32" : "f16") << t.name;
    elements += t.elements();
  }
  EXPECT_EQ(elements, 513048);
  EXPECT_EQ(file->FindTensor("token_embd.weight")->ShapeString(), "[8, 32000]");
  EXPECT_EQ(file->FindTensor("output.weight")->ShapeString(), "[8, 32000]");
  EXPECT_EQ(file->FindTensor("blk.0.ffn_down.weight")->ShapeString(), "[32, 8]");
  EXPECT_EQ(file->FindTensor("blk.0.ffn_norm.weight")->ShapeString(), "[8]");
  EXPECT_EQ(file->FindTensor("no.such.tensor"), nullptr);
}

TEST(GgufFileTest, RefusesGgufVersion1) {
  auto file = GgufFile::Open(ModelPath("legacy/tinyllamas-stories-260k-f32.ggufv1.gguf"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(file.status().message(), HasSubstr("version 1"));
  EXPECT_THAT(file.status().message(), HasSubstr("tinyllamas-stories-260k-f32.ggufv1.gguf"));
}

TEST(GgufFileTest, MissingFileIsNotFoundAndDirectoryIsIoError) {
  auto missing = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/model.gguf"));
  auto dir = GgufFile::Open(bmad::testing::SharedModelsDir());
  EXPECT_EQ(dir.status().code(), StatusCode::kIoError);
}

TEST(GgufFileTest, TypedGettersReportMismatches) {
  auto file = OpenOrDie(ModelPath("stories260K.gguf"));
  ASSERT_NE(file, nullptr);
  auto absent = file->GetInt("no.such.key");
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(absent.status().message(), HasSubstr("no.such.key"));

  auto not_int = file->GetInt("general.name");
  EXPECT_EQ(not_int.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_int.status().message(), HasSubstr("'general.name' is string"));
  EXPECT_EQ(file->GetFloat("general.architecture").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(file->GetBool("llama.block_count").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file->GetString("llama.block_count").status().code(), StatusCode::kInvalidArgument);
  auto not_strings = file->GetStringArray("tokenizer.ggml.scores");
  EXPECT_EQ(not_strings.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_strings.status().message(), HasSubstr("array of float32"));
  EXPECT_EQ(file->GetFloatArray("tokenizer.ggml.tokens").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(file->GetIntArray("tokenizer.ggml.scores").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(file->GetIntArray("general.name").status().code(), StatusCode::kInvalidArgument);
  // An integer reads as a float too.
  EXPECT_DOUBLE_EQ(*file->GetFloat("llama.block_count"), 5.0);
}

// A uint64 past int64's range is an integer out of range, not a value of the wrong type ("is
// uint64, expected an integer" before; found in review).
TEST(GgufFileTest, AUint64PastInt64IsOutOfRangeNotTheWrongType) {
  const std::string dir = bmad::testing::MakeTempDir("gguf_u64_");
  gguf::GgufWriter writer;
  writer.SetUint64("big", uint64_t{1} << 63);
  writer.SetUint64("fits", (uint64_t{1} << 63) - 1);
  ASSERT_TRUE(writer.WriteFile(dir + "/u64.gguf").ok());
  auto file = OpenOrDie(dir + "/u64.gguf");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(*file->GetInt("fits"), INT64_MAX);
  auto big = file->GetInt("big");
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(),
              HasSubstr("metadata key 'big' is 9223372036854775808, past the largest value it can have (2^63 - 1)"));
  std::filesystem::remove_all(dir);
}

// --- Hand-assembled files, each breaking one rule. -----------------------------------------

Status Parse(const std::string& bytes) {
  return GgufFile::FromBytes(bytes, "test.gguf").status();
}

TEST(GgufFileTest, MinimalHandBuiltFileParses) {
  RawGguf raw;
  raw.Header(3, 1, 1).KvString("general.architecture", "llama");
  raw.Tensor("t", {8}, kF32, 0).PadTo(32).Zeros(32);
  auto file = GgufFile::FromBytes(raw.str(), "test.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->tensors()[0].nbytes, 32u);
  EXPECT_EQ((*file)->path(), "test.gguf");
}

TEST(GgufFileTest, AcceptsVersion2) {
  RawGguf raw;
  raw.Header(2, 0, 1).KvUint32("a", 7);
  auto file = GgufFile::FromBytes(raw.str(), "v2.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->version(), 2u);
}

TEST(GgufFileTest, RejectsBadMagic) {
  RawGguf raw;
  raw.Raw("GGML").Put<uint32_t>(3).Put<uint64_t>(0).Put<uint64_t>(0);
  Status s = Parse(raw.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("bad magic"));
  EXPECT_THAT(s.message(), HasSubstr("test.gguf"));
  EXPECT_EQ(Parse("").code(), StatusCode::kDataLoss);
}

TEST(GgufFileTest, RejectsUnsupportedVersions) {
  for (uint32_t version : {0u, 1u, 4u, 0x03000000u, 0xffffffffu}) {
    RawGguf raw;
    raw.Header(version, 0, 0);
    Status s = Parse(raw.str());
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << version;
    EXPECT_THAT(s.message(), HasSubstr("version " + std::to_string(version)));
  }
}

TEST(GgufFileTest, RejectsUnknownTensorType) {
  RawGguf raw;
  raw.Header(3, 1, 0).Tensor("weird", {32}, 99, 0).PadTo(32).Zeros(128);
  Status s = Parse(raw.str());
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("'weird'"));
  EXPECT_THAT(s.message(), HasSubstr("99"));
}

TEST(GgufFileTest, RejectsMisalignedTensorOffset) {
  RawGguf raw;
  raw.Header(3, 2, 0).Tensor("a", {8}, kF32, 0).Tensor("b", {8}, kF32, 36).PadTo(32).Zeros(128);
  Status s = Parse(raw.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("'b' data offset 36 is not aligned to 32"));
}

TEST(GgufFileTest, HonoursGeneralAlignment) {
  RawGguf raw;
  raw.Header(3, 1, 1).KvUint32("general.alignment", 64).Tensor("a", {8}, kF32, 32);
  EXPECT_THAT(Parse(raw.str() + std::string(256, '\0')).message(),
              HasSubstr("not aligned to 64"));
  RawGguf bad;
  bad.Header(3, 0, 1).KvUint32("general.alignment", 48);
  EXPECT_THAT(Parse(bad.str()).message(), HasSubstr("power of two"));
  // Below 8 (the specification's minimum), F32 data could sit at an odd address.
  for (uint32_t small : {1u, 2u, 4u}) {
    RawGguf tiny;
    tiny.Header(3, 0, 1).KvUint32("general.alignment", small);
    EXPECT_THAT(Parse(tiny.str()).message(), HasSubstr("power of two from 8")) << small;
  }
  RawGguf eight;
  eight.Header(3, 1, 1).KvUint32("general.alignment", 8).Tensor("a", {8}, kF32, 0).PadTo(8).Zeros(32);
  EXPECT_TRUE(Parse(eight.str()).ok()) << Parse(eight.str()).ToString();
}

// Keys are at most 65535 bytes (the specification), refused before they are copied.
TEST(GgufFileTest, RejectsOverlongKeys) {
  RawGguf raw;
  raw.Header(3, 0, 1).KvUint32(std::string(65536, 'k'), 1);
  Status s = Parse(raw.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("metadata key #0 is 65536 bytes long (at most 65535)"));
  RawGguf ok;
  ok.Header(3, 0, 1).KvUint32(std::string(65535, 'k'), 1);
  EXPECT_TRUE(Parse(ok.str()).ok());
}

// A key or tensor name with a control byte or invalid UTF-8 is a corrupt file, refused with the
// text escaped: a NUL ended the messages that quoted it ("'blk.0.attn_q.weight" looked like the
// expected name), an ESC reached the terminal. Found in review.
TEST(GgufFileTest, RejectsKeysAndTensorNamesThatAreNotPrintable) {
  RawGguf key;
  key.Header(3, 0, 1).KvUint32(std::string_view("general.x\0y", 11), 1);
  Status s = Parse(key.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("metadata key #0 is not printable text: 'general.x\\x00y'"));
  RawGguf name;
  name.Header(3, 1, 0).Tensor("blk.0\x1B[2K", {16}, kF32, 0).PadTo(32).Zeros(64);
  s = Parse(name.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("the name of tensor #0 is not printable text: 'blk.0\\x1B[2K'"));
}

TEST(GgufFileTest, RejectsTensorDataPastTheEnd) {
  RawGguf raw;
  raw.Header(3, 1, 0).Tensor("a", {16}, kF32, 0).PadTo(32).Zeros(63);  // needs 64
  Status s = Parse(raw.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
  EXPECT_THAT(s.message(), HasSubstr("runs past the end"));

  RawGguf far;
  far.Header(3, 1, 0).Tensor("a", {8}, kF32, 0xffffffffffffffe0ull).PadTo(32).Zeros(64);
  EXPECT_EQ(Parse(far.str()).code(), StatusCode::kDataLoss);
}

// More after the last tensor than its padding: infos read as data. A tensor count one too low
// (the shared model's, decremented) left every tensor read from the wrong bytes.
TEST(GgufFileTest, RejectsDataAfterTheLastTensorsPadding) {
  RawGguf trailing;
  trailing.Header(3, 1, 0).Tensor("a", {16}, kF32, 0).PadTo(32).Zeros(64 + 32);
  Status s = Parse(trailing.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("32 bytes follow the data of the last of its 1 tensors"));
  EXPECT_THAT(s.message(), HasSubstr("the header's tensor count is too low"));
  // Padding short of the alignment passes, and so does a last tensor without its padding.
  RawGguf padded;
  padded.Header(3, 1, 0).Tensor("a", {15}, kF32, 0).PadTo(32).Zeros(64);  // 60 bytes, 4 of padding
  EXPECT_TRUE(Parse(padded.str()).ok()) << Parse(padded.str()).ToString();
  RawGguf unpadded;
  unpadded.Header(3, 1, 0).Tensor("a", {15}, kF32, 0).PadTo(32).Zeros(60);
  EXPECT_TRUE(Parse(unpadded.str()).ok()) << Parse(unpadded.str()).ToString();

  // stories260K with its tensor count one too low.
  std::string bytes;
  {
    std::ifstream in(ModelPath("stories260K.gguf"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 24u);
  uint64_t count = 0;
  std::memcpy(&count, bytes.data() + 8, sizeof count);
  --count;
  std::memcpy(bytes.data() + 8, &count, sizeof count);
  s = Parse(bytes);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("the header's tensor count is too low"));
}

TEST(GgufFileTest, RejectsTensorsThatShareData) {
  // A small file of tensors all pointing at one block would have the loader prepare each as
  // its own (a 6 MB file took 2 GB).
  RawGguf shared;
  shared.Header(3, 2, 0).Tensor("a", {16}, kF32, 0).Tensor("b", {8}, kF32, 32).PadTo(32).Zeros(64);
  Status s = Parse(shared.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("the data of tensor 'b' (at 32) overlaps that of tensor 'a' (64 bytes at 0)"));
  RawGguf same;
  same.Header(3, 2, 0).Tensor("a", {8}, kF32, 0).Tensor("b", {8}, kF32, 0).PadTo(32).Zeros(64);
  EXPECT_EQ(Parse(same.str()).code(), StatusCode::kDataLoss);
  // Next to each other, in either order of the list, is fine.
  RawGguf apart;
  apart.Header(3, 2, 0).Tensor("b", {8}, kF32, 32).Tensor("a", {8}, kF32, 0).PadTo(32).Zeros(64);
  EXPECT_TRUE(Parse(apart.str()).ok()) << Parse(apart.str()).ToString();
}

TEST(GgufFileTest, RejectsTensorWhoseByteSizeOverflows) {
  // 2^31 x 2^31 f32 elements need 2^64 bytes: the size must not wrap to 0 and "fit".
  RawGguf raw;
  raw.Header(3, 1, 0).Tensor("huge", {1ull << 31, 1ull << 31}, kF32, 0).PadTo(32).Zeros(64);
  Status s = Parse(raw.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("'huge'"));
}

TEST(GgufFileTest, RejectsBadTensorShapes) {
  RawGguf zero_dims;
  zero_dims.Header(3, 1, 0).Tensor("a", {}, kF32, 0).PadTo(32).Zeros(64);
  EXPECT_THAT(Parse(zero_dims.str()).message(), HasSubstr("0 dimensions"));
  RawGguf zero;
  zero.Header(3, 1, 0).Tensor("a", {8, 0}, kF32, 0).PadTo(32).Zeros(64);
  EXPECT_THAT(Parse(zero.str()).message(), HasSubstr("invalid dimension 0"));
  RawGguf q8;
  q8.Header(3, 1, 0).Tensor("a", {33}, static_cast<uint32_t>(TensorType::kQ8_0), 0).Zeros(128);
  EXPECT_THAT(Parse(q8.str()).message(), HasSubstr("not a multiple of 32"));
}

TEST(GgufFileTest, RejectsDuplicateKeysAndTensors) {
  RawGguf keys;
  keys.Header(3, 0, 2).KvUint32("general.x", 1).KvString("general.x", "again");
  Status s = Parse(keys.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("'general.x' appears twice"));

  RawGguf tensors;
  tensors.Header(3, 2, 0).Tensor("w", {8}, kF32, 0).Tensor("w", {8}, kF32, 32).PadTo(32).Zeros(64);
  EXPECT_THAT(Parse(tensors.str()).message(), HasSubstr("tensor 'w' appears twice"));
}

TEST(GgufFileTest, RefusesMetadataArraysTooLargeInAll) {
  // Each array within its own bound, but together each one-byte element would cost 24 bytes of
  // memory here: the total is bounded too.
  auto uint8_array = [](RawGguf& g, std::string_view key, uint64_t count) {
    g.Str(key).Put(static_cast<uint32_t>(ValueType::kArray)).Put(static_cast<uint32_t>(ValueType::kUint8));
    g.Put(count).Zeros(count);
  };
  RawGguf fits;
  fits.Header(3, 0, 2);
  uint8_array(fits, "a", 1u << 22);
  uint8_array(fits, "b", 1u << 22);
  EXPECT_TRUE(Parse(fits.str()).ok()) << Parse(fits.str()).ToString();
  RawGguf over;
  over.Header(3, 0, 3);
  uint8_array(over, "a", 1u << 22);
  uint8_array(over, "b", 1u << 22);
  uint8_array(over, "c", 1);
  const Status s = Parse(over.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("metadata arrays hold an implausible 8388609 elements by 'c' (at most 8388608 in all"));
}

TEST(GgufFileTest, RejectsStringLengthsPastTheEnd) {
  RawGguf key;
  key.Header(3, 0, 1).Put<uint64_t>(1000).Raw("short");
  Status s = Parse(key.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("truncated"));

  RawGguf value;
  value.Header(3, 0, 1).Str("k").Put(static_cast<uint32_t>(ValueType::kString));
  value.Put<uint64_t>(0xffffffffffffff00ull).Raw("abc");
  s = Parse(value.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("'k'"));

  RawGguf name;
  name.Header(3, 1, 0).Put<uint64_t>(1ull << 62).Raw("t");
  EXPECT_EQ(Parse(name.str()).code(), StatusCode::kDataLoss);
}

TEST(GgufFileTest, RejectsArrayCountsPastTheEnd) {
  for (ValueType element : {ValueType::kUint8, ValueType::kFloat32, ValueType::kString,
                            ValueType::kUint64}) {
    RawGguf raw;
    raw.Header(3, 0, 1).Str("arr").Put(static_cast<uint32_t>(ValueType::kArray));
    raw.Put(static_cast<uint32_t>(element)).Put<uint64_t>(1ull << 60).Zeros(16);
    Status s = Parse(raw.str());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << ValueTypeName(element);
    EXPECT_THAT(s.message(), HasSubstr("'arr'"));
  }
  RawGguf nested;
  nested.Header(3, 0, 1).Str("arr").Put(static_cast<uint32_t>(ValueType::kArray));
  nested.Put(static_cast<uint32_t>(ValueType::kArray)).Put<uint64_t>(0);
  EXPECT_THAT(Parse(nested.str()).message(), HasSubstr("unsupported element type"));
}

TEST(GgufFileTest, RejectsHugeArraysAndLongTensorNames) {
  // 2^24 + 1 one-byte elements fit in the file but not in a sane vocabulary.
  RawGguf big;
  const uint64_t count = (1ull << 24) + 1;
  big.Header(3, 0, 1).Str("arr").Put(static_cast<uint32_t>(ValueType::kArray));
  big.Put(static_cast<uint32_t>(ValueType::kUint8)).Put<uint64_t>(count).Zeros(count);
  Status s = Parse(big.str());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("implausible"));

  RawGguf name;
  name.Header(3, 1, 0).Tensor(std::string(64, 'n'), {8}, kF32, 0).PadTo(32).Zeros(64);
  EXPECT_THAT(Parse(name.str()).message(), HasSubstr("longer than 63 bytes"));
  RawGguf ok;
  ok.Header(3, 1, 0).Tensor(std::string(63, 'n'), {8}, kF32, 0).PadTo(32).Zeros(32);
  EXPECT_TRUE(Parse(ok.str()).ok());
}

TEST(GgufFileTest, RejectsUnknownValueTypeAndImplausibleCounts) {
  RawGguf type;
  type.Header(3, 0, 1).Str("k").Put<uint32_t>(13).Put<uint32_t>(0);
  EXPECT_THAT(Parse(type.str()).message(), HasSubstr("unknown value type 13"));
  RawGguf kvs;
  kvs.Header(3, 0, 1ull << 40);
  EXPECT_EQ(Parse(kvs.str()).code(), StatusCode::kDataLoss);
  RawGguf tensors;
  tensors.Header(3, 1ull << 40, 0);
  EXPECT_EQ(Parse(tensors.str()).code(), StatusCode::kDataLoss);
  // A count that could be real in a file that ends after the header: truncated, not implausible.
  RawGguf cut;
  cut.Header(3, 48, 0);
  EXPECT_THAT(Parse(cut.str()).message(), HasSubstr("truncated GGUF file: the tensor infos (48 tensors)"));
  RawGguf cut_keys;
  cut_keys.Header(3, 0, 40);
  EXPECT_THAT(Parse(cut_keys.str()).message(), HasSubstr("truncated GGUF file: the metadata (40 keys)"));
}

TEST(GgufFileTest, ANamedPipeIsNoFileAndDoesNotBlock) {
  // Opening one used to wait for a writer, for ever.
  const std::string fifo = bmad::testing::MakeTempDir("bmad-gguf-") + "/model.gguf";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto file = GgufFile::Open(fifo);
  EXPECT_EQ(file.status().code(), StatusCode::kIoError);
  EXPECT_THAT(file.status().message(), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace bmad::gguf
