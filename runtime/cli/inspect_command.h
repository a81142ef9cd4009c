// `ingot inspect`: prints an artifact's manifest in human form and optionally verifies checksums.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

namespace ingot {

class Artifact;

struct InspectOptions {
  /// Also hash every tensor and compare with its stored xxh64.
  bool verify = false;
  /// Print every tensor and step even for big models; otherwise long tables show their
  /// head and tail around a "... N more" line.
  bool all = false;
  /// Longest table printed in full when `all` is off.
  size_t maxRows = 64;
};

/// Opens `path`, prints its manifest to `out` and, with `verify`, checks every tensor
/// checksum ("checksums: N tensors OK"). Errors go to `err` as one line. Returns the
/// process exit code: 0 on success, 1 on any error.
int runInspect(const std::string& path, bool verify, std::ostream& out, std::ostream& err);
int runInspect(const std::string& path, const InspectOptions& options, std::ostream& out,
               std::ostream& err);

/// Prints the manifest of an opened artifact (no checksum work).
void printArtifact(const Artifact& artifact, const InspectOptions& options, std::ostream& out);

}  // namespace ingot
