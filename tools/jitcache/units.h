// Parsing and printing the units jitcache speaks: durations ("7d", "12h"),
// byte counts ("500M", "2GiB") and times.
//
//   std::optional<int64_t> s = ParseDuration("7d");      // 604800
//   std::optional<uint64_t> b = ParseBytes("1.5G");       // 1610612736
//   std::string h = FormatBytes(1536);                    // "1.5 KiB"
#ifndef MLAJIT_TOOLS_JITCACHE_UNITS_H_
#define MLAJIT_TOOLS_JITCACHE_UNITS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace mlajit::tools {

// "<number>[s|m|h|d|w]", no suffix = seconds; whole numbers only.
std::optional<int64_t> ParseDuration(const std::string& text);
// "<number>[K|M|G|T][i][B]" in powers of 1024, no suffix = bytes; "1.5G" allowed.
std::optional<uint64_t> ParseBytes(const std::string& text);
std::string FormatBytes(uint64_t bytes);
std::string FormatSeconds(double seconds);         // "42s", "3m05s", "1h02m"
std::string FormatUnixTime(int64_t unix_seconds);  // local "2025-01-31 12:00", "-" for 0

}  // namespace mlajit::tools

#endif  // MLAJIT_TOOLS_JITCACHE_UNITS_H_
