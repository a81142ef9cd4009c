// CudaBackend: device setup, kernels, KV pool, and steps replayed as CUDA graphs or run eagerly.
#include "runtime/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/backend/cuda/cuda_backend_state.h"
#include "runtime/backend/cuda/cuda_ops.h"
#include "runtime/backend/cuda/cuda_fp8_linear.h"
#include "runtime/dist/communicator.h"

namespace ingot {
namespace {

using schema::OpKind;

/// GPU memory kept out of the KV pool for what is allocated after it (graphs, cuBLASLt's
/// internal state, buffers that grow with longer prefills).
constexpr uint64_t kReserveBytes = 512ull << 20;
/// Split-KV partials of an eager step stay under this many bytes.
constexpr uint64_t kMaxPartialBytes = 64ull << 20;
/// Key tile of the decode kernel (codegen kDecodeKeyTile).
constexpr int32_t kDecodeKeyTile = 32;

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

/// Bytes of one element of an extra attention operand (i1 takes a byte, as on the CPU).
size_t operandElementBytes(RegionType t) {
  const unsigned bits = typeBitWidth(t);
  return bits <= 8 ? 1 : bits / 8;
}

/// The device, context and stream of `options.device`.
Status openDevice(CudaBackendState& s, int ordinal) {
  CudaDriver& cu = *s.cu;
  int count = 0;
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGetCount", cu.deviceGetCount(&count)));
  if (count == 0) return notFound("the NVIDIA driver sees no CUDA device");
  if (ordinal < 0 || ordinal >= count)
    return invalidArgument("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(count) + " present)");
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGet", cu.deviceGet(&s.device, ordinal)));
  char name[256] = {0};
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGetName", cu.deviceGetName(name, sizeof(name) - 1, s.device)));
  s.gpu.name = name;
  s.gpu.emulated = cu.emulated();
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGetAttribute",
      cu.deviceGetAttribute(&s.gpu.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s.device)));
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGetAttribute",
      cu.deviceGetAttribute(&s.gpu.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s.device)));
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGetAttribute",
      cu.deviceGetAttribute(&s.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s.device)));
  if (s.gpu.major < 8)
    return unimplemented(s.gpu.name + " (sm_" + std::to_string(s.gpu.major) +
                         std::to_string(s.gpu.minor) + "): the CUDA backend needs sm_80 or newer");
  INGOT_RETURN_IF_ERROR(cu.check("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(&s.context, s.device)));
  s.context_retained = true;
  INGOT_RETURN_IF_ERROR(cu.check("cuCtxSetCurrent", cu.ctxSetCurrent(s.context)));
  return cu.check("cuStreamCreate", cu.streamCreate(&s.stream, CU_STREAM_NON_BLOCKING));
}

/// What the CUDA backend cannot run yet, as an error naming it (ok when all is supported).
Status checkSupported(const Artifact& artifact, const ProgramPlan& plan, int32_t program) {
  const schema::ProgramDef* def = artifact.manifest().programs()->Get(program);
  for (uint32_t b = 0; def->buffers() && b < def->buffers()->size(); ++b) {
    const schema::BufferDef* buffer = def->buffers()->Get(b);
    if (buffer->kind() == schema::BufferKind::Activation && buffer->dtype() != schema::DType::F32)
      return unimplemented("activation " + (buffer->name() ? buffer->name()->str() : std::to_string(b)) +
                           " is " + schema::EnumNameDType(buffer->dtype()) +
                           "; the CUDA backend runs f32 activations only so far");
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlannedStep& p = plan.steps[i];
    const std::string where = "step " + std::to_string(i) + ": ";
    if (!findCudaOpDefinition(p.op))
      return unimplemented(where + schema::EnumNameOpKind(p.op) +
                           " is not supported by the CUDA backend yet");
    // planProgram accepts a head that writes an activation only as a vocab-parallel slice.
    if (p.op == OpKind::Logits && plan.buffers[p.outputs[0]].kind != schema::BufferKind::Output &&
        !plan.buffers[p.outputs[0]].logit_rows)
      return internalError(where + "the head writes neither the logits nor a slice of them");
  }
  return okStatus();
}

/// The fused kernels, each attention step's decode and combine kernels, and each quantized
/// linear's GEMV kernel (and its GEMM, where the artifact has one).
Status resolveKernels(CudaBackendState& s, int32_t program) {
  const KernelModules& m = *s.modules;
  auto fused = [&](const char* op, LoadedKernel* out) -> Status {
    const std::string name = std::string("ingot_fused_") + op + "_f32";
    StatusOr<LoadedKernel> k = m.find(name);
    if (!k.ok())
      return notFound("the artifact has no CUDA kernel " + name +
                      "; compile it with --cuda-targets (the default where NVRTC is present)");
    *out = *k;
    return okStatus();
  };
  FusedKernels& f = s.fused;
  INGOT_RETURN_IF_ERROR(fused("embedding", &f.embedding));
  INGOT_RETURN_IF_ERROR(fused("rms_norm_residual", &f.rms_norm));
  INGOT_RETURN_IF_ERROR(fused("rope_kv_write", &f.rope_kv));
  INGOT_RETURN_IF_ERROR(fused("silu_mul", &f.silu_mul));
  INGOT_RETURN_IF_ERROR(fused("add", &f.add));
  INGOT_RETURN_IF_ERROR(fused("add_bias", &f.add_bias));
  INGOT_RETURN_IF_ERROR(fused("to_bf16", &f.to_bf16));
  INGOT_RETURN_IF_ERROR(fused("gather_rows", &f.gather_rows));
  // Sampling is optional: an artifact compiled before it existed runs with host sampling.
  if (m.has("ingot_fused_sample_f32")) INGOT_RETURN_IF_ERROR(fused("sample", &f.sample));
  if (m.has("ingot_fused_scale_f32")) INGOT_RETURN_IF_ERROR(fused("scale", &f.scale));
  if (m.has("ingot_fused_gelu_mul_f32")) INGOT_RETURN_IF_ERROR(fused("gelu_mul", &f.gelu_mul));
  const bool fp8 = s.kv_dtype == KvDtype::kFp8E4M3;
  // The fp8 KV write and attention kernels are compiled in only with `--kv-dtype fp8`.
  const std::string recompile = "; recompile it with `ingot compile --kv-dtype fp8` (the CUDA "
                                "kernels are made for the KV cache's type)";
  if (fp8 && !m.has("ingot_fused_kv_write_fp8_f32"))
    return notFound("an fp8 KV cache needs CUDA kernel ingot_fused_kv_write_fp8_f32, which the "
                    "artifact lacks" + recompile);
  if (fp8) INGOT_RETURN_IF_ERROR(fused("kv_write_fp8", &f.kv_write_fp8));
  const schema::ProgramDef* def = s.artifact->manifest().programs()->Get(program);
  for (size_t i = 0; i < s.plan->steps.size(); ++i) {
    const CudaOpDefinition* op = findCudaOpDefinition(s.plan->steps[i].op);
    s.steps[i].op = op;
    if (op->resolve)
      INGOT_RETURN_IF_ERROR(op->resolve(s, i, *def->steps()->Get(static_cast<uint32_t>(i))));
  }
  return okStatus();
}

/// Split-KV of the decode graph of `bucket` requests: planned for the longest sequence its
/// block tables can hold, so every key of every request falls in some split.
SplitPlan graphSplit(const CudaBackendState& s, int32_t bucket) {
  return chooseSplits(int64_t{s.max_blocks_per_request} * s.shape.kv_block_size,
                      int64_t{bucket} * s.plan->kv_layout.num_kv_heads, s.sms, kDecodeKeyTile);
}

}  // namespace

