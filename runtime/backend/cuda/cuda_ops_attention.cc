// The CUDA definition of attention: the step's paged decode / prefill kernel from the
// artifact (one per variant, head dim, group and KV type) and its split-KV combine.
#include <algorithm>

#include "core/kernels/attention_params.h"
#include "core/kernels/region_operands.h"
#include "runtime/backend/cuda/cuda_ops.h"

namespace ingot {

using schema::GridCount;

Status resolveAttentionCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def) {
  const PlannedStep& p = s.plan->steps[index];
  const schema::Manifest& manifest = s.artifact->manifest();
  const KernelModules& m = *s.modules;
  const bool fp8 = s.kv_dtype == KvDtype::kFp8E4M3;
  const int32_t kernel = def.kernel();
  const std::string where = "attention step " + std::to_string(index);
  if (kernel < 0 || !manifest.kernels() ||
      kernel >= static_cast<int32_t>(manifest.kernels()->size()))
    return notFound(where + " has no CUDA kernel (head dim " +
                    std::to_string(p.attention.head_dim) + ", " +
                    std::to_string(p.attention.num_heads /
                                   std::max<int64_t>(1, p.attention.num_kv_heads)) +
                    " query heads per kv head): the compiler made none for this shape, or the "
                    "artifact was compiled with --cuda-targets none");
  const std::string name = manifest.kernels()->Get(kernel)->name()->str();
  // codegen::decodeKernelName: "_kvfp8_" marks a kernel reading an fp8 pool.
  const bool fp8Kernel = name.find("_kvfp8_") != std::string::npos;
  if (fp8Kernel != fp8)
    return failedPrecondition(
        where + "'s CUDA kernel " + name + " reads " + (fp8Kernel ? "an fp8" : "an f32") +
        " KV cache, not the " + kvDtypeName(s.kv_dtype) + " one asked for" +
        (fp8 ? "; recompile it with `ingot compile --kv-dtype fp8` (the CUDA kernels are made "
               "for the KV cache's type)"
             : "; run it with --kv-dtype fp8 (or the artifact's default), or recompile it "
               "with `ingot compile --kv-dtype f32`"));
  INGOT_ASSIGN_OR_RETURN(s.steps[index].attention, m.find(name));
  // codegen::combineKernelName(kF32, D): the combine kernel every f32 variant shares.
  INGOT_ASSIGN_OR_RETURN(s.steps[index].combine,
                         m.find("ingot_decode_combine_f32_d" +
                                std::to_string(p.attention.head_dim)));
  s.max_heads = std::max(s.max_heads, p.attention.num_heads);
  s.head_dim = std::max(s.head_dim, p.attention.head_dim);
  return okStatus();
}

Status enqueueAttentionCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  const CudaBackendState& s = *l.s;
  const StepBuffers& b = s.buffers;
  const KvCacheLayout& kv = s.plan->kv_layout;
  attn::PagedAttentionParams a{};
  a.q = reinterpret_cast<const void*>(l.slot(p.inputs[0]));
  a.kv_cache = reinterpret_cast<const void*>(s.kv_pool.ptr());
  a.out = reinterpret_cast<void*>(l.slot(p.outputs[0]));
  a.block_tables = reinterpret_cast<const int*>(l.at(l.layout.block_tables));
  a.seq_lens = reinterpret_cast<const int*>(l.at(l.layout.seq_lens));
  a.query_start = reinterpret_cast<const int*>(l.at(l.layout.query_start));
  a.partial_out = reinterpret_cast<float*>(b.partial_out.ptr());
  a.partial_max = reinterpret_cast<float*>(b.partial_max.ptr());
  a.partial_sum = reinterpret_cast<float*>(b.partial_sum.ptr());
  a.num_requests = l.dims->requests;
  a.num_tokens = l.tokens();
  a.num_heads = static_cast<int>(p.attention.num_heads);
  a.num_kv_heads = static_cast<int>(p.attention.num_kv_heads);
  a.num_layers = static_cast<int>(kv.num_layers);
  a.layer = static_cast<int>(p.attention.layer);
  a.block_size = static_cast<int>(kv.block_size);
  a.max_blocks = l.dims->max_blocks;
  a.num_splits = l.split->num_splits;
  a.keys_per_split = l.split->keys_per_split;
  a.scale = p.attention.scale;
  a.kv_scales = l.fp8_kv ? reinterpret_cast<const float*>(s.kv_scales.ptr()) : nullptr;
  rgn::RegionOperands ops{};
  for (size_t e = 0; e < p.extra_inputs.size(); ++e) {
    const auto& [data, shape] = l.extra->at(static_cast<size_t>(p.extra_inputs[e]));
    ops.operand[e].data = reinterpret_cast<const void*>(data);
    for (size_t r = 0; r < shape.size() && r < rgn::kMaxRegionOperandRank; ++r)
      ops.operand[e].shape[r] = shape[r];
  }
  ops.error = reinterpret_cast<rgn::u32*>(l.errors + 4);
  const KernelArgs args = kernelArgs(a, ops);
  const GridCounts counts = GridCounts()
                                .set(GridCount::KvHeads, a.num_kv_heads)
                                .set(GridCount::Heads, a.num_heads)
                                .set(GridCount::Requests, l.dims->requests)
                                .set(GridCount::Splits, l.split->num_splits)
                                .set(GridCount::Tokens, l.tokens());
  INGOT_RETURN_IF_ERROR(l.launch(d.attention, counts, args, l.where + " (attention)"));
  if (l.split->num_splits <= 1) return okStatus();
  const KernelArgs cargs = kernelArgs(a);
  return l.launch(d.combine, counts, cargs, l.where + " (attention combine)");
}

}  // namespace ingot
