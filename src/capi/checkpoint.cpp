// checkpoint.cpp - the C API's checkpoints and plans: open, list tensors and storages, plan a SPEC.
#include <memory>

#include "handles.h"

using namespace maploc;
using capi::guarded;

extern "C" {

int maploc_open(const char* path, maploc_checkpoint** out) {
  return guarded([&] {
    capi::require(path, "the path");
    capi::require(out, "the output pointer");
    *out = nullptr;
    *out = new maploc_checkpoint{torch::Checkpoint::open(path)};
  });
}

void maploc_checkpoint_free(maploc_checkpoint* checkpoint) { delete checkpoint; }

const char* maploc_checkpoint_format(const maploc_checkpoint* checkpoint) {
  return checkpoint == nullptr ? nullptr : torch::format_name(checkpoint->checkpoint.format()).data();
}

size_t maploc_checkpoint_tensor_count(const maploc_checkpoint* checkpoint) {
  return checkpoint == nullptr ? 0 : checkpoint->checkpoint.tensors().size();
}

size_t maploc_checkpoint_storage_count(const maploc_checkpoint* checkpoint) {
  return checkpoint == nullptr ? 0 : checkpoint->checkpoint.storages().size();
}

int maploc_checkpoint_tensor(const maploc_checkpoint* checkpoint, size_t index, maploc_tensor_info* out) {
  return guarded([&] {
    const auto& c = capi::checkpoint_of(checkpoint);
    capi::require(out, "the output struct");
    capi::check_index(index, c.tensors().size(), "tensor");
    const auto& t = c.tensors()[index];
    capi::describe_tensor(t, out);
    if (t.storage) out->location = c.storages()[*t.storage].location.c_str();
  });
}

int maploc_checkpoint_storage(const maploc_checkpoint* checkpoint, size_t index, maploc_storage_info* out) {
  return guarded([&] {
    const auto& c = capi::checkpoint_of(checkpoint);
    capi::require(out, "the output struct");
    capi::check_index(index, c.storages().size(), "storage");
    const auto& s = c.storages()[index];
    *out = maploc_storage_info{};
    out->key = s.key.c_str();
    out->dtype = torch::dtype_name(s.dtype).data();
    out->nbytes = s.nbytes;
    out->location = s.location.c_str();
  });
}

int maploc_plan_make(const maploc_checkpoint* checkpoint, const char* map_location, maploc_plan** out) {
  return guarded([&] {
    const auto& c = capi::checkpoint_of(checkpoint);
    capi::require(out, "the output pointer");
    *out = nullptr;
    auto plan = std::make_unique<maploc_plan>();
    plan->plan = remap::make_plan(c, capi::parse_spec(map_location), remap::DeviceInventory::probe());
    for (const auto& d : plan->plan.targets) plan->targets.push_back(d.str());
    for (const auto& t : plan->plan.totals) plan->totals.push_back(t.device.str());
    *out = plan.release();
  });
}

void maploc_plan_free(maploc_plan* plan) { delete plan; }

const char* maploc_plan_target(const maploc_plan* plan, size_t index) {
  return plan == nullptr || index >= plan->targets.size() ? nullptr : plan->targets[index].c_str();
}

size_t maploc_plan_device_count(const maploc_plan* plan) { return plan == nullptr ? 0 : plan->totals.size(); }

int maploc_plan_device(const maploc_plan* plan, size_t index, maploc_device_total* out) {
  return guarded([&] {
    capi::require(plan, "the plan");
    capi::require(out, "the output struct");
    capi::check_index(index, plan->totals.size(), "device");
    const auto& t = plan->plan.totals[index];
    *out = maploc_device_total{};
    out->device = plan->totals[index].c_str();
    out->bytes = t.bytes;
    out->storages = t.storages;
    out->has_free_bytes = t.free_bytes.has_value();
    out->free_bytes = t.free_bytes.value_or(0);
  });
}

int maploc_plan_check_fits(const maploc_plan* plan) {
  return guarded([&] {
    capi::require(plan, "the plan");
    remap::check_fits(plan->plan);
  });
}

}  // extern "C"
