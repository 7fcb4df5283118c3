// tensor_state.cpp - a tensor's state (__dict__, slots): inner tensors named by attribute, the rest as inert JSON.
#include <charconv>
#include <cmath>
#include <vector>

#include "globals.h"
#include "interpreter.h"
#include "maploc/torch/dtype.h"
#include "support/json_string.h"
#include "support/seeded_hash.h"

namespace maploc::torch {
namespace {

using pickle::Kind;
using pickle::Value;

bool is_scalar(const Value& v) {
  return v.is_none() || v.is(Kind::kBool) || v.is(Kind::kInt) || v.is(Kind::kFloat) || v.is(Kind::kStr);
}

// Renders a pickled value as JSON text without running anything. `budget` bounds the output (a
// value shared through the memo many times expands); `path` holds the containers being rendered.
class Renderer {
 public:
  Renderer(const Limits& limits, std::uint64_t budget, const std::string& name)
      : limits_(limits), budget_(budget), name_(name) {}

  std::string run(const Value& v) {
    render(v, 0);
    return std::move(out_);
  }

 private:
  void put(std::string_view s) {
    out_ += s;
    if (out_.size() > budget_) {
      fail(ErrorCode::kTorchLimitWalkBytes,
           "attribute '" + name_ + "': its value renders to more than the bytes left of "
           "Limits::torch_max_walk_bytes (" + std::to_string(limits_.torch_max_walk_bytes) +
           ") (shared references expand)",
           name_.substr(0, 256));
    }
  }
  void str(std::string_view s) {
    std::string q;
    detail::append_json_string(q, s);
    put(q);
  }
  void tagged(std::string_view tag, std::string_view text) {
    put("{");
    str(tag);
    put(":");
    str(text);
    put("}");
  }
  void number(double d) {
    if (!std::isfinite(d)) return tagged("float", std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    std::string_view s(buf, static_cast<std::size_t>(r.ptr - buf));
    put(s);
    if (s.find_first_of(".e") == std::string_view::npos) put(".0");  // stays a float when read back
  }
  void sequence(std::span<const Value> elems, std::size_t depth) {
    put("[");
    for (std::size_t i = 0; i < elems.size(); ++i) {
      if (i) put(",");
      render(elems[i], depth + 1);
    }
    put("]");
  }
  static std::string path_of(const Value& g) { return std::string(g.global_module()) + "." + std::string(g.global_name()); }

  void render(const Value& v, std::size_t depth) {
    if (depth > limits_.pickle_max_nesting_depth) {
      fail(ErrorCode::kPickleLimitNesting,
           "attribute '" + name_ + "': value nested deeper than Limits::pickle_max_nesting_depth (" +
               std::to_string(limits_.pickle_max_nesting_depth) + ")",
           name_.substr(0, 256));
    }
    const void* node = v.identity();
    if (node) {
      for (const void* open : path_) {
        if (open == node) return put("{\"cycle\":true}");  // a container holding itself: not followed
      }
      path_.push_back(node);
    }
    render_value(v, depth);
    if (node) path_.pop_back();
  }

  void render_value(const Value& v, std::size_t depth) {
    switch (v.kind()) {
      case Kind::kNone: return put("null");
      case Kind::kBool: return put(v.as_bool() ? "true" : "false");
      case Kind::kInt: {
        if (!v.is_big_int()) return put(std::to_string(v.as_int()));
        const std::string digits = v.int_decimal(limits_.pickle_max_int_digits);
        if (digits.find('x') != std::string::npos) return tagged("int", digits);  // beyond the cap: Python's hex()
        return put(digits);
      }
      case Kind::kFloat: return number(v.as_float());
      case Kind::kStr: return str(v.as_str());
      case Kind::kBytes:
      case Kind::kByteArray: {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex;
        for (const std::uint8_t b : v.as_bytes()) {
          hex += kHex[b >> 4];
          hex += kHex[b & 15];
          if (hex.size() > budget_) put(hex);  // refused before it grows further
        }
        return tagged("bytes", hex);
      }
      case Kind::kTuple:
      case Kind::kList:
      case Kind::kSet:
      case Kind::kFrozenSet: return sequence(v.elements(), depth);
      case Kind::kDict: return members(v.items(), depth);
      case Kind::kGlobal:
        if (v.global_module() == "torch" && dtype_from_name(v.global_name())) return tagged("dtype", v.global_name());
        return tagged("global", path_of(v));
      case Kind::kReduce:
      case Kind::kObject: return call(v, depth);
      case Kind::kPersistent:
      case Kind::kExternal: return put("{\"storage\":true}");  // a storage met again (not followed)
    }
    put("null");
  }

  // A dict's items (or an OrderedDict's SETITEMS) as a JSON object, keys as names print them.
  template <typename Items>
  void members(const Items& items, std::size_t depth) {
    put("{");
    bool first = true;
    for (const auto& item : items) {
      if (!first) put(",");
      first = false;
      str(key_text(item.key, limits_.pickle_max_int_digits));
      put(":");
      render(item.value, depth + 1);
    }
    put("}");
  }

  // A call as data: torch.Size(...) as its list, torch.device as its text, an enum member
  // (Enum's __reduce_ex__: the class called with its value) as {"class", "value"}, anything
  // else as {"class", "args"[, "state"]}. The class is named, never imported.
  void call(const Value& v, std::size_t depth) {
    const Value& callable = v.callable();
    const Value& args = v.args();
    // A tensor met again where its walk did not follow (a path back into a cycle): named, not expanded.
    if (global_entry(callable).use == GlobalUse::kRebuild) return tagged("tensor", path_of(callable));
    // set([...]) and frozenset([...]) as protocols 2-3 write sets: the list; OrderedDict() + SETITEMS: the items.
    if ((callable.is_global("builtins", "set") || callable.is_global("builtins", "frozenset")) &&
        args.is(Kind::kTuple) && args.size() == 1) {
      return render(args[0], depth + 1);
    }
    if (callable.is_global("collections", "OrderedDict") && args.is(Kind::kTuple) && args.size() == 0) {
      return members(v.set_items(), depth);
    }
    const bool plain = v.build_states().empty() && v.set_items().empty() && v.appended().empty();
    if (callable.is(Kind::kGlobal) && plain && args.is(Kind::kTuple)) {
      if (callable.is_global("torch", "Size") && args.size() == 1) return render(args[0], depth + 1);
      if (callable.is_global("torch", "device") && args.size() >= 1 && args[0].is(Kind::kStr)) {
        std::string text(args[0].as_str());
        if (args.size() >= 2 && args[1].is(Kind::kInt)) text += ":" + args[1].int_decimal();
        return tagged("device", text);
      }
      if (args.size() == 1 && is_scalar(args[0])) {
        put("{\"class\":");
        str(path_of(callable));
        put(",\"value\":");
        render(args[0], depth + 1);
        return put("}");
      }
    }
    put("{\"class\":");
    if (callable.is(Kind::kGlobal)) str(path_of(callable)); else render(callable, depth + 1);
    put(",\"args\":");
    if (args.is(Kind::kTuple)) sequence(args.elements(), depth); else render(args, depth + 1);
    if (!v.build_states().empty()) {
      put(",\"state\":");
      render(v.build_states().back(), depth + 1);
    }
    put("}");
  }

  const Limits& limits_;
  std::uint64_t budget_;
  const std::string& name_;
  std::string out_;
  std::vector<const void*> path_;
};

}  // namespace

std::string Interpreter::attribute_json(const Value& v, const std::string& name) {
  const std::uint64_t cap = state_.options.limits.torch_max_walk_bytes;
  std::string json = Renderer(state_.options.limits, cap > walk_bytes_ ? cap - walk_bytes_ : 0, name).run(v);
  account(json.size(), name);
  return json;
}

bool Interpreter::tensor_free(const void* node) const {
  const auto word = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(node));
  const auto slot = mark_index_.find(detail::hash_word(word, 0x67726170),
                                     [&](std::uint32_t i) { return marks_[i].node == node; });
  return slot && marks_[*slot].mark == Mark::kTensorFree;
}

// `walked_before`: the state was walked on another path and held no tensor; only rendered again.
void Interpreter::state_items(std::size_t tensor, const Value& dict, const std::string& name, std::size_t depth,
                              bool walked_before) {
  for (const auto& item : dict.items()) {
    const std::string key = key_text(item.key, state_.options.limits.pickle_max_int_digits);
    const std::string attr = join_name(name, key);
    const std::size_t before = state_.tensors.size();
    if (!walked_before) walk(item.value, attr, depth + 1);  // the usual names, cycle and sharing rules
    if (state_.tensors.size() != before) continue;
    std::string json = attribute_json(item.value, attr);
    account(key.size(), attr);
    state_.tensors[tensor].attributes.push_back({key, std::move(json)});
  }
}

// The state torch's _get_obj_state gives: the __dict__, or (__dict__ or None, slots dict).
void Interpreter::tensor_state(std::size_t tensor, const Value& state, const std::string& name, std::size_t depth) {
  step(name, depth);
  if (state.is_none()) return;
  const bool pair = state.is(Kind::kTuple) && state.size() == 2 && (state[0].is(Kind::kDict) || state[0].is_none()) &&
                    (state[1].is(Kind::kDict) || state[1].is_none());
  if (!state.is(Kind::kDict) && !pair) {
    bad(name, std::string("its state (the last argument of the rebuild call) is a ") +
                  std::string(pickle::kind_name(state.kind())) + ", not a dict or a (dict, slots) pair");
  }
  // The state is a node of the object graph: a tensor whose state leads back to itself is not
  // followed again (docs/torch.md, "Names"); a state already walked without tensors is rendered only.
  std::optional<Entered> entered;
  bool walked_before = false;
  if (const void* node = state.identity()) {
    entered = enter(node);
    if (!entered) {
      if (!tensor_free(node)) return;  // a path back into a cycle
      walked_before = true;
    }
  }
  const std::size_t first = state_.tensors.size();
  if (state.is(Kind::kDict)) {
    state_items(tensor, state, name, depth, walked_before);
  } else {
    if (state[0].is(Kind::kDict)) state_items(tensor, state[0], name, depth + 1, walked_before);
    if (state[1].is(Kind::kDict)) state_items(tensor, state[1], name, depth + 1, walked_before);
  }
  // The tensors of this state are held by `tensor` (those of an inner tensor's state by that one).
  for (std::size_t i = first; i < state_.tensors.size(); ++i) {
    Tensor& held = state_.tensors[i];
    if (!held.held_by && !held.is_component && i != tensor) held.held_by = tensor;
  }
  if (entered) leave(*entered);
}

}  // namespace maploc::torch
