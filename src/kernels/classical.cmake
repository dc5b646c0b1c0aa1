# The classical expert-centric MoE path (issue 4): its kernels, the host class,
# the W8A8 CPU reference and the warp-decode/classical dispatch. Included by
# src/CMakeLists.txt inside its CUDA block.
target_sources(warpdecode PRIVATE
  kernels/classical_gemm.cu
  kernels/classical_gemm_bf16.cu
  kernels/classical_gemm_fp8.cu
  kernels/classical_gemm_mxfp8.cu
  kernels/classical_stages.cu
  kernels/classical_stream_gemm.cu
  kernels/classical_stream_wgmma.cu
  kernels/classical_tma_gemm.cu
  kernels/tma_map.cpp
  moe/classical_moe.cpp
  moe/moe_dispatch.cpp
  moe/untiled_weights.cpp
  reference/classical_reference.cpp)
target_link_libraries(warpdecode PRIVATE nlohmann_json::nlohmann_json)
# The wgmma GEMM exists only in sm_90a code; the host side asks for it only
# when this build has that target.
if("90a" IN_LIST WD_CUDA_ARCHS)
  set_source_files_properties(kernels/classical_gemm.cu PROPERTIES COMPILE_DEFINITIONS WD_HAVE_SM90A=1)
endif()
