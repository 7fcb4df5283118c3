// writer.h - a value tree back to a pickle stream (protocol 2 opcodes), shared nodes kept shared.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "maploc/pickle/value.h"

namespace maploc::pickle {

class Emitter;

/// Writes what takes the place of a kPersistent or kExternal node: it must
/// leave exactly one value on the unpickler's stack (typically a
/// persistent-id tuple followed by Emitter::persid()).
using PersistentWrite = std::function<void(const Value& node, Emitter& out)>;

/// How write() encodes a tree.
struct WriteOptions {
  /// The PROTO header (2..5). Opcodes are protocol 2's; bytes use
  /// BINBYTES from protocol 3 on and `_codecs.encode` below it, as Python does.
  int protocol = 2;
  /// Called for every kPersistent and kExternal node. Empty: a kPersistent
  /// node is written as its id + BINPERSID, a kExternal one raises kPickleUnwritable.
  PersistentWrite persistent{};
};

/// Low-level output handed to a PersistentWrite callback: appends opcodes to
/// the stream being written. value() goes through the same memo as the rest
/// of the tree, so a node written from a callback stays shared.
class Emitter {
 public:
  /// A whole value (memoized like every other node).
  void value(const Value& v);
  void none();
  void boolean(bool v);
  void integer(std::int64_t v);
  void str(std::string_view utf8);
  /// GLOBAL module\nname\n.
  void global(std::string_view module, std::string_view name);
  void mark();
  /// TUPLE: the items since the last mark() become a tuple.
  void tuple_from_mark();
  /// BINPERSID: the top of the stack is a persistent id.
  void persid();
  /// EMPTY_DICT.
  void empty_dict();
  /// SETITEMS: the key/value pairs since the last mark() go into the dict below the mark.
  void setitems();
  /// REDUCE: callable(*args) of the two topmost items.
  void reduce();

  struct Impl;
  explicit Emitter(Impl& impl) : impl_(impl) {}

 private:
  Impl& impl_;
};

/// A pickle built opcode by opcode, for writers that have no value tree
/// (torch's dict of tensors). The constructor writes PROTO, finish() STOP.
class Stream {
 public:
  /// Raises kInvalidArgument for a protocol outside 2..5.
  explicit Stream(const WriteOptions& options = {});
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  /// The emitter appending to this stream (valid while the Stream lives).
  Emitter& emitter() noexcept { return emitter_; }
  /// Counts the references of v's nodes before Emitter::value() writes them: a node reached more
  /// than once among the values counted (a tie, a cycle) is then written once and fetched from the
  /// memo, as write() does. Count every value before the first value() call.
  void count(const Value& v);
  /// Appends STOP and hands the bytes over; the Stream is then empty.
  std::vector<std::uint8_t> finish();

 private:
  std::unique_ptr<Emitter::Impl> impl_;
  Emitter emitter_;
};

/// Pickles `root` as PROTO, the value, STOP. Every node referenced more than
/// once (two handles with Value::same_node) is written once and fetched
/// from the memo afterwards (BINPUT/BINGET), so ties and cycles survive;
/// containers are memoized before their items as Python's pickler does.
/// Raises Stage::kPickle errors: kPickleUnwritable (a kExternal node
/// without callback, an INST/OBJ node whose args are no tuple),
/// kInvalidArgument (protocol out of 2..5), and whatever the callback throws.
std::vector<std::uint8_t> write(const Value& root, const WriteOptions& options = {});

}  // namespace maploc::pickle
