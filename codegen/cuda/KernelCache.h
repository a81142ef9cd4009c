//===- KernelCache.h - on-disk cache of compiled CUDA kernels ----*- C++ -*-===//
//
// NVRTC takes seconds per kernel and target; the same kernels recur in every artifact of a
// model family (and in every lit test that compiles one). This cache stores each compiled
// binary under a hash of everything that determines it, so compiling many artifacts pays
// NVRTC once. Plain C++ (no CUDA): the cache neither knows nor needs the compiler.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot::codegen {

/// A folder of compiled kernel binaries, one file per key. Safe to share between threads
/// and processes: an entry is written to a temporary file and renamed into place, so a
/// reader sees a whole entry or none; each entry carries its key, size and xxh64, and one
/// that fails the check (truncated, bit rot, another format) is removed and reported as a
/// miss, so it is compiled again.
class KernelCache {
public:
  /// `directory` is created on first store; empty = a disabled cache (every lookup misses,
  /// stores do nothing).
  explicit KernelCache(std::string directory);

  /// $INGOT_KERNEL_CACHE if set (an empty value disables the cache), else
  /// $XDG_CACHE_HOME/ingot/kernels, else $HOME/.cache/ingot/kernels, else "" (disabled).
  static std::string defaultDirectory();

  /// The key of one compiled binary: a 128-bit hash (32 hex digits) of the kernel source,
  /// the compiler options, the target and the compiler's version, each length-prefixed so
  /// no two different tuples collide by concatenation.
  static std::string key(const std::string &source, const std::vector<std::string> &options,
                         const std::string &target, const std::string &compilerVersion);

  const std::string &directory() const { return directory_; }
  bool enabled() const { return !directory_.empty(); }

  /// The bytes stored under `key`, or nothing on a miss. A corrupt entry is deleted and
  /// counts as a miss.
  std::optional<std::vector<uint8_t>> lookup(const std::string &key) const;

  /// Stores `data` under `key` atomically (temporary file + rename). Fails, naming the
  /// path, when the folder cannot be created or written; a disabled cache succeeds.
  Status store(const std::string &key, const std::vector<uint8_t> &data) const;

  /// The entry under `key`, else `compute()`'s result, stored. While computing it holds an
  /// exclusive lock on the key (flock on "<key>.lock"), so concurrent callers with the same
  /// key, in this or another process, wait and then read the entry instead of compiling
  /// again. `hit` (optional) says whether the bytes came from the cache. A failed store is
  /// not an error (the bytes are still returned); `storeError` (optional) receives it.
  StatusOr<std::vector<uint8_t>>
  getOrCompute(const std::string &key,
               const std::function<StatusOr<std::vector<uint8_t>>()> &compute,
               bool *hit = nullptr, std::string *storeError = nullptr) const;

  /// Path of the entry file of `key` (tests corrupt it).
  std::string entryPath(const std::string &key) const;

private:
  std::string directory_;
};

} // namespace ingot::codegen
