// machine.cpp - the inert pickle machine: one loop over the shared opcode table, no imports, no calls.
#include "maploc/pickle/machine.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "keys.h"
#include "node.h"
#include "reader.h"
#include "text.h"
#include "support/memory_guard.h"

namespace maploc::pickle {

using detail::Arena;
using detail::BlobNode;
using detail::Builder;
using detail::ByteSpan;
using detail::CallNode;
using detail::DictNode;
using detail::GlobalNode;
using detail::GlobalRole;
using detail::Node;
using detail::node_as;
using detail::PersistentNode;
using detail::SeqNode;

// The value tree of a torch pickle takes about eight times the stream's bytes
// (30,000 tensors: a 3 MB stream, 24 MB of nodes): the first chunk is sized
// for that, so that the tree is built in a few huge pages (only what is
// touched is ever committed), at most 64 MiB at first: a legacy file's
// stream runs on over its storages' bytes.
Result::Result(std::size_t stream_bytes)
    : arena_(std::make_unique<Arena>(std::clamp<std::size_t>(stream_bytes * 8, std::size_t{64} << 10,
                                                             std::size_t{64} << 20))) {}
Result::Result(Result&&) noexcept = default;
Result& Result::operator=(Result&&) noexcept = default;
Result::~Result() = default;
std::span<const Value> Result::globals() const noexcept { return arena_->global_values; }

namespace {
std::string str_of(ByteSpan s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }
std::string_view view_of(ByteSpan s) {
  return {reinterpret_cast<const char*>(s.data()), s.size()};
}
std::string n(std::uint64_t v) { return std::to_string(v); }
}  // namespace

/// One run over one stream. Every handler reads its argument through the
/// Reader (bounds and length limits) and checks its stack operands'
/// kinds (CVE-2026-24747: SETITEM on a non-dict) before touching them.
class Machine {
 public:
  Machine(std::span<const std::uint8_t> data, const Options& options, Result& result)
      : in_(data, options.start_offset, options.limits, options.stream_name),
        options_(options),
        limits_(options.limits),
        result_(result),
        arena_(*result.arena_) {
    // Torch pickles memoize after nearly everything: one value per 10 bytes
    // in a state_dict of small tensors, and an entry takes at least 3 bytes
    // (an opcode and BINPUT). Reserved address space costs nothing until it
    // is touched, so reserve for the densest stream: a regrowth would copy
    // the memo into fresh 4 KiB pages. A stream with trailing data (legacy,
    // 0.1.x tar) has no known end: what follows it is storages or further
    // streams, so it reserves 2^12 entries and grows; one 0.1.x tar header
    // per record each reserving for all the records after it was n^2 bytes
    // allocated (cheap as address space, quadratic under AddressSanitizer).
    const std::uint64_t stream_bytes = data.size() - std::min<std::uint64_t>(options.start_offset, data.size());
    const std::uint64_t up_front = options.allow_trailing ? std::uint64_t{1} << 12 : std::uint64_t{1} << 20;
    dense_.reserve(std::min<std::uint64_t>({stream_bytes / 3, limits_.pickle_max_memo_entries, up_front}));
    maploc::detail::prefer_huge_pages(dense_.data(), dense_.capacity() * sizeof(Value));
  }

  void run() {
    for (;;) {
      const OpcodeInfo& info = in_.next_opcode();
      const detail::RawArg arg = in_.read_arg(info.arg);
      ++result_.opcode_count_;
      if (info.code == Op::STOP) {
        result_.root_ = pop();
        break;
      }
      step(info.code, arg);
    }
    result_.end_offset_ = in_.pos();
    result_.protocol_ = proto_;
    if (depths_stale_) check_depth(result_.root_);
  }

 private:
  // ---- stack and marks (marks are fences on the one stack, as in _pickle.c) ----
  std::size_t fence() const noexcept { return marks_.empty() ? 0 : marks_.back(); }

  [[gnu::always_inline]] void push(const Value& v) {
    if (stack_.size() + marks_.size() >= limits_.pickle_max_stack_depth) [[unlikely]] too_deep();
    stack_.push_back(v);
  }

  [[gnu::always_inline]] void need(std::size_t count) {
    if (stack_.size() - fence() < count) [[unlikely]] underflow(count);
  }

  // The failures of push() and need(), out of line so that both inline into every handler.
  [[noreturn, gnu::cold, gnu::noinline]] void too_deep() const {
    in_.fail(ErrorCode::kPickleLimitStackDepth,
             "stack depth exceeds " + n(limits_.pickle_max_stack_depth) + " (raise Limits::pickle_max_stack_depth)");
  }

