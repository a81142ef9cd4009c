// CudaBackend: runs an artifact's serving-step program on one NVIDIA GPU (driver API,
// the artifact's kernels, cuBLASLt), with decode steps replayed as CUDA graphs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/kernel_modules.h"
#include "runtime/backend/kv_dtype.h"
#include "runtime/backend/step_inputs.h"
#include "core/base/status.h"

namespace ingot {

class Communicator;

struct CudaBackendOptions {
  /// CUDA device ordinal.
  int device = 0;
  /// Fraction of the GPU's memory this process may fill (weights, buffers, KV pool), as
  /// vLLM's --gpu-memory-utilization; memory other processes use counts against it.
  double gpu_memory_utilization = 0.9;
  /// Blocks in the KV pool; 0 = as many as gpu_memory_utilization leaves.
  int64_t num_kv_blocks = 0;
  /// Longest sequence the engine will run (0 = the model's max_context): the fewest KV
  /// blocks accepted and the block-table width of the decode graphs.
  int64_t max_model_len = 0;
  /// Decode steps of up to this many requests replay CUDA graphs (0 = no graphs: every
  /// step eager, which also keeps a tensor-parallel rank's collectives out of graphs).
  int32_t max_graph_batch = 128;
  /// False: those decode steps still run at their bucket's shape and split-KV plan, but
  /// eagerly, never captured or replayed: the graphs' exact computation without the graphs
  /// (tests compare the two bit for bit).
  bool capture_decode_graphs = true;
  /// Element type of the KV pool; unset = the program's (an artifact compiled with
  /// `--kv-dtype fp8` has an fp8 one). fp8 needs the artifact's fp8 KV kernels, which only
  /// `ingot compile --kv-dtype fp8` puts in: create() names the recompile otherwise.
  std::optional<KvDtype> kv_dtype;
  /// Which program: 0 = the main one.
  int32_t program = 0;
  /// Tensor parallelism (docs/tensor-parallel.md): for an artifact sharded over N > 1 ranks,
  /// the rank this GPU runs (its main program and only its tensors) and the group's
  /// communicator over this GPU's memory (an NcclCommunicator on `device`; not owned, it
  /// must outlive the backend; rank and world size must agree with it). An unsharded
  /// artifact needs neither.
  int32_t tp_rank = 0;
  Communicator* communicator = nullptr;
  /// Kernel binaries: the PTX JIT cache, and forcing the PTX path.
  KernelModuleOptions kernels;
  /// fp8 linears on sm_90+: steps of at least this many tokens run W8A8 (per-token E4M3
  /// activations, cuBLASLt FP8; cuda_fp8_linear.h), shorter ones the weight-only GEMV;
  /// 0 = always weight-only. $INGOT_CUDA_W8A8 (off, or a row count) overrides it. Below it
  /// the GEMV, streaming the weight bytes once per 4 tokens, is bound by those bytes, not
  /// by math; 32 is a first guess made without a GPU (test/gpu/fp8_linear_test.cc prints
  /// both paths' times per row count).
  int64_t fp8_w8a8_min_rows = 32;
};

struct CudaBackendState;

/// Executes programs[0] with f32 activations and an f32 paged KV pool in GPU memory, the
/// layout the CPU backend uses. Linear and logits weights live on the GPU in bf16 and run
/// through cuBLASLt (bf16 inputs, f32 accumulation and output); embeddings, norms, biases
/// and rope frequencies stay f32. Attention uses the artifact's generated split-KV paged
/// kernels (1..N query tokens per request); the fused kernels of the artifact do the rest.
/// A step whose requests each bring one token (a decode step) of at most max_graph_batch
/// requests replays a CUDA graph captured once per batch-size bucket; every other step
/// (prefill, chunks, speculative trees) is launched eagerly with its own shape.
/// Every CUDA call is checked; an error names the call and the step.
/// One rank of a tensor-parallel artifact runs its program the same way, with its
/// all_reduce / all_gather steps going through the communicator between kernels: the
/// compute stream is drained first, the collective returns when complete, and a
/// vocabulary-parallel head's gathered [N, L, V/N] slices are put side by side into
/// [L, V] with strided copies on the GPU. With a communicator that is also a
/// StreamCollectives (NcclCommunicator) the collectives are enqueued on the compute stream
/// between the kernels, a step has one host wait at its end (bounded by the group's timeout,
/// which aborts the group), and decode steps replay graphs with the collectives captured
/// inside, as for one GPU; with any other communicator the collectives are host calls and
/// every step runs eagerly. A rank samples on the host.
/// An fp8 KV pool (kv_dtype) holds the CPU backend's bytes exactly: E4M3 codes with a
/// power-of-two scale per block-head, appended token by token by the artifact's fp8 write
/// kernel, decoded to f32 by its fp8 decode kernels (docs/quantization.md, "FP8 KV cache").
/// Not supported yet (create() says so): layer_norm, bf16 activations.
class CudaBackend final : public Backend {
 public:
  /// Loads the driver and cuBLASLt, picks the device, loads the kernels (cubin, else PTX
  /// through the JIT cache), uploads the weights through pinned staging buffers (two, so
  /// host conversion overlaps the copies) and sizes the KV pool from free memory.
  static StatusOr<std::unique_ptr<CudaBackend>> create(const Artifact& artifact,
                                                       const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Status step(const StepInputs& inputs, std::vector<float>* logits) override;
  /// With the artifact's sampling kernel: the logits stay on the GPU and only the tokens
  /// come back (decode steps replay graphs of their own for it).
  bool samplesOnBackend() const override;
  Status stepAndSample(const StepInputs& inputs, const std::vector<RowSampling>& rows,
                       std::vector<int32_t>* tokens) override;
  /// On the SIMT emulator: freed blocks are filled with NaN bytes (codes and fp8 scales).
  bool wantsFreedKvBlocks() const override;
  Status kvBlocksFreed(const std::vector<int32_t>& blocks) override;
  Status copyKvBlocks(int64_t src, int64_t dst) override;
  Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) override;

