# FindISAL.cmake - Intel's ISA-L (Debian libisal-dev), which ships a pkg-config file but no CMake package.
# Defines ISAL_FOUND, ISAL_VERSION and the imported target ISAL::ISAL (header isa-l/crc.h, libisal).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_ISAL QUIET libisal)
endif()
find_path(ISAL_INCLUDE_DIR NAMES isa-l/crc.h HINTS ${PC_ISAL_INCLUDE_DIRS})
find_library(ISAL_LIBRARY NAMES isal HINTS ${PC_ISAL_LIBRARY_DIRS})
set(ISAL_VERSION ${PC_ISAL_VERSION})

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ISAL REQUIRED_VARS ISAL_LIBRARY ISAL_INCLUDE_DIR VERSION_VAR ISAL_VERSION)
if(ISAL_FOUND AND NOT TARGET ISAL::ISAL)
  add_library(ISAL::ISAL UNKNOWN IMPORTED)
  set_target_properties(ISAL::ISAL PROPERTIES IMPORTED_LOCATION "${ISAL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${ISAL_INCLUDE_DIR}")
endif()
mark_as_advanced(ISAL_INCLUDE_DIR ISAL_LIBRARY)
