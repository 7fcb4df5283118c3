# maploc_target.cmake - one way to declare a maploc module library and its alias.

# maploc_add_module(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Declares maploc_<name> (static, alias maploc::<name>) built from the object library
# maploc_<name>_objects, whose -fPIC objects also make up the shared libmaploc.so.
# Headers come in three tiers (docs/house-style.md, "Headers"):
#   include/maploc/...       public: installed, supported, on every path;
#   src/<name>/internal/...  the module's internal interface: never installed, on the path of
#                            the module and of whatever links it (its arrows' downstream);
#   src/<name>/*.h           private: on the path of the module and of its own tests only.
# tests/headers/check_module_includes.cmake fails the build's tests when an include crosses an arrow.
function(maploc_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(objects maploc_${name}_objects)
  add_library(${objects} OBJECT ${ARG_SOURCES})
  target_include_directories(${objects} PUBLIC ${PROJECT_SOURCE_DIR}/include
                             PRIVATE ${PROJECT_SOURCE_DIR}/src/${name} ${PROJECT_SOURCE_DIR}/src/${name}/internal)
  target_link_libraries(${objects} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(${objects} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  maploc_target_defaults(${objects})

  add_library(maploc_${name} STATIC $<TARGET_OBJECTS:${objects}>)
  add_library(maploc::${name} ALIAS maploc_${name})
  target_include_directories(maploc_${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
    INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src/${name}/internal>)
  target_link_libraries(maploc_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(maploc_${name} PROPERTIES EXPORT_NAME ${name} LINKER_LANGUAGE CXX)
  maploc_target_defaults(maploc_${name})
  set_property(GLOBAL APPEND PROPERTY MAPLOC_MODULE_OBJECTS ${objects})
  set_property(GLOBAL APPEND PROPERTY MAPLOC_MODULE_PRIVATE_DEPS ${ARG_PRIVATE_DEPS})
endfunction()

# Warnings and sanitizers shared by every maploc target (libraries, tests, CLI).
# maploc_target_defaults(<target> [TEST]): TEST for test programs' own sources.
# Sanitizer builds are there to find bugs, not to be fast, and CI builds two of them on two cores
# (docs/testing.md, "CI's time"): the library at -O1 (what the sanitizers' own docs advise: reports
# stay exact, the tests still run at a useful speed), test sources at -O0 (Catch2's macros make
# large functions that -O1 spends most of the compile on; the work under test is the library's),
# and -g1: line tables, all a report's stack needs.
function(maploc_target_defaults target)
  cmake_parse_arguments(ARG "TEST" "" "" ${ARGN})
  target_compile_features(${target} PUBLIC cxx_std_20)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                           -Wno-sign-conversion)
  endif()
  if(MAPLOC_SANITIZE)
    target_compile_options(${target} PUBLIC $<BUILD_INTERFACE:-fsanitize=${MAPLOC_SANITIZE}
                           -fno-omit-frame-pointer -fno-sanitize-recover=all>)
    target_link_options(${target} PUBLIC $<BUILD_INTERFACE:-fsanitize=${MAPLOC_SANITIZE}>)
    if(ARG_TEST)
      target_compile_options(${target} PRIVATE -O0 -g1)
    else()
      target_compile_options(${target} PRIVATE -O1 -g1)
    endif()
  endif()
endfunction()
