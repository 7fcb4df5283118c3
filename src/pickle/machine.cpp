// machine.cpp - the inert pickle machine: one loop over the shared opcode table, no imports, no calls.
#include "stack_machine.h"

namespace maploc::pickle {

// The arena's first chunk is sized from the stream, capped (docs/pickle.md, "Memory").
Result::Result(std::size_t stream_bytes)
    : arena_(std::make_unique<Arena>(std::clamp<std::size_t>(stream_bytes * 8, std::size_t{64} << 10,
                                                             std::size_t{64} << 20))) {}
Result::Result(Result&&) noexcept = default;
Result& Result::operator=(Result&&) noexcept = default;
Result::~Result() = default;
std::span<const Value> Result::globals() const noexcept { return arena_->global_values; }

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
                 "stack depth exceeds " + decimal(limits_.pickle_max_stack_depth) +
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
        in_.fail(ErrorCode::kPickleBadArgument, "unsupported pickle protocol " + decimal(arg.u));
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

const std::array<Machine::Handler, 256> Machine::kHandlers =
    Machine::make_handlers(std::make_index_sequence<kOpcodes.size()>());

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
