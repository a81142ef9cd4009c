// The requests of one `ingot bench` run: lengths (random or from a file), prompts, arrivals.
#include "runtime/bench/workload.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ingot {
namespace {

/// A uniform double in [0, 1) from the top 53 bits of one draw.
double unitUniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// Arrivals use their own stream so that changing the rate leaves prompts unchanged.
constexpr uint64_t kArrivalSeedSalt = 0x9e3779b97f4a7c15ull;

bool readCount(const nlohmann::json& line, const char* key, int32_t* out, std::string* why) {
  auto it = line.find(key);
  if (it == line.end()) return (*why = std::string("missing \"") + key + "\"", false);
  if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
      it->get<int64_t>() > std::numeric_limits<int32_t>::max())
    return (*why = std::string("\"") + key + "\" must be a positive integer, got " + it->dump(),
            false);
  *out = static_cast<int32_t>(it->get<int64_t>());
  return true;
}

}  // namespace

std::vector<double> poissonArrivals(double rate, int32_t n, uint64_t seed) {
  std::vector<double> times;
  if (!(rate > 0) || n <= 0) return times;
  std::mt19937_64 rng(seed ^ kArrivalSeedSalt);
  times.reserve(static_cast<size_t>(n));
  double t = 0;
  for (int32_t i = 0; i < n; ++i) {
    t += -std::log1p(-unitUniform(rng)) / rate;
    times.push_back(t);
  }
  return times;
}

StatusOr<std::vector<RequestLengths>> parseLengths(const std::string& text,
                                                   const std::string& source) {
  std::vector<RequestLengths> lengths;
  std::istringstream in(text);
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::string where = source + ":" + std::to_string(line_number) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return invalidArgument(where + "expected a JSON object like "
                             "{\"prompt_tokens\": 128, \"output_tokens\": 64}");
    RequestLengths r;
    std::string why;
    if (!readCount(j, "prompt_tokens", &r.prompt_tokens, &why) ||
        !readCount(j, "output_tokens", &r.output_tokens, &why))
      return invalidArgument(where + why);
    lengths.push_back(r);
  }
  if (lengths.empty()) return invalidArgument(source + ": no requests (expected JSON lines)");
  return lengths;
}

StatusOr<std::vector<RequestLengths>> loadLengthsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalidArgument("cannot read lengths file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parseLengths(text.str(), path);
}

StatusOr<std::vector<PlannedRequest>> planWorkload(const WorkloadOptions& options, int64_t vocab) {
  const bool from_file = !options.lengths.empty();
  if (options.num_requests < 0 || (options.num_requests == 0 && !from_file))
    return invalidArgument("bench: the number of requests must be positive");
  if (!from_file && (options.prompt_min < 1 || options.prompt_max < options.prompt_min ||
                     options.output_min < 1 || options.output_max < options.output_min))
    return invalidArgument("bench: prompt and output ranges must be positive with min <= max");
  if (!(options.request_rate >= 0) || std::isinf(options.request_rate))
    return invalidArgument("bench: the request rate must be a finite number >= 0");
  if (vocab < 1) return invalidArgument("bench: the vocabulary must not be empty");

  const int32_t n = options.num_requests > 0 ? options.num_requests
                                             : static_cast<int32_t>(options.lengths.size());
  std::mt19937_64 rng(options.seed);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return lo + static_cast<int32_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  std::vector<double> arrivals = poissonArrivals(options.request_rate, n, options.seed);
  std::vector<PlannedRequest> plan(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    PlannedRequest& r = plan[static_cast<size_t>(i)];
    RequestLengths len;
    if (from_file) {
      len = options.lengths[static_cast<size_t>(i) % options.lengths.size()];
    } else {
      len.prompt_tokens = uniform(options.prompt_min, options.prompt_max);
      len.output_tokens = uniform(options.output_min, options.output_max);
    }
    r.prompt.resize(static_cast<size_t>(len.prompt_tokens));
    for (int32_t& t : r.prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    r.max_tokens = len.output_tokens;
    r.arrival_s = arrivals.empty() ? 0 : arrivals[static_cast<size_t>(i)];
  }
  return plan;
}

}  // namespace ingot
