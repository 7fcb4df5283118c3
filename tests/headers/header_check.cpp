// header_check.cpp - compiles the umbrella header with nothing but include/ on the path.
#include <maploc/maploc.h>

#if __has_include(<nlohmann/json.hpp>) && defined(MAPLOC_HEADER_CHECK_STRICT)
#error "nlohmann must not be needed by the public headers"
#endif
