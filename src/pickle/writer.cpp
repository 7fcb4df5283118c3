// writer.cpp - emits an inert value tree as pickle opcodes (the inverse of machine.cpp, protocol 2 style).
#include "pickle/writer.h"

#include <cstring>
#include <unordered_map>

#include "maploc/error.h"
#include "maploc/pickle/opcodes.h"

namespace maploc::pickle {

namespace {
constexpr std::size_t kBatch = 1000;  // Python's pickler batches APPENDS/SETITEMS by 1000

[[noreturn]] void unwritable(const std::string& message) {
  throw Error(ErrorCode::kPickleUnwritable, Stage::kPickle, message);
}
}  // namespace

struct Emitter::Impl {
  std::vector<std::uint8_t> out;
  WriteOptions options;
  std::unordered_map<const void*, std::uint32_t> refs;  ///< references per node (pre-pass)
  std::unordered_map<const void*, std::uint32_t> memo;  ///< node -> memo index once written

  void op(Op o) { out.push_back(static_cast<std::uint8_t>(o)); }
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }

  // Pre-pass: how many edges reach each node (children visited once).
  void count(const Value& v) {
    const void* id = v.identity();
    if (!id) return;
    if (refs[id]++ > 0) return;
    switch (v.kind()) {
      case Kind::kTuple: case Kind::kList: case Kind::kSet: case Kind::kFrozenSet:
        for (const Value& e : v.elements()) count(e);
        break;
      case Kind::kDict:
        for (const DictItem& it : v.items()) {
          count(it.key);
          count(it.value);
        }
        break;
      case Kind::kReduce: case Kind::kObject:
        count(v.callable());
        count(v.args());
        count(v.kwargs());
        for (const Value& e : v.appended()) count(e);
        for (const DictItem& it : v.set_items()) {
          count(it.key);
          count(it.value);
        }
        for (const Value& s : v.build_states()) count(s);
        break;
      case Kind::kPersistent:
        count(v.persistent_id());
        break;
      default:
        break;
    }
  }

  bool fetch(const Value& v) {
    const void* id = v.identity();
    if (!id) return false;
    auto it = memo.find(id);
    if (it == memo.end()) return false;
    if (it->second < 256) {
      op(Op::BINGET);
      le(it->second, 1);
    } else {
      op(Op::LONG_BINGET);
      le(it->second, 4);
    }
    return true;
  }

  void put(const Value& v) {
    const void* id = v.identity();
    if (!id || refs[id] < 2 || memo.count(id)) return;
    const auto index = static_cast<std::uint32_t>(memo.size());
    memo.emplace(id, index);
    if (index < 256) {
      op(Op::BINPUT);
      le(index, 1);
    } else {
      op(Op::LONG_BINPUT);
      le(index, 4);
    }
  }