  int64_t numKvBlocks() const override;
  int64_t vocabSize() const override;
  int32_t numExtraInputs() const override;
  bool takesTreeInputs() const override;
  /// Attention and linear layers both run at tensor-core-ish rates here: 1.
  double attentionMacCost() const override { return 1.0; }
  int numThreads() const override { return 1; }
  uint64_t matrixBytes() const override;
  KvDtype kvDtype() const override;
  /// Ranks of the artifact's tensor-parallel group this backend is one of (1 = unsharded;
  /// worldSize() stays 1: this backend is one rank, the group is its caller's).
  int tpWorldSize() const;
  /// Whether the last step got past its input checks (a tensor-parallel rank failing after
  /// that point may have left the others inside a collective: its group must be broken).
  bool stepStarted() const;

  /// "NVIDIA H200 (sm_90), 12.3 GiB weights, KV 30000 blocks, graphs <= 128": the
  /// startup line.
  std::string describe() const;
  /// What the last step did: replayed a decode graph (its bucket, > 0), ran eagerly at a
  /// bucket's shape before capturing it (-bucket), or ran eagerly at its own shape (0).
  int32_t lastGraphBucket() const;
  /// How the kernels were loaded (cubins, PTX JIT, from the cache).
  const KernelLoadReport& kernelReport() const;
  /// Seconds the weight upload took, and its bytes (host side, before conversion).
  double uploadSeconds() const;
  uint64_t uploadBytes() const;

 private:
  CudaBackend();
  /// One step: logits back (sample_rows null), or a token per logit row.
  Status run(const StepInputs& inputs, const std::vector<RowSampling>* sample_rows,
             std::vector<int32_t>* tokens, std::vector<float>* logits);
  std::unique_ptr<CudaBackendState> s_;
};

/// Whether this machine has a CUDA driver with at least one device (for --device auto and
/// for GPU tests that skip, saying why): ok, or the reason there is none.
Status cudaDeviceAvailable();

}  // namespace ingot
