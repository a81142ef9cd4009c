# The NVRTC + ptxas compile test of the fused kernels (kernels/fused_ops.cuh); their host
# tests against the CPU backend are in test/kernels.
if(NOT INGOT_BUILD_TESTS)
  return()
endif()
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
