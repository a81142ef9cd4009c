# The CUDA backend (cuda_backend.h) over the driver, the kernel modules and cuBLASLt; its
# host-side planning (step_pack.h) is tested on any machine.
add_library(ingot_cuda_step_pack step_pack.cc)
target_link_libraries(ingot_cuda_step_pack PUBLIC ingot_backend_cpu)

add_library(ingot_backend_cuda cuda_backend.cc cuda_step.cc cuda_upload.cc cuda_collectives.cc
  cuda_kv_pool.cc cuda_fp8_linear.cc cuda_op_table.cc cuda_ops_attention.cc cuda_ops_fused.cc
  cuda_ops_linear.cc)
target_link_libraries(ingot_backend_cuda
  PUBLIC ingot_backend_cpu ingot_cuda_step_pack ingot_cuda_driver ingot_cuda_kernels ingot_cublaslt)

if(INGOT_BUILD_TESTS)
  add_executable(ingot_cuda_step_pack_tests step_pack_test.cc)
  target_link_libraries(ingot_cuda_step_pack_tests PRIVATE ingot_cuda_step_pack GTest::gtest_main)
  gtest_discover_tests(ingot_cuda_step_pack_tests)

  # The weight upload against the fake libcuda (device memory is host memory there).
  add_executable(ingot_cuda_upload_tests cuda_upload_test.cc cuda_ops_test.cc)
  target_link_libraries(ingot_cuda_upload_tests PRIVATE ingot_backend_cuda ingot_backend_testing
    GTest::gtest_main)
  target_compile_definitions(ingot_cuda_upload_tests PRIVATE
    INGOT_FAKE_LIBCUDA="$<TARGET_FILE:ingot_fake_libcuda>")
  add_dependencies(ingot_cuda_upload_tests ingot_fake_libcuda)
  gtest_discover_tests(ingot_cuda_upload_tests)

  # The backend's control flow against the fake libcuda and a fake libcublasLt.
  add_executable(ingot_cuda_backend_fake_tests cuda_backend_fake_test.cc cuda_backend_tp_fake_test.cc
    cuda_backend_kv_fp8_fake_test.cc cuda_backend_grid_fake_test.cc)
  target_link_libraries(ingot_cuda_backend_fake_tests PRIVATE ingot_backend_cuda
    ingot_backend_testing GTest::gtest_main ${CMAKE_DL_LIBS})
  target_compile_definitions(ingot_cuda_backend_fake_tests PRIVATE
    INGOT_FAKE_LIBCUDA="$<TARGET_FILE:ingot_fake_libcuda>"
    INGOT_FAKE_CUBLASLT="$<TARGET_FILE:ingot_fake_cublaslt>")
  add_dependencies(ingot_cuda_backend_fake_tests ingot_fake_libcuda ingot_fake_cublaslt)
  gtest_discover_tests(ingot_cuda_backend_fake_tests)

  # A rank with a real NcclCommunicator over the fake libcuda + libnccl (runtime/dist):
  # decode graphs with the collectives captured inside, timeouts and aborts.
  if(TARGET ingot_dist_nccl)
    add_executable(ingot_cuda_tp_graph_fake_tests cuda_backend_tp_graph_fake_test.cc)
    target_link_libraries(ingot_cuda_tp_graph_fake_tests PRIVATE ingot_backend_cuda
      ingot_dist_nccl ingot_backend_testing GTest::gtest_main ${CMAKE_DL_LIBS})
    target_compile_definitions(ingot_cuda_tp_graph_fake_tests PRIVATE
      INGOT_FAKE_LIBCUDA="$<TARGET_FILE:ingot_fake_cuda_nccl>"
      INGOT_FAKE_CUBLASLT="$<TARGET_FILE:ingot_fake_cublaslt>")
    add_dependencies(ingot_cuda_tp_graph_fake_tests ingot_fake_cuda_nccl ingot_fake_cublaslt)
    gtest_discover_tests(ingot_cuda_tp_graph_fake_tests PROPERTIES TIMEOUT 120)
  endif()

  # W8A8 FP8 linears (cuda_fp8_linear.h): gemmFp8's values and the backend's dispatch.
  add_executable(ingot_cuda_fp8_fake_tests cublaslt_fp8_fake_test.cc
    cuda_fp8_linear_fake_test.cc)
  target_link_libraries(ingot_cuda_fp8_fake_tests PRIVATE ingot_backend_cuda
    ingot_backend_testing GTest::gtest_main ${CMAKE_DL_LIBS})
  target_compile_definitions(ingot_cuda_fp8_fake_tests PRIVATE
    INGOT_FAKE_LIBCUDA="$<TARGET_FILE:ingot_fake_libcuda>"
    INGOT_FAKE_CUBLASLT="$<TARGET_FILE:ingot_fake_cublaslt>")
  add_dependencies(ingot_cuda_fp8_fake_tests ingot_fake_libcuda ingot_fake_cublaslt)
  gtest_discover_tests(ingot_cuda_fp8_fake_tests)
endif()
