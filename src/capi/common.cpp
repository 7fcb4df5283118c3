// common.cpp - the C API's per-thread last error, its version, and what every part of it shares.
#include <string>

#include "handles.h"
#include "maploc/version.h"

namespace maploc::capi {
namespace {

thread_local int last_code = MAPLOC_OK;
thread_local std::string last_message;

}  // namespace

void set_error(int code, const char* message) noexcept {
  last_code = code;
  try {
    last_message = message;
  } catch (...) {
    last_message.clear();  // no memory for the text: the code still tells
  }
}

void invalid(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, Stage::kRemap, message); }

void check_index(std::size_t index, std::size_t count, const char* what) {
  if (index >= count) {
    invalid(std::string(what) + " index " + std::to_string(index) + " is out of range (there are " +
            std::to_string(count) + ")");
  }
}

const torch::Checkpoint& checkpoint_of(const maploc_checkpoint* c) {
  require(c, "the checkpoint");
  return c->checkpoint;
}

remap::MapLocation parse_spec(const char* spec) {
  return spec == nullptr || *spec == '\0' ? remap::MapLocation::none() : remap::MapLocation::parse(spec);
}

void describe_tensor(const torch::Tensor& t, maploc_tensor_info* out) noexcept {
  *out = maploc_tensor_info{};
  out->name = t.name.c_str();
  out->dtype = torch::dtype_name(t.dtype).data();  // the names are NUL-terminated literals
  out->kind = torch::tensor_kind_name(t.kind).data();
  out->ndim = static_cast<int32_t>(t.shape.size());
  out->shape = t.shape.empty() ? nullptr : t.shape.data();
  // Storage-less kinds (meta, wrapper subclasses) may carry a shape and no strides.
  out->stride = t.stride.size() != t.shape.size() || t.stride.empty() ? nullptr : t.stride.data();
  out->storage_offset = t.storage_offset;
  out->storage = t.storage ? static_cast<int64_t>(*t.storage) : -1;
  out->requires_grad = t.requires_grad;
  out->conj = t.conj;
  out->neg = t.neg;
  out->parameter = t.parameter;
  out->location = "";
}

}  // namespace maploc::capi

extern "C" {

int maploc_last_error_code(void) { return maploc::capi::last_code; }

const char* maploc_last_error_message(void) { return maploc::capi::last_message.c_str(); }

const char* maploc_version(void) { return maploc::kVersion; }

}  // extern "C"