CudaBackendState::~CudaBackendState() {
  if (!cu) return;
  if (context) cu->ctxSetCurrent(context);
  if (stream) cu->streamSynchronize(stream);
  dropGraphs();
  // Device memory goes before the context it lives in is released.
  fp8_linear.reset();
  buffers = StepBuffers();
  kv_pool.reset();
  kv_scales.reset();
  weight_memory.clear();
  workspace.reset();
  errors.reset();
  errors_host.reset();
  blas.reset();
  modules.reset();
  if (stream) cu->streamDestroy(stream);
  if (context_retained) cu->primaryCtxRelease(device);
}

Status CudaBackendState::makeCurrent() {
  return cu->check("cuCtxSetCurrent", cu->ctxSetCurrent(context));
}

void CudaBackendState::dropGraphs() {
  for (auto& [bucket, exec] : graphs) cu->graphExecDestroy(exec);
  graphs.clear();
}

CudaBackend::CudaBackend() : s_(std::make_unique<CudaBackendState>()) {}
CudaBackend::~CudaBackend() = default;

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::create(const Artifact& artifact,
                                                           const CudaBackendOptions& options) {
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  CudaBackendState& s = *backend->s_;
  s.artifact = &artifact;
  const schema::Manifest& manifest = artifact.manifest();
  if (!manifest.programs() || options.program < 0 ||
      options.program >= static_cast<int32_t>(manifest.programs()->size()))
    return invalidArgument("cuda backend: the artifact has no program " + std::to_string(options.program));
  StatusOr<int32_t> program =
      selectProgram(artifact, options.program, options.tp_rank, options.communicator);
  if (!program.ok()) return program.status().withPrefix("cuda backend");
  s.comm = options.communicator;
  s.tp_rank = std::max(0, manifest.programs()->Get(*program)->tp_rank());
  s.weights = std::make_unique<WeightStore>(artifact, manifest.programs()->Get(*program)->tp_rank());
  StatusOr<ProgramPlan> plan = planProgram(artifact, *s.weights, *program);
  if (!plan.ok()) return plan.status().withPrefix("cuda backend");
  s.plan = std::make_unique<ProgramPlan>(std::move(*plan));
  s.world = s.plan->world_size;
  // A group that can enqueue on the compute stream (NCCL) gets whole steps and graphs.
  s.stream_comm = s.world > 1 ? dynamic_cast<StreamCollectives*>(s.comm) : nullptr;
  INGOT_RETURN_IF_ERROR(checkSupported(artifact, *s.plan, *program).withPrefix("cuda backend"));
  s.kv_dtype = options.kv_dtype.value_or(s.plan->kv_dtype);
  const schema::ModelConfigDef& config = *manifest.config();
  s.shape.vocab_size = config.vocab_size();
  s.shape.kv_block_size = static_cast<int32_t>(s.plan->kv_layout.block_size);
  s.max_model_len = options.max_model_len > 0 ? options.max_model_len
                                              : std::max<int64_t>(config.max_context(), 1);
  s.max_blocks_per_request =
      static_cast<int32_t>((s.max_model_len + s.shape.kv_block_size - 1) / s.shape.kv_block_size);
  s.tree_inputs = programTakesTreeInputs(*manifest.programs()->Get(*program),
                                         s.plan->num_extra_inputs);
  for (const PlannedStep& p : s.plan->steps)
    if (p.op == OpKind::Linear || p.op == OpKind::Logits || p.op == OpKind::GatedLinear)
      s.max_linear_k = std::max(s.max_linear_k, p.weight.cols());

  StatusOr<std::unique_ptr<CudaDriver>> driver = CudaDriver::load();
  if (!driver.ok()) return driver.status().withPrefix("cuda backend");
  s.cu = std::move(driver).value();
  CudaDriver& cu = *s.cu;
  INGOT_RETURN_IF_ERROR(openDevice(s, options.device).withPrefix("cuda backend"));
  StatusOr<std::unique_ptr<KernelModules>> modules =
      KernelModules::load(cu, artifact, s.gpu, options.kernels);
  if (!modules.ok()) return modules.status().withPrefix("cuda backend");
  s.modules = std::move(modules).value();
  s.steps.resize(s.plan->steps.size());
  INGOT_RETURN_IF_ERROR(resolveKernels(s, *program).withPrefix("cuda backend"));
  StatusOr<std::unique_ptr<CublasLt>> blas = CublasLt::load();
  if (!blas.ok()) return blas.status().withPrefix("cuda backend");
  s.blas = std::move(blas).value();
  INGOT_RETURN_IF_ERROR(s.workspace.allocate(cu, CublasLt::kWorkspaceBytes, "the cuBLASLt workspace"));
  INGOT_RETURN_IF_ERROR(s.errors.allocate(cu, 16, "error words"));
  INGOT_RETURN_IF_ERROR(s.errors_host.allocate(cu, 16, "error words"));
  INGOT_RETURN_IF_ERROR(uploadWeights(s).withPrefix("cuda backend"));
  INGOT_RETURN_IF_ERROR(prepareFp8Linears(s, options.fp8_w8a8_min_rows).withPrefix("cuda backend"));

  // Buffers for the largest decode graph and a first prefill, before the KV pool takes
  // the rest of the memory.
  s.buckets = decodeBuckets(std::max(options.max_graph_batch, 0));
  s.capture_graphs = options.capture_decode_graphs;
  const int32_t graphBatch = s.buckets.empty() ? 1 : s.buckets.back();
  StepDims first;
  first.tokens = std::max(graphBatch, 512);
  first.requests = graphBatch;
  first.max_blocks = s.max_blocks_per_request;
  first.logit_rows = graphBatch;
  INGOT_RETURN_IF_ERROR(ensureBuffers(s, first, graphSplit(s, 1).num_splits).withPrefix("cuda backend"));

  const uint64_t blockBytes = kvBlockBytes(s);
  int64_t blocks = options.num_kv_blocks;
  if (blocks <= 0) {
    size_t free = 0, total = 0;
    INGOT_RETURN_IF_ERROR(cu.check("cuMemGetInfo", cu.memGetInfo(&free, &total)).withPrefix("cuda backend"));
    StatusOr<int64_t> fit = kvBlocksForMemory(free, total, options.gpu_memory_utilization,
                                              kReserveBytes, blockBytes, s.max_blocks_per_request);
    // Every rank of a group takes part, short of memory or not, so that all pools agree
    // and a rank without room is named to the others at once rather than at a timeout.
    StatusOr<int64_t> agreed = agreeKvBlocks(s, fit.ok() ? *fit : 0);
    if (!fit.ok()) return fit.status();
    if (!agreed.ok()) return agreed.status().withPrefix("cuda backend");
    blocks = *agreed;
  }
  INGOT_RETURN_IF_ERROR(allocateKvPool(s, blocks).withPrefix("cuda backend"));
  return backend;
}

