// addFakeCudaKernels: the CUDA kernels of a tiny Llama for the fake libcuda, named and
// described (block, parameters, grid rule) as `ingot compile` makes them.
#include <optional>
#include <string>
#include <vector>

#include "core/artifact/artifact_writer.h"
#include "core/artifact/launch_grid.h"
#include "testing/llama_model_config.h"
#include "testing/llama_program.h"

namespace ingot::testing {

void addFakeCudaKernels(ArtifactWriter& writer, const LlamaProgramOptions& o) {
  auto kernel = [&](const std::string& name, uint32_t threads) {
    Kernel k;
    k.name = name;
    k.blockDim = {threads, 1, 1};
    if (auto it = o.fake_kernel_param_bytes.find(name); it != o.fake_kernel_param_bytes.end())
      k.paramBytes = it->second;
    std::optional<GridRule> rule = kernelGridRule(name, threads);
    if (auto it = o.fake_kernel_grid_overrides.find(name); it != o.fake_kernel_grid_overrides.end())
      rule = it->second;
    if (o.fake_kernel_grids && rule) k.grid.assign(rule->begin(), rule->end());
    const std::string image = "FAKECUBIN entry:" + name;
    // sm_90 and sm_80 (the fake device's compute capability can be set: sm_80..sm_89 load
    // the sm_80 one); the writer stores the identical images once.
    for (const char* target : {"sm_90", "sm_80"})
      k.binaries.push_back({target, schema::BinaryFormat::Cubin,
                            std::vector<uint8_t>(image.c_str(), image.c_str() + image.size() + 1)});
    return writer.addKernel(std::move(k));
  };
  for (const char* op : {"embedding", "rms_norm_residual", "rope_kv_write", "silu_mul", "add",
                         "add_bias", "to_bf16", "gather_rows", "sample"})
    kernel(std::string("ingot_fused_") + op + "_f32", 256);
  // An fp8 KV cache brings its write kernel and fp8 decode kernels (`--kv-dtype fp8`).
  const bool fp8 = o.kv_dtype == schema::DType::F8E4M3FN;
  if (fp8) kernel("ingot_fused_kv_write_fp8_f32", 256);
  // A scale step brings the scale kernel.
  if (o.embedding_scale != 1.0f && o.fake_scale_kernel) kernel("ingot_fused_scale_f32", 256);
  // GELU gating brings gelu_mul.
  if (o.gated_activation == 1 && o.fake_gelu_kernel) kernel("ingot_fused_gelu_mul_f32", 256);
  for (const char* format : {"int4min_f16", "int4min_bf16", "int4min_f32", "int4zero_f16",
                             "int4zero_bf16", "int4zero_f32", "fp8", "nvfp4", "mxfp4"}) {
    kernel(std::string("ingot_quant_gemv_") + format, 128);
    if (o.fake_quant_gemm_kernels) kernel(std::string("ingot_quant_gemm_") + format, 256);
  }
  for (const char* w8a8 : {"ingot_fp8_quantize_rows", "ingot_fp8_scale_epilogue"})
    kernel(w8a8, 256);  // W8A8 fp8 linears (codegen/cuda/W8a8KernelsSource.h)
  if (o.fake_fp8_producer_kernels)
    for (const char* producer : {"ingot_fp8_rms_norm_quant", "ingot_fp8_silu_mul_quant"})
      kernel(producer, 256);
  const std::string shape = std::string(fp8 ? "_f32_kvfp8_d" : "_f32_d") + std::to_string(o.head_dim) + "_g" +
                            std::to_string(o.heads / o.kv_heads);
  const int32_t decode = kernel("ingot_decode_test" + shape, 128);
  kernel("ingot_decode_combine_f32_d" + std::to_string(o.head_dim),
         static_cast<uint32_t>(o.head_dim));
  const std::vector<Program>& programs = writer.contents().programs;
  for (size_t p = 0; p < programs.size(); ++p)
    for (size_t s = 0; s < programs[p].steps.size(); ++s)
      if (programs[p].steps[s].op == schema::OpKind::Attention) writer.setStepKernel(p, s, decode);
}

}  // namespace ingot::testing