  [[noreturn, gnu::cold, gnu::noinline]] void underflow(std::size_t count) const {
    in_.fail(ErrorCode::kPickleStackUnderflow,
             "needs " + n(count) + " stack item(s), " + n(stack_.size() - fence()) +
                 (marks_.empty() ? " on the stack" : " above the MARK"));
  }

  [[gnu::always_inline]] Value pop() {
    need(1);
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }

  [[gnu::always_inline]] Value& top() {
    need(1);
    return stack_.back();
  }

  /// Pops the topmost MARK; returns where its items start on the stack.
  std::size_t pop_mark() {
    if (marks_.empty()) in_.fail(ErrorCode::kPickleMarkNotFound, "no MARK on the stack");
    const std::size_t at = marks_.back();
    marks_.pop_back();
    return at;
  }

  // ---- allocation accounting and limits ----
  [[gnu::always_inline]] void account(std::uint64_t bytes) {
    if (bytes > limits_.pickle_max_total_bytes - allocated_ ||
        allocated_ > limits_.pickle_max_total_bytes)
      in_.fail(ErrorCode::kPickleLimitTotalBytes,
               "values would take more than " + n(limits_.pickle_max_total_bytes) +
                   " bytes (raise Limits::pickle_max_total_bytes)");
    allocated_ += bytes;
  }

  void check_items(std::size_t have, std::size_t adding) {
    if (adding > limits_.pickle_max_container_items ||
        have > limits_.pickle_max_container_items - adding)
      in_.fail(ErrorCode::kPickleLimitContainerItems,
               "container would hold " + n(have) + " + " + n(adding) + " items, more than " +
                   n(limits_.pickle_max_container_items) +
                   " (raise Limits::pickle_max_container_items)");
  }

  void nest(Node& parent, const Value& child) {
    Node* c = Builder::node(child);
    if (c == nullptr) return;
    c->has_parent = true;
    if (c->depth < parent.depth) return;
    if (c->depth >= limits_.pickle_max_nesting_depth)
      in_.fail(ErrorCode::kPickleLimitNesting,
               "values nest deeper than " + n(limits_.pickle_max_nesting_depth) +
                   " (raise Limits::pickle_max_nesting_depth)");
    // A node that already sits inside another grew deeper: its ancestors'
    // depths are now lower bounds, and the final walk must look.
    if (parent.has_parent) depths_stale_ = true;
    parent.depth = c->depth + 1;
  }

  // ---- node factories ----
  Value blob(Kind kind, ByteSpan data) {
    account(sizeof(BlobNode));
    return Builder::box(kind, &arena_.blobs.emplace_back(kind, data));
  }

  ByteSpan keep(detail::ByteVec&& bytes) {
    account(bytes.size());
    const auto& owned = arena_.owned.emplace_back(std::move(bytes));
    return owned;
  }

  Value seq(Kind kind, std::span<const Value> items) {
    check_items(0, items.size());
    account(sizeof(SeqNode) + items.size() * sizeof(Value));
    auto& node = arena_.seqs.emplace_back(kind, arena_.memory);
    if (kind == Kind::kFrozenSet || kind == Kind::kSet) {
      for (const auto& e : items) add_to_set(node, e);
    } else {
      node.items.assign(items.begin(), items.end());
      for (const auto& e : items) nest(node, e);
    }
    return Builder::box(kind, &node);
  }

  Value dict() {
    account(sizeof(DictNode));
    return Builder::box(Kind::kDict, &arena_.dicts.emplace_back(arena_.memory));
  }

  Value call(Kind kind, CallOp op, Value callable, Value args, Value kwargs = {}) {
    account(sizeof(CallNode));
    auto& node = arena_.calls.emplace_back(kind, op, callable, args, kwargs);
    nest(node, callable);
    nest(node, args);
    nest(node, kwargs);
    return Builder::box(kind, &node);
  }

  Value integer(const detail::ParsedInt& p) {
    if (p.fits) return Value::integer(p.small);
    detail::ByteVec copy = p.big;
    return blob(Kind::kInt, keep(std::move(copy)));
  }

  Value str_from_utf8(ByteSpan data) {
    if (!detail::valid_utf8_surrogatepass(data))
      in_.fail(ErrorCode::kPickleBadArgument, "text is not valid UTF-8");
    return blob(Kind::kStr, data);
  }

  Value str_from_latin1(ByteSpan data) {
    if (detail::is_ascii(data)) return blob(Kind::kStr, data);
    detail::ByteVec utf8;
    detail::latin1_to_utf8(data, utf8);
    return blob(Kind::kStr, keep(std::move(utf8)));
  }