Status CudaBackend::step(const StepInputs& in, std::vector<float>* logits) {
  return run(in, nullptr, nullptr, logits);
}

bool CudaBackend::samplesOnBackend() const {
  // A rank of a group holds a slice of the logits until the all_gather; sampling where the
  // gathered logits are is a later step (every rank would have to draw the same token).
  return s_->fused.sample.function != nullptr && s_->world == 1;
}

Status CudaBackend::stepAndSample(const StepInputs& in, const std::vector<RowSampling>& rows,
                                  std::vector<int32_t>* tokens) {
  if (!samplesOnBackend())
    return unimplemented(s_->world > 1
                             ? "a tensor-parallel CUDA rank does not sample on the GPU yet; "
                               "sample on the host with step()"
                             : "the artifact has no sampling kernel (ingot_fused_sample_f32); "
                               "recompile it, or sample on the host with step()");
  if (rows.size() != in.logit_rows.size())
    return invalidArgument("stepAndSample: " + std::to_string(rows.size()) +
                           " sampling rows for " + std::to_string(in.logit_rows.size()) +
                           " logit rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowSampling& r = rows[i];
    if (!(r.u >= 0.0 && r.u < 1.0) || !(r.top_p > 0.0f && r.top_p <= 1.0f) ||
        !(r.min_p >= 0.0f && r.min_p <= 1.0f) || r.top_k < -1 || std::isnan(r.temperature))
      return invalidArgument("stepAndSample: row " + std::to_string(i) +
                             " has sampling parameters out of range");
  }
  return run(in, &rows, tokens, nullptr);
}

