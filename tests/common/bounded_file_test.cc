// ReadFileUpTo: the whole file up to its bound, and a clear error past it or for what is not a
// readable file.
#include "common/bounded_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/paths.h"

namespace bmad {
namespace {

TEST(BoundedFileTest, ReadsUpToTheBoundAndNoFurther) {
  const std::string dir = testing::MakeTempDir("bmad-bounded-");
  const std::string path = dir + "/f";
  // More than one read chunk (64 KiB), so that the bound is checked across chunks.
  const std::string content(100'000, 'x');
  { std::ofstream(path, std::ios::binary) << content; }
  Result<std::string> whole = ReadFileUpTo(path, content.size());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, content);
  Result<std::string> over = ReadFileUpTo(path, content.size() - 1);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(), "is larger than 99999 bytes, the most read");
  { std::ofstream(dir + "/empty"); }
  EXPECT_EQ(ReadFileUpTo(dir + "/empty", 0).value(), "");
  std::filesystem::remove_all(dir);
}

TEST(BoundedFileTest, WhatIsNotAReadableFileIsNamed) {
  EXPECT_EQ(ReadFileUpTo("/nonexistent/f", 10).status().message(),
            "cannot open the file: No such file or directory");
  EXPECT_EQ(ReadFileUpTo("/tmp", 10).status().message(), "is a directory, not a file");
  // An endless device stops at the bound.
  EXPECT_EQ(ReadFileUpTo("/dev/zero", 1000).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace bmad