  Value python2_string(ByteSpan data) {
    return options_.python2_strings == StringDecoding::kBytes ? blob(Kind::kBytes, data)
                                                              : str_from_latin1(data);
  }

  // ---- container mutation ----
  detail::CallExtras& extras(CallNode& c) {
    if (c.extra == nullptr) {
      account(sizeof(detail::CallExtras));
      c.extra = &arena_.call_extras.emplace_back(arena_.memory);
    }
    return *c.extra;
  }

  void add_to_set(SeqNode& set, const Value& e) {
    check_items(set.items.size(), 1);
    account(sizeof(Value));
    if (!detail::set_add(set, e))
      in_.fail(ErrorCode::kPickleTypeError,
               "unhashable " + std::string(kind_name(e.kind())) + " in a set");
    nest(set, e);
  }

  void set_item(Value& target, const Value& key, const Value& value) {
    if (target.kind() == Kind::kDict) {
      auto& d = node_as<DictNode>(target);
      check_items(d.items.size(), 1);
      account(sizeof(DictItem));
      if (!detail::dict_set(d, key, value))
        in_.fail(ErrorCode::kPickleTypeError,
                 "unhashable dict key of kind " + std::string(kind_name(key.kind())));
      nest(d, key);
      nest(d, value);
    } else if (target.kind() == Kind::kReduce || target.kind() == Kind::kObject) {
      // An OrderedDict or other mapping rebuilt by a call: record the items
      // as a dict keeps them (a key set twice keeps its place, takes the new value).
      auto& c = node_as<CallNode>(target);
      auto& extra = extras(c);
      check_items(extra.set_items.size(), 1);
      account(sizeof(DictItem));
      if (!detail::items_set(extra.set_items, extra.index, key, value)) {
        if (is_dict_class(c.callable))
          in_.fail(ErrorCode::kPickleTypeError,
                   "unhashable dict key of kind " + std::string(kind_name(key.kind())));
        extra.set_items.push_back({key, value});  // an unknown class's __setitem__: keep every item
      }
      nest(c, key);
      nest(c, value);
    } else {
      in_.fail(ErrorCode::kPickleTypeError,
               "cannot set items on a " + std::string(kind_name(target.kind())));
    }
  }

  void append(Value& target, std::span<const Value> items) {
    std::pmr::vector<Value>* dest = nullptr;
    Node* node = Builder::node(target);
    if (target.kind() == Kind::kList)
      dest = &node_as<SeqNode>(target).items;
    else if (target.kind() == Kind::kReduce || target.kind() == Kind::kObject)
      dest = &extras(node_as<CallNode>(target)).appended;  // a list subclass rebuilt by a call
    else
      in_.fail(ErrorCode::kPickleTypeError,
               "cannot append to a " + std::string(kind_name(target.kind())));
    check_items(dest->size(), items.size());
    account(items.size() * sizeof(Value));
    for (const auto& e : items) nest(*node, e);
    dest->insert(dest->end(), items.begin(), items.end());
  }

  // ---- memo: a map, never an array sized by a file index (CVE-2018-20406) ----
  void memo_put(std::uint64_t index) {
    if (index >= limits_.pickle_max_memo_entries)
      in_.fail(ErrorCode::kPickleLimitMemo,
               "index " + n(index) + " exceeds memo limit " + n(limits_.pickle_max_memo_entries) +
                   " (raise Limits::pickle_max_memo_entries)");
    const Value& v = top();
    if (index < dense_.size()) {
      dense_[index] = v;
    } else if (index == dense_.size() && sparse_.empty()) {
      account(sizeof(Value));
      dense_.push_back(v);
    } else {
      auto it = sparse_.find(index);
      if (it == sparse_.end()) {
        account(sizeof(Value) * 4);
        sparse_.emplace(index, v);
      } else {
        it->second = v;
      }
    }
  }

  void memo_get(std::uint64_t index) {
    if (index < dense_.size()) {
      push(dense_[index]);
      return;
    }
    auto it = sparse_.find(index);
    if (it == sparse_.end())
      in_.fail(ErrorCode::kPickleMemoMissing, "memo index " + n(index) + " was never stored");
    push(it->second);
  }

  std::uint64_t memo_size() const noexcept { return dense_.size() + sparse_.size(); }

  std::uint64_t text_index(ByteSpan line) {
    detail::ParsedInt p;
    if (const char* err = detail::parse_decimal(view_of(line), p))
      in_.fail(ErrorCode::kPickleBadArgument, std::string(err) + ": '" + str_of(line) + "'");
    if (!p.fits || p.small < 0)
      in_.fail(ErrorCode::kPickleBadArgument, "negative or huge memo index '" + str_of(line) + "'");
    return static_cast<std::uint64_t>(p.small);
  }

