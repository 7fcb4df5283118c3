# maploc_target.cmake - one way to declare a maploc module library and its alias.

# maploc_add_module(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Declares maploc_<name> with alias maploc::<name>; public headers come from include/.
function(maploc_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(maploc_${name} ${ARG_SOURCES})
  add_library(maploc::${name} ALIAS maploc_${name})
  target_include_directories(maploc_${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(maploc_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  maploc_target_defaults(maploc_${name})
endfunction()

# Warnings and sanitizers shared by every maploc target (libraries, tests, CLI).
function(maploc_target_defaults target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                           -Wno-sign-conversion)
  endif()
  if(MAPLOC_SANITIZE)
    target_compile_options(${target} PUBLIC -fsanitize=${MAPLOC_SANITIZE} -fno-omit-frame-pointer
                           -fno-sanitize-recover=all)
    target_link_options(${target} PUBLIC -fsanitize=${MAPLOC_SANITIZE})
  endif()
endfunction()
