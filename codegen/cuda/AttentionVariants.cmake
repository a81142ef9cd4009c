# Generated CUDA attention variants and their host test (included by CMakeLists.txt).
#
# At build time every example variant (examples/attention/*.mlir, through ingot-region-bc
# --emit-cuda) and the tree mask the Llama importer builds (the tiny Llama checkpoint
# through `ingot compile --emit-mlir`) become headers under
# <build>/codegen/cuda/generated/codegen/cuda/variants/; ingot-variant-opcases writes one
# variant per region op. The host test compiles them as plain C++ and compares them with
# the CPU bytecode evaluator. Needs the compiler (MLIR) for the examples.
set(INGOT_CUDA_GENERATED_DIR ${CMAKE_CURRENT_BINARY_DIR}/generated)
set(_variant_dir ${INGOT_CUDA_GENERATED_DIR}/codegen/cuda/variants)
file(MAKE_DIRECTORY ${_variant_dir})

add_custom_command(OUTPUT ${_variant_dir}/op_cases.h
  COMMAND ingot-variant-opcases ${_variant_dir}/op_cases.h
  DEPENDS ingot-variant-opcases
  COMMENT "Generating one CUDA attention variant per region op")
set(INGOT_CUDA_VARIANT_HEADERS ${_variant_dir}/op_cases.h)

if(TARGET ingot-region-bc AND TARGET ingot)
  # example file : struct name
  set(_examples alibi:Alibi causal:Causal chunked_local:ChunkedLocal
      document_mask:DocumentMask sliding_window:SlidingWindow softcap:Softcap
      tree_mask:TreeMask)
  foreach(_entry ${_examples})
    string(REPLACE ":" ";" _pair ${_entry})
    list(GET _pair 0 _file)
    list(GET _pair 1 _struct)
    set(_mlir ${CMAKE_SOURCE_DIR}/examples/attention/${_file}.mlir)
    add_custom_command(OUTPUT ${_variant_dir}/${_file}.h
      COMMAND ingot-region-bc ${_mlir} --emit-cuda=${_struct} --cuda-header
              > ${_variant_dir}/${_file}.h
      DEPENDS ingot-region-bc ${_mlir}
      COMMENT "Generating the CUDA attention variant ${_struct}")
    list(APPEND INGOT_CUDA_VARIANT_HEADERS ${_variant_dir}/${_file}.h)
  endforeach()
  # The Llama importer's causal + speculative-tree mask, as compiled (one op per layer: the
  # struct of layer 0 is LlamaTreeMask0).
  set(_llama ${CMAKE_SOURCE_DIR}/test/data/tiny/llama.gguf)
  add_custom_command(OUTPUT ${_variant_dir}/llama_tree_mask.h
    BYPRODUCTS ${_variant_dir}/tiny_llama.mlir
    COMMAND ingot compile ${_llama} --emit-mlir > ${_variant_dir}/tiny_llama.mlir
    COMMAND ingot-region-bc ${_variant_dir}/tiny_llama.mlir --emit-cuda=LlamaTreeMask
            --cuda-header > ${_variant_dir}/llama_tree_mask.h
    DEPENDS ingot ingot-region-bc ${_llama}
    COMMENT "Generating the CUDA attention variant of the compiled tiny Llama")
  list(APPEND INGOT_CUDA_VARIANT_HEADERS ${_variant_dir}/llama_tree_mask.h)
  set(INGOT_CUDA_HAVE_EXAMPLE_VARIANTS ON)
endif()
add_custom_target(ingot_cuda_variant_headers DEPENDS ${INGOT_CUDA_VARIANT_HEADERS})

add_executable(IngotAttentionVariantHostTests AttentionVariantHostTest.cpp)
add_dependencies(IngotAttentionVariantHostTests ingot_cuda_variant_headers)
target_include_directories(IngotAttentionVariantHostTests PRIVATE ${INGOT_CUDA_GENERATED_DIR})
# Exact float equality with the evaluator: no fused multiply-add the evaluator does not do.
target_compile_options(IngotAttentionVariantHostTests PRIVATE -ffp-contract=off)
if(INGOT_CUDA_HAVE_EXAMPLE_VARIANTS)
  target_compile_definitions(IngotAttentionVariantHostTests PRIVATE
    INGOT_CUDA_HAVE_EXAMPLE_VARIANTS=1)
endif()
target_link_libraries(IngotAttentionVariantHostTests PRIVATE IngotAttentionCuda
  GTest::gtest_main)
gtest_discover_tests(IngotAttentionVariantHostTests DISCOVERY_TIMEOUT 60)
