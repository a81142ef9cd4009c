// The `ingot` command-line tool: one binary, one subcommand per user task.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/cli/inspect_command.h"
#include "runtime/cli/bench_command.h"
#include "runtime/cli/eval_command.h"
#include "runtime/cli/run_command.h"
#include "runtime/cli/serve_command.h"
#include "runtime/cli/tensor_parallel_launch.h"
#include "runtime/cli/tokenize_command.h"
#include "core/base/version.h"
#ifdef INGOT_HAVE_COMPILER
#include "compiler/driver/CompileCommand.h"
#include "tools/ingot/calibration_forward.h"
#endif

namespace {

/// --kv-dtype (ingot::parseKvDtypeFlag()).
void addKvDtypeFlag(CLI::App* app, std::string& kv_dtype) {
  app->add_option("--kv-dtype", kv_dtype,
                  "KV cache element type: f32, or fp8 (E4M3 with per-block scales, ~4x the "
                  "tokens per byte; docs/quantization.md). Default: the artifact's")
      ->check(CLI::IsMember({"f32", "fp8"}));
}

/// --tp-mode and the multi-node flags (ingot::checkTensorParallelLaunch()).
void addTensorParallelLaunchFlags(CLI::App* app, ingot::TensorParallelLaunch& launch) {
  app->add_option("--tp-mode", launch.mode,
                  "A sharded artifact's ranks: threads of this process, or processes (rank 0 "
                  "here, the others as worker processes it starts)")
      ->check(CLI::IsMember({"threads", "processes"}))
      ->capture_default_str();
  app->add_option("--nnodes", launch.nnodes,
                  "Hosts in the group (--tp-mode processes): every host runs the same command "
                  "with its --node-rank; node 0 serves, the others run only their ranks")
      ->check(CLI::PositiveNumber);
  app->add_option("--node-rank", launch.node_rank, "This host's index in [0, --nnodes)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--master-addr", launch.master_addr,
                  "--tp-mode processes: rank 0's address for the group's store (default 127.0.0.1)");
  app->add_option("--master-port", launch.master_port,
                  "--tp-mode processes: the store's port (0 = a free one)")
      ->check(CLI::Range(0, 65535));
  app->add_option("--dist-timeout", launch.dist_timeout_s,
                  "--tp-mode processes: seconds any rank waits for the others (forming the "
                  "group, loading, each step) before failing; a rank seen to exit fails the "
                  "others at once (default 30)");
}

/// --device and --gpu-memory-utilization (ingot::backendFactoryFor()).
void addDeviceFlags(CLI::App* app, ingot::DeviceFlags& flags) {
  app->add_option("--device", flags.device,
                  std::string("Where the model runs: cpu, or cuda[:N] (GPU N)") +
                      (ingot::cudaBackendBuilt() ? "" : " (this build has no CUDA backend)"))
      ->capture_default_str();
  app->add_option("--gpu-memory-utilization", flags.gpu_memory_utilization,
                  "CUDA: fraction of GPU memory to fill with weights, buffers and the KV cache")
      ->capture_default_str();
  addTensorParallelLaunchFlags(app, flags.tp_launch);
}

/// --tp on the runtime commands (ingot::checkTensorParallelFlag()).
void addTensorParallelFlag(CLI::App* app, int32_t& tp) {
  app->add_option("--tp", tp,
                  "Tensor-parallel ranks the artifact was compiled for (ingot compile --tp); "
                  "checked, 0 = any")
      ->check(CLI::NonNegativeNumber);
}

/// Options `ingot run` and `ingot chat` share: the artifact, prompt, length, sampling, threads.
void addGenerationOptions(CLI::App* app, ingot::RunOptions& options) {
  app->add_option("artifact", options.artifact, "Path to a .ingot artifact")->required();
  app->add_option("-p,--prompt", options.prompt, "The prompt (chat: the first user turn)");
  app->add_option("-n,--max-tokens", options.max_new_tokens, "Tokens to generate at most")
      ->check(CLI::PositiveNumber);
  app->add_option("--temperature", options.sampling.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  app->add_option("--top-k", options.sampling.top_k, "Keep the k likeliest tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--top-p", options.sampling.top_p, "Nucleus sampling threshold")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--min-p", options.sampling.min_p, "Drop tokens below min_p x the top one");
  app->add_option("--repetition-penalty", options.sampling.repetition_penalty,
                  "Penalize tokens already in the prompt or output (1 = off)");
  app->add_option("--presence-penalty", options.sampling.presence_penalty,
                  "OpenAI presence penalty (-2..2)");
  app->add_option("--frequency-penalty", options.sampling.frequency_penalty,
                  "OpenAI frequency penalty (-2..2)");
  app->add_option("--stop", options.sampling.stop, "Stop before this text (repeatable)");
  app->add_option("--seed", options.sampling.seed, "Sampling seed");
  app->add_option("--threads", options.num_threads, "CPU threads (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  addKvDtypeFlag(app, options.kv_dtype);
  addTensorParallelFlag(app, options.tp);
  addDeviceFlags(app, options.device);
}

/// --speculative, --spec-tokens, --spec-branches (see ingot::speculativeOptions()).
void addSpeculativeFlags(CLI::App* app, std::string& source, int& tokens, int& branches,
                         std::string& draft) {
  app->add_option("--draft", draft, "Draft artifact for --speculative draft-model (same vocabulary)");
  app->add_option("--speculative", source,
                  "Speculative decoding (lossless): off; prompt-lookup (n-gram matches in the "
                  "prompt and output); self (the artifact's draft program, see compile "
                  "--draft-layers); draft-model (a smaller artifact, --draft)")
      ->check(CLI::IsMember({"off", "prompt-lookup", "self", "draft-model"}));
  app->add_option("--spec-tokens", tokens, "Deepest draft per step (adaptive below it)")
      ->check(CLI::Range(1, 32));
  app->add_option("--spec-branches", branches,
                  "Draft tree branches (1 = a chain; more need a tree-mask artifact)")
      ->check(CLI::Range(1, 8));
}

/// `ingot compile`'s flags, as given.
struct CompileFlags {
  CLI::App* command = nullptr;
  std::string input, output;
  std::string emit_mlir;
  bool print_ir_after_all = false, dummy_weights = false, random_weights = false;
  uint64_t seed = 0;
  std::string weight_dtype = "bf16";
  std::string kv_dtype = "f32";
  std::string quant;
  int64_t quant_group = 32;
  std::vector<std::string> quant_skip;
  std::string quant_scales = "absmax";
  std::string calib, calib_search = "all";
  int64_t calib_tokens = 4096;
  int32_t tp = 1;
  std::string cuda_targets;
  int32_t draft_layers = 0;
};

void addCompileCommand(CLI::App& app, CompileFlags& f) {
  CLI::App* compile = app.add_subcommand("compile", "Compile a model into a .ingot artifact");
  f.command = compile;
  compile->add_option("input", f.input,
                      "A GGUF checkpoint, a Hugging Face directory, a Hugging Face config.json "
                      "alone (with --dummy-weights) or an ingot module (.mlir)")
      ->required();
  compile->add_option("--dtype", f.weight_dtype,
                      "Weight dtype for checkpoints: f32, bf16 (default), f16; a config alone "
                      "defaults to its torch_dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  compile->add_option("--kv-dtype", f.kv_dtype,
                      "KV cache element type the artifact declares: f32 or fp8 (E4M3, one "
                      "scale per block and kv head); serve/run --kv-dtype override it on the "
                      "CPU, while CUDA kernels are made for the declared type")
      ->check(CLI::IsMember({"f32", "fp8"}));
  compile->add_option("-o,--output", f.output, "Output artifact path");
  // Every stage a compile can have (quantize with --quant, shard with --tp).
#ifdef INGOT_HAVE_COMPILER
  const std::vector<std::string> stageNames = ingot::compiler::compileStageNames();
#else
  const std::vector<std::string> stageNames = {"import", "final"};  // compile refuses anyway
#endif
  std::string stageList;
  for (const std::string& name : stageNames)
    stageList += (stageList.empty() ? "" : ", ") + name +
                 (name == "quantize" ? " (--quant)" : name == "shard" ? " (--tp)" : "");
  compile->add_option("--emit-mlir", f.emit_mlir,
                      "Print the module after the pass pipeline, or with =STAGE after that "
                      "stage: " + stageList)
      ->expected(0, 1)
      ->default_str("final")
      ->check(CLI::IsMember(stageNames));
  compile->add_flag("--print-ir-after-all", f.print_ir_after_all,
                    "Print the module after every pass of the pipeline (to stderr)");
  compile->add_flag("--dummy-weights", f.dummy_weights,
                    "Write no weight blob; the runtime fills weights from --seed");
  compile->add_flag("--random-weights", f.random_weights,
                    "Fill the weight blob with seeded pseudo-random values");
  compile->add_option("--seed", f.seed, "Seed for --dummy-weights / --random-weights");
  compile->add_option("--quant", f.quant,
                      "Quantize linear weights: int4 (group-wise, asymmetric; GGUF Q4_0/Q4_1 "
                      "blocks kept exactly), fp8, nvfp4, mxfp4")
      ->check(CLI::IsMember({"int4", "fp8", "nvfp4", "mxfp4"}));
  compile->add_option("--quant-group", f.quant_group,
                      "Elements per int4 scale: 32, 64, 128 (default 32, or a GPTQ/AWQ "
                      "checkpoint's own group, whose integers are then copied exactly)")
      ->check(CLI::IsMember({32, 64, 128}));
  compile->add_option("--quant-skip", f.quant_skip,
                      "Keep weights whose name matches PATTERN (a glob, or a substring) "
                      "unquantized; repeatable")
      ->allow_extra_args(false);
  compile->add_option("--quant-scales", f.quant_scales,
                      "NVFP4/MXFP4 block scales: absmax (from the block maximum) or mse (the "
                      "nearby scale with the least squared error)")
      ->check(CLI::IsMember({"absmax", "mse"}));
  compile->add_option("--calib", f.calib,
                      "Calibration text for activation-aware 4-bit scales (int4, nvfp4, mxfp4): "
                      "runs the unquantized model over it (docs/quantization.md)");
  compile->add_option("--calib-tokens", f.calib_tokens, "Most calibration tokens (default 4096)")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 20));
  compile->add_option("--calib-search", f.calib_search,
                      "What --calib searches: all (folded AWQ scales and activation-weighted "
                      "block scales), scale, or clip")
      ->check(CLI::IsMember({"all", "scale", "clip"}));
  compile->add_option("--tp", f.tp,
                      "Shard the model over N tensor-parallel ranks (docs/tensor-parallel.md)")
      ->check(CLI::Range(1, 1024));
  compile->add_option("--cuda-targets", f.cuda_targets,
                      "CUDA attention kernels to compile with NVRTC: all (sm_80 sm_89 sm_90a "
                      "sm_100f sm_120f compute_80; the default where NVRTC is available), none, "
                      "or a comma-separated list; binaries are cached in $INGOT_KERNEL_CACHE "
                      "(default ~/.cache/ingot/kernels)");
  compile->add_option("--draft-layers", f.draft_layers,
                      "Also build a draft program of the first N layers and the head, sharing "
                      "the weights, for self-speculation (ingot serve --speculative self)")
      ->check(CLI::PositiveNumber);
}

int runCompileCommand(const CompileFlags& f, int argc, char** argv) {
#ifdef INGOT_HAVE_COMPILER
  if (f.output.empty() && f.emit_mlir.empty()) {
    std::cerr << "ingot compile: error: give -o OUTPUT or --emit-mlir\n";
    return 2;
  }
  if (f.dummy_weights && f.random_weights) {
    std::cerr << "ingot compile: error: --dummy-weights and --random-weights exclude each other\n";
    return 2;
  }
  ingot::compiler::CompileOptions options;
  options.input = f.input;
  options.output = f.output;
  options.emitMlir = f.emit_mlir;
  options.printIrAfterAll = f.print_ir_after_all;
  options.dummyWeights = f.dummy_weights;
  options.randomWeights = f.random_weights;
  options.seed = f.seed;
  if (f.command->count("--dtype")) options.dtype = f.weight_dtype;
  options.kvDtype = f.kv_dtype;
  options.quant = f.quant;
  // Given at all (even at its default), a value is honoured; unset leaves the choice to
  // the checkpoint (a GPTQ / AWQ group) and refuses --calib-* without --calib.
  if (f.command->count("--quant-group")) options.quantGroupSize = f.quant_group;
  options.quantSkip = f.quant_skip;
  options.quantScales = f.quant_scales;
  options.calib = f.calib;
  if (f.command->count("--calib-tokens")) options.calibTokens = f.calib_tokens;
  if (f.command->count("--calib-search")) options.calibSearch = f.calib_search;
  options.draftLayers = f.draft_layers;
  options.cudaTargets = f.cuda_targets;
  options.tensorParallel = f.tp;
  options.calibrationForward = ingot::tools::recordLinearInputsOnCpu;
  options.commandLine.assign(argv, argv + argc);
  return ingot::compiler::runCompile(options, std::cout, std::cerr);
#else
  (void)f;
  (void)argc;
  (void)argv;
  std::cerr << "ingot compile: error: this build has no compiler "
               "(configured with -DINGOT_BUILD_COMPILER=OFF)\n";
  return 2;
#endif
}

CLI::App* addBenchCommand(CLI::App& app, ingot::BenchCommandOptions& o) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Throughput and latency: offline (ARTIFACT, engine in-process) or online (--url)");
  bench->add_option("artifact", o.artifact, "Offline: path to a .ingot artifact");
  bench->add_option("--url", o.url,
                    "Online: an ingot server, http://HOST:PORT (streams /v1/completions)");
  bench->add_option("--model", o.model, "Online: the requests' model name");
  bench->add_option("--prompt-vocab", o.prompt_vocab,
                    "Online: prompt token ids are drawn below this (within the model's vocab)")
      ->check(CLI::PositiveNumber);
  bench->add_option("-c,--concurrency", o.concurrency,
                    "Requests in flight, one run each (default 1 8 32; with --request-rate: "
                    "a cap, none by default)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--request-rate", o.request_rates,
                    "Poisson arrivals at these requests/s, one run each (default: closed loop)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--requests", o.bench.num_requests, "Requests per run")
      ->check(CLI::PositiveNumber);
  bench->add_option("--lengths", o.lengths_path,
                    "JSON lines {\"prompt_tokens\": N, \"output_tokens\": M}, one request "
                    "each, in order (replaces the random lengths; cycled up to --requests)");
  bench->add_option("--prompt-min", o.bench.prompt_min, "Shortest prompt (tokens)");
  bench->add_option("--prompt-max", o.bench.prompt_max, "Longest prompt (tokens)");
  bench->add_option("--output-min", o.bench.output_min, "Fewest tokens generated");
  bench->add_option("--output-max", o.bench.output_max, "Most tokens generated");
  bench->add_option("--seed", o.bench.seed, "Seed of the random prompts and lengths");
  bench->add_option("--threads", o.bench.num_threads, "CPU threads (0 = all cores)");
  addKvDtypeFlag(bench, o.kv_dtype);
  addDeviceFlags(bench, o.device);
  addTensorParallelFlag(bench, o.tp);
  bench->add_option("--json", o.json_path, "Also write the results as JSON");
  bench->add_option("--interference", o.interference.long_prompt,
                    "Instead: how a prompt of this many tokens slows running decoders");
  bench->add_option("--decoders", o.interference.decoders,
                    "Decoding requests for --interference");
  bench->add_option("--max-prefill-while-decoding",
                    o.interference.max_prefill_while_decoding,
                    "Prefill tokens a step carries next to decodes (0 = budget only)");
  bench->add_option("--max-batched-tokens", o.interference.max_batched_tokens,
                    "Token budget of one step");
  addSpeculativeFlags(bench, o.speculative, o.spec_tokens,
                      o.spec_branches, o.draft);
  return bench;
}

