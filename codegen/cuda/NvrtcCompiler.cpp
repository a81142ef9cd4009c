//===- NvrtcCompiler.cpp - CUDA C++ to cubins and PTX with NVRTC ----------===//
#include "codegen/cuda/NvrtcCompiler.h"

#include <memory>

#include <nvrtc.h>

#include "core/simt/emulator.h"

namespace ingot::codegen {
namespace {

/// Owns an nvrtcProgram.
struct ProgramDeleter {
  void operator()(nvrtcProgram *p) const {
    nvrtcDestroyProgram(p);
    delete p;
  }
};
using ProgramPtr = std::unique_ptr<nvrtcProgram, ProgramDeleter>;

std::string programLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1)
    return "";
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  log.resize(size - 1);
  return log;
}

StatusOr<CudaBinary> compileOne(const std::string &source, const std::string &name,
                                const std::string &target,
                                const std::vector<std::string> &extraOptions) {
  if (isSimtTarget(target)) {
    if (!extraOptions.empty())
      return invalidArgument("the simt target of '" + name + "' takes no NVRTC options");
    CudaBinary binary;
    binary.target = target;
    binary.isSource = true;
    const std::string image = std::string(simt::kSimtImageMagic) + source;
    binary.data.assign(image.begin(), image.end());
    return binary;
  }
  ProgramPtr program(new nvrtcProgram(nullptr));
  nvrtcResult rc = nvrtcCreateProgram(program.get(), source.c_str(), name.c_str(), 0,
                                      nullptr, nullptr);
  if (rc != NVRTC_SUCCESS)
    return internalError(std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc));

  bool isPtx = target.rfind("compute_", 0) == 0;
  std::vector<std::string> options = {"-arch=" + target};
  for (std::string &o : nvrtcBaseOptions())
    options.push_back(std::move(o));
  options.insert(options.end(), extraOptions.begin(), extraOptions.end());
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());

  rc = nvrtcCompileProgram(*program, static_cast<int>(argv.size()), argv.data());
  if (rc != NVRTC_SUCCESS)
    return invalidArgument("NVRTC failed to compile '" + name + "' for " + target + ": " +
                           nvrtcGetErrorString(rc) + "\n" + programLog(*program));

  CudaBinary binary;
  binary.target = target;
  binary.isPtx = isPtx;
  size_t size = 0;
  if (isPtx) {
    if (nvrtcGetPTXSize(*program, &size) != NVRTC_SUCCESS)
      return internalError("nvrtcGetPTXSize failed for " + target);
    binary.data.resize(size);
    nvrtcGetPTX(*program, reinterpret_cast<char *>(binary.data.data()));
  } else {
    if (nvrtcGetCUBINSize(*program, &size) != NVRTC_SUCCESS)
      return internalError("nvrtcGetCUBINSize failed for " + target);
    binary.data.resize(size);
    nvrtcGetCUBIN(*program, reinterpret_cast<char *>(binary.data.data()));
  }
  if (binary.data.empty())
    return internalError("NVRTC produced no output for " + target);
  return binary;
}

} // namespace

StatusOr<std::vector<CudaBinary>> compileCuda(const std::string &source,
                                              const std::string &name,
                                              const std::vector<std::string> &targets,
                                              const std::vector<std::string> &options) {
  std::vector<CudaBinary> binaries;
  for (const std::string &target : targets) {
    StatusOr<CudaBinary> binary = compileOne(source, name, target, options);
    if (!binary.ok())
      return binary.status();
    binaries.push_back(std::move(binary).value());
  }
  return binaries;
}

bool isSimtTarget(const std::string &target) { return target == simt::kSimtTarget; }

std::vector<std::string> nvrtcBaseOptions() {
  return {"-std=c++17", "-I" INGOT_CUDA_INCLUDE_DIR, "--use_fast_math"};
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  ::nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

} // namespace ingot::codegen
