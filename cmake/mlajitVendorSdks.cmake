# Detects the vendor SDK headers the backends compile against. Neither is
# required: the backends dlopen the driver and the run-time compiler, so a build
# without the headers simply leaves that backend out.
#
# Sets MLAJIT_HAVE_CUDA_HEADERS / MLAJIT_CUDA_INCLUDE_DIR and
#      MLAJIT_HAVE_HIP_HEADERS / MLAJIT_HIP_INCLUDE_DIR.
set(MLAJIT_HAVE_CUDA_HEADERS OFF)
set(MLAJIT_HAVE_HIP_HEADERS OFF)
if(MLAJIT_ENABLE_CUDA)
  find_path(MLAJIT_CUDA_INCLUDE_DIR cuda.h
    HINTS ${CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda
    PATH_SUFFIXES include targets/x86_64-linux/include)
  find_path(MLAJIT_NVRTC_INCLUDE_DIR nvrtc.h
    HINTS ${CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda
    PATH_SUFFIXES include targets/x86_64-linux/include)
  if(MLAJIT_CUDA_INCLUDE_DIR AND MLAJIT_NVRTC_INCLUDE_DIR)
    set(MLAJIT_HAVE_CUDA_HEADERS ON)
  endif()
endif()
if(MLAJIT_ENABLE_HIP)
  find_path(MLAJIT_HIP_INCLUDE_DIR hip/hiprtc.h
    HINTS $ENV{ROCM_PATH} /opt/rocm /usr PATH_SUFFIXES include)
  if(MLAJIT_HIP_INCLUDE_DIR)
    set(MLAJIT_HAVE_HIP_HEADERS ON)
  endif()
endif()
message(STATUS "mlajit: CUDA backend headers: ${MLAJIT_HAVE_CUDA_HEADERS} (${MLAJIT_CUDA_INCLUDE_DIR})")
message(STATUS "mlajit: HIP backend headers:  ${MLAJIT_HAVE_HIP_HEADERS} (${MLAJIT_HIP_INCLUDE_DIR})")
