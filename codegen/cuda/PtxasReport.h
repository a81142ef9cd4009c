//===- PtxasReport.h - resource use of compiled kernels from `ptxas -v` -*- C++ -*-===//
//
// Test support: runs the toolkit's ptxas on NVRTC's PTX and reads back, per kernel, the
// registers, shared memory, stack frame and spill bytes it reports, so compile tests can
// assert that no kernel spills. Header-only; the caller passes the ptxas path.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "core/base/status.h"

namespace ingot::codegen {

/// Resource use of one kernel as ptxas reports it.
struct PtxasResources {
  int registers = -1;
  int sharedBytes = 0;
  int stackBytes = 0;
  int spillStores = 0, spillLoads = 0;
};

/// Runs `<ptxas> -v -arch=<arch>` on `ptx` (NVRTC's text; a trailing NUL is dropped) and
/// returns the resources of each entry function, or an error with ptxas's log.
inline StatusOr<std::map<std::string, PtxasResources>> ptxasResources(
    const std::string &ptxas, std::string ptx, const std::string &arch) {
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  char dir[] = "/tmp/ingot-ptxas-XXXXXX";
  if (!mkdtemp(dir)) return internalError("mkdtemp failed");
  const std::string in = std::string(dir) + "/k.ptx", out = std::string(dir) + "/k.cubin";
  std::ofstream(in) << ptx;
  const std::string cmd = ptxas + " -v -arch=" + arch + " " + in + " -o " + out + " 2>&1";
  FILE *pipe = popen(cmd.c_str(), "r");
  if (!pipe) return internalError("cannot run " + cmd);
  std::string log;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) log.append(buf, n);
  const int rc = pclose(pipe);
  std::remove(in.c_str());
  std::remove(out.c_str());
  rmdir(dir);
  if (rc != 0) return internalError("ptxas failed (" + cmd + "):\n" + log);
  // ptxas info    : Compiling entry function 'NAME' for 'sm_80'
  // ptxas info    : Function properties for NAME
  //     S bytes stack frame, A bytes spill stores, B bytes spill loads
  // ptxas info    : Used R registers, used 1 barriers, M bytes smem, 400 bytes cmem[0]
  std::map<std::string, PtxasResources> result;
  std::string current;
  const std::regex entry("Compiling entry function '([^']+)'");
  const std::regex frame(
      "(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads");
  const std::regex used("Used (\\d+) registers");
  const std::regex smem("(\\d+) bytes smem");
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      current = m[1];
      result[current];
    } else if (!current.empty() && std::regex_search(line, m, frame)) {
      result[current].stackBytes = std::stoi(m[1]);
      result[current].spillStores = std::stoi(m[2]);
      result[current].spillLoads = std::stoi(m[3]);
    } else if (!current.empty() && std::regex_search(line, m, used)) {
      result[current].registers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) result[current].sharedBytes = std::stoi(m[1]);
    }
  }
  if (result.empty()) return internalError("no kernels in the ptxas log:\n" + log);
  return result;
}

} // namespace ingot::codegen
