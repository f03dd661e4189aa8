// Writes one valid encoding of each message kind into DIR, as the fuzzer's seed corpus.
#include <cstdio>
#include <fstream>

#include "common/proto/codec.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: proto_fuzz_seeds DIR\n");
    return 2;
  }
  using namespace bmad::proto;
  SamplingParams sampling;
  sampling.stop_strings = {"\n"};
  sampling.stop_token_ids = {2};
  const Message seeds[] = {
      Submit{"c", "m", false, "hello", {}, sampling, 1, 100, true, "sk-key"},
      Submit{"c", "m", true, "", {1, 2, 3}, sampling, 0, 0, false},
      Cancel{"c", 1},
      Accepted{"c", 1, 3},
      TokenChunk{1, "c", 0, 0, {5, 6}, "ab", {-0.1f, -0.2f}, FinishReason::kStop, Usage{1, 2, 0}},
      ErrorMessage{bmad::StatusCode::kResourceExhausted, "overloaded", 1, "c", 100},
      StatusQuery{},
      ClusterStatus{"m", {ReplicaInfo{}}, 1, 2, 3},
      Register{ReplicaInfo{}, 1},
      RegisterAck{true, "ok"},
      Heartbeat{"r", LoadStats{}, {1, 2}},
      Assign{1, {1, 2}, {3}, sampling, 1, 10, 20},
      WorkerCancel{1},
      Drain{},
      Shutdown{"x"},
      StepPlan{1, {NewSequence{1, {1, 2}}}, {ScheduledSequence{1, 0, 2, {}, {1}, true}}, {2}, false},
      HeartbeatAck{},
  };
  int i = 0;
  for (const Message& m : seeds) {
    const std::string bytes = Encode(m);
    std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(i++), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return 0;
}
