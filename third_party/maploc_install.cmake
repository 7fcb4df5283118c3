# maploc_install.cmake - install rules: headers, static module libraries, one shared library,
# the CLI, a CMake package (find_package(maploc) -> maploc::maploc) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(maploc_modules maploc_support maploc_zip maploc_remote maploc_pickle maploc_torch maploc_remap maploc_capi)

# libmaploc.so: the objects of every module in one shared library.
get_property(maploc_objects GLOBAL PROPERTY MAPLOC_MODULE_OBJECTS)
get_property(maploc_private_deps GLOBAL PROPERTY MAPLOC_MODULE_PRIVATE_DEPS)
set(maploc_object_files "")
foreach(objects ${maploc_objects})
  list(APPEND maploc_object_files $<TARGET_OBJECTS:${objects}>)
endforeach()
add_library(maploc_shared SHARED ${maploc_object_files})
add_library(maploc::maploc_shared ALIAS maploc_shared)
set_target_properties(maploc_shared PROPERTIES OUTPUT_NAME maploc EXPORT_NAME maploc_shared LINKER_LANGUAGE CXX
                      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_link_libraries(maploc_shared PRIVATE ${maploc_private_deps})
# Exported: the C API (maploc_*) and the C++ API (maploc::*); everything else the objects carry
# (std:: instantiations, helpers of other libraries) stays local to the library.
set(maploc_version_script ${PROJECT_SOURCE_DIR}/third_party/libmaploc.map)
target_link_options(maploc_shared PRIVATE "LINKER:--version-script=${maploc_version_script}")
set_property(TARGET maploc_shared APPEND PROPERTY LINK_DEPENDS ${maploc_version_script})
target_include_directories(maploc_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(maploc_shared INTERFACE cxx_std_20)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/maploc TYPE INCLUDE)
install(TARGETS ${maploc_modules} maploc_maploc maploc_shared
        EXPORT maploc-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(MAPLOC_BUILD_CLI)
  install(TARGETS maploc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(maploc_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/maploc)
install(EXPORT maploc-targets NAMESPACE maploc:: DESTINATION ${maploc_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/third_party/maploc-config.cmake.in
  ${PROJECT_BINARY_DIR}/maploc-config.cmake INSTALL_DESTINATION ${maploc_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/maploc-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/maploc-config.cmake ${PROJECT_BINARY_DIR}/maploc-config-version.cmake
        ${PROJECT_SOURCE_DIR}/third_party/FindISAL.cmake
        ${PROJECT_SOURCE_DIR}/third_party/FindZSTD.cmake DESTINATION ${maploc_cmake_dir})

# pkg-config: the shared library; `pkg-config --static` adds what it needs privately.
set(MAPLOC_PC_REQUIRES_PRIVATE "zlib libcrypto libisal libzstd libcurl")
set(MAPLOC_PC_LIBS_PRIVATE "-ldl")  # the CUDA runtime is loaded with dlopen, never linked
# Relocatable: the prefix is found from where the .pc file lies.
file(RELATIVE_PATH MAPLOC_PC_UP "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(${PROJECT_SOURCE_DIR}/third_party/maploc.pc.in ${PROJECT_BINARY_DIR}/maploc.pc @ONLY)
# maploc-c.pc: the same library for C programs (maploc/maploc_c.h), without maploc.pc's -std=c++20.
configure_file(${PROJECT_SOURCE_DIR}/third_party/maploc-c.pc.in ${PROJECT_BINARY_DIR}/maploc-c.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/maploc.pc ${PROJECT_BINARY_DIR}/maploc-c.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
