// version.h - maploc's version, for code that must check it at compile time or run time.
#pragma once

#define MAPLOC_VERSION_MAJOR 0
#define MAPLOC_VERSION_MINOR 1
#define MAPLOC_VERSION_PATCH 0

namespace maploc {

/// "major.minor.patch" of the headers in use; equals project(maploc VERSION) in CMakeLists.txt.
inline constexpr const char* kVersion = "0.1.0";

}  // namespace maploc