namespace {

using ExtraOperands = std::vector<std::pair<CUdeviceptr, std::vector<int64_t>>>;

/// A decode step replays its bucket's graph; anything else runs eagerly at its own size.
/// A tensor-parallel rank does too when its collectives are stream-ordered (every rank got
/// the same inputs, so all capture and replay the same graphs in the same order); with
/// host-call collectives it runs every step eagerly. Returns the bucket (-1: eager).
int32_t chooseStepShape(const CudaBackendState& s, const StepInputs& in, StepDims& dims,
                        SplitPlan& split) {
  int32_t bucket = -1;
  if ((s.world == 1 || (s.stream_comm && s.stream_comm->capturable())) && isPlainDecode(in) &&
      in.max_blocks_per_request <= s.max_blocks_per_request)
    bucket = decodeBucket(in.numTokens(), s.buckets);
  if (bucket > 0) {
    dims = StepDims{bucket, bucket, s.max_blocks_per_request, bucket};
    split = graphSplit(s, bucket);
  } else {
    dims = stepDims(in);
    const int32_t maxLen = *std::max_element(in.seq_lens.begin(), in.seq_lens.end());
    split = chooseSplits(maxLen, int64_t{in.num_requests} * s.plan->kv_layout.num_kv_heads, s.sms,
                         kDecodeKeyTile);
    const uint64_t perSplit = static_cast<uint64_t>(dims.tokens) * std::max<int64_t>(s.max_heads, 1) *
                              (std::max<int64_t>(s.head_dim, 1) + 2) * 4;
    while (split.num_splits > 1 && perSplit * split.num_splits > kMaxPartialBytes)
      split = chooseSplits(maxLen, int64_t{in.num_requests} * s.plan->kv_layout.num_kv_heads,
                           std::max(1, s.sms / 2), kDecodeKeyTile, split.keys_per_split * 2);
  }
  return bucket;
}

/// Extra attention operands on the device: the no-tree default points at the packed
/// seq_lens (a tree that starts at each request's KV length is plain causal attention) and
/// zero bits; given operands are copied up behind the step's inputs.
StatusOr<ExtraOperands> uploadExtraOperands(CudaBackendState& s, const StepInputs& in,
                                            const StepDims& dims, bool defaultTrees) {
  CudaDriver& cu = *s.cu;
  StepBuffers& b = s.buffers;
  ExtraOperands extra;
  if (defaultTrees) {
    const CUdeviceptr lens = b.inputs.ptr() + static_cast<CUdeviceptr>(stepLayout(dims).seq_lens) * 4;
    extra.push_back({lens, {dims.requests}});
    extra.push_back({b.tree_bits.ptr(), {dims.requests, 1, 1}});
  } else if (!in.extra_inputs.empty()) {
    size_t total = 0;
    std::vector<size_t> offsets;
    for (const RegionOperandView& v : in.extra_inputs) {
      size_t n = operandElementBytes(v.element_type);
      for (uint32_t r = 0; r < v.rank; ++r) n *= static_cast<size_t>(v.shape[r]);
      offsets.push_back(total);
      total = (total + n + 255) / 256 * 256;
    }
    if (b.extra.bytes() < total) {
      INGOT_RETURN_IF_ERROR(b.extra.allocate(cu, 2 * total, "extra attention operands"));
      INGOT_RETURN_IF_ERROR(b.extra_host.allocate(cu, 2 * total, "extra attention operands"));
    }
    for (size_t i = 0; i < in.extra_inputs.size(); ++i) {
      const RegionOperandView& v = in.extra_inputs[i];
      size_t n = operandElementBytes(v.element_type);
      std::vector<int64_t> shape(v.shape, v.shape + v.rank);
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      std::memcpy(static_cast<char*>(b.extra_host.data()) + offsets[i], v.data, n);
      extra.push_back({b.extra.ptr() + offsets[i], shape});
    }
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyHtoDAsync",
                                   cu.memcpyHtoDAsync(b.extra.ptr(), b.extra_host.data(), total, s.stream)));
  }

  return extra;
}

