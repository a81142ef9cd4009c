// `ingot tokenize`: the token ids (and pieces) an artifact's tokenizer gives a text.
#include "runtime/cli/tokenize_command.h"

#include "core/artifact/artifact_reader.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {

int runTokenize(const TokenizeOptions& options, std::ostream& out, std::ostream& err) {
  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) {
    err << "ingot tokenize: error: " << artifact.status().message() << "\n";
    return 1;
  }
  StatusOr<TokenizerData> data = tokenizerDataFromManifest(artifact->manifest().tokenizer());
  StatusOr<Tokenizer> tokenizer =
      data.ok() ? Tokenizer::create(std::move(data).value()) : StatusOr<Tokenizer>(data.status());
  if (!tokenizer.ok()) {
    err << "ingot tokenize: error: " << options.artifact << ": "
        << tokenizer.status().message() << "\n";
    return 1;
  }
  std::vector<int32_t> ids =
      tokenizer->encode(options.text, options.add_special, options.parse_special);
  if (options.pieces) {
    for (int32_t id : ids) out << id << "\t" << tokenizer->decode({id}, false) << "\n";
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  out << "\n";
  return 0;
}

}  // namespace ingot
