# FindZSTD.cmake - Zstandard (Debian libzstd-dev), found through its pkg-config file (libzstd.pc), as FindISAL does.
# Defines ZSTD_FOUND, ZSTD_VERSION and the imported target ZSTD::ZSTD (header zstd.h, libzstd).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_ZSTD QUIET libzstd)
endif()
find_path(ZSTD_INCLUDE_DIR NAMES zstd.h HINTS ${PC_ZSTD_INCLUDE_DIRS})
find_library(ZSTD_LIBRARY NAMES zstd HINTS ${PC_ZSTD_LIBRARY_DIRS})
set(ZSTD_VERSION ${PC_ZSTD_VERSION})

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZSTD REQUIRED_VARS ZSTD_LIBRARY ZSTD_INCLUDE_DIR VERSION_VAR ZSTD_VERSION)
if(ZSTD_FOUND AND NOT TARGET ZSTD::ZSTD)
  add_library(ZSTD::ZSTD UNKNOWN IMPORTED)
  set_target_properties(ZSTD::ZSTD PROPERTIES IMPORTED_LOCATION "${ZSTD_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${ZSTD_INCLUDE_DIR}")
endif()
mark_as_advanced(ZSTD_INCLUDE_DIR ZSTD_LIBRARY)
