// value.h - the inert value tree a pickle stream turns into; handles into an arena owned by a Result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace maploc::pickle {

/// What a Value is. Nothing here was ever imported, called or evaluated:
/// kGlobal is a name, kReduce/kObject record the call that Python would make.
enum class Kind : std::uint8_t {
  kNone,
  kBool,
  kInt,        ///< any size; int64 fast path, larger ones kept exactly
  kFloat,
  kStr,        ///< UTF-8 text (lone surrogates kept as Python's 'surrogatepass' bytes)
  kBytes,
  kByteArray,
  kTuple,
  kList,
  kDict,       ///< insertion-ordered
  kSet,
  kFrozenSet,
  kGlobal,     ///< GLOBAL/STACK_GLOBAL/INST class: (module, name)
  kReduce,     ///< REDUCE: callable(*args), plus what later opcodes did to the result
  kObject,     ///< NEWOBJ, NEWOBJ_EX, INST or OBJ: cls.__new__(cls, *args)
  kPersistent, ///< a persistent id with no callback to resolve it
  kExternal,   ///< a caller handle, returned by the persistent-id callback
};

/// Lower-case name of a kind ("dict", "frozenset", ...).
std::string_view kind_name(Kind kind) noexcept;

/// Which opcode created a kReduce/kObject node.
enum class CallOp : std::uint8_t { kReduce, kNewObj, kNewObjEx, kInst, kObj };

/// pickletools name of the opcode that created a call node ("NEWOBJ").
std::string_view call_op_name(CallOp op) noexcept;

namespace detail {
struct Node;
class Builder;
}  // namespace detail

struct DictItem;

/// A handle to one value of the tree: scalars (none, bool, int64, float,
/// external handles) are held inline; everything else points at a node in
/// the arena of the Result that produced it.
///
/// Lifetime: a Value, and every view (string_view, span) obtained from it,
/// stays valid while the Result that produced it lives, and, for the
/// span overload of run(), while the input stream's bytes live.
/// Copying a Value copies the handle, never the node: two handles to one
/// memoized value compare equal with same_node() (tied weights rely on it).
///
/// Accessors of the wrong kind throw maploc::Error(kPickleTypeError).
class Value {
 public:
  /// None.
  Value() noexcept = default;
  static Value boolean(bool v) noexcept;
  static Value integer(std::int64_t v) noexcept;
  static Value real(double v) noexcept;
  /// An opaque caller handle (a persistent-id callback's result).
  static Value external(std::uint64_t handle) noexcept;

  Kind kind() const noexcept { return kind_; }
  bool is(Kind k) const noexcept { return kind_ == k; }
  bool is_none() const noexcept { return kind_ == Kind::kNone; }

  bool as_bool() const;
  /// True for kInt values that do not fit int64.
  bool is_big_int() const noexcept { return kind_ == Kind::kInt && boxed_; }
  /// kInt that fits int64 (kPickleTypeError otherwise; check is_big_int()).
  std::int64_t as_int() const;
  /// Any kInt in decimal, e.g. "-340282366920938463463374607431768211456";
  /// an int of more than max_digits digits (Limits::pickle_max_int_digits,
  /// judged by its bit length) prints as Python's hex() instead ("0x...").
  std::string int_decimal(std::uint64_t max_digits = 4300) const;
  /// Any kInt as minimal little-endian two's-complement bytes (0 -> empty).
  std::vector<std::uint8_t> int_bytes() const;
  double as_float() const;
  /// kStr: the UTF-8 text.
  std::string_view as_str() const;
  /// kBytes or kByteArray: the bytes.
  std::span<const std::uint8_t> as_bytes() const;

  /// kTuple, kList, kSet, kFrozenSet: the elements in order.
  std::span<const Value> elements() const;
  /// Element count of a tuple/list/set/frozenset, item count of a dict,
  /// byte count of str/bytes/bytearray.
  std::size_t size() const;
  /// kTuple/kList element i (kPickleTypeError when out of range).
  const Value& operator[](std::size_t i) const;
  /// kDict: the items in insertion order.
  std::span<const DictItem> items() const;
  /// kDict: the value under a str key, or nullptr.
  const Value* find(std::string_view key) const;

  /// kGlobal: module after fix_imports (`__builtin__` -> `builtins`, `copy_reg` -> `copyreg`).
  std::string_view global_module() const;
  /// kGlobal: the name.
  std::string_view global_name() const;
  /// kGlobal with this module and name?
  bool is_global(std::string_view module, std::string_view name) const noexcept;

  /// kReduce/kObject: the opcode that created it.
  CallOp call_op() const;
  /// kReduce: the callable; kObject: the class.
  const Value& callable() const;
  /// kReduce/kObject: the positional arguments (normally a tuple).
  const Value& args() const;
  /// kObject made by NEWOBJ_EX: the keyword-argument dict (None otherwise).
  const Value& kwargs() const;
  /// kReduce/kObject: items added later by APPEND/APPENDS (list subclasses).
  std::span<const Value> appended() const;
  /// kReduce/kObject: items added later by SETITEM/SETITEMS (OrderedDict), in order, duplicates kept.
  std::span<const DictItem> set_items() const;
  /// kReduce/kObject: the states given by BUILD, in order.
  std::span<const Value> build_states() const;

  /// kPersistent: the persistent id.
  const Value& persistent_id() const;
  /// kExternal: the caller's handle.
  std::uint64_t external_handle() const;

  /// Address identifying the node, nullptr for inline scalars.
  const void* identity() const noexcept { return boxed_ ? u_.node : nullptr; }
  /// Both handles refer to the same node (false for inline scalars).
  bool same_node(const Value& other) const noexcept {
    return boxed_ && other.boxed_ && u_.node == other.u_.node;
  }

 private:
  friend class detail::Builder;
  Value(Kind kind, detail::Node* node) noexcept : kind_(kind), boxed_(true) { u_.node = node; }
  detail::Node* node() const noexcept { return boxed_ ? u_.node : nullptr; }
  void require(Kind k) const;
  [[noreturn]] void wrong_kind(std::string_view wanted) const;

  // 16 bytes: scalars inline, no heap allocation per scalar opcode.
  Kind kind_ = Kind::kNone;
  bool boxed_ = false;  ///< u_.node is set
  union {
    bool b;
    std::int64_t i;
    double f;
    std::uint64_t handle;
    detail::Node* node;
  } u_{.i = 0};
};

/// One key/value pair of a dict (or of SETITEMS applied to a call node).
struct DictItem {
  Value key;
  Value value;
};

/// Python's str() of a dict key, as torch's state_dict keys print: str as
/// is, bytes as b'...', int in decimal, True/False/None, float by repr(),
/// tuples and frozensets of those by repr(); other kinds "<kind>".
std::string key_str(const Value& key);

}  // namespace maploc::pickle
