// Parsing request bodies the way the HTTP front end does, with the limits the tests assume.
#pragma once

#include <string_view>

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

}  // namespace bmad::testing
