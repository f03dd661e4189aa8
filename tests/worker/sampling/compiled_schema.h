// A JSON Schema the test expects to compile; a failure is reported with the schema's text.
#pragma once

#include <memory>
#include <string_view>

#include <gtest/gtest.h>

#include "worker/sampling/json_schema.h"

namespace bmad::testing {

inline std::shared_ptr<const sampling::JsonSchema> CompiledSchema(std::string_view text) {
  Result<std::shared_ptr<const sampling::JsonSchema>> s = sampling::JsonSchema::Compile(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

}  // namespace bmad::testing
