// Writes the six example attention variants' region bytecode as fuzz seeds: <dir>/<name>.bin.
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/region/region_examples.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  std::error_code error;
  std::filesystem::create_directories(argv[1], error);
  if (error) {
    std::fprintf(stderr, "error: cannot create %s: %s\n", argv[1], error.message().c_str());
    return 1;
  }
  for (const ingot::RegionExample& example : ingot::regionExamples()) {
    const std::string path = std::string(argv[1]) + "/" + example.name + ".bin";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr ||
        std::fwrite(example.bytecode.data(), 1, example.bytecode.size(), f) !=
            example.bytecode.size() ||
        std::fclose(f) != 0) {
      std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
