# Every third-party library ztrain uses, found once. tools/install-deps.sh installs them on Debian.
find_package(MPI REQUIRED COMPONENTS C CXX)                   # MPI::MPI_CXX
find_package(HDF5 REQUIRED COMPONENTS C)                      # hdf5::hdf5 (or HDF5_* variables)
# Boost::program_options (argv and INI files). CONFIG: Boost >= 1.70 installs BoostConfig.cmake (Debian
# and the device bundle, .devdeps, both have it); CMake 3.30 dropped FindBoost (CMP0167).
find_package(Boost 1.74 CONFIG REQUIRED COMPONENTS program_options)
find_package(GTest REQUIRED)                                  # GTest::gtest_main
find_package(OpenMP REQUIRED COMPONENTS CXX)                  # OpenMP::OpenMP_CXX
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas) # PkgConfig::OPENBLAS
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(nlohmann_json 3.11 REQUIRED)                     # nlohmann_json::nlohmann_json
find_package(ZLIB REQUIRED)

if(NOT TARGET hdf5::hdf5)
  add_library(zt_hdf5 INTERFACE)
  target_include_directories(zt_hdf5 INTERFACE ${HDF5_INCLUDE_DIRS})
  target_link_libraries(zt_hdf5 INTERFACE ${HDF5_LIBRARIES})
  target_compile_definitions(zt_hdf5 INTERFACE ${HDF5_DEFINITIONS})
  add_library(hdf5::hdf5 ALIAS zt_hdf5)
endif()

if(ZT_WITH_CUDA)
  find_package(CUDAToolkit REQUIRED)                          # CUDA::cudart CUDA::cublas CUDA::cublasLt
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  find_library(NCCL_LIBRARY nccl HINTS $ENV{NCCL_HOME}/lib $ENV{NCCL_HOME}/lib64 ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  add_library(zt_nccl INTERFACE)
  target_include_directories(zt_nccl INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(zt_nccl INTERFACE ${NCCL_LIBRARY})
  add_library(NCCL::nccl ALIAS zt_nccl)
endif()

# cuDNN 9 (optional; the fused attention of train.attention=auto|cudnn): its headers and libcudnn from
# CUDNN_HOME / CUDNN_ROOT, the CUDA toolkit, or the system. ZTRAIN_CUDNN=AUTO builds without it when it is
# not found (attention runs on the native kernels and says so), ON requires it, OFF leaves it out.
set(ZTRAIN_CUDNN "AUTO" CACHE STRING "Build cuDNN attention: AUTO (where cuDNN 9 is found), ON, OFF")
set_property(CACHE ZTRAIN_CUDNN PROPERTY STRINGS AUTO ON OFF)
set(ZT_WITH_CUDNN OFF)
string(TOUPPER "${ZTRAIN_CUDNN}" _zt_cudnn)
if(ZT_WITH_CUDA AND NOT _zt_cudnn STREQUAL "OFF")
  set(_zt_cudnn_hints $ENV{CUDNN_HOME} $ENV{CUDNN_ROOT} ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT})
  find_path(CUDNN_INCLUDE_DIR cudnn_graph.h HINTS ${_zt_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  # The pip wheel (nvidia-cudnn-cu13, PyTorch's) ships only the versioned name.
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_zt_cudnn_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  # cudnn_graph.h (the backend graph API) exists from cuDNN 9 on: finding it is the version check.
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    set(ZT_WITH_CUDNN ON)
    add_library(zt_cudnn INTERFACE)
    target_include_directories(zt_cudnn SYSTEM INTERFACE ${CUDNN_INCLUDE_DIR})  # its headers, not our warnings
    target_link_libraries(zt_cudnn INTERFACE ${CUDNN_LIBRARY})
    add_library(CUDNN::cudnn ALIAS zt_cudnn)
  elseif(_zt_cudnn STREQUAL "ON")
    message(FATAL_ERROR "ZTRAIN_CUDNN=ON but cuDNN 9 was not found (cudnn_graph.h: ${CUDNN_INCLUDE_DIR}, libcudnn: "
                        "${CUDNN_LIBRARY}): install cuDNN 9 or point CUDNN_HOME at it, or use -DZTRAIN_CUDNN=AUTO")
  else()
    message(STATUS "ztrain: cuDNN 9 not found, attention runs on the native kernels only (set CUDNN_HOME to use cuDNN)")
  endif()
endif()
