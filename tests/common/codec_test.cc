#include "common/proto/codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "bmad.capnp.h"

namespace bmad::proto {
namespace {

std::vector<Message> SampleMessages() {
  SamplingParams sampling;
  sampling.temperature = 0.7f;
  sampling.top_k = 40;
  sampling.top_p = 0.9f;
  sampling.min_p = 0.05f;
  sampling.repetition_penalty = 1.1f;
  sampling.presence_penalty = 0.2f;
  sampling.frequency_penalty = 0.3f;
  sampling.seed = 1234;
  sampling.has_seed = true;
  sampling.max_tokens = 77;
  sampling.stop_token_ids = {2, 13};
  sampling.stop_strings = {"\n\n", "END"};
  sampling.logprobs = true;
  sampling.top_logprobs = 2;
  sampling.min_tokens = 5;
  sampling.include_stop_str_in_output = true;
  sampling.response_format = ResponseFormat::kJsonSchema;
  sampling.json_schema = R"({"type":"object","properties":{"a":{"enum":["\u00e9"]}}})";
  sampling.logit_bias = {{13, -100.0f}, {261, 2.5f}};
  sampling.allowed_token_ids = {5, 7, 5};
  sampling.bad_words = {{261}, {378, 9, 1}, {}};
  sampling.prompt_logprobs = 1;
  sampling.cache_salt = "tenant-\xc3\xa9";
  sampling.disable_any_whitespace = true;
  sampling.reasoning_end_token = 151668;
  sampling.reasoning_start_token = 151667;

  Submit text_submit{"c-1", "stories", false, "Once upon a time", {}, sampling, 0, 1500, true, "sk-test-1"};
  SamplingParams json_object;
  json_object.response_format = ResponseFormat::kJsonObject;
  Submit token_submit{"c-2", "", true, "", {1, 403, 407}, json_object, 2, 0, false};
  TokenChunk chunk{42, "c-1", 3, 17, {261, 378}, " a time", {-0.5f, -1.25f},
                   FinishReason::kLength, Usage{5, 20, 4}, {261, 7, 378, 9}, {-0.5f, -2.0f, -1.25f, -1.5f}, 2};
  chunk.prompt_logprob_offset = 3;
  chunk.prompt_logprobs = {-2.5f, -0.125f};
  chunk.prompt_ranks = {4, 1};
  chunk.prompt_top_token_ids = {13, 378};
  chunk.prompt_top_logprobs = {-0.75f, -0.125f};
  ReplicaInfo info;
  info.replica_id = "r0";
  info.pool = ReplicaPool::kLongTail;
  info.tp = 2;
  info.pp = 2;
  info.kv_blocks = 4096;
  info.block_size = 16;
  info.max_seqs = 64;
  info.model_name = "stories";
  info.context_length = 512;
  info.metrics_address = "127.0.0.1:9500";
  info.live = true;
  info.load = LoadStats{3, 4, 0.5f, 0.75f, 100, 200, 9, 99, 64};
  info.in_flight = 7;
  info.routed_total = 70;
  StepPlan plan;
  plan.step = 5;
  plan.new_sequences = {NewSequence{9, {1, 2, 3}}};
  plan.scheduled = {ScheduledSequence{9, 0, 3, {}, {1}, true},
                    ScheduledSequence{8, 40, 1, {77}, {}, true}};
  plan.released = {4, 6};
  return {text_submit,
          token_submit,
          Cancel{"c-1", 42},
          Accepted{"c-1", 42, 5},
          chunk,
          ErrorMessage{StatusCode::kResourceExhausted, "overloaded", 42, "c-1", 250, 3},
          ErrorMessage{StatusCode::kUnauthenticated, "no API key", 0, "c-2", 0, 0},
          StatusQuery{},
          ClusterStatus{"stories", {info, info}, 3, 4, 1000},
          Register{info, 77},
          RegisterAck{true, "welcome"},
          Heartbeat{"r0", info.load, {42, 43}, 0xfffffff0u, true, {0xfffffff0u, 7}, 0xfffffff3u, true},
          Assign{42, {1, 2, 3}, {4, 5}, sampling, 1, 2000, 1700000000000, 4},
          WorkerCancel{42},
          Drain{},
          Shutdown{"bye"},
          Shutdown{"drained", /*planned=*/true},
          plan,
          HeartbeatAck{0xfffffff3u, true}};
}

TEST(CodecTest, AStopFinishKeepsItsCause) {
  TokenChunk by_string;
  by_string.finish_reason = FinishReason::kStop;
  by_string.stop_string = "END";
  TokenChunk by_token = by_string;
  by_token.stop_string.clear();
  by_token.stop_token_id = 13;
  for (const TokenChunk& chunk : {by_string, by_token, TokenChunk{}}) {
    const std::string bytes = Encode(Message(chunk));
    Result<Message> back = Decode(bytes.data(), bytes.size());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_TRUE(std::holds_alternative<TokenChunk>(*back));
    EXPECT_EQ(std::get<TokenChunk>(*back), chunk);
  }
  EXPECT_EQ(TokenChunk{}.stop_token_id, -1);
}

TEST(CodecTest, EveryMessageRoundTrips) {
  std::vector<Message> messages = SampleMessages();
  ASSERT_EQ(messages.size(), std::variant_size_v<Message> + 3);  // two submits, errors, shutdowns
  for (const Message& m : messages) {
    const std::string bytes = Encode(m);
    EXPECT_EQ(bytes.size() % 8, 0u);
    Result<Message> back = Decode(bytes.data(), bytes.size());
    ASSERT_TRUE(back.ok()) << MessageName(m) << ": " << back.status().ToString();
    EXPECT_TRUE(*back == m) << MessageName(m);
  }
}

TEST(CodecTest, TextKeepsEmbeddedNulBytes) {
  TokenChunk chunk;
  chunk.text = std::string("a\0b", 3);  // the <0x00> byte token decodes to a NUL
  const std::string bytes = Encode(chunk);
  Result<Message> back = Decode(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<TokenChunk>(*back).text, std::string("a\0b", 3));
}

TEST(CodecTest, DecodesUnalignedBuffers) {
  const std::string bytes = Encode(Cancel{"x", 1});
  std::string shifted = " " + bytes;
  Result<Message> back = Decode(shifted.data() + 1, bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
}

TEST(CodecTest, RejectsEmptyTruncatedAndTrailing) {
  EXPECT_EQ(Decode("", 0).status().code(), StatusCode::kDataLoss);
  const std::string bytes = Encode(SampleMessages()[0]);
  for (size_t cut : {size_t{3}, size_t{8}, size_t{16}, bytes.size() - 8, bytes.size() - 1}) {
    Result<Message> r = Decode(bytes.data(), cut);
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  }
  std::string trailing = bytes + std::string(8, '\0');
  EXPECT_EQ(Decode(trailing.data(), trailing.size()).status().code(), StatusCode::kDataLoss);
}

TEST(CodecTest, RejectsOversizedMessages) {
  const std::string bytes = Encode(SampleMessages()[0]);
  Result<Message> r = Decode(bytes.data(), bytes.size(), bytes.size() - 8);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("exceeds the limit"), std::string::npos);
}

std::string EncodeRaw(capnp::MallocMessageBuilder& builder) {
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// A Submit whose logit_bias list claims `count` elements of zero size each (a list tag saying
// "count structs of 0 words"): a few hundred bytes on the wire.
std::vector<uint64_t> SubmitClaimingEmptyLogitBiases(uint64_t count) {
  capnp::MallocMessageBuilder builder;
  auto envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  auto submit = envelope.getBody().initSubmit();
  submit.getPrompt().initTokenIds(1).set(0, 1);
  auto bias = submit.initSampling().initLogitBias(1);
  bias[0].setTokenId(0x11223344);
  bias[0].setBias(1.0f);
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(builder);
  std::vector<uint64_t> words(flat.size());  // (capnp::word cannot be copied into a vector)
  std::memcpy(words.data(), flat.begin(), flat.size() * sizeof(uint64_t));
  uint64_t* w = words.data();
  // The list's tag word (1 element of 1 data word) is followed by the element's data.
  const uint64_t tag = (uint64_t{1} << 2) | (uint64_t{1} << 32);
  size_t tag_at = 0;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (w[i] == tag && (w[i + 1] & 0xffffffff) == 0x11223344) tag_at = i;
  }
  EXPECT_GT(tag_at, 0u) << "no logit_bias list tag";
  // The list pointer to it: a list (type 1) of inline composites (element size 7).
  for (size_t i = 0; i < tag_at; ++i) {
    const uint64_t p = w[i];
    const int32_t offset = static_cast<int32_t>(p & 0xffffffff) >> 2;
    if ((p & 3) == 1 && ((p >> 32) & 7) == 7 && i + 1 + offset == tag_at) {
      w[i] = p & 0x7ffffffffULL;  // 0 words of elements
      w[tag_at] = count << 2;     // `count` elements of 0 data and 0 pointer words
      return words;
    }
  }
  ADD_FAILURE() << "no logit_bias list pointer";
  return words;
}

TEST(CodecTest, ASmallMessageCannotDecodeIntoAHugeOne) {
  // Cap'n Proto charges each zero-sized element one word against the traversal limit, which
  // was sized for the largest message allowed (64 MiB): a 200-byte Submit decoded into 8
  // million logit biases (67 MB, a tenth of a second of the coordinator's event loop each).
  // The limit now follows the message's own size.
  const std::vector<uint64_t> small = SubmitClaimingEmptyLogitBiases(1);
  Result<Message> one = Decode(small.data(), small.size() * sizeof(uint64_t));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(std::get<Submit>(*one).sampling.logit_bias.size(), 1u);
  const std::vector<uint64_t> huge = SubmitClaimingEmptyLogitBiases(8'000'000);
  ASSERT_LT(huge.size() * sizeof(uint64_t), 512u);
  Result<Message> refused = Decode(huge.data(), huge.size() * sizeof(uint64_t));
  ASSERT_FALSE(refused.ok()) << std::get<Submit>(*refused).sampling.logit_bias.size() << " logit biases";
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss) << refused.status().ToString();
  // A large message of real content still decodes: its limit grows with it.
  Submit big;
  big.prompt_is_tokens = true;
  big.prompt_tokens.assign(1 << 20, 7);
  big.sampling.logit_bias.assign(4096, LogitBias{3, 1.0f});
  const std::string wire = Encode(big);
  Result<Message> back = Decode(wire.data(), wire.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Submit>(*back).prompt_tokens.size(), size_t{1} << 20);
  EXPECT_EQ(std::get<Submit>(*back).sampling.logit_bias.size(), 4096u);
}

TEST(CodecTest, RejectsOtherProtocolVersions) {
  capnp::MallocMessageBuilder builder;
  auto env = builder.initRoot<wire::Envelope>();
  env.setVersion(kProtocolVersion + 1);
  env.getBody().initDrain();
  const std::string bytes = EncodeRaw(builder);
  Result<Message> r = Decode(bytes.data(), bytes.size());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("protocol version " + std::to_string(kProtocolVersion + 1)),
            std::string::npos);
}

