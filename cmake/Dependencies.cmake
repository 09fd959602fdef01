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