/// Enqueues the step: replayed from its bucket's decode graph (captured on the bucket's
/// second step), or eagerly.
Status launchStep(CudaBackendState& s, int32_t bucket, const StepDims& dims,
                  const SplitPlan& split, const ExtraOperands& extra, bool sample) {
  CudaDriver& cu = *s.cu;
  // A bucket's first step runs eagerly at the bucket's shape (cuBLASLt picks its algorithms
  // and the driver loads lazily loaded kernels outside any capture); its second is captured.
  const int32_t key = 2 * bucket + (sample ? 1 : 0);
  const bool replay =
      bucket > 0 && s.capture_graphs && (s.graphs.count(key) || s.warmed.count(key));
  if (bucket > 0 && !replay) s.warmed.insert(key);
  if (replay) {
    auto it = s.graphs.find(key);
    if (it == s.graphs.end()) {
      INGOT_RETURN_IF_ERROR(cu.check("cuStreamBeginCapture",
                                     cu.streamBeginCapture(s.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)));
      Status enqueued = enqueueStep(s, dims, split, extra, sample);
      CUgraph graph = nullptr;
      Status ended = cu.check("cuStreamEndCapture", cu.streamEndCapture(s.stream, &graph));
      if (!enqueued.ok() || !ended.ok()) {
        if (graph) cu.graphDestroy(graph);
        return (enqueued.ok() ? ended : enqueued).withPrefix("capturing the decode graph of batch " +
                                                             std::to_string(bucket));
      }
      CUgraphExec exec = nullptr;
      Status made = cu.check("cuGraphInstantiate", cu.graphInstantiate(&exec, graph, 0));
      cu.graphDestroy(graph);
      INGOT_RETURN_IF_ERROR(made.withPrefix("decode graph of batch " + std::to_string(bucket)));
      it = s.graphs.emplace(key, exec).first;
    }
    INGOT_RETURN_IF_ERROR(cu.check("cuGraphLaunch", cu.graphLaunch(it->second, s.stream)));
    s.last_bucket = bucket;
  } else {
    INGOT_RETURN_IF_ERROR(enqueueStep(s, dims, split, extra, sample));
    s.last_bucket = bucket > 0 ? -bucket : 0;
  }
  return okStatus();
}

