# The NVRTC + ptxas compile test of the quantized GEMV and GEMM kernels (kernels/quant_gemv.cuh,
# quant_gemm.cuh); their host tests against the CPU backend are in test/kernels.
if(NOT INGOT_BUILD_TESTS)
  return()
endif()
if(NOT INGOT_ENABLE_CUDA OR NOT INGOT_NVRTC_TARGET_TESTS)
  return()
endif()
find_program(INGOT_QUANT_PTXAS ptxas HINTS ${CUDAToolkit_BIN_DIR})
set(_quant_ptxas "")
if(INGOT_QUANT_PTXAS)
  set(_quant_ptxas ${INGOT_QUANT_PTXAS})
endif()
add_executable(IngotQuantKernelsCompileTests QuantKernelsCompileTest.cpp)
target_link_libraries(IngotQuantKernelsCompileTests PRIVATE IngotAttentionCuda IngotNvrtc
  GTest::gtest_main)
target_compile_definitions(IngotQuantKernelsCompileTests PRIVATE INGOT_PTXAS="${_quant_ptxas}")
gtest_discover_tests(IngotQuantKernelsCompileTests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
