// KernelArgs: one kernel launch's arguments with their sizes, checked against the kernel ABI
// the artifact recorded (KernelDef.param_bytes) before cuLaunchKernel.
#include "runtime/backend/cuda/kernel_args.h"

namespace ingot {
namespace {

/// "3 parameters of 8, 8, 4 bytes" ("1 parameter of 88 bytes", "no parameters").
template <typename SizeAt>
std::string describeParams(size_t count, SizeAt sizeAt) {
  if (count == 0) return "no parameters";
  std::string text = std::to_string(count) + (count == 1 ? " parameter of " : " parameters of ");
  for (size_t i = 0; i < count; ++i) text += (i ? ", " : "") + std::to_string(sizeAt(i));
  return text + " bytes";
}

}  // namespace

Status checkKernelArgs(const LoadedKernel& k, const KernelArgs& args, const std::string& what) {
  const std::vector<uint32_t>& want = k.param_bytes;
  if (want.empty()) return okStatus();  // not recorded (an older artifact): unchecked
  bool same = want.size() == args.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = want[i] == args.bytes(i);
  if (same) return okStatus();
  return failedPrecondition(
      what + ": kernel '" + k.name + "' takes " +
      describeParams(want.size(), [&](size_t i) { return want[i]; }) +
      " (the artifact's kernel ABI); this runtime passes " +
      describeParams(args.size(), [&](size_t i) { return args.bytes(i); }) +
      ": the artifact was compiled for another kernel ABI; compile it again with this version");
}

}  // namespace ingot
