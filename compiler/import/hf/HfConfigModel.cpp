//===- HfConfigModel.cpp - a model from its Hugging Face config.json alone -===//
#include "compiler/import/hf/HfConfigModel.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "compiler/import/LlamaTensorShapes.h"
#include "compiler/import/hf/HfCheckpoint.h"
#include "xxhash.h"

namespace ingot::importer::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// torch_dtype spellings (torch.<name>, as transformers writes them) and what they become.
struct TorchDtype {
  const char *name;
  schema::DType dtype;
};
constexpr TorchDtype kTorchDtypes[] = {
    {"float32", schema::DType::F32}, {"float", schema::DType::F32},
    {"bfloat16", schema::DType::BF16}, {"float16", schema::DType::F16},
    {"half", schema::DType::F16},
};

/// A config file is small; anything larger is not one (and is not read whole to find out).
constexpr uintmax_t kMaxConfigBytes = 16u << 20;

bool startsWithBrace(const fs::path &file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) > kMaxConfigBytes || ec)
    return false;
  std::ifstream in(file, std::ios::binary);
  char c = 0;
  while (in.get(c))
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      return c == '{';
  return false;
}

Status missingWeights(const std::string &tensor, const std::string &source) {
  return failedPrecondition("tensor '" + tensor + "' has no weights: '" + source +
                            "' is a model config alone (compile it with --dummy-weights)");
}

} // namespace

bool isConfigOnlyInput(const std::string &path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    return fs::is_regular_file(dir / "config.json", ec) &&
           !fs::exists(dir / "model.safetensors", ec) &&
           !fs::exists(dir / "model.safetensors.index.json", ec);
  }
  return startsWithBrace(path);
}

StatusOr<std::optional<schema::DType>> configWeightDtype(const std::string &configText,
                                                         const std::string &where) {
  json c = json::parse(configText, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object())
    return invalidArgument(where + ": not a JSON object");
  // transformers >= 5 writes `dtype`; older versions `torch_dtype`.
  for (const char *key : {"dtype", "torch_dtype"}) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null())
      continue;
    if (!it->is_string())
      return invalidArgument(where + ": key '" + key + "' must be a string");
    std::string name = it->get<std::string>();
    if (name.rfind("torch.", 0) == 0)
      name = name.substr(6);
    if (name == "auto")
      return std::optional<schema::DType>();
    for (const TorchDtype &t : kTorchDtypes)
      if (name == t.name)
        return std::optional<schema::DType>(t.dtype);
    return invalidArgument(where + ": " + key + " '" + it->get<std::string>() +
                           "' is not a weight dtype a config-only import makes (float32, "
                           "bfloat16, float16); pass --dtype");
  }
  return std::optional<schema::DType>();
}

StatusOr<ImportedModel> importConfigOnly(const std::string &path,
                                         const ConfigModelOptions &options) {
  std::error_code ec;
  const bool isDirectory = fs::is_directory(path, ec);
  fs::path configPath = isDirectory ? fs::path(path) / "config.json" : fs::path(path);
  if (!fs::is_regular_file(configPath, ec))
    return notFound(configPath.string() + ": cannot read");
  fs::path directory = configPath.parent_path();
  if (directory.empty())
    directory = ".";

  HfCheckpoint described;
  std::string text;
  INGOT_RETURN_IF_ERROR(
      readHfModelFiles(directory.string(), configPath.string(), described, text));
  StatusOr<std::optional<schema::DType>> configDtype =
      configWeightDtype(text, configPath.string());
  if (!configDtype.ok() && !options.weightDtype)
    return configDtype.status();
  const schema::DType weightDtype = options.weightDtype ? *options.weightDtype
                                    : configDtype->has_value() ? **configDtype
                                                               : schema::DType::BF16;

  ImportedModel model;
  model.source = path;
  model.config = described.config;
  // "llama3-8b.json" names the model llama3-8b; a config.json its directory.
  if (configPath.filename() != "config.json")
    model.config.name = configPath.stem().string();
  model.features = described.features;
  model.hasTokenizer = described.hasTokenizer;
  model.tokenizer = std::move(described.tokenizer);
  model.sourceXxh64 = XXH64(text.data(), text.size(), 0);
  for (const std::string &name : llamaTensorNames(model.config, model.features)) {
    ImportedTensor tensor;
    tensor.name = name;
    tensor.shape = expectedLlamaShape(name, model.config);
    if (tensor.shape.empty())
      return internalError("no shape for the Llama tensor '" + name + "'");
    // Norm weights and biases stay f32, as importHuggingFace keeps them.
    tensor.dtype = tensor.shape.size() == 1 ? schema::DType::F32 : weightDtype;
    tensor.produce = [name, source = path](const TensorByteSink &) {
      return missingWeights(name, source);
    };
    tensor.readF32 = [name, source = path](std::vector<float> &) {
      return missingWeights(name, source);
    };
    model.add(std::move(tensor));
  }
  return model;
}

} // namespace ingot::importer::hf
