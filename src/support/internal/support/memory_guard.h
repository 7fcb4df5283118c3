// memory_guard.h - allocation failure as maploc::Error(kLimitMemory) at the public entry points (internal).
// Every allocation sized by a file is bounded by a Limits field, but the
// process may have less memory than the limits allow (RLIMIT_AS, a cgroup,
// a 32-bit address space): then the caller gets an error that says what to
// do, never std::bad_alloc escaping into code that does not expect it, and
// never an abort.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "maploc/error.h"

namespace maploc::detail {

/// Runs f(); a std::bad_alloc from it becomes kLimitMemory naming `item`.
template <typename F>
decltype(auto) guard_memory(Stage stage, const std::string& item, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kLimitMemory, stage,
                "out of memory (the process's memory or address-space limit was reached before any Limits "
                "bound): lower the Limits fields that bound this input (see docs/security.md) or give the "
                "process more memory",
                std::nullopt, item);
  }
}

}  // namespace maploc::detail
