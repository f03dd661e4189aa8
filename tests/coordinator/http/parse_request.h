// Parsing request bodies the way the HTTP front end does, with the limits the tests assume.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/status.h"
#include "coordinator/http/openai_request.h"

namespace bmad::testing {

inline http::RequestLimits TestLimits() {
  http::RequestLimits limits;
  limits.max_model_len = 4096;
  return limits;
}

// A /v1/completions body.
inline Result<http::CompletionRequest> Completion(
    std::string_view body, const http::RequestLimits& limits = TestLimits()) {
  return http::ParseCompletionRequest(body, /*chat=*/false, limits);
}

// A /v1/chat/completions body.
inline Result<http::CompletionRequest> Chat(std::string_view body,
                                            const http::RequestLimits& limits = TestLimits()) {
  return http::ParseCompletionRequest(body, /*chat=*/true, limits);
}

// The parsed request; a failure is a test failure (and an empty request).
inline http::CompletionRequest Ok(const Result<http::CompletionRequest>& result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : http::CompletionRequest{};
}

// A body, the endpoint, and the phrases its error must contain.
struct Rejection {
  std::string body;
  bool chat;
  std::vector<std::string> parts;
  StatusCode code = StatusCode::kInvalidArgument;
};

// Each body is refused with its code and a message holding its parts.
inline void ExpectRejected(const std::vector<Rejection>& cases, const http::RequestLimits& limits = TestLimits()) {
  for (const Rejection& c : cases) {
    const Result<http::CompletionRequest> result = http::ParseCompletionRequest(c.body, c.chat, limits);
    ASSERT_FALSE(result.ok()) << c.body;
    EXPECT_EQ(result.status().code(), c.code) << c.body << "\n" << result.status().ToString();
    for (const std::string& part : c.parts) {
      EXPECT_THAT(result.status().message(), ::testing::HasSubstr(part)) << c.body;
    }
  }
}

}  // namespace bmad::testing
