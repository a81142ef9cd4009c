# Tests of the quantized GEMV and GEMM kernels (kernels/quant_gemv.cuh, quant_gemm.cuh): host
# tests of their math against the CPU backend's QuantKernels, and (with CUDA) the NVRTC +
# ptxas compile test.
if(NOT INGOT_BUILD_TESTS)
  return()
endif()
add_executable(IngotQuantGemvHostTests QuantGemvHostTest.cpp)
target_link_libraries(IngotQuantGemvHostTests PRIVATE ingot_backend_cpu GTest::gtest_main)
target_include_directories(IngotQuantGemvHostTests PRIVATE ${CMAKE_SOURCE_DIR})
gtest_discover_tests(IngotQuantGemvHostTests DISCOVERY_TIMEOUT 60)
# The tensor-core GEMM's tile staging and tiled product (kernels/quant_gemm.cuh) on the host.
add_executable(IngotQuantGemmHostTests QuantGemmHostTest.cpp)
target_link_libraries(IngotQuantGemmHostTests PRIVATE ingot_backend_cpu GTest::gtest_main)
target_include_directories(IngotQuantGemmHostTests PRIVATE ${CMAKE_SOURCE_DIR})
gtest_discover_tests(IngotQuantGemmHostTests DISCOVERY_TIMEOUT 60)
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
