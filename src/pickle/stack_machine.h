// stack_machine.h - the Machine of pickle::run: its stack, memo, node factories and limits (private).
// The opcode switch is machine.cpp; containers.cpp mutates dicts, lists and sets; calls.cpp holds
// globals, persistent ids and the only two calls it evaluates (pure data transforms); depth.cpp
// bounds the finished tree's nesting. The hot helpers stay inline here.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "maploc/pickle/machine.h"
#include "node.h"
#include "reader.h"
#include "support/memory_guard.h"
#include "support/seeded_hash.h"
#include "text.h"

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

inline std::string str_of(detail::ByteSpan s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }
inline std::string_view view_of(detail::ByteSpan s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }
inline std::string decimal(std::uint64_t v) { return std::to_string(v); }

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
    // The memo is reserved up front for the densest stream, a stream with trailing data
    // (legacy, 0.1.x tar) for 2^12 entries (docs/pickle.md, "Memory").
    const std::uint64_t stream_bytes = data.size() - std::min<std::uint64_t>(options.start_offset, data.size());
    const std::uint64_t up_front = options.allow_trailing ? std::uint64_t{1} << 12 : std::uint64_t{1} << 20;
    dense_.reserve(std::min<std::uint64_t>({stream_bytes / 3, limits_.pickle_max_memo_entries, up_front}));
    maploc::detail::prefer_huge_pages(dense_.data(), dense_.capacity() * sizeof(Value));
  }

  void run() {
    for (;;) {
      const std::uint8_t byte = in_.opcode_byte();
      ++result_.opcode_count_;
      if (byte == static_cast<std::uint8_t>(Op::STOP)) {
        in_.set_op(find_opcode(byte));
        result_.root_ = pop();
        break;
      }
      (this->*kHandlers[byte])();
    }
    result_.end_offset_ = in_.pos();
    result_.protocol_ = proto_;
    if (depths_stale_) check_depth(result_.root_);
  }

 private:
  // ---- dispatch: one handler per opcode byte, each reading its argument as the table says ----
  using Handler = void (Machine::*)();

  /// Opcode O: its argument read and its step taken, both specialised to O.
  template <Op O>
  void exec() {
    static constexpr const OpcodeInfo* kInfo = find_opcode(static_cast<std::uint8_t>(O));
    in_.set_op(kInfo);
    step(O, in_.read_arg(kInfo->arg));
  }

  void unknown() { in_.unknown_opcode(in_.data_at(in_.op_offset())); }

  template <std::size_t... I>
  static constexpr std::array<Handler, 256> make_handlers(std::index_sequence<I...>) {
    std::array<Handler, 256> table{};
    for (auto& h : table) h = &Machine::unknown;
    ((table[static_cast<std::uint8_t>(kOpcodes[I].code)] = &Machine::exec<kOpcodes[I].code>), ...);
    return table;
  }
  static const std::array<Handler, 256> kHandlers;

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
             "stack depth exceeds " + decimal(limits_.pickle_max_stack_depth) + " (raise Limits::pickle_max_stack_depth)");
  }

  [[noreturn, gnu::cold, gnu::noinline]] void underflow(std::size_t count) const {
    in_.fail(ErrorCode::kPickleStackUnderflow,
             "needs " + decimal(count) + " stack item(s), " + decimal(stack_.size() - fence()) +
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
               "values would take more than " + decimal(limits_.pickle_max_total_bytes) +
                   " bytes (raise Limits::pickle_max_total_bytes)");
    allocated_ += bytes;
  }

  void check_items(std::size_t have, std::size_t adding) {
    if (adding > limits_.pickle_max_container_items ||
        have > limits_.pickle_max_container_items - adding)
      in_.fail(ErrorCode::kPickleLimitContainerItems,
               "container would hold " + decimal(have) + " + " + decimal(adding) + " items, more than " +
                   decimal(limits_.pickle_max_container_items) +
                   " (raise Limits::pickle_max_container_items)");
  }

  void nest(Node& parent, const Value& child) {
    Node* c = Builder::node(child);
    // A container holding itself (d['self'] = d, through the memo) is no deeper for it:
    // counted, a dict with 1,000 self-references would read as 1,000 deep.
    if (c == nullptr || c == &parent) return;
    c->has_parent = true;
    if (c->depth < parent.depth) return;
    if (c->depth >= limits_.pickle_max_nesting_depth)
      in_.fail(ErrorCode::kPickleLimitNesting,
               "values nest deeper than " + decimal(limits_.pickle_max_nesting_depth) +
                   " (raise Limits::pickle_max_nesting_depth)");
    // A node that already sits inside another grew deeper: its ancestors'
    // depths are now lower bounds, and the final walk must look.
    if (parent.has_parent) depths_stale_ = true;
    parent.depth = c->depth + 1;
  }

  // ---- node factories ----
  Value blob(Kind kind, ByteSpan data) {
    account(sizeof(BlobNode));
    return Builder::box(kind, &arena_.make<BlobNode>(kind, data));
  }

  ByteSpan keep(detail::ByteVec&& bytes) {
    account(bytes.size());
    const auto& owned = arena_.owned.emplace_back(std::move(bytes));
    return owned;
  }

  Value seq(Kind kind, std::span<const Value> items) {
    // One empty tuple per stream, as CPython has one (a tensor's rebuild call names one each).
    if (kind == Kind::kTuple && items.empty() && empty_tuple_.kind() == Kind::kTuple) return empty_tuple_;
    check_items(0, items.size());
    account(sizeof(SeqNode) + items.size() * sizeof(Value));
    auto& node = arena_.make<SeqNode>(kind, arena_.memory);
    if (kind == Kind::kFrozenSet || kind == Kind::kSet) {
      for (const auto& e : items) add_to_set(node, e);
    } else {
      node.items.assign(items.begin(), items.end());
      for (const auto& e : items) nest(node, e);
    }
    const Value v = Builder::box(kind, &node);
    if (kind == Kind::kTuple && items.empty()) empty_tuple_ = v;
    return v;
  }

  Value dict() {
    account(sizeof(DictNode));
    return Builder::box(Kind::kDict, &arena_.make<DictNode>(arena_.memory));
  }

  Value call(Kind kind, CallOp op, Value callable, Value args, Value kwargs = {}) {
    account(sizeof(CallNode));
    auto& node = arena_.make<CallNode>(kind, op, callable, args, kwargs);
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
  detail::CallExtras& extras(CallNode& c);

  void add_to_set(SeqNode& set, const Value& e);

  void set_item(Value& target, const Value& key, const Value& value);

  void append(Value& target, std::span<const Value> items);

  // ---- memo: a map, never an array sized by a file index (CVE-2018-20406) ----
  void memo_put(std::uint64_t index) {
    if (index >= limits_.pickle_max_memo_entries)
      in_.fail(ErrorCode::kPickleLimitMemo,
               "index " + decimal(index) + " exceeds memo limit " + decimal(limits_.pickle_max_memo_entries) +
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
      in_.fail(ErrorCode::kPickleMemoMissing, "memo index " + decimal(index) + " was never stored");
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
  Value global(std::string_view module, std::string_view name);

  static GlobalRole role_of(std::string_view module, std::string_view name);

  static GlobalRole role(const Value& v) {
    return v.kind() == Kind::kGlobal ? node_as<GlobalNode>(v).role : GlobalRole::kOther;
  }

  Value global_from_lines(ByteSpan module, ByteSpan name);

  // ---- the only calls interpreted, as data transformations ----
  static bool is_latin1_name(std::string_view e);

  /// _codecs.encode(text[, 'latin1']) and builtins.bytearray(...); nullopt: keep the REDUCE inert.
  std::optional<Value> interpret(const Value& callable, const Value& args);

  static bool is_dict_class(const Value& c) { return role(c) >= GlobalRole::kOrderedDict; }

  /// OrderedDict(pairs) and dict(pairs | mapping | nothing) as the mapping they
  /// build: Python 2's OrderedDict.__reduce__ passes one list of [key, value]
  /// lists. An OrderedDict stays a call node (its BUILD state is attributes),
  /// its items recorded as SETITEMS records them. nullopt: keep the REDUCE.
  std::optional<Value> mapping(const Value& callable, const Value& args);

  Value persistent(const Value& pid);

  Value tuple_from(std::size_t at) {
    Value t = seq(Kind::kTuple, std::span<const Value>(stack_).subspan(at));
    stack_.resize(at);
    return t;
  }

  [[gnu::always_inline]] inline void step(Op op, const detail::RawArg& arg);
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
  Value empty_tuple_;  ///< None until the first empty tuple is made
  std::uint64_t allocated_ = 0;
  bool depths_stale_ = false;  ///< a nested node grew deeper after it was nested (see nest())
  std::uint8_t proto_ = 0;
};

}  // namespace maploc::pickle