CLI::App* addEvalCommand(CLI::App& app, ingot::EvalPerplexityOptions& o) {
  CLI::App* eval = app.add_subcommand("eval", "Measure model quality on the CPU backend");
  eval->require_subcommand(1);
  CLI::App* ppl = eval->add_subcommand("ppl", "Perplexity of the model over a text file");
  ppl->add_option("artifact", o.artifact, "Path to a .ingot artifact")->required();
  ppl->add_option("--text", o.text_path, "UTF-8 text file to score")->required();
  ppl->add_option("--ctx", o.context, "Tokens per window (default 1024)");
  ppl->add_option("--stride", o.stride,
                  "Tokens between window starts; each window scores only tokens the last one "
                  "did not (0 = --ctx, disjoint windows)")
      ->check(CLI::NonNegativeNumber);
  ppl->add_option("--max-tokens", o.max_tokens,
                  "Score only the text's first N tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  ppl->add_option("--threads", o.num_threads, "CPU threads (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  ppl->add_option("--json", o.json_path, "Also write the result as JSON");
  ppl->add_flag("--no-window-bos", o.no_window_bos,
                "Start windows after the first without the BOS the tokenizer adds to a text "
                "(default: BOS is fed before each window, as llama.cpp's perplexity starts "
                "each chunk with it)");
  addKvDtypeFlag(ppl, o.kv_dtype);
  addDeviceFlags(ppl, o.device);
  addTensorParallelFlag(ppl, o.tp);
  return ppl;
}

/// `ingot tokenize`'s flags.
struct TokenizeFlags {
  ingot::TokenizeOptions options;
  bool no_special = false, literal_specials = false;
};

CLI::App* addTokenizeCommand(CLI::App& app, TokenizeFlags& f) {
  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text");
  tokenize->add_option("artifact", f.options.artifact, "Path to a .ingot artifact")
      ->required();
  tokenize->add_option("text", f.options.text, "The text")->required();
  tokenize->add_flag("--no-bos", f.no_special, "Do not add BOS/EOS");
  tokenize->add_flag("--literal-specials", f.literal_specials,
                     "Tokenize special-token strings as plain text");
  tokenize->add_flag("--pieces", f.options.pieces, "Print one 'id<TAB>piece' per line");
  return tokenize;
}

CLI::App* addServeCommand(CLI::App& app, ingot::ServeOptions& o) {
  CLI::App* serve = app.add_subcommand("serve", "Serve an artifact over an OpenAI-compatible HTTP API");
  serve->add_option("artifact", o.artifact, "Path to a .ingot artifact")->required();
  serve->add_option("--host", o.host, "Address to listen on");
  serve->add_option("--port", o.port, "TCP port (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  serve->add_option("--threads", o.threads, "Compute threads (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--io-threads", o.io_threads, "Network I/O threads")
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-queue", o.max_queue,
                    "Sequences admitted beyond --max-running before 429")
      ->check(CLI::NonNegativeNumber);
  addKvDtypeFlag(serve, o.kv_dtype);
  addDeviceFlags(serve, o.device);
  serve->add_option("--kv-blocks", o.kv_blocks, "KV cache blocks (0 = default)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--max-running", o.max_running, "Sequences batched at once")
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-batched-tokens", o.max_batched_tokens,
                    "Token budget of one engine step")
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-prefill-while-decoding", o.max_prefill_while_decoding,
                    "Prefill a step carries next to decodes, in tokens, a token at position p "
                    "counting 1 + p / (the context where its attention costs as much as its "
                    "linear layers); bounds decoders' latency (0 = the step budget only)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--max-model-len", o.max_model_len,
                    "Longest sequence, prompt plus output (0 = the model's context)")
      ->check(CLI::NonNegativeNumber);
  serve->add_flag("--no-prefix-cache", o.no_prefix_cache, "Disable prefix caching");
  addTensorParallelFlag(serve, o.tp);
  addSpeculativeFlags(serve, o.speculative, o.spec_tokens,
                      o.spec_branches, o.draft);
  serve->add_option("--served-model-name", o.model_name,
                    "Model name for the API (default: the artifact's file name)");
  return serve;
}

/// The hidden `ingot tp-worker`: a worker rank that `--tp-mode processes` starts.
struct TpWorkerFlags {
  ingot::TpWorkerOptions options;
  std::string master, kv_dtype = "artifact", device = "cpu";
  int64_t timeout_ms = ingot::TpWorkerOptions{}.timeout.count();
};

CLI::App* addTpWorkerCommand(CLI::App& app, TpWorkerFlags& f) {
  CLI::App* tp_worker = app.add_subcommand("tp-worker", "A tensor-parallel worker rank (internal)");
  tp_worker->group("");
  tp_worker->add_option("--artifact", f.options.artifact)->required();
  tp_worker->add_option("--rank", f.options.rank)->required();
  tp_worker->add_option("--world", f.options.world_size)->required();
  tp_worker->add_option("--master", f.master)->required();
  tp_worker->add_option("--group", f.options.group);
  tp_worker->add_option("--threads", f.options.num_threads)->check(CLI::PositiveNumber);
  tp_worker->add_option("--kv-blocks", f.options.num_kv_blocks)->check(CLI::NonNegativeNumber);
  tp_worker->add_option("--kv-dtype", f.kv_dtype);
  tp_worker->add_option("--timeout-ms", f.timeout_ms)->check(CLI::PositiveNumber);
  tp_worker->add_option("--chunk-floats", f.options.chunk_floats)->check(CLI::PositiveNumber);
  tp_worker->add_option("--nnodes", f.options.nnodes)->check(CLI::PositiveNumber);
  tp_worker->add_option("--device", f.device, "cpu, or cuda:N: this rank's GPU");
  tp_worker->add_option("--gpu-memory-utilization", f.options.gpu_memory_utilization);
  tp_worker->add_option("--max-model-len", f.options.max_model_len)->check(CLI::NonNegativeNumber);
  return tp_worker;
}

int runTpWorker(TpWorkerFlags& f) {
    f.options.kv_dtype = f.kv_dtype == "artifact" ? "" : f.kv_dtype;
  f.options.timeout = std::chrono::milliseconds(f.timeout_ms);
  if (f.device != "cpu") {
    char* end = nullptr;
    const long gpu = f.device.rfind("cuda:", 0) == 0
                         ? std::strtol(f.device.c_str() + 5, &end, 10) : -1;
    if (gpu < 0 || !end || end == f.device.c_str() + 5 || *end != '\0') {
      std::cerr << "ingot tp-worker: error: --device must be cpu or cuda:N, got '"
                << f.device << "'\n";
      return 2;
    }
    f.options.gpu = static_cast<int32_t>(gpu);
  }
  return ingot::runTpWorkerCommand(f.options, f.master, std::cerr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ingot: ahead-of-time compiler and serving runtime for LLMs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ingot ") + ingot::kVersion);

  // ingot inspect
  std::string inspect_path;
  bool inspect_verify = false;
  CLI::App* inspect = app.add_subcommand("inspect", "Print an artifact's manifest in human form");
  inspect->add_option("artifact", inspect_path, "Path to a .ingot artifact")->required();
  inspect->add_flag("--verify", inspect_verify, "Also check every tensor's xxh64 checksum");
  CompileFlags compile;
  addCompileCommand(app, compile);
  // ingot run
  ingot::RunOptions run_options;
  CLI::App* run = app.add_subcommand("run", "Generate text from a prompt on the CPU backend");
  addGenerationOptions(run, run_options);
  run->get_option("--prompt")->required();
  run->add_flag("--chat", run_options.chat, "Apply the artifact's chat template to the prompt");
  run->add_flag("--ignore-eos", run_options.sampling.ignore_eos, "Keep generating past end-of-sequence");
  // ingot chat
  ingot::RunOptions chat_options;
  chat_options.max_new_tokens = 256;
  chat_options.chat = true;
  CLI::App* chat = app.add_subcommand("chat", "Chat with a model on the CPU backend");
  addGenerationOptions(chat, chat_options);
  ingot::BenchCommandOptions bench_options;
  CLI::App* bench = addBenchCommand(app, bench_options);
  ingot::EvalPerplexityOptions ppl_options;
  CLI::App* ppl = addEvalCommand(app, ppl_options);
  TokenizeFlags tokenize;
  CLI::App* tokenize_command = addTokenizeCommand(app, tokenize);
  ingot::ServeOptions serve_options;
  CLI::App* serve = addServeCommand(app, serve_options);
  TpWorkerFlags worker;
  CLI::App* tp_worker = addTpWorkerCommand(app, worker);

  CLI11_PARSE(app, argc, argv);

  if (*tp_worker) return runTpWorker(worker);
  // A worker node of a multi-host group runs only its ranks: no engine, no server.
  using ingot::isWorkerNode;
  using ingot::runWorkerNodeCommand;
  if (*serve && isWorkerNode(serve_options.device.tp_launch))
    return runWorkerNodeCommand("serve", serve_options.device.tp_launch,
                                serve_options.device.device, serve_options.artifact,
                                serve_options.threads, serve_options.tp, std::cerr);
  const ingot::RunOptions* generation = *run ? &run_options : *chat ? &chat_options : nullptr;
  if (generation && isWorkerNode(generation->device.tp_launch))
    return runWorkerNodeCommand(*run ? "run" : "chat", generation->device.tp_launch,
                                generation->device.device, generation->artifact,
                                generation->num_threads, generation->tp, std::cerr);
  if (*bench && isWorkerNode(bench_options.device.tp_launch))
    return runWorkerNodeCommand("bench", bench_options.device.tp_launch,
                                bench_options.device.device, bench_options.artifact,
                                bench_options.bench.num_threads, bench_options.tp, std::cerr);
  if (*ppl && isWorkerNode(ppl_options.device.tp_launch))
    return runWorkerNodeCommand("eval ppl", ppl_options.device.tp_launch,
                                ppl_options.device.device, ppl_options.artifact,
                                ppl_options.num_threads, ppl_options.tp, std::cerr);
  if (*serve) {
    return ingot::runServe(serve_options, std::cerr);
  }

  if (*bench) {
    bench_options.run_interference = bench->count("--interference") > 0;
    bench_options.concurrency_given = bench->count("--concurrency") > 0;
    bench_options.requests_given = bench->count("--requests") > 0;
    bench_options.interference.seed = bench_options.bench.seed;
    bench_options.interference.num_threads = bench_options.bench.num_threads;
    return ingot::runBench(bench_options, std::cout, std::cerr);
  }
  if (*ppl) {
    return ingot::runEvalPerplexity(ppl_options, std::cout, std::cerr);
  }
  if (*tokenize_command) {
    tokenize.options.add_special = !tokenize.no_special;
    tokenize.options.parse_special = !tokenize.literal_specials;
    return ingot::runTokenize(tokenize.options, std::cout, std::cerr);
  }
  if (*chat) {
    return ingot::runChat(chat_options, std::cin, std::cout, std::cerr);
  }
  if (*run) {
    return ingot::runGenerate(run_options, std::cout, std::cerr);
  }

  if (*inspect) {
    return ingot::runInspect(inspect_path, inspect_verify, std::cout, std::cerr);
  }
  if (*compile.command) return runCompileCommand(compile, argc, argv);
  return 0;
}
