// cmd_dis.cpp - `maploc dis`: pickletools-style disassembly of a checkpoint's pickles.
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "json_writer.h"
#include "maploc/error.h"
#include "maploc/mapped_file.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/remote/object.h"
#include "maploc/torch/checkpoint.h"
#include "support/sniff.h"
#include "maploc/zip/archive.h"

namespace maploc::cli {
namespace {

// pytorch-format.md §2.1: magic, protocol version, sys_info, the object, the storage keys.
constexpr int kLegacyPickles = 5;

// The archive of a zip file, also one behind prepended bytes (where the
// first bytes are not PK\3\4); nullopt when the file holds no zip.
std::optional<zip::Archive> as_archive(const MappedFile& file, ContentKind kind) {
  if (kind == ContentKind::kZip) return zip::Archive::from_file(file);
  if (kind != ContentKind::kUnknown) return std::nullopt;
  try {
    return zip::Archive::from_file(file);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Where disassembly goes: pickletools text on stdout, or with --json one
// object per pickle with its opcodes. JSON goes out only once every pickle
// disassembled cleanly (an error leaves stdout empty, never half a document):
// a first pass over each pickle prints nothing but finds its end and any error;
// finish() then streams the document from a second pass.
class Output {
 public:
  explicit Output(bool json) : json_(json), out_(OutBuffer::Mode::kStream) {}

  // Disassembles one pickle of `stream` from options.start_offset; returns where it ends.
  std::uint64_t pickle(const Bytes& stream, pickle::DisOptions options) {
    if (!json_) return pickle::disassemble(stream.span(), out_.stream(), options);
    std::ostream discard(nullptr);
    options.write_text = false;
    const std::uint64_t end = pickle::disassemble(stream.span(), discard, options);
    pickles_.push_back({stream, std::move(options), end});
    return end;
  }

  void finish(const std::string& file) {
    if (!json_) return;
    JsonWriter doc(out_.text());
    doc.begin_object().field("file", file).key("pickles").begin_array();
    std::ostream discard(nullptr);
    for (auto& p : pickles_) {
      // "end" sorts before "opcodes": known from the first pass.
      doc.begin_object().field("end", p.end).key("opcodes").begin_array();
      p.options.on_opcode = [&](const pickle::DisLine& l) {
        doc.begin_object()
            .field("arg", l.arg)
            .field("byte", static_cast<unsigned>(l.byte))
            .field("depth", l.depth)
            .field("name", l.name)
            .field("note", l.note)
            .field("offset", l.offset)
            .end_object();
        out_.spill();
      };
      pickle::disassemble(p.stream.span(), discard, p.options);
      doc.end_array().field("start", p.options.start_offset).field("stream", p.options.stream_name).end_object();
    }
    doc.end_array().end_object();
    out_.append('\n');
    out_.finish();
  }

 private:
  struct Pickle {
    Bytes stream;
    pickle::DisOptions options;
    std::uint64_t end;
  };
  bool json_;
  OutBuffer out_;
  std::vector<Pickle> pickles_;
};

// One record of a zip: data.pkl unless --record names another
// (relative to the archive's prefix, or the full name).
void dis_zip(const zip::Archive& archive, const std::string& record_name, Output& out) {
  const zip::Record* record = archive.find(record_name);
  if (record == nullptr) record = &archive.at(record_name);
  const Bytes bytes = archive.read(*record);
  pickle::DisOptions options;
  options.stream_name = record->name;
  out.pickle(bytes, options);
}

// A legacy stream: its five pickles back to back, as pickletools prints them one after another.
void dis_legacy(const MappedFile& file, Output& out) {
  pickle::DisOptions options;
  options.stream_name = file.path;
  for (int i = 0; i < kLegacyPickles; ++i) options.start_offset = out.pickle(file.bytes, options);
}

}  // namespace

int cmd_dis(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc dis FILE [--record NAME] [--json]");
  }
  const std::string& source = args.positional[0];
  // A URL: the zip's structure and data.pkl by ranged requests, anything else whole (docs/remote.md).
  const MappedFile file = remote::is_url(source) ? torch::open_url(source, open_options(args)) : MappedFile::open(source);
  const auto kind = sniff_content(file.bytes.span().subspan(0, std::min<std::size_t>(file.bytes.size(), 512)));
  const bool has_record = args.has("record");
  Output out(args.has("json"));
  if (const auto archive = as_archive(file, kind)) {
    dis_zip(*archive, has_record ? args.get("record") : "data.pkl", out);
  } else if (has_record) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "--record applies to zip archives only; this file is " + describe_content(kind), std::nullopt,
                file.path);
  } else if (kind == ContentKind::kTorchLegacy) {
    dis_legacy(file, out);
  } else if (kind == ContentKind::kPickle || kind == ContentKind::kUnknown) {
    pickle::DisOptions options;
    options.stream_name = file.path;
    out.pickle(file.bytes, options);
  } else {
    throw Error(ErrorCode::kTorchNotCheckpoint, Stage::kTorch,
                "cannot disassemble " + describe_content(kind) +
                    ": maploc dis reads zip checkpoints, legacy torch files and bare pickles",
                std::nullopt, file.path);
  }
  out.finish(file.path);
  return kExitOk;
}

}  // namespace maploc::cli