  // ---- globals: a name, never an import ----
  Value global(std::string_view module, std::string_view name) {
    if (proto_ < 3) {  // Python's fix_imports, limited to the two module renames
      if (module == "__builtin__") module = "builtins";
      else if (module == "copy_reg") module = "copyreg";
    }
    account(sizeof(GlobalNode));
    Value v = Builder::box(Kind::kGlobal, &arena_.globals.emplace_back(module, name, role_of(module, name)));
    arena_.global_values.push_back(v);
    return v;
  }

  static GlobalRole role_of(std::string_view module, std::string_view name) {
    if (module == "_codecs" && name == "encode") return GlobalRole::kCodecsEncode;
    if (module == "builtins" && name == "bytearray") return GlobalRole::kByteArray;
    if (module == "builtins" && name == "dict") return GlobalRole::kDict;
    if (module != "collections") return GlobalRole::kOther;
    if (name == "OrderedDict") return GlobalRole::kOrderedDict;
    if (name == "defaultdict") return GlobalRole::kDefaultDict;
    return name == "Counter" ? GlobalRole::kCounter : GlobalRole::kOther;
  }

  static GlobalRole role(const Value& v) {
    return v.kind() == Kind::kGlobal ? node_as<GlobalNode>(v).role : GlobalRole::kOther;
  }

  Value global_from_lines(ByteSpan module, ByteSpan name) {
    if (!detail::valid_utf8_surrogatepass(module) || !detail::valid_utf8_surrogatepass(name))
      in_.fail(ErrorCode::kPickleBadArgument, "module or name is not valid UTF-8");
    return global(view_of(module), view_of(name));
  }

  // ---- the only calls interpreted, as data transformations ----
  static bool is_latin1_name(std::string_view e) {
    return e == "latin1" || e == "latin-1" || e == "latin_1" || e == "iso-8859-1" ||
           e == "iso8859-1" || e == "l1";
  }

  /// _codecs.encode(text[, 'latin1']) and builtins.bytearray(...); nullopt: keep the REDUCE inert.
  std::optional<Value> interpret(const Value& callable, const Value& args) {
    const bool encode = role(callable) == GlobalRole::kCodecsEncode;
    const bool bytearray = role(callable) == GlobalRole::kByteArray;
    if ((!encode && !bytearray) || args.kind() != Kind::kTuple) return std::nullopt;
    const auto& a = node_as<SeqNode>(args).items;
    if (bytearray && a.empty()) return blob(Kind::kByteArray, {});
    if (bytearray && a.size() == 1 && (a[0].kind() == Kind::kBytes || a[0].kind() == Kind::kByteArray))
      return blob(Kind::kByteArray, node_as<BlobNode>(a[0]).data);
    if (a.empty() || a.size() > 2 || a[0].kind() != Kind::kStr) return std::nullopt;
    if (a.size() == 2 && a[1].kind() != Kind::kStr) return std::nullopt;
    const Kind kind = encode ? Kind::kBytes : Kind::kByteArray;
    const ByteSpan text = node_as<BlobNode>(a[0]).data;
    const std::string_view enc = a.size() == 2 ? a[1].as_str() : std::string_view("utf-8");
    if (encode && (enc == "utf-8" || enc == "utf8" || enc == "utf_8")) {
      return blob(kind, text);
    }
    if (!is_latin1_name(enc)) return std::nullopt;
    if (detail::is_ascii(text)) return blob(kind, text);
    detail::ByteVec bytes;
    if (!detail::utf8_to_latin1(text, bytes))
      in_.fail(ErrorCode::kPickleBadArgument, "text for 'latin1' encoding has a code point above U+00FF");
    return blob(kind, keep(std::move(bytes)));
  }

  static bool is_dict_class(const Value& c) { return role(c) >= GlobalRole::kOrderedDict; }

