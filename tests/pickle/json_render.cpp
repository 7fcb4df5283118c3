// json_render.cpp - golden-JSON rendering of value trees for the conformance tests.
#include "json_render.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>

namespace maploc::pickle::testing {

namespace {
std::string hex(std::span<const std::uint8_t> b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (auto c : b) {
    s.push_back(kHex[c >> 4]);
    s.push_back(kHex[c & 0xF]);
  }
  return s;
}

bool has_surrogate(std::string_view s) {
  for (std::size_t i = 0; i + 1 < s.size(); ++i)
    if (static_cast<std::uint8_t>(s[i]) == 0xED && static_cast<std::uint8_t>(s[i + 1]) >= 0xA0) return true;
  return false;
}

class Renderer {
 public:
  nlohmann::json render(const Value& v) {
    using nlohmann::json;
    switch (v.kind()) {
      case Kind::kNone: return nullptr;
      case Kind::kBool: return v.as_bool();
      case Kind::kInt: return json{{"int", v.int_decimal()}};
      case Kind::kFloat: {
        const double f = v.as_float();
        std::uint64_t bits;
        std::memcpy(&bits, &f, 8);
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(bits));
        return json{{"float", buf}};
      }
      case Kind::kStr: {
        const auto s = v.as_str();
        if (has_surrogate(s))
          return json{{"str_hex", hex({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()})}};
        return json{{"str", std::string(s)}};
      }
      case Kind::kBytes: return json{{"bytes", hex(v.as_bytes())}};
      case Kind::kTuple: return json{{"tuple", seq(v.elements())}};
      case Kind::kFrozenSet: return json{{"frozenset", seq(v.elements())}};
      case Kind::kGlobal:
        return json{{"global", {std::string(v.global_module()), std::string(v.global_name())}}};
      case Kind::kExternal: return json{{"external", v.external_handle()}};
      default: break;
    }
    // Mutable nodes are numbered at first visit; later visits are refs.
    auto [it, fresh] = ids_.emplace(v.identity(), ids_.size());
    if (!fresh) return json{{"ref", it->second}};
    switch (v.kind()) {
      case Kind::kByteArray: return json{{"bytearray", hex(v.as_bytes())}};
      case Kind::kList: return json{{"list", seq(v.elements())}};
      case Kind::kSet: return json{{"set", seq(v.elements())}};
      case Kind::kDict: return json{{"dict", pairs(v.items())}};
      case Kind::kPersistent: return json{{"persistent", render(v.persistent_id())}};
      case Kind::kReduce:
      case Kind::kObject: {
        json body = json::object();
        body["callable"] = render(v.callable());
        body["args"] = render(v.args());
        if (v.call_op() == CallOp::kNewObjEx) body["kwargs"] = render(v.kwargs());
        body["append"] = seq(v.appended());
        body["setitems"] = pairs(v.set_items());
        body["build"] = seq(v.build_states());
        if (v.kind() == Kind::kReduce) return json{{"reduce", body}};
        body["op"] = std::string(call_op_name(v.call_op()));
        return json{{"object", body}};
      }
      default: return json{{"unexpected", std::string(kind_name(v.kind()))}};
    }
  }

 private:
  nlohmann::json seq(std::span<const Value> items) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : items) a.push_back(render(e));
    return a;
  }
  nlohmann::json pairs(std::span<const DictItem> items) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& kv : items) {
      nlohmann::json k = render(kv.key);
      nlohmann::json val = render(kv.value);
      a.push_back({std::move(k), std::move(val)});
    }
    return a;
  }
  std::unordered_map<const void*, std::size_t> ids_;
};
}  // namespace

nlohmann::json to_json(const Value& root) { return Renderer().render(root); }

void sort_sets(nlohmann::json& j) {
  if (j.is_object()) {
    for (auto& [key, val] : j.items()) {
      sort_sets(val);
      if ((key == "set" || key == "frozenset") && val.is_array()) std::sort(val.begin(), val.end());
    }
  } else if (j.is_array()) {
    for (auto& e : j) sort_sets(e);
  }
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace maploc::pickle::testing
