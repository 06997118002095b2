// The vocabulary shared by every stage: MLA dimensions, KV formats and Q modes.
//
//   if (format == KvFormat::kMxfp4) bytes = num_tokens * KvBytesPerToken(format);
#ifndef MLAJIT_SRC_BASE_MLA_TYPES_H_
#define MLAJIT_SRC_BASE_MLA_TYPES_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace mlajit {

// DeepSeek-V3 "forward_absorb" MLA: one latent KV head of 576 dims shared by all
// query heads; the first 512 dims of each KV token are also its V.
inline constexpr int kHeadDimQk = 576;
inline constexpr int kHeadDimV = 512;
inline constexpr int kMaxHeads = 128;
inline constexpr int kMaxQLen = 8;
inline constexpr int kMxBlock = 32;  // elements per MXFP4 scale (OCP MX)
// MXFP4 token: 288 bytes of packed e2m1 (low nibble = even element) followed by
// 18 e8m0 scale bytes, one per 32 elements.
inline constexpr int kMxfp4PackedBytes = kHeadDimQk / 2;
inline constexpr int kMxfp4ScaleBytes = kHeadDimQk / kMxBlock;

// Values match the public C enum mlajit_kv_format_t.
enum class KvFormat : int32_t { kBf16 = 0, kFp8E4m3 = 1, kMxfp4 = 2 };
// Values match the public C enum mlajit_q_mode_t. kFp8: Q is quantised to fp8
// e4m3 per query row, one power-of-two scale (the smallest 2^e with amax <=
// 448 * 2^e) for each token's head of 576 values, before the products ("a8").
enum class QMode : int32_t { kBf16 = 0, kFp8 = 1 };

constexpr int KvBytesPerToken(KvFormat f) {
  return f == KvFormat::kBf16      ? kHeadDimQk * 2
         : f == KvFormat::kFp8E4m3 ? kHeadDimQk
                                   : kMxfp4PackedBytes + kMxfp4ScaleBytes;
}

constexpr std::string_view KvFormatName(KvFormat f) {
  return f == KvFormat::kBf16 ? "bf16" : f == KvFormat::kFp8E4m3 ? "fp8_e4m3" : "mxfp4";
}
constexpr std::string_view QModeName(QMode m) { return m == QMode::kBf16 ? "bf16" : "fp8"; }
// The format KvFormatName calls `name`, if any.
constexpr std::optional<KvFormat> KvFormatFromName(std::string_view name) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    if (KvFormatName(f) == name) return f;
  }
  return std::nullopt;
}

constexpr bool IsValidKvFormat(int32_t v) { return v >= 0 && v <= 2; }
constexpr bool IsValidQMode(int32_t v) { return v == 0 || v == 1; }
constexpr bool IsValidPageSize(int32_t p) {
  return p == 0 || p == 1 || p == 16 || p == 32 || p == 64 || p == 128;  // 0 = flat
}

}  // namespace mlajit

#endif  // MLAJIT_SRC_BASE_MLA_TYPES_H_
