# Tests of the fused kernels (kernels/fused_ops.cuh, kernels/sampling.cuh): the host tests of
# their math against the CPU backend ops and the CPU Sampler, and (with CUDA) the NVRTC +
# ptxas compile test.
if(NOT INGOT_BUILD_TESTS)
  return()
endif()
add_executable(IngotFusedOpsHostTests FusedOpsHostTest.cpp)
target_link_libraries(IngotFusedOpsHostTests PRIVATE ingot_backend_cpu GTest::gtest_main)
target_include_directories(IngotFusedOpsHostTests PRIVATE ${CMAKE_SOURCE_DIR})
gtest_discover_tests(IngotFusedOpsHostTests DISCOVERY_TIMEOUT 60)
# The sampling kernel's algorithm (kernels/sampling.cuh) against the CPU Sampler.
add_executable(IngotSamplingHostTests SamplingHostTest.cpp)
target_link_libraries(IngotSamplingHostTests PRIVATE ingot_generate GTest::gtest_main)
target_include_directories(IngotSamplingHostTests PRIVATE ${CMAKE_SOURCE_DIR})
gtest_discover_tests(IngotSamplingHostTests DISCOVERY_TIMEOUT 60)
# Its device code runs on the SIMT emulator in emulated.ingot_sampling_gpu_tests (test/gpu).
if(NOT INGOT_ENABLE_CUDA OR NOT INGOT_NVRTC_TARGET_TESTS)
  return()
endif()
find_program(INGOT_FUSED_PTXAS ptxas HINTS ${CUDAToolkit_BIN_DIR})
set(_fused_ptxas "")
if(INGOT_FUSED_PTXAS)
  set(_fused_ptxas ${INGOT_FUSED_PTXAS})
endif()
add_executable(IngotFusedOpsCompileTests FusedOpsCompileTest.cpp)
target_link_libraries(IngotFusedOpsCompileTests PRIVATE IngotAttentionCuda IngotNvrtc
  GTest::gtest_main)
target_compile_definitions(IngotFusedOpsCompileTests PRIVATE INGOT_PTXAS="${_fused_ptxas}")
gtest_discover_tests(IngotFusedOpsCompileTests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
