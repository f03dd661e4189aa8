// JsonNestingDepth: brackets count outside strings only (escaped quotes do not end a string),
// and text that is not JSON, or is cut short, is measured as far as it goes. JsonContainerEnd:
// where the first container closes, by the same rules.
#include "common/json_nesting.h"

#include <gtest/gtest.h>

#include <string>

namespace bmad {
namespace {

TEST(JsonNestingDepth, CountsContainersOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth(""), 0u);
  EXPECT_EQ(JsonNestingDepth("12"), 0u);
  EXPECT_EQ(JsonNestingDepth("{}"), 1u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}],"c":{}})"), 4u);
  EXPECT_EQ(JsonNestingDepth(R"(["[[[", "{{"])"), 1u);
  EXPECT_EQ(JsonNestingDepth(R"(["a\"[[", "\\", [2]])"), 2u);  // \" stays in the string; \\ ends it
}

TEST(JsonNestingDepth, MeasuresTextThatIsNotJson) {
  EXPECT_EQ(JsonNestingDepth(std::string(30000, '[')), 30000u);
  EXPECT_EQ(JsonNestingDepth("]]]}[["), 2u);  // closers with nothing open are skipped
  EXPECT_EQ(JsonNestingDepth(R"(["unclosed [[[)"), 1u);
}

TEST(JsonContainerEnd, FindsWhereTheFirstContainerCloses) {
  EXPECT_EQ(JsonContainerEnd(R"({"a": [1, "}"]}; {"b": 2})"), 15u);
  EXPECT_EQ(JsonContainerEnd(R"(["\"]", {}] tail)"), 11u);  // \" stays in the string
  EXPECT_EQ(JsonContainerEnd(R"({"a": [1)"), std::string_view::npos);
  EXPECT_EQ(JsonContainerEnd("no container"), std::string_view::npos);
}

}  // namespace
}  // namespace bmad
