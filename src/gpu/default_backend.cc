#include "src/gpu/backend.h"

namespace mlajit::gpu {

absl::StatusOr<Backend*> DefaultBackend() {
  return absl::FailedPreconditionError("no GPU backend is built yet");
}

}  // namespace mlajit::gpu