/// Waits for the step, then reads its error words: a token outside the vocabulary, a
/// trapped attention region.
Status finishStep(CudaBackendState& s, int32_t bucket, const StepInputs& in) {
  CudaDriver& cu = *s.cu;
  if (s.stream_comm) {
    // The step's one host wait, bounded by the group's timeout: a peer that died or hangs
    // aborts the group (its collective kernels exit) instead of blocking here for good.
    const std::string what = "tp rank " + std::to_string(s.tp_rank) + " step (" +
                             (bucket > 0 && s.last_bucket > 0
                                  ? "decode graph of batch " + std::to_string(bucket)
                                  : "eager, " + std::to_string(in.numTokens()) + " tokens") +
                             ")";
    INGOT_RETURN_IF_ERROR(s.stream_comm->waitStream(s.stream, what));
  } else {
    INGOT_RETURN_IF_ERROR(cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream)).withPrefix("step"));
  }
  const uint32_t* err = static_cast<const uint32_t*>(s.errors_host.data());
  if (err[0] != 0)
    return invalidArgument("step: token " + std::to_string(in.tokens[err[0] - 1]) +
                           " is outside the vocabulary");
  if (err[1] != 0)
    return invalidArgument(std::string("step: an attention region trapped (") +
                           ((err[1] & 1u) ? "integer division by zero " : "") +
                           ((err[1] & 2u) ? "operand index out of range " : "") +
                           ((err[1] & 4u) ? "poison value" : "") + ")");
  return okStatus();
}

}  // namespace

