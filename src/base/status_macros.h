// Status propagation helpers used by every stage.
//
// Debian's abseil (20220623) ships no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so the
// library defines its own, once, here.
//
//   absl::StatusOr<int> ParseCount(absl::string_view s);
//   absl::Status Use(absl::string_view s) {
//     MLAJIT_ASSIGN_OR_RETURN(int n, ParseCount(s));
//     MLAJIT_RETURN_IF_ERROR(CheckPositive(n));
//     return absl::OkStatus();
//   }
#ifndef MLAJIT_SRC_BASE_STATUS_MACROS_H_
#define MLAJIT_SRC_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MLAJIT_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status mlajit_status_ = (expr);          \
    if (!mlajit_status_.ok()) return mlajit_status_; \
  } while (0)

#define MLAJIT_STATUS_CONCAT_INNER_(a, b) a##b
#define MLAJIT_STATUS_CONCAT_(a, b) MLAJIT_STATUS_CONCAT_INNER_(a, b)

#define MLAJIT_ASSIGN_OR_RETURN(lhs, expr) \
  MLAJIT_ASSIGN_OR_RETURN_IMPL_(MLAJIT_STATUS_CONCAT_(mlajit_statusor_, __LINE__), lhs, expr)

#define MLAJIT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // MLAJIT_SRC_BASE_STATUS_MACROS_H_
