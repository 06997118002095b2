#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/base/log.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"

namespace mlajit {
namespace {

absl::StatusOr<int> Half(int v) {
  if (v % 2 != 0) return absl::InvalidArgumentError(absl::StrCat("v=", v, ": must be even"));
  return v / 2;
}

absl::StatusOr<int> Quarter(int v) {
  MLAJIT_ASSIGN_OR_RETURN(int h, Half(v));
  MLAJIT_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckQuarter(int v) {
  MLAJIT_RETURN_IF_ERROR(Quarter(v).status());
  return absl::OkStatus();
}

TEST(StatusMacros, PropagateValuesAndErrors) {
  EXPECT_EQ(*Quarter(12), 3);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Quarter(6).status().message(), "v=3: must be even");
  EXPECT_TRUE(CheckQuarter(8).ok());
  EXPECT_EQ(CheckQuarter(10).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MlaTypes, BytesPerToken) {
  EXPECT_EQ(KvBytesPerToken(KvFormat::kBf16), 1152);
  EXPECT_EQ(KvBytesPerToken(KvFormat::kFp8E4m3), 576);
  EXPECT_EQ(KvBytesPerToken(KvFormat::kMxfp4), 306);
  EXPECT_TRUE(IsValidPageSize(64));
  EXPECT_FALSE(IsValidPageSize(8));
}

TEST(Log, SinkReceivesEnabledLinesOnly) {
  struct Captured {
    std::vector<std::string> lines;
  } captured;
  SetLogSink(
      [](LogLevel, std::string_view line, void* u) {
        static_cast<Captured*>(u)->lines.emplace_back(line);
      },
      &captured);
  LogLevel saved = CurrentLogLevel();
  SetLogLevel(LogLevel::kWarn);
  MLAJIT_LOG_WARN("cache dir ", 7, " read-only");
  MLAJIT_LOG_DEBUG("not shown");
  SetLogLevel(saved);
  SetLogSink(nullptr, nullptr);
  ASSERT_EQ(captured.lines.size(), 1u);
  EXPECT_EQ(captured.lines[0], "cache dir 7 read-only");
}

}  // namespace
}  // namespace mlajit
