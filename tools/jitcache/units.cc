#include "tools/jitcache/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace mlajit::tools {

std::optional<int64_t> ParseDuration(const std::string& text) {
  size_t i = 0;
  int64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (n > (int64_t{1} << 40)) return std::nullopt;
    n = n * 10 + (text[i++] - '0');
  }
  if (i == 0) return std::nullopt;
  std::string unit = text.substr(i);
  if (unit.empty() || unit == "s") return n;
  if (unit == "m") return n * 60;
  if (unit == "h") return n * 3600;
  if (unit == "d") return n * 86400;
  if (unit == "w") return n * 7 * 86400;
  return std::nullopt;
}

std::optional<uint64_t> ParseBytes(const std::string& text) {
  size_t i = 0;
  bool dot = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
    dot |= text[i] == '.';
    ++i;
  }
  if (i == 0 || text[0] == '.') return std::nullopt;
  double value = std::strtod(text.substr(0, i).c_str(), nullptr);
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (!unit.empty() && unit != "B") {
    const std::string prefixes = "KMGT";
    size_t p = prefixes.find(unit[0]);
    std::string rest = unit.substr(1);
    if (p == std::string::npos || !(rest.empty() || rest == "B" || rest == "I" || rest == "IB")) {
      return std::nullopt;
    }
    scale = std::pow(1024.0, static_cast<double>(p + 1));
  }
  if (dot && scale == 1) return std::nullopt;  // fractional bytes
  double bytes = value * scale;
  if (bytes >= 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  }
  return buf;
}

std::string FormatSeconds(double seconds) {
  if (!(seconds >= 0) || seconds > 1e9) return "?";
  long s = std::lround(seconds);
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%lds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string FormatUnixTime(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

}  // namespace mlajit::tools
