// The one compile sequence of NVRTC and hiprtc, which share a C API shape:
// create a program with named in-memory headers, compile, read the log, read
// the code. Each compiler passes its function table and names.
//
//   RtcNames names{"nvrtc", "nvrtcGetCUBINSize", "nvrtcGetCUBIN"};
//   return RtcCompile(api_, kNvrtcSuccess, api_.GetCUBINSize, api_.GetCUBIN, names,
//                     [this](int rc) { return ErrorString(rc); }, source, options, arch);
#ifndef MLAJIT_SRC_JIT_RTC_COMPILE_H_
#define MLAJIT_SRC_JIT_RTC_COMPILE_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/jit/compiler.h"
#include "src/jit/renderer.h"

namespace mlajit::jit::jit_internal {

struct RtcNames {
  const char* tool;       // "nvrtc"
  const char* code_size;  // "nvrtcGetCUBINSize"
  const char* code;       // "nvrtcGetCUBIN"
};

// Api: CreateProgram, DestroyProgram, CompileProgram, GetProgramLogSize,
// GetProgramLog function pointers over the program handle type Program.
template <typename Program, typename Api, typename ErrorStringFn>
absl::StatusOr<CompiledBinary> RtcCompile(const Api& api, int success,
                                          int (*code_size)(Program, size_t*),
                                          int (*code)(Program, char*), const RtcNames& names,
                                          const ErrorStringFn& error_string,
                                          const RenderedSource& source,
                                          const std::vector<std::string>& options,
                                          const std::string& arch) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_texts, header_names, opts;
  for (const HeaderFile& h : source.headers) {
    header_texts.push_back(h.contents.c_str());
    header_names.push_back(h.name.c_str());
  }
  for (const std::string& o : options) opts.push_back(o.c_str());
  Program prog = nullptr;
  int rc = api.CreateProgram(&prog, source.source.c_str(), source.program_name.c_str(),
                             static_cast<int>(header_texts.size()), header_texts.data(),
                             header_names.data());
  if (rc != success) {
    return absl::InternalError(absl::StrCat(names.tool, "CreateProgram(", source.program_name,
                                            ") failed: ", error_string(rc)));
  }
  struct Destroy {
    const Api& api;
    Program prog;
    ~Destroy() { api.DestroyProgram(&prog); }
  } destroy{api, prog};

  rc = api.CompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  CompiledBinary out;
  size_t size = 0;
  if (api.GetProgramLogSize(prog, &size) == success && size > 1) {
    out.log.resize(size);
    if (api.GetProgramLog(prog, out.log.data()) != success) out.log.clear();
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) {
      out.log.pop_back();
    }
  }
  if (rc != success) {
    return absl::InternalError(absl::StrCat(names.tool, " failed to compile ",
                                            source.program_name, " for ", arch, " (",
                                            error_string(rc), "); options: ",
                                            absl::StrJoin(options, " "), "\ncompiler log:\n",
                                            out.log));
  }
  size = 0;
  if ((rc = code_size(prog, &size)) != success || size == 0) {
    return absl::InternalError(absl::StrCat(names.code_size, "(", source.program_name, "): ",
                                            error_string(rc), ", size ", size));
  }
  out.binary.resize(size);
  if ((rc = code(prog, out.binary.data())) != success) {
    return absl::InternalError(
        absl::StrCat(names.code, "(", source.program_name, "): ", error_string(rc)));
  }
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace mlajit::jit::jit_internal

#endif  // MLAJIT_SRC_JIT_RTC_COMPILE_H_