  /// OrderedDict(pairs) and dict(pairs | mapping | nothing) as the mapping they
  /// build: Python 2's OrderedDict.__reduce__ passes one list of [key, value]
  /// lists. An OrderedDict stays a call node (its BUILD state is attributes),
  /// its items recorded as SETITEMS records them. nullopt: keep the REDUCE.
  std::optional<Value> mapping(const Value& callable, const Value& args) {
    const bool ordered = role(callable) == GlobalRole::kOrderedDict;
    if ((!ordered && role(callable) != GlobalRole::kDict) || args.kind() != Kind::kTuple) return std::nullopt;
    const auto& a = node_as<SeqNode>(args).items;
    if (a.size() > 1 || (ordered && a.empty())) return std::nullopt;
    Value target = ordered ? call(Kind::kReduce, CallOp::kReduce, callable, seq(Kind::kTuple, {})) : dict();
    if (a.empty()) return target;
    if (a[0].kind() == Kind::kDict) {
      for (const auto& item : node_as<DictNode>(a[0]).items) set_item(target, item.key, item.value);
      return target;
    }
    if (a[0].kind() != Kind::kList && a[0].kind() != Kind::kTuple) return std::nullopt;
    const auto& pairs = node_as<SeqNode>(a[0]).items;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const Kind k = pairs[i].kind();
      if ((k != Kind::kList && k != Kind::kTuple) || node_as<SeqNode>(pairs[i]).items.size() != 2)
        in_.fail(ErrorCode::kPickleTypeError,
                 std::string(ordered ? "OrderedDict" : "dict") + " argument element #" + n(i) +
                     " is not a (key, value) pair but a " + std::string(kind_name(k)));
      const auto& kv = node_as<SeqNode>(pairs[i]).items;
      set_item(target, kv[0], kv[1]);
    }
    return target;
  }

  Value persistent(const Value& pid) {
    if (!options_.persistent_load) {
      account(sizeof(PersistentNode));
      auto& node = arena_.persistents.emplace_back(pid);
      nest(node, pid);
      return Builder::box(Kind::kPersistent, &node);
    }
    std::optional<Value> v = options_.persistent_load(pid, in_.op_offset());
    if (!v) in_.fail(ErrorCode::kPicklePersistentId, "the persistent-id callback rejected the id");
    return *v;
  }

  Value tuple_from(std::size_t at) {
    Value t = seq(Kind::kTuple, std::span<const Value>(stack_).subspan(at));
    stack_.resize(at);
    return t;
  }

  void step(Op op, const detail::RawArg& arg);
  void check_depth(const Value& root);

  detail::Reader in_;
  const Options& options_;
  const Limits& limits_;
  Result& result_;
  Arena& arena_;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Value> dense_;                          // memo indices 0..n-1 stored in order
  std::unordered_map<std::uint64_t, Value, maploc::detail::SeededWordHash> sparse_;  // any other memo index
  std::uint64_t allocated_ = 0;
  bool depths_stale_ = false;  ///< a nested node grew deeper after it was nested (see nest())
  std::uint8_t proto_ = 0;
};

