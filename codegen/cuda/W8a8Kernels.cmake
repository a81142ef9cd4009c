# Tests of the W8A8 FP8 helper kernels (kernels/fp8_w8a8.cuh): the host test of the
# quantizer and epilogue thread loops against float64 references, and (with CUDA) the
# NVRTC + ptxas compile test.
if(NOT INGOT_BUILD_TESTS)
  return()
endif()
add_executable(IngotW8a8HostTests W8a8HostTest.cpp)
target_link_libraries(IngotW8a8HostTests PRIVATE ingot_backend_cpu GTest::gtest_main)
target_include_directories(IngotW8a8HostTests PRIVATE ${CMAKE_SOURCE_DIR})
gtest_discover_tests(IngotW8a8HostTests DISCOVERY_TIMEOUT 60)
# The quantizing rms_norm / silu_mul (kernels/fp8_producers.cuh) against the quantizer.
add_executable(IngotFp8ProducersHostTests Fp8ProducersHostTest.cpp)
target_link_libraries(IngotFp8ProducersHostTests PRIVATE ingot_backend_cpu GTest::gtest_main)
target_include_directories(IngotFp8ProducersHostTests PRIVATE ${CMAKE_SOURCE_DIR})
gtest_discover_tests(IngotFp8ProducersHostTests DISCOVERY_TIMEOUT 60)
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
