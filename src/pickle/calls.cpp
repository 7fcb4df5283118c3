// calls.cpp - the Machine's globals (names, never imports), persistent ids, and the two calls it evaluates as data.
#include "stack_machine.h"

namespace maploc::pickle {

Value Machine::global(std::string_view module, std::string_view name) {
  if (proto_ < 3) {  // Python's fix_imports, limited to the two module renames
    if (module == "__builtin__") module = "builtins";
    else if (module == "copy_reg") module = "copyreg";
  }
  account(sizeof(GlobalNode));
  Value v = Builder::box(Kind::kGlobal, &arena_.make<GlobalNode>(module, name, role_of(module, name)));
  arena_.global_values.push_back(v);
  return v;
}

GlobalRole Machine::role_of(std::string_view module, std::string_view name) {
  if (module == "_codecs" && name == "encode") return GlobalRole::kCodecsEncode;
  if (module == "builtins" && name == "bytearray") return GlobalRole::kByteArray;
  if (module == "builtins" && name == "dict") return GlobalRole::kDict;
  if (module != "collections") return GlobalRole::kOther;
  if (name == "OrderedDict") return GlobalRole::kOrderedDict;
  if (name == "defaultdict") return GlobalRole::kDefaultDict;
  return name == "Counter" ? GlobalRole::kCounter : GlobalRole::kOther;
}

Value Machine::global_from_lines(ByteSpan module, ByteSpan name) {
  if (!detail::valid_utf8_surrogatepass(module) || !detail::valid_utf8_surrogatepass(name))
    in_.fail(ErrorCode::kPickleBadArgument, "module or name is not valid UTF-8");
  return global(view_of(module), view_of(name));
}

bool Machine::is_latin1_name(std::string_view e) {
  return e == "latin1" || e == "latin-1" || e == "latin_1" || e == "iso-8859-1" ||
         e == "iso8859-1" || e == "l1";
}

std::optional<Value> Machine::interpret(const Value& callable, const Value& args) {
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

std::optional<Value> Machine::mapping(const Value& callable, const Value& args) {
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
               std::string(ordered ? "OrderedDict" : "dict") + " argument element #" + decimal(i) +
                   " is not a (key, value) pair but a " + std::string(kind_name(k)));
    const auto& kv = node_as<SeqNode>(pairs[i]).items;
    set_item(target, kv[0], kv[1]);
  }
  return target;
}

Value Machine::persistent(const Value& pid) {
  if (!options_.persistent_load) {
    account(sizeof(PersistentNode));
    auto& node = arena_.make<PersistentNode>(pid);
    nest(node, pid);
    return Builder::box(Kind::kPersistent, &node);
  }
  std::optional<Value> v = options_.persistent_load(pid, in_.op_offset());
  if (!v) in_.fail(ErrorCode::kPicklePersistentId, "the persistent-id callback rejected the id");
  return *v;
}

}  // namespace maploc::pickle