void Machine::step(Op op, const detail::RawArg& arg) {
  switch (op) {
    // ---- scalars ----
    case Op::NONE: push(Value()); break;
    case Op::NEWTRUE: push(Value::boolean(true)); break;
    case Op::NEWFALSE: push(Value::boolean(false)); break;
    case Op::BININT: push(Value::integer(arg.i)); break;
    case Op::BININT1:
    case Op::BININT2: push(Value::integer(static_cast<std::int64_t>(arg.u))); break;
    case Op::INT: {
      const std::string_view text = view_of(arg.data);
      if (text == "00" || text == "01") {  // protocol 0's booleans
        push(Value::boolean(text == "01"));
        break;
      }
      [[fallthrough]];
    }
    case Op::LONG: {
      std::string_view text = view_of(arg.data);
      if (op == Op::LONG && !text.empty() && text.back() == 'L') text.remove_suffix(1);
      detail::ParsedInt p;
      if (const char* err = detail::parse_decimal(text, p))
        in_.fail(ErrorCode::kPickleBadArgument, std::string(err) + ": '" + std::string(text) + "'");
      push(integer(p));
      break;
    }
    case Op::LONG1:
    case Op::LONG4: {
      std::int64_t small = 0;
      if (detail::twos_to_int64(arg.data, small)) {
        push(Value::integer(small));
        break;
      }
      ByteSpan d = arg.data;  // drop redundant sign bytes so int_bytes() is minimal
      while (d.size() >= 2 && ((d.back() == 0 && !(d[d.size() - 2] & 0x80)) ||
                               (d.back() == 0xFF && (d[d.size() - 2] & 0x80))))
        d = d.first(d.size() - 1);
      push(blob(Kind::kInt, d));
      break;
    }
    case Op::FLOAT: {
      double f = 0;
      if (const char* err = detail::parse_float(view_of(arg.data), f))
        in_.fail(ErrorCode::kPickleBadArgument, std::string(err) + ": '" + str_of(arg.data) + "'");
      push(Value::real(f));
      break;
    }
    case Op::BINFLOAT: push(Value::real(arg.f)); break;

    // ---- text and bytes ----
    case Op::STRING: {
      const ByteSpan d = arg.data;
      if (d.size() < 2 || d.front() != d.back() || (d.front() != '\'' && d.front() != '"'))
        in_.fail(ErrorCode::kPickleBadArgument, "the STRING argument must be quoted");
      detail::ByteVec bytes;
      if (const char* err = detail::escape_decode(d.subspan(1, d.size() - 2), bytes))
        in_.fail(ErrorCode::kPickleBadArgument, err);
      push(python2_string(keep(std::move(bytes))));
      break;
    }
    case Op::BINSTRING:
    case Op::SHORT_BINSTRING: push(python2_string(arg.data)); break;
    case Op::UNICODE: {
      const ByteSpan d = arg.data;
      if (detail::is_ascii(d) && std::find(d.begin(), d.end(), '\\') == d.end()) {
        push(blob(Kind::kStr, d));
        break;
      }
      detail::ByteVec utf8;
      if (const char* err = detail::raw_unicode_escape_decode(d, utf8))
        in_.fail(ErrorCode::kPickleBadArgument, err);
      push(blob(Kind::kStr, keep(std::move(utf8))));
      break;
    }
    case Op::SHORT_BINUNICODE:
    case Op::BINUNICODE:
    case Op::BINUNICODE8: push(str_from_utf8(arg.data)); break;
    case Op::SHORT_BINBYTES:
    case Op::BINBYTES:
    case Op::BINBYTES8: push(blob(Kind::kBytes, arg.data)); break;
    case Op::BYTEARRAY8: push(blob(Kind::kByteArray, arg.data)); break;

    // ---- containers ----
    case Op::EMPTY_TUPLE: push(seq(Kind::kTuple, {})); break;
    case Op::EMPTY_LIST: push(seq(Kind::kList, {})); break;
    case Op::EMPTY_DICT: push(dict()); break;
    case Op::EMPTY_SET: push(seq(Kind::kSet, {})); break;
    case Op::TUPLE1:
    case Op::TUPLE2:
    case Op::TUPLE3: {
      const std::size_t count = static_cast<std::size_t>(op) - static_cast<std::size_t>(Op::TUPLE1) + 1;
      need(count);
      push(tuple_from(stack_.size() - count));
      break;
    }
    case Op::TUPLE: push(tuple_from(pop_mark())); break;
    case Op::LIST: {
      const std::size_t at = pop_mark();
      Value v = seq(Kind::kList, std::span<const Value>(stack_).subspan(at));
      stack_.resize(at);
      push(v);
      break;
    }
    case Op::FROZENSET: {
      const std::size_t at = pop_mark();
      Value v = seq(Kind::kFrozenSet, std::span<const Value>(stack_).subspan(at));
      stack_.resize(at);
      push(v);
      break;
    }
    case Op::DICT: {
      const std::size_t at = pop_mark();
      if ((stack_.size() - at) % 2 != 0)
        in_.fail(ErrorCode::kPickleBadArgument, "odd number of items for a dict");
      Value d = dict();
      for (std::size_t k = at; k < stack_.size(); k += 2) set_item(d, stack_[k], stack_[k + 1]);
      stack_.resize(at);
      push(d);
      break;
    }
    case Op::APPEND: {
      const Value v = pop();
      append(top(), {&v, 1});
      break;
    }
    case Op::APPENDS: {
      const std::size_t at = pop_mark();
      const std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
      stack_.resize(at);
      append(top(), items);
      break;
    }
    case Op::SETITEM: {
      const Value value = pop();
      const Value key = pop();
      set_item(top(), key, value);
      break;
    }
    case Op::SETITEMS: {
      const std::size_t at = pop_mark();
      if ((stack_.size() - at) % 2 != 0)
        in_.fail(ErrorCode::kPickleBadArgument, "odd number of items for SETITEMS");
      // the target sits just below the MARK, above the next fence
      if (at == 0 || at - 1 < fence())
        in_.fail(ErrorCode::kPickleStackUnderflow, "no dict below the MARK");
      Value target = stack_[at - 1];
      for (std::size_t k = at; k < stack_.size(); k += 2) set_item(target, stack_[k], stack_[k + 1]);
      stack_.resize(at);
      break;
    }
    case Op::ADDITEMS: {
      const std::size_t at = pop_mark();
      if (at == 0 || at - 1 < fence())
        in_.fail(ErrorCode::kPickleStackUnderflow, "no set below the MARK");
      Value target = stack_[at - 1];
      if (target.kind() != Kind::kSet)
        in_.fail(ErrorCode::kPickleTypeError,
                 "cannot add items to a " + std::string(kind_name(target.kind())));
      for (std::size_t k = at; k < stack_.size(); ++k) add_to_set(node_as<SeqNode>(target), stack_[k]);
      stack_.resize(at);
      break;
    }

    // ---- stack manipulation ----
    case Op::MARK:
      if (stack_.size() + marks_.size() >= limits_.pickle_max_stack_depth)
        in_.fail(ErrorCode::kPickleLimitStackDepth,
                 "stack depth exceeds " + n(limits_.pickle_max_stack_depth) +
                     " (raise Limits::pickle_max_stack_depth)");
      marks_.push_back(stack_.size());
      break;
    case Op::POP:
      if (stack_.size() > fence())
        stack_.pop_back();
      else if (!marks_.empty())
        marks_.pop_back();  // Python's POP discards a MARK when nothing is above it
      else
        need(1);
      break;
    case Op::POP_MARK: stack_.resize(pop_mark()); break;
    case Op::DUP: {
      const Value v = top();
      push(v);
      break;
    }

    // ---- memo ----
    case Op::GET: memo_get(text_index(arg.data)); break;
    case Op::BINGET:
    case Op::LONG_BINGET: memo_get(arg.u); break;
    case Op::PUT: memo_put(text_index(arg.data)); break;
    case Op::BINPUT:
    case Op::LONG_BINPUT: memo_put(arg.u); break;
    case Op::MEMOIZE: memo_put(memo_size()); break;

    // ---- globals and the calls Python would make ----
    case Op::GLOBAL: push(global_from_lines(arg.data, arg.data2)); break;
    case Op::STACK_GLOBAL: {
      const Value name = pop();
      const Value module = pop();
      if (module.kind() != Kind::kStr || name.kind() != Kind::kStr)
        in_.fail(ErrorCode::kPickleTypeError, "module and name must be str");
      push(global(module.as_str(), name.as_str()));
      break;
    }
    case Op::REDUCE: {
      const Value args = pop();
      const Value callable = pop();
      std::optional<Value> v = interpret(callable, args);
      if (!v) v = mapping(callable, args);
      push(v ? *v : call(Kind::kReduce, CallOp::kReduce, callable, args));
      break;
    }
    case Op::NEWOBJ: {
      const Value args = pop();
      const Value cls = pop();
      push(call(Kind::kObject, CallOp::kNewObj, cls, args));
      break;
    }
    case Op::NEWOBJ_EX: {
      const Value kwargs = pop();
      const Value args = pop();
      const Value cls = pop();
      push(call(Kind::kObject, CallOp::kNewObjEx, cls, args, kwargs));
      break;
    }
    case Op::INST: {
      const Value cls = global_from_lines(arg.data, arg.data2);
      const Value args = tuple_from(pop_mark());
      push(call(Kind::kObject, CallOp::kInst, cls, args));
      break;
    }
    case Op::OBJ: {
      const std::size_t at = pop_mark();
      if (stack_.size() == at) in_.fail(ErrorCode::kPickleStackUnderflow, "no class after the MARK");
      const Value cls = stack_[at];
      const Value args = seq(Kind::kTuple, std::span<const Value>(stack_).subspan(at + 1));
      stack_.resize(at);
      push(call(Kind::kObject, CallOp::kObj, cls, args));
      break;
    }
    case Op::BUILD: {
      const Value state = pop();
      Value& inst = top();
      if (inst.kind() != Kind::kReduce && inst.kind() != Kind::kObject)
        in_.fail(ErrorCode::kPickleTypeError,
                 "cannot apply state to a " + std::string(kind_name(inst.kind())));
      auto& c = node_as<CallNode>(inst);
      account(sizeof(Value));
      extras(c).states.push_back(state);
      nest(c, state);
      break;
    }
    case Op::PERSID: {
      if (!detail::is_ascii(arg.data)) in_.fail(ErrorCode::kPickleBadArgument, "persistent id is not ASCII");
      push(persistent(blob(Kind::kStr, arg.data)));
      break;
    }
    case Op::BINPERSID: push(persistent(pop())); break;

    // ---- framing and protocol ----
    case Op::PROTO:
      if (arg.u > kHighestProtocol)
        in_.fail(ErrorCode::kPickleBadArgument, "unsupported pickle protocol " + n(arg.u));
      proto_ = static_cast<std::uint8_t>(arg.u);
      break;
    case Op::FRAME: in_.enter_frame(arg.u); break;

    // ---- what needs Python ----
    case Op::EXT1:
    case Op::EXT2:
    case Op::EXT4:
      in_.fail(ErrorCode::kPickleUnsupportedOpcode,
               "extension code " + std::to_string(op == Op::EXT4 ? arg.i : static_cast<std::int64_t>(arg.u)) +
                   " needs copyreg's extension registry, which a reader without Python does not have");
    case Op::NEXT_BUFFER:
    case Op::READONLY_BUFFER:
      in_.fail(ErrorCode::kPickleUnsupportedOpcode, "out-of-band buffers are not supported");
    case Op::STOP: break;  // handled by run()
  }
}