Status CudaBackend::run(const StepInputs& in, const std::vector<RowSampling>* sampleRows,
                        std::vector<int32_t>* tokens, std::vector<float>* logits) {
  CudaBackendState& s = *s_;
  const bool sample = sampleRows != nullptr;
  s.step_started = false;
  // The engine may step from another thread than the one that created the backend.
  INGOT_RETURN_IF_ERROR(s.makeCurrent());
  INGOT_RETURN_IF_ERROR(in.validate(s.shape, s.num_kv_blocks));
  const bool defaultTrees = s.tree_inputs && in.extra_inputs.empty();
  // (The no-tree default is built on the GPU from the packed inputs and needs no check.)
  if (!defaultTrees) INGOT_RETURN_IF_ERROR(checkExtraInputs(*s.plan, in));
  const int64_t V = s.shape.vocab_size;
  const size_t L = in.logit_rows.size();
  if (sample) tokens->assign(L, 0);
  else logits->assign(L * static_cast<size_t>(V), 0.0f);
  s.last_bucket = 0;
  if (in.tokens.empty()) return okStatus();
  // Every rank got the same inputs and accepted them: from here on the others may be
  // inside a collective that this rank must join.
  s.step_started = true;
  // A group that broke (here, on another rank, or by a watcher's abort) stays broken. Its
  // NCCL abort finishes only once the graphs that captured its collectives are destroyed, so
  // they go as soon as the group is seen broken, and are never replayed on it again.
  struct DropGraphsOnBrokenGroup {
    CudaBackendState& s;
    ~DropGraphsOnBrokenGroup() {
      if (s.stream_comm && !s.graphs.empty() && !s.comm->groupStatus().ok()) s.dropGraphs();
    }
  } dropOnBroken{s};
  if (s.stream_comm) INGOT_RETURN_IF_ERROR(s.comm->groupStatus());

  StepDims dims;
  SplitPlan split;
  const int32_t bucket = chooseStepShape(s, in, dims, split);
  INGOT_RETURN_IF_ERROR(ensureBuffers(s, dims, split.num_splits));
  StepBuffers& b = s.buffers;
  INGOT_RETURN_IF_ERROR(packStepInputs(in, dims, 0, static_cast<int32_t*>(b.inputs_host.data())));
  if (s.kv_dtype == KvDtype::kFp8E4M3)
    packKvRuns(in, dims, s.shape.kv_block_size, static_cast<int32_t*>(b.inputs_host.data()));
  if (sample) {  // padded rows sample greedily (their tokens are never read)
    std::memset(b.row_sampling_host.data(), 0, static_cast<size_t>(dims.logit_rows) * sizeof(RowSampling));
    std::memcpy(b.row_sampling_host.data(), sampleRows->data(), L * sizeof(RowSampling));
  }

  INGOT_ASSIGN_OR_RETURN(ExtraOperands extra, uploadExtraOperands(s, in, dims, defaultTrees));
  INGOT_RETURN_IF_ERROR(launchStep(s, bucket, dims, split, extra, sample));
  INGOT_RETURN_IF_ERROR(finishStep(s, bucket, in));
  INGOT_RETURN_IF_ERROR(kvWriteError(s).withPrefix("step"));
  if (sample) std::memcpy(tokens->data(), b.tokens_host.data(), L * sizeof(int32_t));
  else std::memcpy(logits->data(), b.logits_host.data(), L * static_cast<size_t>(V) * sizeof(float));
  return okStatus();
}

Status CudaBackend::copyKvBlocks(int64_t src, int64_t dst) {
  CudaBackendState& s = *s_;
  if (src < 0 || src >= s.num_kv_blocks || dst < 0 || dst >= s.num_kv_blocks)
    return invalidArgument("copyKvBlocks: block " +
                           std::to_string(src < 0 || src >= s.num_kv_blocks ? src : dst) +
                           " is outside the pool of " + std::to_string(s.num_kv_blocks));
  if (src == dst) return okStatus();
  INGOT_RETURN_IF_ERROR(s.makeCurrent());
  return copyKvBlock(s, src, dst);
}

bool CudaBackend::wantsFreedKvBlocks() const { return s_->gpu.emulated; }

