// Fixed-size header at the start of every .ingot file (little-endian on disk).
#pragma once

#include <cstdint>

namespace ingot::artifact {

/// Eight bytes that open every artifact: "INGOT", then 0x1A (stops `type`), '\n', 0.
inline constexpr char kMagic[8] = {'I', 'N', 'G', 'O', 'T', '\x1a', '\n', '\0'};

/// Format version this build writes and the newest major version it reads. Bump the major
/// version for any change an older runtime cannot safely ignore (see artifact.fbs).
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 7;  // 1: AddRmsNorm, 2: RopeKvWrite, 3: BufferDef.slot,
                                             // 4: GatedLinear, 5: KernelDef.grid, 6: Scale,
                                             // 7: per-head RmsNorm, ProvenanceDef.assumed

/// Size of the header on disk; the manifest starts right after it.
inline constexpr uint64_t kHeaderSize = 64;

/// Weight blob and every tensor in it start at multiples of this (page size, and the
/// alignment cudaHostRegister/cuMemcpy want for zero-copy uploads).
inline constexpr uint64_t kBlobAlignment = 4096;

/// On-disk layout of the header, field by field (all little-endian):
///   0  magic[8]
///   8  u16 format_major
///  10  u16 format_minor
///  12  u32 flags            (bit 0: artifact has no blob, dummy weights)
///  16  u64 manifest_offset  (== kHeaderSize)
///  24  u64 manifest_size
///  32  u64 blob_offset      (multiple of kBlobAlignment, 0 when there is no blob)
///  40  u64 blob_size
///  48  u64 manifest_xxh64   (xxh64, seed 0, of the manifest bytes)
///  56  u64 header_xxh64     (xxh64, seed 0, of bytes [0, 56))
struct Header {
  uint16_t format_major = kFormatMajor;
  uint16_t format_minor = kFormatMinor;
  uint32_t flags = 0;
  uint64_t manifest_offset = kHeaderSize;
  uint64_t manifest_size = 0;
  uint64_t blob_offset = 0;
  uint64_t blob_size = 0;
  uint64_t manifest_xxh64 = 0;
  uint64_t header_xxh64 = 0;
};

inline constexpr uint32_t kFlagNoBlob = 1u << 0;

}  // namespace ingot::artifact