/// The incremental depths are exact for immutable values but only lower
/// bounds for lists/dicts filled through the memo, so the finished tree is
/// walked once (iteratively, each node once) to bound the depth any
/// recursive consumer will see.
void Machine::check_depth(const Value& root) {
  struct Frame {
    Node* node;
    std::size_t next;
  };
  auto child = [](Node* node, std::size_t i) -> Node* {
    auto pick = [](const Value& v) { return Builder::node(v); };
    switch (node->kind) {
      case Kind::kTuple:
      case Kind::kList:
      case Kind::kSet:
      case Kind::kFrozenSet: {
        auto& items = static_cast<SeqNode*>(node)->items;
        return i < items.size() ? pick(items[i]) : reinterpret_cast<Node*>(-1);
      }
      case Kind::kDict: {
        auto& items = static_cast<DictNode*>(node)->items;
        if (i >= items.size() * 2) return reinterpret_cast<Node*>(-1);
        return pick(i % 2 ? items[i / 2].value : items[i / 2].key);
      }
      case Kind::kReduce:
      case Kind::kObject: {
        auto* c = static_cast<CallNode*>(node);
        if (i == 0) return pick(c->callable);
        if (i == 1) return pick(c->args);
        if (i == 2) return pick(c->kwargs);
        i -= 3;
        const auto appended = c->appended();
        const auto set_items = c->set_items();
        const auto states = c->states();
        if (i < appended.size()) return pick(appended[i]);
        i -= appended.size();
        if (i < set_items.size() * 2) return pick(i % 2 ? set_items[i / 2].value : set_items[i / 2].key);
        i -= set_items.size() * 2;
        if (i < states.size()) return pick(states[i]);
        return reinterpret_cast<Node*>(-1);
      }
      case Kind::kPersistent:
        return i == 0 ? pick(static_cast<PersistentNode*>(node)->pid) : reinterpret_cast<Node*>(-1);
      default: return reinterpret_cast<Node*>(-1);
    }
  };
  Node* start = Builder::node(root);
  if (start == nullptr) return;
  const Node* kEnd = reinterpret_cast<Node*>(-1);
  std::vector<Frame> path{{start, 0}};
  start->visit = 1;
  while (!path.empty()) {
    Frame& f = path.back();
    Node* c = child(f.node, f.next++);
    if (c == kEnd) {
      path.pop_back();
      continue;
    }
    if (c == nullptr || c->visit == 1) continue;
    c->visit = 1;
    if (path.size() >= limits_.pickle_max_nesting_depth)
      throw Error(ErrorCode::kPickleLimitNesting, Stage::kPickle,
                  "STOP: the value nests deeper than " + n(limits_.pickle_max_nesting_depth) +
                      " (raise Limits::pickle_max_nesting_depth)",
                  result_.end_offset_ - 1, options_.stream_name);
    path.push_back({c, 0});
  }
}