TEST(CodecTest, AnAnswerCanBeStampedWithThePeersVersion) {
  // How the coordinator tells a peer of another protocol version why it is refused: in that
  // peer's version, which only EnvelopeVersion reads here.
  const Message ack = RegisterAck{false, "speak version 7"};
  const std::string ours = Encode(ack);
  EXPECT_EQ(EnvelopeVersion(ours.data(), ours.size()), std::optional<uint16_t>(kProtocolVersion));
  const std::string theirs = EncodeStamped(ack, kProtocolVersion + 1);
  EXPECT_EQ(EnvelopeVersion(theirs.data(), theirs.size()), std::optional<uint16_t>(kProtocolVersion + 1));
  EXPECT_EQ(Decode(theirs.data(), theirs.size()).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncodeStamped(ack, kProtocolVersion), ours);
  const std::string garbage(16, '\xff');
  EXPECT_EQ(EnvelopeVersion(garbage.data(), garbage.size()), std::nullopt);
  EXPECT_EQ(EnvelopeVersion(garbage.data(), 3), std::nullopt);
}

TEST(CodecTest, RejectsOutOfRangeEnumsAndCodes) {
  {
    capnp::MallocMessageBuilder builder;
    auto env = builder.initRoot<wire::Envelope>();
    env.setVersion(kProtocolVersion);
    env.getBody().initError().setCode(999);
    const std::string bytes = EncodeRaw(builder);
    Result<Message> r = Decode(bytes.data(), bytes.size());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("error code 999"), std::string::npos);
  }
  {
    // An error with code 0 (OK) fails nothing: refused rather than failing a request as "OK".
    capnp::MallocMessageBuilder builder;
    auto env = builder.initRoot<wire::Envelope>();
    env.setVersion(kProtocolVersion);
    env.getBody().initError().setCode(0);
    const std::string bytes = EncodeRaw(builder);
    Result<Message> r = Decode(bytes.data(), bytes.size());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("code 0 (OK)"), std::string::npos) << r.status().ToString();
  }
  {
    capnp::MallocMessageBuilder builder;
    auto env = builder.initRoot<wire::Envelope>();
    env.setVersion(kProtocolVersion);
    env.getBody().initTokenChunk().setFinishReason(static_cast<wire::FinishReason>(40));
    const std::string bytes = EncodeRaw(builder);
    EXPECT_EQ(Decode(bytes.data(), bytes.size()).status().code(), StatusCode::kInvalidArgument);
  }
}

