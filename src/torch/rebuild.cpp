// rebuild.cpp - torch's rebuild functions as data: every tensor form a checkpoint can hold (§4.6).
#include <string_view>

#include "globals.h"
#include "interpreter.h"
#include "storage_table.h"

namespace maploc::torch {
namespace {

using pickle::Kind;
using pickle::Value;


std::string device_text(const Value& v) {
  if (auto t = text_of(v); t && !v.is(Kind::kInt)) return *t;
  if ((v.is(Kind::kReduce) || v.is(Kind::kObject)) && v.callable().is_global("torch", "device") &&
      v.args().is(Kind::kTuple) && v.args().size() >= 1) {
    std::string out = text_of(v.args()[0]).value_or("?");
    if (v.args().size() >= 2 && v.args()[1].is(Kind::kInt)) out += ":" + v.args()[1].int_decimal();
    return out;
  }
  return "?";
}

}  // namespace

void Interpreter::bad(const std::string& name, const std::string& why) const {
  fail(ErrorCode::kTorchBadTensor, "tensor '" + name + "': " + why, name);
}

void Interpreter::admit(const std::string& name) {
  if (state_.tensors.size() >= state_.options.limits.torch_max_tensors) {
    fail(ErrorCode::kTorchLimitTensors,
         "more than Limits::torch_max_tensors (" + std::to_string(state_.options.limits.torch_max_tensors) +
             ") tensors (every path to a tensor lists one; shared references can name millions)",
         name.substr(0, 256));
  }
  account(sizeof(Tensor) + name.size(), name);
}

std::size_t Interpreter::push(Tensor t) {
  admit(t.name);
  account(8 * (t.shape.size() + t.stride.size()), t.name);
  state_.tensors.push_back(std::move(t));
  return state_.tensors.size() - 1;
}

namespace {

// int64 list from a tuple/list of ints or a torch.Size(tuple) call, at most
// max_rank long (Limits::torch_max_rank; validate() names the limit).
bool int_list(const Value& v, std::vector<std::int64_t>& out, std::uint64_t max_rank) {
  const Value* seq = &v;
  if ((v.is(Kind::kReduce) || v.is(Kind::kObject)) && v.callable().is_global("torch", "Size") &&
      v.args().is(Kind::kTuple) && v.args().size() == 1) {
    seq = &v.args()[0];
  }
  if (!seq->is(Kind::kTuple) && !seq->is(Kind::kList)) return false;
  if (seq->size() > max_rank) return false;
  out.clear();
  out.reserve(seq->size());
  for (const auto& e : seq->elements()) {
    if (!e.is(Kind::kInt) || e.is_big_int()) return false;
    out.push_back(e.as_int());
  }
  return true;
}

bool int_of(const Value& v, std::int64_t& out) {
  if (!v.is(Kind::kInt) || v.is_big_int()) return false;
  out = v.as_int();
  return true;
}

std::optional<DType> dtype_of(const Value& v) {
  if (!v.is(Kind::kGlobal) || v.global_module() != "torch") return std::nullopt;
  return dtype_from_name(v.global_name());
}

}  // namespace

std::size_t Interpreter::strided(const Value& storage, const Value& offset, const Value& size, const Value& stride,
                                 std::optional<DType> dtype, const std::string& name) {
  if (!storage.is(Kind::kExternal) || storage.external_handle() >= state_.refs.size()) {
    bad(name, std::string("storage argument is a ") + std::string(pickle::kind_name(storage.kind())) +
                  ", not a storage persistent id");
  }
  const StorageRef& ref = state_.refs[storage.external_handle()];
  // Built in place: W1's 30,000 tensors are 9 MB of Tensor structs.
  admit(name);
  const std::size_t index = state_.tensors.size();
  Tensor& t = state_.tensors.emplace_back();
  t.name = name;
  t.dtype = dtype.value_or(ref.dtype);
  t.storage = ref.storage;
  if (!int_of(offset, t.storage_offset)) bad(name, "storage_offset is not an int64");
  if (!int_list(size, t.shape, state_.options.limits.torch_max_rank)) bad(name, "size is not a tuple of at most Limits::torch_max_rank int64s");
  if (!int_list(stride, t.stride, state_.options.limits.torch_max_rank)) bad(name, "stride is not a tuple of at most Limits::torch_max_rank int64s");
  if (t.shape.size() != t.stride.size()) {
    bad(name, "size has " + std::to_string(t.shape.size()) + " dims but stride has " +
                  std::to_string(t.stride.size()));
  }
  account(16 * t.shape.size(), name);
  return index;
}

std::size_t Interpreter::storage_object(const Value& v, const std::string& name) {
  if (v.external_handle() >= kTarTensorHandle &&
      v.external_handle() - kTarTensorHandle < state_.tar_tensors.size()) {
    Tensor t = state_.tar_tensors[v.external_handle() - kTarTensorHandle];
    t.name = name;
    return push(std::move(t));
  }
  if (v.external_handle() >= state_.refs.size()) bad(name, "unknown storage handle");
  const StorageRef& ref = state_.refs[v.external_handle()];
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kStorage;
  t.dtype = ref.dtype;
  t.storage = ref.storage;
  const Storage& s = state_.storages[ref.storage];
  t.shape = {static_cast<std::int64_t>(s.nbytes / element_size(ref.dtype))};
  t.stride = {1};
  return push(std::move(t));
}

std::size_t Interpreter::require_tensor(const Value& v, const std::string& name, std::size_t depth) {
  step(name, depth);
  if (v.is(Kind::kExternal)) return storage_object(v, name);
  if (auto idx = try_tensor(v, name, depth)) return *idx;
  bad(name, std::string("expected a tensor, found a ") + std::string(pickle::kind_name(v.kind())));
}

void Interpreter::add_component(std::size_t composite, const std::string& role, const Value& v,
                                const std::string& name, std::size_t depth) {
  const std::size_t idx = require_tensor(v, join_name(name, role), depth + 1);
  state_.tensors[idx].is_component = true;
  state_.tensors[composite].components.push_back({role, idx});
}

std::optional<std::size_t> Interpreter::try_tensor(const Value& v, const std::string& name, std::size_t depth) {
  if (!v.is(Kind::kReduce) && !v.is(Kind::kObject)) return std::nullopt;
  const Value& callable = v.callable();
  if (auto idx = rebuild(callable, v.args(), name, depth)) {
    // The outermost call that yields the tensor is its node (an inner try_tensor set its own first).
    state_.origins.push_back({v, 0, *idx, true, false});
    return idx;
  }
  // The oldest form: torch.FloatTensor() then BUILD with set_'s arguments.
  if (global_entry(callable).use == GlobalUse::kTensorClass && !v.build_states().empty()) {
    return old_style(v.build_states().back(), name, depth);
  }
  return std::nullopt;
}

std::size_t Interpreter::old_style(const Value& state, const std::string& name, std::size_t depth) {
  if (!state.is(Kind::kTuple)) bad(name, "Tensor BUILD state is not a tuple");
  if (state.size() == 4) return strided(state[0], state[1], state[2], state[3], std::nullopt, name);
  if (state.size() == 5) {  // legacy Variable: (data, _, hooks?, requires_grad, hooks)
    const std::size_t idx = require_tensor(state[0], name, depth + 1);
    if (state[3].is(Kind::kBool)) state_.tensors[idx].requires_grad = state[3].as_bool();
    return idx;
  }
  bad(name, "Tensor BUILD state has " + std::to_string(state.size()) + " items, expected 4 or 5");
}

std::optional<std::size_t> Interpreter::rebuild(const Value& callable, const Value& args, const std::string& name,
                                                std::size_t depth) {
  const GlobalEntry& g = global_entry(callable);
  if (g.use != GlobalUse::kRebuild) return std::nullopt;  // another torch._utils helper: not a tensor
  const std::string fn(callable.global_name());
  if (!args.is(Kind::kTuple)) bad(name, fn + " arguments are not a tuple");
  const std::size_t n = args.size();
  if (n < g.min_args || n > g.max_args) {
    bad(name, fn + " takes " + std::to_string(g.min_args) +
                  (g.min_args == g.max_args ? "" : "-" + std::to_string(g.max_args)) + " arguments, got " +
                  std::to_string(n));
  }
  switch (g.rebuild) {
    case RebuildForm::kTensor: return strided(args[0], args[1], args[2], args[3], std::nullopt, name);
    case RebuildForm::kTensorV2:
    case RebuildForm::kTensorV3: return tensor_v2(args, g.rebuild == RebuildForm::kTensorV3, name);
    case RebuildForm::kParameter: {
      const auto idx = require_tensor(args[0], name, depth + 1);
      state_.tensors[idx].parameter = true;
      set_grad(idx, args[1]);
      if (n == 4) tensor_state(idx, args[3], name, depth + 1);  // _rebuild_parameter_with_state
      return idx;
    }
    case RebuildForm::kFromType: return from_type(args, name, depth);
    case RebuildForm::kQuantized: return qtensor(args, name, depth);
    case RebuildForm::kSparse: return sparse(args, name, depth);
    case RebuildForm::kNested: return nested(args, name, depth);
    case RebuildForm::kNestedJagged: return nested_jagged(args, name, depth);
    case RebuildForm::kMeta: return meta(args, name);
    case RebuildForm::kWrapperSubclass: return wrapper_subclass(args, name);
    case RebuildForm::kDeviceFromCpu:
    case RebuildForm::kDeviceFromNumpy:
      return device_tensor(args, g.rebuild == RebuildForm::kDeviceFromCpu, name, depth);
    case RebuildForm::kNone: break;
  }
  return std::nullopt;
}

void Interpreter::set_grad(std::size_t idx, const Value& requires_grad) {
  if (requires_grad.is(Kind::kBool)) state_.tensors[idx].requires_grad = requires_grad.as_bool();
}

DType Interpreter::dtype_argument(const Value& v, const std::string& name) const {
  const auto dtype = dtype_of(v);
  if (!dtype) fail(ErrorCode::kTorchUnknownDType, "tensor '" + name + "': unknown dtype " + global_path(v), name);
  return *dtype;
}

// _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]);
// v3 puts the dtype before the metadata.
std::size_t Interpreter::tensor_v2(const Value& args, bool v3, const std::string& name) {
  const std::optional<DType> dtype = v3 ? std::optional<DType>(dtype_argument(args[6], name)) : std::nullopt;
  const auto idx = strided(args[0], args[1], args[2], args[3], dtype, name);
  set_grad(idx, args[4]);
  const std::size_t metadata_at = v3 ? 7 : 6;
  if (args.size() > metadata_at && args[metadata_at].is(Kind::kDict)) {
    const Value& md = args[metadata_at];
    if (const Value* c = md.find("conj"); c && c->is(Kind::kBool)) state_.tensors[idx].conj = c->as_bool();
    if (const Value* g = md.find("neg"); g && g->is(Kind::kBool)) state_.tensors[idx].neg = g->as_bool();
  }
  return idx;
}

// _rebuild_from_type_v2(func, type, args, dict): func(*args) as `type`, then its state set (tensor_state.cpp).
std::optional<std::size_t> Interpreter::from_type(const Value& args, const std::string& name, std::size_t depth) {
  const Value& func = args[0];
  const Value& inner = args[2];
  auto idx = rebuild(func, inner, name, depth + 1);
  if (!idx) {
    if (global_entry(func).use == GlobalUse::kTensorClass || !func.is(Kind::kGlobal)) return std::nullopt;
    // func is e.g. Tensor._make_subclass: look for the tensor in its arguments.
    if (!inner.is(Kind::kTuple)) return std::nullopt;
    for (const auto& a : inner.elements()) {
      if (auto t = try_tensor(a, name, depth + 1)) {
        idx = t;
        break;
      }
    }
    if (!idx) return std::nullopt;
  }
  const Value& type = args[1];
  if (type.is_global("torch.nn.parameter", "Parameter")) {
    state_.tensors[*idx].parameter = true;
  } else if (!type.is_global("torch", "Tensor") && !type.is_global("torch._tensor", "Tensor")) {
    state_.tensors[*idx].subclass = global_path(type);
  }
  // Its __dict__ (and slots); a jagged nested tensor's repeats its constructor's arguments (_values, ...).
  if (args.size() == 4 && state_.tensors[*idx].kind != TensorKind::kNestedJagged) {
    tensor_state(*idx, args[3], name, depth + 1);
  }
  return idx;
}

std::size_t Interpreter::nested(const Value& args, const std::string& name, std::size_t depth) {
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kNested;
  const auto idx = push(std::move(t));
  static constexpr std::string_view kRoles[] = {"buffer", "sizes", "strides", "storage_offsets"};
  for (std::size_t i = 0; i < 4; ++i) add_component(idx, std::string(kRoles[i]), args[i], name, depth);
  state_.tensors[idx].dtype = state_.tensors[state_.tensors[idx].components[0].tensor].dtype;
  return idx;
}

// _rebuild_njt({'values', 'offsets', 'lengths', '_ragged_idx', '_metadata_cache', 'requires_grad'}).
// The cached min/max sequence lengths are stored as the first size of an empty tensor
// (torch.nested._internal.nested_tensor._store_val_in_tensor): read from the size argument, not listed.
std::size_t Interpreter::nested_jagged(const Value& args, const std::string& name, std::size_t depth) {
  const Value& kw = args[0];
  if (!kw.is(Kind::kDict)) bad(name, "_rebuild_njt's argument is not a dict of constructor arguments");
  const Value* values = kw.find("values");
  const Value* offsets = kw.find("offsets");
  if (!values || !offsets) bad(name, "_rebuild_njt's arguments have no values or offsets");
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kNestedJagged;
  const auto idx = push(std::move(t));
  add_component(idx, "values", *values, name, depth);
  add_component(idx, "offsets", *offsets, name, depth);
  if (const Value* lengths = kw.find("lengths"); lengths && !lengths->is_none()) {
    add_component(idx, "lengths", *lengths, name, depth);
  }
  state_.tensors[idx].dtype = state_.tensors[state_.tensors[idx].components[0].tensor].dtype;
  if (const Value* g = kw.find("requires_grad")) set_grad(idx, *g);
  auto& attrs = state_.tensors[idx].attributes;
  if (const Value* r = kw.find("_ragged_idx"); r && r->is(Kind::kInt) && !r->is_big_int()) {
    attrs.push_back({"ragged_idx", std::to_string(r->as_int())});
  }
  if (const Value* cache = kw.find("_metadata_cache"); cache && cache->is(Kind::kDict)) {
    for (const char* key : {"min_seqlen", "max_seqlen"}) {
      const Value* v = cache->find(key);
      if (!v || !(v->is(Kind::kReduce) || v->is(Kind::kObject)) || !v->args().is(Kind::kTuple)) continue;
      const Value* a = &v->args();  // _rebuild_tensor_v2's, or those inside _rebuild_from_type_v2's
      if (global_entry(v->callable()).rebuild == RebuildForm::kFromType && a->size() >= 3) a = &(*a)[2];
      std::vector<std::int64_t> size;
      if (a->is(Kind::kTuple) && a->size() >= 3 && int_list((*a)[2], size, state_.options.limits.torch_max_rank) &&
          !size.empty()) {
        attrs.push_back({key, std::to_string(size[0])});
        // Its (empty) storage is read, as this attribute: not unreferenced (completeness.cpp).
        if (const Value& s = (*a)[0]; s.is(Kind::kExternal) && s.external_handle() < state_.refs.size()) {
          state_.consumed.push_back(state_.refs[s.external_handle()].storage);
        }
      }
    }
  }
  return idx;
}

std::size_t Interpreter::meta(const Value& args, const std::string& name) {
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kMeta;
  t.device = "meta";
  t.dtype = dtype_argument(args[0], name);
  const std::uint64_t max_rank = state_.options.limits.torch_max_rank;
  if (!int_list(args[1], t.shape, max_rank) || !int_list(args[2], t.stride, max_rank)) {
    bad(name, "size/stride are not int tuples");
  }
  const auto idx = push(std::move(t));
  set_grad(idx, args[3]);
  return idx;
}

std::size_t Interpreter::wrapper_subclass(const Value& args, const std::string& name) {
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kWrapperSubclass;
  t.subclass = global_path(args[0]);
  t.dtype = dtype_argument(args[1], name);
  const std::uint64_t max_rank = state_.options.limits.torch_max_rank;
  if (!int_list(args[2], t.shape, max_rank) || !int_list(args[3], t.stride, max_rank) ||
      !int_of(args[4], t.storage_offset)) {
    bad(name, "size/stride/storage_offset are not ints");
  }
  t.device = device_text(args[6]);
  const auto idx = push(std::move(t));
  set_grad(idx, args[7]);
  return idx;
}

// _rebuild_device_tensor_from_cpu_tensor(data, dtype, device, requires_grad), and the numpy
// (and XLA) forms whose data is an ndarray.
std::size_t Interpreter::device_tensor(const Value& args, bool from_cpu, const std::string& name, std::size_t depth) {
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kDeviceFromCpu;
  t.dtype = dtype_argument(args[1], name);
  t.device = device_text(args[2]);
  const auto idx = push(std::move(t));
  set_grad(idx, args[3]);
  if (from_cpu) {
    add_component(idx, "data", args[0], name, depth);
    state_.tensors[idx].shape = state_.tensors[state_.tensors[idx].components[0].tensor].shape;
  } else if (const Value& nd = args[0]; (nd.is(Kind::kReduce) || nd.is(Kind::kObject)) && !nd.build_states().empty()) {
    // numpy ndarray BUILD state (version, shape, dtype, is_fortran, raw bytes).
    const Value& st = nd.build_states().back();
    if (st.is(Kind::kTuple) && st.size() >= 2) int_list(st[1], state_.tensors[idx].shape, state_.options.limits.torch_max_rank);
  }
  return idx;
}

std::size_t Interpreter::qtensor(const Value& args, const std::string& name, std::size_t depth) {
  const auto idx = strided(args[0], args[1], args[2], args[3], std::nullopt, name);
  state_.tensors[idx].kind = TensorKind::kQuantized;
  if (args[5].is(Kind::kBool)) state_.tensors[idx].requires_grad = args[5].as_bool();
  const Value& q = args[4];
  if (!q.is(Kind::kTuple) || q.size() < 3 || !q[0].is(Kind::kGlobal)) bad(name, "quantizer_params is not (qscheme, ...)");
  Quantizer quant;
  quant.qscheme = std::string(q[0].global_name());
  if (quant.qscheme == "per_tensor_affine" || quant.qscheme == "per_tensor_symmetric") {
    if (q.size() != 3 || !q[1].is(Kind::kFloat) || !int_of(q[2], quant.zero_point)) {
      bad(name, "per-tensor quantizer_params is not (qscheme, scale, zero_point)");
    }
    quant.scale = q[1].as_float();
    state_.tensors[idx].quantizer = quant;
  } else if (quant.qscheme.rfind("per_channel_", 0) == 0) {
    if (q.size() != 4 || !int_of(q[3], quant.axis)) bad(name, "per-channel quantizer_params is not (qscheme, scales, zero_points, axis)");
    state_.tensors[idx].quantizer = quant;
    add_component(idx, "scales", q[1], name, depth);
    add_component(idx, "zero_points", q[2], name, depth);
    const auto& t = state_.tensors[idx];
    if (quant.axis < 0 || static_cast<std::size_t>(quant.axis) >= std::max<std::size_t>(t.shape.size(), 1)) {
      bad(name, "quantizer axis " + std::to_string(quant.axis) + " is outside the tensor's " +
                    std::to_string(t.shape.size()) + " dims");
    }
  } else {
    bad(name, "unknown qscheme " + global_path(q[0]));
  }
  return idx;
}

std::size_t Interpreter::sparse(const Value& args, const std::string& name, std::size_t depth) {
  // layout: torch.serialization._get_layout('torch.sparse_coo') or the bare GLOBAL torch.sparse_coo.
  std::string layout;
  const Value& l = args[0];
  if (l.is(Kind::kGlobal)) {
    layout = std::string(l.global_name());
  } else if ((l.is(Kind::kReduce) || l.is(Kind::kObject)) && l.args().is(Kind::kTuple) && l.args().size() == 1) {
    layout = text_of(l.args()[0]).value_or("");
    if (layout.rfind("torch.", 0) == 0) layout.erase(0, 6);
  }
  struct Layout {
    std::string_view name;
    TensorKind kind;
    std::string_view compressed, plain;
  };
  static constexpr Layout kLayouts[] = {
      {"sparse_coo", TensorKind::kSparseCoo, "indices", ""},
      {"sparse_csr", TensorKind::kSparseCsr, "crow_indices", "col_indices"},
      {"sparse_csc", TensorKind::kSparseCsc, "ccol_indices", "row_indices"},
      {"sparse_bsr", TensorKind::kSparseBsr, "crow_indices", "col_indices"},
      {"sparse_bsc", TensorKind::kSparseBsc, "ccol_indices", "row_indices"},
  };
  const Layout* found = nullptr;
  for (const auto& row : kLayouts) {
    if (row.name == layout) found = &row;
  }
  if (!found) bad(name, "unknown sparse layout '" + layout + "'");
  const Value& data = args[1];
  Tensor t;
  t.name = name;
  t.kind = found->kind;
  const auto idx = push(std::move(t));
  if (found->kind == TensorKind::kSparseCoo) {
    if (!data.is(Kind::kTuple) || data.size() < 3 || data.size() > 4) bad(name, "COO data is not (indices, values, size[, is_coalesced])");
    add_component(idx, "indices", data[0], name, depth);
    add_component(idx, "values", data[1], name, depth);
    if (!int_list(data[2], state_.tensors[idx].shape, state_.options.limits.torch_max_rank)) bad(name, "sparse size is not an int tuple");
  } else {
    if (!data.is(Kind::kTuple) || data.size() != 4) bad(name, "compressed sparse data is not (compressed, plain, values, size)");
    add_component(idx, std::string(found->compressed), data[0], name, depth);
    add_component(idx, std::string(found->plain), data[1], name, depth);
    add_component(idx, "values", data[2], name, depth);
    if (!int_list(data[3], state_.tensors[idx].shape, state_.options.limits.torch_max_rank)) bad(name, "sparse size is not an int tuple");
  }
  const auto& comps = state_.tensors[idx].components;
  state_.tensors[idx].dtype = state_.tensors[comps[comps.size() - 1].tensor].dtype;
  return idx;
}

}  // namespace maploc::torch
