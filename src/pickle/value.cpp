// value.cpp - accessors of the inert value tree.
#include "maploc/pickle/value.h"

#include <string>

#include "maploc/error.h"
#include "node.h"
#include "repr.h"
#include "text.h"

namespace maploc::pickle {

using detail::BlobNode;
using detail::CallNode;
using detail::DictNode;
using detail::GlobalNode;
using detail::node_as;
using detail::PersistentNode;
using detail::SeqNode;

std::string_view kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kByteArray: return "bytearray";
    case Kind::kTuple: return "tuple";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kSet: return "set";
    case Kind::kFrozenSet: return "frozenset";
    case Kind::kGlobal: return "global";
    case Kind::kReduce: return "reduce";
    case Kind::kObject: return "object";
    case Kind::kPersistent: return "persistent";
    case Kind::kExternal: return "external";
  }
  return "?";
}

std::string_view call_op_name(CallOp op) noexcept {
  switch (op) {
    case CallOp::kReduce: return "REDUCE";
    case CallOp::kNewObj: return "NEWOBJ";
    case CallOp::kNewObjEx: return "NEWOBJ_EX";
    case CallOp::kInst: return "INST";
    case CallOp::kObj: return "OBJ";
  }
  return "?";
}

Value Value::boolean(bool v) noexcept {
  Value r;
  r.kind_ = Kind::kBool;
  r.u_.b = v;
  return r;
}
Value Value::integer(std::int64_t v) noexcept {
  Value r;
  r.kind_ = Kind::kInt;
  r.u_.i = v;
  return r;
}
Value Value::real(double v) noexcept {
  Value r;
  r.kind_ = Kind::kFloat;
  r.u_.f = v;
  return r;
}
Value Value::external(std::uint64_t handle) noexcept {
  Value r;
  r.kind_ = Kind::kExternal;
  r.u_.handle = handle;
  return r;
}

void Value::wrong_kind(std::string_view wanted) const {
  throw Error(ErrorCode::kPickleTypeError, Stage::kPickle,
              "expected " + std::string(wanted) + ", got " + std::string(kind_name(kind_)));
}

void Value::require(Kind k) const {
  if (kind_ != k) wrong_kind(kind_name(k));
}

bool Value::as_bool() const {
  require(Kind::kBool);
  return u_.b;
}

std::int64_t Value::as_int() const {
  require(Kind::kInt);
  if (boxed_) wrong_kind("int that fits int64");
  return u_.i;
}

std::string Value::int_decimal(std::uint64_t max_digits) const {
  require(Kind::kInt);
  if (boxed_) return detail::twos_to_decimal(node_as<BlobNode>(*this).data, max_digits);
  return std::to_string(u_.i);
}

std::vector<std::uint8_t> Value::int_bytes() const {
  require(Kind::kInt);
  if (boxed_) {
    auto d = node_as<BlobNode>(*this).data;
    return {d.begin(), d.end()};
  }
  return detail::int64_to_twos(u_.i);
}

double Value::as_float() const {
  require(Kind::kFloat);
  return u_.f;
}