// Millions of empty texts fit a message but decode into several times its size: a list of
// texts is refused past 1024 (sampling itself allows 8 stop strings).
TEST(CodecTest, AListOfTextsIsBounded) {
  for (const unsigned n : {1024u, 1025u}) {
    capnp::MallocMessageBuilder builder;
    auto env = builder.initRoot<wire::Envelope>();
    env.setVersion(kProtocolVersion);
    env.getBody().initSubmit().initSampling().initStopStrings(n);
    const std::string bytes = EncodeRaw(builder);
    Result<Message> r = Decode(bytes.data(), bytes.size());
    if (n == 1024) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("stopStrings holds 1025 texts"), std::string::npos) << r.status().ToString();
    }
  }
}

TEST(CodecTest, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(7);
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    const size_t words = rng() % 16;
    std::string buf(words * 8 + (i % 7 == 0 ? rng() % 8 : 0), '\0');
    for (char& c : buf) c = static_cast<char>(rng());
    Result<Message> r = Decode(buf.data(), buf.size());
    if (r.ok()) {
      ++decoded;
      const std::string again = Encode(*r);  // whatever decodes must encode again
      EXPECT_TRUE(Decode(again.data(), again.size()).ok());
    }
  }
  SUCCEED() << decoded << " random buffers happened to decode";
}

TEST(CodecTest, MutatedMessagesNeverCrash) {
  std::mt19937_64 rng(11);
  const std::vector<Message> samples = SampleMessages();
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = Encode(samples[rng() % samples.size()]);
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
    if (rng() % 4 == 0) bytes.resize(bytes.size() - 8 * (1 + rng() % 2));
    Result<Message> r = Decode(bytes.data(), bytes.size());
    if (r.ok()) {
      const std::string again = Encode(*r);
      EXPECT_TRUE(Decode(again.data(), again.size()).ok());
    }
  }
}

TEST(CodecTest, NamesAndFinishReasons) {
  EXPECT_EQ(MessageName(Message{Drain{}}), "drain");
  EXPECT_EQ(MessageName(Message{StepPlan{}}), "step_plan");
  EXPECT_EQ(MessageName(Message{HeartbeatAck{}}), "heartbeat_ack");
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), "");
}

}  // namespace
}  // namespace bmad::proto