Status CudaBackend::kvBlocksFreed(const std::vector<int32_t>& blocks) {
  CudaBackendState& s = *s_;
  if (blocks.empty()) return okStatus();
  INGOT_RETURN_IF_ERROR(s.makeCurrent());
  for (int32_t b : blocks)
    if (b < 0 || b >= s.num_kv_blocks)
      return invalidArgument("kvBlocksFreed: block " + std::to_string(b) + " is outside the pool of " +
                             std::to_string(s.num_kv_blocks));
  return poisonKvBlocks(s, blocks);
}

Status CudaBackend::copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) {
  CudaBackendState& s = *s_;
  const KvCacheLayout& kv = s.plan->kv_layout;
  const int64_t slots = s.num_kv_blocks * kv.block_size;
  for (const auto& [from, to] : moves)
    if (from < 0 || to < 0 || from >= slots || to >= slots)
      return invalidArgument("copyKvSlots: slot " + std::to_string(from < 0 || from >= slots ? from : to) +
                             " outside the pool of " + std::to_string(slots) + " slots");
  INGOT_RETURN_IF_ERROR(s.makeCurrent());
  return copyKvSlotRows(s, moves);
}

int64_t CudaBackend::numKvBlocks() const { return s_->num_kv_blocks; }
int64_t CudaBackend::vocabSize() const { return s_->shape.vocab_size; }
int32_t CudaBackend::numExtraInputs() const { return s_->plan->num_extra_inputs; }
bool CudaBackend::takesTreeInputs() const { return s_->tree_inputs; }
uint64_t CudaBackend::matrixBytes() const { return s_->plan->matrix_bytes; }
KvDtype CudaBackend::kvDtype() const { return s_->kv_dtype; }
int32_t CudaBackend::lastGraphBucket() const { return s_->last_bucket; }
int CudaBackend::tpWorldSize() const { return s_->world; }
bool CudaBackend::stepStarted() const { return s_->step_started; }
const KernelLoadReport& CudaBackend::kernelReport() const { return s_->modules->report(); }
double CudaBackend::uploadSeconds() const { return s_->upload_seconds; }
uint64_t CudaBackend::uploadBytes() const { return s_->upload_bytes; }

std::string CudaBackend::describe() const {
  const CudaBackendState& s = *s_;
  const KernelLoadReport& k = s.modules->report();
  return s.gpu.name + " (sm_" + std::to_string(s.gpu.major) + std::to_string(s.gpu.minor) + ", " +
         std::to_string(s.sms) + " SMs), weights " + gib(s.weight_device_bytes) + " on the GPU (" +
         std::to_string(s.upload_seconds).substr(0, 5) + " s), KV " + std::to_string(s.num_kv_blocks) +
         " blocks (" +
         gib(s.kv_pool.bytes() + s.kv_scales.bytes()) + ", " + kvDtypeName(s.kv_dtype) + "), kernels " +
         (k.simt > 0 ? std::to_string(k.simt) + " emulated from source (SIMT)"
                     : std::to_string(k.cubins) + " cubin + " +
                           std::to_string(k.ptx_jit + k.ptx_from_cache) + " PTX") +
         (s.world > 1 ? std::string(", tp rank ") + std::to_string(s.tp_rank) + " of " +
                            std::to_string(s.world) +
                            (s.stream_comm ? " (collectives on the compute stream)"
                                           : " (eager steps, collectives between kernels)")
                      : std::string()) +
         (s.world == 1 || (s.stream_comm && s.stream_comm->capturable())
              ? ", decode graphs up to batch " +
                    std::to_string(s.buckets.empty() ? 0 : s.buckets.back())
              : std::string()) +
         (describeFp8Linears(s).empty() ? std::string() : ", " + describeFp8Linears(s));
}

Status cudaDeviceAvailable() {
  StatusOr<std::unique_ptr<CudaDriver>> driver = CudaDriver::load();
  if (!driver.ok()) return driver.status();
  int count = 0;
  INGOT_RETURN_IF_ERROR((*driver)->check("cuDeviceGetCount", (*driver)->deviceGetCount(&count)));
  if (count == 0) return notFound("the NVIDIA driver sees no CUDA device");
  return okStatus();
}

}  // namespace ingot