  void integer(std::int64_t i) {
    if (i >= 0 && i < 256) {
      op(Op::BININT1);
      le(static_cast<std::uint64_t>(i), 1);
    } else if (i >= 0 && i < 65536) {
      op(Op::BININT2);
      le(static_cast<std::uint64_t>(i), 2);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      op(Op::BININT);
      le(static_cast<std::uint64_t>(i), 4);
    } else {
      long_bytes(Value::integer(i).int_bytes());
    }
  }
  void long_bytes(const std::vector<std::uint8_t>& b) {
    if (b.size() < 256) {
      op(Op::LONG1);
      le(b.size(), 1);
    } else {
      op(Op::LONG4);
      le(b.size(), 4);
    }
    raw(b.data(), b.size());
  }
  void str(std::string_view s) {
    if (s.size() > 0xFFFFFFFFu) {
      op(Op::BINUNICODE8);
      le(s.size(), 8);
    } else {
      op(Op::BINUNICODE);
      le(s.size(), 4);
    }
    raw(s.data(), s.size());
  }
  void global(std::string_view module, std::string_view name) {
    op(Op::GLOBAL);
    raw(module.data(), module.size());
    out.push_back('\n');
    raw(name.data(), name.size());
    out.push_back('\n');
  }
  // Python 3 bytes under protocol < 3: _codecs.encode(latin-1 text, 'latin1').
  void bytes(std::span<const std::uint8_t> b) {
    if (options.protocol >= 3) {
      if (b.size() < 256) {
        op(Op::SHORT_BINBYTES);
        le(b.size(), 1);
      } else if (b.size() <= 0xFFFFFFFFu) {
        op(Op::BINBYTES);
        le(b.size(), 4);
      } else {
        op(Op::BINBYTES8);
        le(b.size(), 8);
      }
      raw(b.data(), b.size());
      return;
    }
    if (b.empty()) {
      global("builtins", "bytes");
      op(Op::EMPTY_TUPLE);
      op(Op::REDUCE);
      return;
    }
    global("_codecs", "encode");
    std::string text;
    text.reserve(b.size() * 2);
    for (std::uint8_t c : b) {
      if (c < 0x80) {
        text.push_back(static_cast<char>(c));
      } else {
        text.push_back(static_cast<char>(0xC0 | (c >> 6)));
        text.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
    }
    str(text);
    str("latin1");
    op(Op::TUPLE2);
    op(Op::REDUCE);
  }
  template <typename Items, typename EmitOne>
  void batched(const Items& items, Op one, Op many, EmitOne&& emit_one) {
    for (std::size_t i = 0; i < items.size(); i += kBatch) {
      const std::size_t n = std::min(kBatch, items.size() - i);
      if (n > 1) op(Op::MARK);
      for (std::size_t k = i; k < i + n; ++k) emit_one(items[k]);
      op(n > 1 ? many : one);
    }
  }
  void items_of(std::span<const DictItem> items) {
    batched(items, Op::SETITEM, Op::SETITEMS, [&](const DictItem& it) {
      value(it.key);
      value(it.value);
    });
  }
  void elements_of(std::span<const Value> items) {
    batched(items, Op::APPEND, Op::APPENDS, [&](const Value& e) { value(e); });
  }

  void call(const Value& v) {
    const Value& cls = v.callable();
    const Value& args = v.args();
    switch (v.call_op()) {
      case CallOp::kReduce:
        value(cls);
        value(args);
        op(Op::REDUCE);
        break;
      case CallOp::kNewObj:
        value(cls);
        value(args);
        op(Op::NEWOBJ);
        break;
      case CallOp::kNewObjEx:
        value(cls);
        value(args);
        value(v.kwargs());
        op(Op::NEWOBJ_EX);
        break;
      case CallOp::kInst:
      case CallOp::kObj:
        if (!args.is(Kind::kTuple)) unwritable("an INST/OBJ object whose arguments are not a tuple");
        op(Op::MARK);
        value(cls);
        for (const Value& a : args.elements()) value(a);
        op(Op::OBJ);
        break;
    }
    put(v);
    if (!v.appended().empty()) elements_of(v.appended());
    if (!v.set_items().empty()) items_of(v.set_items());
    for (const Value& state : v.build_states()) {
      value(state);
      op(Op::BUILD);
    }
  }

  void value(const Value& v) {
    if (fetch(v)) return;
    switch (v.kind()) {
      case Kind::kNone: op(Op::NONE); return;
      case Kind::kBool: op(v.as_bool() ? Op::NEWTRUE : Op::NEWFALSE); return;
      case Kind::kInt:
        if (v.is_big_int()) {
          long_bytes(v.int_bytes());
        } else {
          integer(v.as_int());
        }
        break;
      case Kind::kFloat: {
        const double d = v.as_float();
        std::uint64_t bits = 0;
        std::memcpy(&bits, &d, sizeof bits);
        op(Op::BINFLOAT);
        for (int i = 7; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
        break;
      }
      case Kind::kStr: str(v.as_str()); break;
      case Kind::kBytes: bytes(v.as_bytes()); break;
      case Kind::kByteArray:
        global("builtins", "bytearray");
        bytes(v.as_bytes());
        op(Op::TUPLE1);
        op(Op::REDUCE);
        break;
      case Kind::kTuple: {
        const auto e = v.elements();
        if (e.empty()) {
          op(Op::EMPTY_TUPLE);
        } else if (e.size() <= 3) {
          for (const Value& x : e) value(x);
          op(e.size() == 1 ? Op::TUPLE1 : e.size() == 2 ? Op::TUPLE2 : Op::TUPLE3);
        } else {
          op(Op::MARK);
          for (const Value& x : e) value(x);
          op(Op::TUPLE);
        }
        break;
      }
      case Kind::kList:
        op(Op::EMPTY_LIST);
        put(v);
        elements_of(v.elements());
        return;
      case Kind::kDict:
        op(Op::EMPTY_DICT);
        put(v);
        items_of(v.items());
        return;
      case Kind::kSet:
      case Kind::kFrozenSet:
        global("builtins", v.is(Kind::kSet) ? "set" : "frozenset");
        op(Op::EMPTY_LIST);
        elements_of(v.elements());
        op(Op::TUPLE1);
        op(Op::REDUCE);
        break;
      case Kind::kGlobal: global(v.global_module(), v.global_name()); break;
      case Kind::kReduce:
      case Kind::kObject: call(v); return;
      case Kind::kPersistent:
      case Kind::kExternal:
        if (options.persistent) {
          Emitter e(*this);
          options.persistent(v, e);
        } else if (v.is(Kind::kPersistent)) {
          value(v.persistent_id());
          op(Op::BINPERSID);
        } else {
          unwritable("an external handle (" + std::to_string(v.external_handle()) +
                     ") and no persistent-id callback to write it");
        }
        break;
    }
    put(v);
  }
};

void Emitter::value(const Value& v) { impl_.value(v); }
void Emitter::none() { impl_.op(Op::NONE); }
void Emitter::boolean(bool v) { impl_.op(v ? Op::NEWTRUE : Op::NEWFALSE); }
void Emitter::integer(std::int64_t v) { impl_.integer(v); }
void Emitter::str(std::string_view utf8) { impl_.str(utf8); }
void Emitter::global(std::string_view module, std::string_view name) { impl_.global(module, name); }
void Emitter::mark() { impl_.op(Op::MARK); }
void Emitter::tuple_from_mark() { impl_.op(Op::TUPLE); }
void Emitter::persid() { impl_.op(Op::BINPERSID); }
void Emitter::empty_dict() { impl_.op(Op::EMPTY_DICT); }
void Emitter::setitems() { impl_.op(Op::SETITEMS); }
void Emitter::reduce() { impl_.op(Op::REDUCE); }

namespace {
void check_protocol(int protocol) {
  if (protocol < 2 || protocol > 5) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kPickle,
                "pickle protocol " + std::to_string(protocol) + " is not in 2..5");
  }
}
}  // namespace

Stream::Stream(const WriteOptions& options) : impl_(std::make_unique<Emitter::Impl>()), emitter_(*impl_) {
  check_protocol(options.protocol);
  impl_->options = options;
  impl_->op(Op::PROTO);
  impl_->le(static_cast<std::uint64_t>(options.protocol), 1);
}

Stream::~Stream() = default;

void Stream::count(const Value& v) { impl_->count(v); }

std::vector<std::uint8_t> Stream::finish() {
  impl_->op(Op::STOP);
  return std::move(impl_->out);
}

std::vector<std::uint8_t> write(const Value& root, const WriteOptions& options) {
  check_protocol(options.protocol);
  Emitter::Impl impl;
  impl.options = options;
  impl.count(root);
  impl.op(Op::PROTO);
  impl.le(static_cast<std::uint64_t>(options.protocol), 1);
  impl.value(root);
  impl.op(Op::STOP);
  return std::move(impl.out);
}

}  // namespace maploc::pickle
