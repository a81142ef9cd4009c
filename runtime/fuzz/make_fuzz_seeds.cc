// ingot-make-fuzz-seeds <dir>: writes small valid artifacts that seed the artifact fuzzer.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "testing/sample_artifact.h"

namespace {

bool writeSeed(const std::string& dir, const std::string& name,
               const std::function<void(ingot::ArtifactWriter&)>& fill) {
  ingot::ArtifactWriter writer;
  fill(writer);
  std::string path = dir + "/" + name + ".ingot";
  ingot::Status status = writer.write(path);
  if (!status.ok()) {
    std::cerr << "ingot-make-fuzz-seeds: error: " << path << ": " << status.message() << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: ingot-make-fuzz-seeds <dir>\n";
    return 2;
  }
  std::string dir = argv[1];
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::cerr << "ingot-make-fuzz-seeds: error: cannot create " << dir << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  using ingot::SampleOptions;
  bool ok = true;
  ok &= writeSeed(dir, "sample", [](auto& w) { ingot::populateSampleArtifact(w, {}); });
  ok &= writeSeed(dir, "sample_tp2", [](auto& w) {
    SampleOptions options;
    options.tpWorldSize = 2;
    options.seed = 2;
    ingot::populateSampleArtifact(w, options);
  });
  ok &= writeSeed(dir, "sample_dummy", [](auto& w) {
    SampleOptions options;
    options.dummyWeights = true;
    options.seed = 3;
    ingot::populateSampleArtifact(w, options);
  });
  ok &= writeSeed(dir, "empty", [](auto&) {});
  ok &= writeSeed(dir, "one_tensor", [](auto& w) {
    w.addTensor({"w", ingot::schema::DType::I4, {5}, {}, -1}, std::vector<uint8_t>{1, 2, 3});
  });
  if (!ok) return 1;
  std::cout << "wrote 5 seed artifacts to " << dir << "\n";
  return 0;
}
