// progress.h - how long operations (loads, remaps, conversions) report how far they are.
#pragma once

#include <cstdint>
#include <functional>

namespace maploc {

/// Receives `done` of `total` payload bytes. Calls are serialized (never two
/// at once, even when the work runs on several threads), `done` never
/// decreases, and the last call has done == total when the work completes.
/// It must not throw.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

}  // namespace maploc
