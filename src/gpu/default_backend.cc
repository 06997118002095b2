// DefaultBackend(): the process-wide backend, chosen once. Also the stand-in
// Open functions for backends left out of the build (no vendor headers).
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/gpu/backend.h"

namespace mlajit::gpu {

#ifndef MLAJIT_HAVE_CUDA_BACKEND
absl::StatusOr<std::unique_ptr<Backend>> OpenCudaBackend() {
  return absl::UnimplementedError(
      "CUDA backend: built without CUDA headers (cuda.h and nvrtc.h were not found at "
      "configure time)");
}
#endif

#ifndef MLAJIT_HAVE_HIP_BACKEND
absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend() {
  return absl::UnimplementedError(
      "HIP backend: built without HIP headers (hip/hiprtc.h was not found at configure time)");
}
#endif

namespace {

// MLAJIT_BACKEND=cuda|hip restricts the choice to one backend; unset or "auto"
// tries CUDA, then HIP.
absl::StatusOr<std::unique_ptr<Backend>> OpenDefault() {
  const char* env = std::getenv("MLAJIT_BACKEND");
  const std::string choice = absl::AsciiStrToLower(env != nullptr ? env : "");
  const bool try_cuda = choice.empty() || choice == "auto" || choice == "cuda";
  const bool try_hip = choice.empty() || choice == "auto" || choice == "hip";
  if (!try_cuda && !try_hip) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MLAJIT_BACKEND=", env, ": expected one of cuda, hip, auto (or unset)"));
  }
  std::string tried;
  if (try_cuda) {
    auto cuda = OpenCudaBackend();
    if (cuda.ok()) return cuda;
    absl::StrAppend(&tried, "\n  cuda: ", cuda.status().message());
  }
  if (try_hip) {
    auto hip = OpenHipBackend();
    if (hip.ok()) return hip;
    absl::StrAppend(&tried, "\n  hip: ", hip.status().message());
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no GPU backend could be opened", choice.empty() ? "" : " (MLAJIT_BACKEND=",
      choice.empty() ? "" : choice, choice.empty() ? "" : ")", "; tried:", tried));
}

}  // namespace

absl::StatusOr<Backend*> DefaultBackend() {
  // A function-local static: initialized once, thread-safely; leaked on purpose
  // so no static destructor unloads modules or releases contexts while other
  // static destructors may still use them.
  static const absl::StatusOr<Backend*>* const kBackend = [] {
    auto opened = OpenDefault();
    if (!opened.ok()) return new absl::StatusOr<Backend*>(opened.status());
    return new absl::StatusOr<Backend*>(opened->release());
  }();
  return *kBackend;
}

}  // namespace mlajit::gpu
