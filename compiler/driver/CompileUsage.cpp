//===- CompileUsage.cpp - `ingot compile` options checked before any work -===//
#include "compiler/driver/CompileUsage.h"

#include <fstream>

#include "compiler/import/hf/HfConfigModel.h"

namespace ingot::compiler {

InputKind classifyInput(const std::string &path) {
  if (importer::hf::isConfigOnlyInput(path))
    return InputKind::ConfigOnly;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // A directory opens as a stream on Linux but reads nothing; check for config.json.
    std::ifstream config(path + "/config.json");
    return config ? InputKind::Directory : InputKind::Missing;
  }
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::string(magic, 4) == "GGUF")
    return InputKind::Gguf;
  std::ifstream config(path + "/config.json");
  if (config)
    return InputKind::Directory;
  return InputKind::Mlir;
}

int checkUsage(const CompileOptions &options, std::ostream &err) {
  const std::string search = options.calibSearch.value_or("all");
  if (options.quant.empty() && !options.quantSkip.empty()) {
    err << "ingot compile: error: --quant-skip needs --quant\n";
    return 2;
  }
  if (options.quant != "int4" && options.quantGroupSize) {
    err << "ingot compile: error: --quant-group applies to --quant int4 only\n";
    return 2;
  }
  if (options.quantScales != "absmax" && options.quant != "nvfp4" && options.quant != "mxfp4") {
    err << "ingot compile: error: --quant-scales applies to --quant nvfp4 and mxfp4 only\n";
    return 2;
  }
  if (!options.calib.empty() && options.quant != "int4" && options.quant != "nvfp4" &&
      options.quant != "mxfp4") {
    err << "ingot compile: error: --calib applies to --quant int4, nvfp4 and mxfp4 only\n";
    return 2;
  }
  if (options.calib.empty() && (options.calibTokens || options.calibSearch)) {
    err << "ingot compile: error: "
        << (options.calibTokens && options.calibSearch ? "--calib-tokens and --calib-search need"
            : options.calibTokens                      ? "--calib-tokens needs"
                                                       : "--calib-search needs")
        << " --calib (a calibration text)\n";
    return 2;
  }
  if (search != "all" && search != "scale" && search != "clip") {
    err << "ingot compile: error: --calib-search must be all, scale or clip, not '"
        << search << "'\n";
    return 2;
  }
  if (options.tensorParallel < 1) {
    err << "ingot compile: error: --tp must be >= 1, got " << options.tensorParallel << "\n";
    return 2;
  }
  if (options.tensorParallel > 1 && options.draftLayers > 0) {
    err << "ingot compile: error: --tp with --draft-layers is not supported yet\n";
    return 2;
  }
  return kContinue;
}

int checkInputUsage(const CompileOptions &options, InputKind kind, bool isCheckpoint,
                    std::ostream &err) {
  if (kind == InputKind::ConfigOnly && !options.calib.empty()) {
    err << "ingot compile: error: --calib needs a checkpoint's weights; '" << options.input
        << "' is a model config alone\n";
    return 2;
  }
  if (!options.calib.empty() && kind != InputKind::Gguf && kind != InputKind::Directory &&
      kind != InputKind::Missing) {
    err << "ingot compile: error: --calib needs a checkpoint (GGUF or Hugging Face directory), "
           "not the module '"
        << options.input << "'\n";
    return 2;
  }
  if (options.kvDtype != "f32" && !isCheckpoint) {
    err << "ingot compile: error: --kv-dtype applies to checkpoints; an ingot module "
           "declares its KV cache type itself\n";
    return 2;
  }
  if (kind == InputKind::Missing) {
    err << "ingot compile: error: cannot read '" << options.input << "'\n";
    return 1;
  }

  return kContinue;
}

} // namespace ingot::compiler
