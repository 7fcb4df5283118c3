// handles.h - what the C API's opaque handles hold, and the wrapper that turns exceptions into error codes.
#pragma once

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/maploc_c.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/plan.h"
#include "maploc/torch/checkpoint.h"

struct maploc_checkpoint {
  maploc::torch::Checkpoint checkpoint;
};

struct maploc_plan {
  maploc::remap::Plan plan;
  std::vector<std::string> targets;  ///< plan.targets spelled, per storage
  std::vector<std::string> totals;   ///< plan.totals' devices spelled
};

struct maploc_loaded {
  maploc::remap::Loaded loaded;
  // The checkpoint's storage descriptions, kept so that the checkpoint may be freed first.
  std::vector<std::string> keys, locations;
  std::vector<maploc::torch::DType> dtypes;
  std::vector<std::string> devices;  ///< each storage's placement spelled; refreshed after to()
};

namespace maploc::capi {

/// Records the calling thread's last error (never throws).
void set_error(int code, const char* message) noexcept;

/// kInvalidArgument with this message (null handles, indices out of range).
[[noreturn]] void invalid(const std::string& message);

/// Throws invalid() naming `what` when p is null.
inline void require(const void* p, const char* what) {
  if (p == nullptr) invalid(std::string(what) + " is NULL");
}

/// Runs f; a thrown exception becomes the returned code and the thread's last error.
template <typename F>
int guarded(F&& f) noexcept {
  try {
    f();
    return MAPLOC_OK;
  } catch (const Error& e) {
    set_error(static_cast<int>(e.code()), e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    set_error(MAPLOC_E_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    set_error(MAPLOC_E_INTERNAL, e.what());
  } catch (...) {
    set_error(MAPLOC_E_INTERNAL, "an unknown exception (a bug in maploc: please report it)");
  }
  return MAPLOC_E_INTERNAL;
}

/// Throws invalid() when index >= count, naming `what` ("tensor", "storage").
void check_index(std::size_t index, std::size_t count, const char* what);

/// The checkpoint of a handle (invalid() for NULL).
const torch::Checkpoint& checkpoint_of(const maploc_checkpoint* c);

/// A SPEC; NULL or "" is MapLocation::none() (the saved tags).
remap::MapLocation parse_spec(const char* spec);

/// Fills the geometry, dtype and flags of `out` from t (location, device, data left to the caller).
void describe_tensor(const torch::Tensor& t, maploc_tensor_info* out) noexcept;

}  // namespace maploc::capi
