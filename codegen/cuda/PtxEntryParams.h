//===- PtxEntryParams.h - an entry point's parameter sizes from its PTX -*- C++ -*-===//
//
// The compiler records, per kernel, the byte size of each parameter of its entry point
// (KernelDef.param_bytes) so the runtime can refuse a launch whose arguments were laid out
// for another kernel ABI. The sizes are read from the PTX NVRTC produced, the kernel as
// compiled, rather than restated by hand.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ingot::codegen {

/// The sizes in bytes of the parameters of `.entry name(...)` in `ptx`, in order: `.u64`,
/// `.s64`, `.b64`, `.f64` 8; `.u32`, `.s32`, `.b32`, `.f32` 4; `.u16`, `.s16`, `.b16`, `.f16`
/// 2; `.u8`, `.s8`, `.b8` 1; an array (`.b8 p[144]`, a struct passed by value) its element
/// size times its length. nullopt when the PTX has no such entry or a parameter it cannot
/// read.
std::optional<std::vector<uint32_t>> ptxEntryParamBytes(std::string_view ptx,
                                                        std::string_view name);

} // namespace ingot::codegen
