# Warnings on for our own code (-Wall -Wextra); the build stays clean of them.
add_library(zt_warnings INTERFACE)
target_compile_options(zt_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
option(ZTRAIN_WERROR "Treat warnings as errors" OFF)
if(ZTRAIN_WERROR)
  target_compile_options(zt_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

# zt_module(NAME SOURCES... DEPS ...): one library per src/ folder, named zt_<folder>.
function(zt_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(zt_${name} STATIC ${ARG_SOURCES})
  target_include_directories(zt_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(zt_${name} PUBLIC ${ARG_DEPS} PRIVATE zt_warnings ${ARG_PRIVATE_DEPS})
  # C++ sources compiled a few per translation unit (CMake's unity build; CUDA files stay one each):
  # the headers most sources include are parsed once per unit, and CI builds everything from scratch.
  set_target_properties(zt_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 6)
endfunction()
