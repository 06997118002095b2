// Shared by the C ABI translation units (c_api.cc, cache_api.cc, runtime.cc):
// the one status mapping and the one resolution of C cache options.
//
//   return ToC(DoThing());                       // sets mlajit_last_error() on failure
//   MLAJIT_ASSIGN_OR_RETURN(auto o, ResolveCacheOptions(c_opts, "mlajit_cache_open"));
#ifndef MLAJIT_SRC_API_C_API_INTERNAL_H_
#define MLAJIT_SRC_API_C_API_INTERNAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mlajit/mlajit.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::api_internal {

// Hands a string to C in *out (when out is not null): malloc'd, so that
// mlajit_free (free) releases it.
absl::Status EmitString(const std::string& s, char** out);

// absl::Status -> mlajit_status_t; keeps the message for mlajit_last_error().
mlajit_status_t ToC(const absl::Status& s);

// Environment defaults (CacheOptions::FromEnvironment) overridden by the
// fields the caller set; `caller` prefixes error messages. NULL: defaults.
absl::StatusOr<cache::CacheOptions> ResolveCacheOptions(const mlajit_cache_options_t* options,
                                                        absl::string_view caller);

}  // namespace mlajit::api_internal

#endif  // MLAJIT_SRC_API_C_API_INTERNAL_H_