Result run(std::span<const std::uint8_t> stream, const Options& options) {
  if (options.start_offset > stream.size())
    throw Error(ErrorCode::kInvalidArgument, Stage::kPickle,
                "start offset " + std::to_string(options.start_offset) + " is past the end (" +
                    std::to_string(stream.size()) + " bytes)",
                options.start_offset, options.stream_name);
  // Back-to-back pickles (allow_trailing: the tar format's thousands of small
  // headers) must not each get an arena sized to the rest of the stream.
  const std::size_t rest = stream.size() - static_cast<std::size_t>(options.start_offset);
  Result result(options.allow_trailing ? std::min<std::size_t>(rest, 8 << 10) : rest);
  maploc::detail::guard_memory(Stage::kPickle, options.stream_name, [&] { Machine(stream, options, result).run(); });
  if (!options.allow_trailing && result.end_offset() < stream.size())
    throw Error(ErrorCode::kPickleTrailingData, Stage::kPickle,
                std::to_string(stream.size() - result.end_offset()) +
                    " byte(s) after STOP (set Options::allow_trailing to read pickles back to back)",
                result.end_offset(), options.stream_name);
  return result;
}

Result run(const Bytes& stream, const Options& options) {
  Result result = run(stream.span(), options);
  result.keep_alive_ = stream;
  return result;
}

}  // namespace maploc::pickle