std::string_view Value::as_str() const {
  require(Kind::kStr);
  auto d = node_as<BlobNode>(*this).data;
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

std::span<const std::uint8_t> Value::as_bytes() const {
  if (kind_ != Kind::kBytes && kind_ != Kind::kByteArray) wrong_kind("bytes or bytearray");
  return node_as<BlobNode>(*this).data;
}

std::span<const Value> Value::elements() const {
  if (kind_ != Kind::kTuple && kind_ != Kind::kList && kind_ != Kind::kSet &&
      kind_ != Kind::kFrozenSet)
    wrong_kind("tuple, list, set or frozenset");
  return node_as<SeqNode>(*this).items;
}

std::size_t Value::size() const {
  switch (kind_) {
    case Kind::kTuple:
    case Kind::kList:
    case Kind::kSet:
    case Kind::kFrozenSet: return node_as<SeqNode>(*this).items.size();
    case Kind::kDict: return node_as<DictNode>(*this).items.size();
    case Kind::kStr:
    case Kind::kBytes:
    case Kind::kByteArray: return node_as<BlobNode>(*this).data.size();
    default: wrong_kind("a sized value");
  }
}

const Value& Value::operator[](std::size_t i) const {
  if (kind_ != Kind::kTuple && kind_ != Kind::kList) wrong_kind("tuple or list");
  const auto& items = node_as<SeqNode>(*this).items;
  if (i >= items.size())
    throw Error(ErrorCode::kPickleTypeError, Stage::kPickle,
                "index " + std::to_string(i) + " out of range for a " +
                    std::string(kind_name(kind_)) + " of " + std::to_string(items.size()));
  return items[i];
}

std::span<const DictItem> Value::items() const {
  require(Kind::kDict);
  return node_as<DictNode>(*this).items;
}

const Value* Value::find(std::string_view key) const {
  for (const auto& item : items())
    if (item.key.kind() == Kind::kStr && item.key.as_str() == key) return &item.value;
  return nullptr;
}

std::string_view Value::global_module() const {
  require(Kind::kGlobal);
  return node_as<GlobalNode>(*this).module;
}

std::string_view Value::global_name() const {
  require(Kind::kGlobal);
  return node_as<GlobalNode>(*this).name;
}

bool Value::is_global(std::string_view module, std::string_view name) const noexcept {
  if (kind_ != Kind::kGlobal) return false;
  const auto& g = node_as<GlobalNode>(*this);
  return g.module == module && g.name == name;
}

namespace {
const CallNode& call_node(const Value& v, Kind kind) {
  if (kind != Kind::kReduce && kind != Kind::kObject)
    throw Error(ErrorCode::kPickleTypeError, Stage::kPickle,
                "expected reduce or object, got " + std::string(kind_name(kind)));
  return node_as<CallNode>(v);
}
}  // namespace

CallOp Value::call_op() const { return call_node(*this, kind_).op; }
const Value& Value::callable() const { return call_node(*this, kind_).callable; }
const Value& Value::args() const { return call_node(*this, kind_).args; }
const Value& Value::kwargs() const { return call_node(*this, kind_).kwargs; }
std::span<const Value> Value::appended() const { return call_node(*this, kind_).appended(); }
std::span<const DictItem> Value::set_items() const { return call_node(*this, kind_).set_items(); }
std::span<const Value> Value::build_states() const { return call_node(*this, kind_).states(); }

namespace {
void python_repr(const Value& v, std::string& out, bool as_str) {
  switch (v.kind()) {
    case Kind::kStr:
      if (as_str) {
        out += v.as_str();
      } else {
        detail::repr_str(node_as<BlobNode>(v).data, out);
      }
      return;
    case Kind::kBytes: detail::repr_bytes(v.as_bytes(), out); return;
    case Kind::kInt: out += v.int_decimal(); return;
    case Kind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Kind::kNone: out += "None"; return;
    case Kind::kFloat: detail::repr_float(v.as_float(), out); return;
    case Kind::kTuple:
    case Kind::kFrozenSet: {
      const auto elems = v.elements();
      const bool tuple = v.kind() == Kind::kTuple;
      if (!tuple && elems.empty()) {
        out += "frozenset()";
        return;
      }
      out += tuple ? "(" : "frozenset({";
      for (std::size_t i = 0; i < elems.size(); ++i) {
        if (i) out += ", ";
        python_repr(elems[i], out, false);
      }
      out += tuple ? (elems.size() == 1 ? ",)" : ")") : "})";
      return;
    }
    default: out += "<" + std::string(kind_name(v.kind())) + ">"; return;
  }
}
}  // namespace

std::string key_str(const Value& key) {
  std::string out;
  python_repr(key, out, true);
  return out;
}

const Value& Value::persistent_id() const {
  require(Kind::kPersistent);
  return node_as<PersistentNode>(*this).pid;
}

std::uint64_t Value::external_handle() const {
  require(Kind::kExternal);
  return u_.handle;
}

}  // namespace maploc::pickle
