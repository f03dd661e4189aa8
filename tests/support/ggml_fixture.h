// Helpers of the fixtures taken from llama.cpp's ggml (tests/kernels/k_quants_test.cc,
// legacy_quants_test.cc): the inputs its harness quantized, and the hex its output came in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bmad::testing {

// The harness's inputs: an integer hash of (i, salt) mapped to [-scale, scale] in steps of
// scale / 1000, exact in float on any machine.
inline float GgmlFixtureInput(uint32_t i, uint32_t salt, float scale) {
  uint32_t h = (i + 1) * 2654435761u ^ salt * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return static_cast<float>(static_cast<int>(h % 2001u) - 1000) / 1000.0f * scale;
}

// Bytes of a string of hex digit pairs.
inline std::vector<uint8_t> FromHex(const char* hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; hex[i] != '\0' && hex[i + 1] != '\0'; i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex + i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace bmad::testing
