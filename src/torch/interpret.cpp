// interpret.cpp - the tree walk: names, containers torch checkpoints use, inert objects.
#include <algorithm>
#include <string_view>

#include "support/huge_chunks.h"
#include "globals.h"
#include "interpreter.h"
#include "storage_table.h"

namespace maploc::torch {
namespace {

using pickle::Kind;
using pickle::Value;


// The items of a dict or of an OrderedDict call node.
std::vector<pickle::DictItem> dict_items(const Value& v) {
  if (v.is(Kind::kDict)) return {v.items().begin(), v.items().end()};
  if ((v.is(Kind::kReduce) || v.is(Kind::kObject)) && v.callable().is_global("collections", "OrderedDict")) {
    return {v.set_items().begin(), v.set_items().end()};
  }
  return {};
}

// Keys of nn.Module._non_persistent_buffers_set: set([...]) or a set value.
std::vector<std::string> set_strings(const Value* v) {
  std::vector<std::string> out;
  if (!v) return out;
  const Value* seq = v;
  if ((v->is(Kind::kReduce) || v->is(Kind::kObject)) && v->args().is(Kind::kTuple) && v->args().size() == 1) {
    seq = &v->args()[0];
  }
  if (seq->is(Kind::kList) || seq->is(Kind::kSet) || seq->is(Kind::kFrozenSet) || seq->is(Kind::kTuple)) {
    for (const auto& e : seq->elements()) {
      if (e.is(Kind::kStr)) out.emplace_back(e.as_str());
    }
  }
  return out;
}

}  // namespace

bool Interpreter::module_state(const Value& state) {
  return state.is(Kind::kDict) && state.find("_parameters") && state.find("_buffers") && state.find("_modules");
}

// nn.Module.state_dict() order: own parameters, own persistent buffers, then
// each submodule under its attribute name (torch/nn/modules/module.py).
void Interpreter::walk_module(const Value& state, const std::string& name, std::size_t depth) {
  step(name, depth);
  for (const auto& item : dict_items(*state.find("_parameters"))) {
    if (!item.value.is_none()) walk(item.value, join_name(name, key_text(item.key, state_.options.limits.pickle_max_int_digits)), depth + 1);
  }
  const auto skip = set_strings(state.find("_non_persistent_buffers_set"));
  for (const auto& item : dict_items(*state.find("_buffers"))) {
    const std::string key = key_text(item.key, state_.options.limits.pickle_max_int_digits);
    if (item.value.is_none() || std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    walk(item.value, join_name(name, key), depth + 1);
  }
  for (const auto& item : dict_items(*state.find("_modules"))) {
    const Value& sub = item.value;
    if ((sub.is(Kind::kReduce) || sub.is(Kind::kObject)) && !sub.build_states().empty() &&
        module_state(sub.build_states().back())) {
      const auto entered = enter(sub.identity());  // a module holding its own ancestor: not followed
      if (!entered) continue;
      walk_module(sub.build_states().back(), join_name(name, key_text(item.key, state_.options.limits.pickle_max_int_digits)), depth + 1);
      leave(*entered);
    }
  }
}

std::string key_text(const Value& key, std::uint64_t max_int_digits) {
  if (key.is(Kind::kStr)) return std::string(key.as_str());
  if (key.is(Kind::kGlobal)) return global_path(key);
  if (key.is(Kind::kInt)) return key.int_decimal(max_int_digits);  // hex beyond the cap (linear)
  return pickle::key_str(key);  // as str(key) prints: b'...', 7, ('enc', 2)
}

std::string join_name(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

Interpreter::Interpreter(Checkpoint::State& state) : state_(state) {}

void Interpreter::step(const std::string& name, std::size_t depth) {
  if (depth > state_.options.limits.pickle_max_nesting_depth) {
    fail(ErrorCode::kPickleLimitNesting,
         "object nesting deeper than Limits::pickle_max_nesting_depth (" +
             std::to_string(state_.options.limits.pickle_max_nesting_depth) + ")",
         name.substr(0, 256));
  }
  if (++steps_ > state_.options.limits.torch_max_walk_paths) {
    fail(ErrorCode::kPickleLimitContainerItems,
         "the object tree expands to more than Limits::torch_max_walk_paths (" +
             std::to_string(state_.options.limits.torch_max_walk_paths) +
             ") paths (shared containers nested into an expansion)",
         name);
  }
  const Limits& limits = state_.options.limits;
  if (name.size() > limits.torch_max_name_bytes) {
    fail(ErrorCode::kTorchLimitNameBytes,
         "an object's name is " + std::to_string(name.size()) + " bytes, more than Limits::torch_max_name_bytes (" +
             std::to_string(limits.torch_max_name_bytes) + "); it starts '" + name.substr(0, 64) + "'",
         name.substr(0, 256));
  }
  account(name.size(), name);
}

void Interpreter::account(std::uint64_t bytes, const std::string& name) {
  walk_bytes_ += bytes;
  if (walk_bytes_ > state_.options.limits.torch_max_walk_bytes) {
    fail(ErrorCode::kTorchLimitWalkBytes,
         "the object walk built more than Limits::torch_max_walk_bytes (" +
             std::to_string(state_.options.limits.torch_max_walk_bytes) +
             ") bytes of names and tensors (shared references reached through many paths)",
         name.substr(0, 256));
  }
}

// The walk names `tensor` at `v`: the row try_tensor just added for v's call, or a row of its own
// (an old-style tensor, whose BUILD no rebuild row records).
void Interpreter::name_origin(const Value& v, std::size_t tensor) {
  auto& rows = state_.origins;
  if (!rows.empty() && rows.back().rebuilt && rows.back().tensor == tensor && rows.back().node.identity() == v.identity()) {
    rows.back().named = true;
  } else {
    rows.push_back({v, 0, tensor, false, true});
  }
}

void Interpreter::walk(const Value& v, const std::string& name, std::size_t depth) {
  step(name, depth);
  switch (v.kind()) {
    case Kind::kExternal: {
      const std::size_t tensor = storage_object(v, name);
      state_.origins.push_back({pickle::Value(), v.external_handle(), tensor, false, true});
      return;
    }
    case Kind::kTuple:
    case Kind::kList:
    case Kind::kSet:
    case Kind::kFrozenSet:
    case Kind::kDict:
    case Kind::kReduce:
    case Kind::kObject:
      break;
    default:
      return;  // scalars, strings, globals (dtypes, classes) are leaves
  }
  // A tensor is named on every path to it (tied weights) and holds no containers: no graph node.
  if (v.is(Kind::kReduce) || v.is(Kind::kObject)) {
    if (const auto tensor = try_tensor(v, name, depth)) {
      name_origin(v, *tensor);
      return;
    }
  }
  std::optional<Entered> entered;
  if (const void* node = v.identity()) {
    entered = enter(node);
    if (!entered) return;  // on a cycle and walked already, or a shared tree without tensors
  }
  switch (v.kind()) {
    case Kind::kDict:
      for (const auto& item : v.items()) walk(item.value, join_name(name, key_text(item.key, state_.options.limits.pickle_max_int_digits)), depth + 1);
      break;
    case Kind::kReduce:
    case Kind::kObject:
      walk_object(v, name, depth);
      break;
    default: {
      const auto elems = v.elements();
      for (std::size_t i = 0; i < elems.size(); ++i) walk(elems[i], join_name(name, std::to_string(i)), depth + 1);
    }
  }
  if (entered) leave(*entered);
}

void Interpreter::walk_object(const Value& v, const std::string& name, std::size_t depth) {
  const Value& callable = v.callable();
  switch (global_entry(callable).use) {
    case GlobalUse::kPassthrough:
      if (v.args().is(Kind::kTuple) && v.args().size() >= 1) walk(v.args()[0], name, depth + 1);
      return;
    case GlobalUse::kContainer: {
      // Items arrive either as the call's argument (Counter({...}), set([...]))
      // or through SETITEMS/APPENDS on the result (OrderedDict, defaultdict).
      const bool args_hold_items = !callable.is_global("collections", "defaultdict");
      if (args_hold_items && v.args().is(Kind::kTuple) && v.args().size() >= 1) walk(v.args()[0], name, depth + 1);
      for (const auto& item : v.set_items()) walk(item.value, join_name(name, key_text(item.key, state_.options.limits.pickle_max_int_digits)), depth + 1);
      const auto appended = v.appended();
      for (std::size_t i = 0; i < appended.size(); ++i) walk(appended[i], join_name(name, std::to_string(i)), depth + 1);
      // OrderedDict's BUILD state is the state_dict's `_metadata` attribute
      // (module versions): not part of the names torch's state_dict gives.
      return;
    }
    case GlobalUse::kLeaf:
    case GlobalUse::kTensorClass:  // a tensor class with no BUILD state (try_tensor took those): nothing in it
      return;
    case GlobalUse::kRebuild:      // a rebuild form try_tensor did not take (no tensor found): walk it inertly
    case GlobalUse::kDcpMetadata:
      break;
    case GlobalUse::kNone:
      note_unknown_rebuild(callable);
      break;
  }
  // A whole nn.Module: named by its state_dict() keys, not by attributes.
  if (!v.build_states().empty() && module_state(v.build_states().back())) {
    walk_module(v.build_states().back(), name, depth + 1);
    return;
  }
  // An inert object (argparse.Namespace, a user class): its
  // attributes are its BUILD state; dict/list subclasses also their items.
  for (const auto& item : v.set_items()) walk(item.value, join_name(name, key_text(item.key, state_.options.limits.pickle_max_int_digits)), depth + 1);
  const auto appended = v.appended();
  for (std::size_t i = 0; i < appended.size(); ++i) walk(appended[i], join_name(name, std::to_string(i)), depth + 1);
  for (const auto& state : v.build_states()) walk_state(state, name, depth + 1);
}

// A `_rebuild*` function maploc does not know builds something torch returns that maploc cannot
// list (completeness.cpp reports it). Recorded once each, in file order.
void Interpreter::note_unknown_rebuild(const Value& callable) {
  if (!callable.is(Kind::kGlobal)) return;
  const std::string path = global_path(callable);
  const auto dot = path.rfind('.');
  if (path.compare(dot == std::string::npos ? 0 : dot + 1, 8, "_rebuild") != 0) return;
  auto& seen = state_.unknown_rebuilds;
  if (std::find(seen.begin(), seen.end(), path) == seen.end() && seen.size() < 64) seen.push_back(path);
}

void Interpreter::walk_state(const Value& state, const std::string& name, std::size_t depth) {
  step(name, depth);
  if (state.is(Kind::kDict)) {
    for (const auto& item : state.items()) walk(item.value, join_name(name, key_text(item.key, state_.options.limits.pickle_max_int_digits)), depth + 1);
  } else if (state.is(Kind::kTuple) && state.size() == 2 &&
             (state[0].is(Kind::kDict) || state[0].is_none()) && (state[1].is(Kind::kDict) || state[1].is_none())) {
    // (__dict__, __slots__ dict) as copyreg writes it.
    walk_state(state[0], name, depth + 1);
    walk_state(state[1], name, depth + 1);
  } else {
    walk(state, name, depth + 1);  // __setstate__ with any other value: keep the name
  }
}

void interpret(Checkpoint::State& state) {
  Interpreter in(state);
  state.tensors.reserve(state.tensors.size() + state.refs.size());  // about one tensor per storage reference
  maploc::detail::prefer_huge_pages(state.tensors.data() + state.tensors.size(),
                                    (state.tensors.capacity() - state.tensors.size()) * sizeof(Tensor));
  in.walk(state.root, "", 0);
  if (state.format == Format::kTorchScript && !state.constants_root.is_none()) {
    in.walk(state.constants_root, "constants", 0);
  }
  index_origins(state);
}

}  // namespace maploc::torch
