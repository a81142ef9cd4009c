# The NVRTC + ptxas compile test of the W8A8 FP8 helper kernels (kernels/fp8_w8a8.cuh); their
# host tests are in test/kernels.
if(NOT INGOT_BUILD_TESTS)
  return()
endif()
if(NOT INGOT_ENABLE_CUDA OR NOT INGOT_NVRTC_TARGET_TESTS)
  return()
endif()
find_program(INGOT_W8A8_PTXAS ptxas HINTS ${CUDAToolkit_BIN_DIR})
set(_w8a8_ptxas "")
if(INGOT_W8A8_PTXAS)
  set(_w8a8_ptxas ${INGOT_W8A8_PTXAS})
endif()
add_executable(IngotW8a8KernelsCompileTests W8a8KernelsCompileTest.cpp)
target_link_libraries(IngotW8a8KernelsCompileTests PRIVATE IngotAttentionCuda IngotNvrtc
  GTest::gtest_main)
target_compile_definitions(IngotW8a8KernelsCompileTests PRIVATE INGOT_PTXAS="${_w8a8_ptxas}")
gtest_discover_tests(IngotW8a8KernelsCompileTests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
