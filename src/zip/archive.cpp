// archive.cpp - maploc::zip::Archive: open, look up and read records.
#include "maploc/zip/archive.h"

#include <cstring>

#include "directory.h"
#include "inflate.h"
#include "maploc/error.h"
#include "support/flat_index.h"
#include "support/memory_guard.h"

namespace maploc::zip {

std::uint64_t Record::alignment() const {
  std::uint64_t a = 1;
  while (a < 4096 && data_offset % (a * 2) == 0) a *= 2;
  return a;
}

Archive Archive::parse(MappedFile file, const Limits& limits, bool locate, DirectoryEnd* end_out) {
  Archive a;
  a.file_ = std::move(file);
  a.limits_ = limits;
  const DirectoryEnd end = find_directory_end(a.file_.bytes, a.file_.path, limits);
  a.base_ = end.base;
  a.records_ = read_central_directory(a.file_.bytes, a.file_.path, end, locate);
  if (end_out != nullptr) *end_out = end;
  auto index = std::make_shared<maploc::detail::FlatIndex>(a.records_.size());
  for (std::uint32_t i = 0; i < a.records_.size(); ++i) {
    const std::string& name = a.records_[i].name;
    const std::uint64_t hash = maploc::detail::hash_text(name);
    const auto earlier = index->insert_unique(hash, i, [&](std::uint32_t k) { return a.records_[k].name == name; });
    if (earlier) {
      throw Error(ErrorCode::kZipDuplicateName, Stage::kZip,
                  "two records are named '" + a.records_[i].name +
                      "' (entries #" + std::to_string(*earlier) + " and #" + std::to_string(i) +
                      "); refusing an ambiguous archive",
                  a.records_[i].header_offset, a.file_.path);
    }
  }
  a.index_ = std::move(index);
  // PyTorchStreamReader: the prefix is everything before the first '/' of entry 0.
  const std::string& first = a.records_.front().name;
  const auto slash = first.find('/');
  if (slash != std::string::npos) a.prefix_ = first.substr(0, slash);
  return a;
}

Archive Archive::open(const std::filesystem::path& path, const Limits& limits) {
  return from_file(MappedFile::open(path), limits);
}

Archive Archive::from_file(MappedFile file, const Limits& limits) {
  const std::string path = file.path;
  return maploc::detail::guard_memory(Stage::kZip, path, [&] { return parse(std::move(file), limits, true, nullptr); });
}

void Archive::require_prefix() const {
  const std::string want = prefix_ + "/";
  for (const Record& r : records_) {
    if (prefix_.empty() || r.name.compare(0, want.size(), want) != 0) {
      throw Error(ErrorCode::kZipNoPrefix, Stage::kZip,
                  "record '" + r.name + "' is not inside the archive's top-level folder" +
                      (prefix_.empty() ? std::string() : " '" + prefix_ + "/'") +
                      "; a torch archive keeps every record under one folder",
                  r.header_offset, file_.path);
    }
  }
}

const Record* Archive::find(std::string_view full_name) const {
  if (!index_) return nullptr;
  const auto at = index_->find(maploc::detail::hash_text(full_name), [&](std::uint32_t k) { return records_[k].name == full_name; });
  return at ? &records_[*at] : nullptr;
}

const Record* Archive::find_in_prefix(std::string_view name) const {
  if (prefix_.empty()) return find(name);
  // Names of storages are short: join them on the stack, not the heap.
  char buf[256];
  if (prefix_.size() + 1 + name.size() <= sizeof buf) {
    std::memcpy(buf, prefix_.data(), prefix_.size());
    buf[prefix_.size()] = '/';
    std::memcpy(buf + prefix_.size() + 1, name.data(), name.size());
    return find(std::string_view(buf, prefix_.size() + 1 + name.size()));
  }
  return find(prefix_ + "/" + std::string(name));
}

const Record& Archive::at(std::string_view name) const {
  if (const Record* r = find_in_prefix(name)) return *r;
  throw Error(ErrorCode::kZipRecordNotFound, Stage::kZip,
              "no record '" + (prefix_.empty() ? std::string() : prefix_ + "/") + std::string(name) +
                  "' in the archive (" + std::to_string(records_.size()) + " records)",
              std::nullopt, file_.path);
}

Bytes Archive::read(const Record& record) const {
  // A Record is a public value type: one the caller built or kept from another archive must
  // still lie inside this file (every record the directory parse made does).
  const std::uint64_t size = file_.bytes.size();
  if (record.data_offset > size || record.compressed_size > size - record.data_offset) {
    throw Error(ErrorCode::kZipOffsetOutOfRange, Stage::kZip,
                "record '" + record.name + "': bytes [" + std::to_string(record.data_offset) + ", +" +
                    std::to_string(record.compressed_size) + ") lie outside the file (" + std::to_string(size) +
                    " bytes); read records this archive's directory lists",
                record.data_offset, file_.path);
  }
  file_.ensure(record.data_offset, record.compressed_size);  // a URL source fetches it now (docs/remote.md)
  Bytes raw = file_.bytes.slice(static_cast<std::size_t>(record.data_offset),
                                static_cast<std::size_t>(record.compressed_size));
  if (record.method == kMethodStored) return raw;
  return maploc::detail::guard_memory(Stage::kZip, record.name, [&] { return inflate_record(raw, record, limits_, file_.path); });
}

}  // namespace maploc::zip
