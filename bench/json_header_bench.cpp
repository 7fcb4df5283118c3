// json_header_bench.cpp - reading a safetensors header: maploc's pull reader (src/torch/json_subset.h)
// against nlohmann_json's SAX interface (nlohmann::json::sax_parse), both extracting the same fields
// (each tensor's name, dtype, shape and data_offsets; every other value skipped) under the same
// nesting limit. One reader per process, so each peak RSS is its own.
//
// usage: maploc_bench_json_header reader|sax header N [--reps R]   N tensors, a realistic header
//        maploc_bench_json_header reader|sax flood MIB [--reps R]   one tensor and MIB MiB of tiny
//                                                                    tokens in a member nobody reads
// prints one JSON line: {"reader", "input", "bytes", "tensors", "best_s", "median_s", "mb_per_s",
//                        "rss_before_kb", "rss_peak_kb"}.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_subset.h"

namespace {

struct Entry {
  std::string name, dtype;
  std::vector<std::uint64_t> shape, offsets;
};

std::string header(std::size_t n) {
  std::string s = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t off = 0;
  const char* parts[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj",   "mlp.up_proj",      "mlp.down_proj",    "input_layernorm"};
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t rows = 64 + i % 7, cols = 128;
    const std::uint64_t bytes = rows * cols * 2;
    s += ",\"model.layers." + std::to_string(i / 8) + "." + parts[i % 8] + ".weight\":{\"dtype\":\"BF16\",\"shape\":[" +
         std::to_string(rows) + "," + std::to_string(cols) + "],\"data_offsets\":[" + std::to_string(off) + "," +
         std::to_string(off + bytes) + "]}";
    off += bytes;
  }
  return s + "}";
}

std::string flood(std::size_t mib) {
  std::string s = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"junk\":[";
  const std::size_t target = mib << 20;
  s.reserve(target + 64);
  while (s.size() < target) s += "0,";
  s += "0]}";
  return s;
}

std::vector<Entry> with_reader(std::string_view text) {
  using maploc::torch::json::Reader;
  std::vector<Entry> out;
  Reader r(text, 64);
  auto u64s = [&](std::vector<std::uint64_t>& into) {
    r.array([&] {
      if (r.peek() == Reader::Type::kNumber) {
        into.push_back(maploc::torch::json::as_u64(r.number()).value_or(UINT64_MAX));
      } else {
        r.skip();
      }
    });
  };
  r.object([&](std::string&& name) {
    if (name == "__metadata__" || r.peek() != Reader::Type::kObject) {
      r.skip();
      return;
    }
    Entry e;
    e.name = std::move(name);
    r.object([&](std::string&& key) {
      if (key == "dtype" && r.peek() == Reader::Type::kString) e.dtype = r.string();
      else if (key == "shape" && r.peek() == Reader::Type::kArray) u64s(e.shape);
      else if (key == "data_offsets" && r.peek() == Reader::Type::kArray) u64s(e.offsets);
      else r.skip();
    });
    out.push_back(std::move(e));
  });
  r.end();
  return out;
}

// The same extraction as SAX events: depth 1 is the header object, 2 a tensor's object, 3 its arrays.
class Handler : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<Entry> out;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return value(UINT64_MAX); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t, const string_t&) override { return value(UINT64_MAX); }
  bool string(string_t& s) override {
    if (depth_ == 2 && in_tensor_ && field_ == Field::kDtype) out.back().dtype = std::move(s);
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (++depth_ > kMaxDepth) return false;
    if (depth_ == 2) {
      in_tensor_ = key_ != "__metadata__";
      if (in_tensor_) out.push_back(Entry{std::move(key_), {}, {}, {}});
    }
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = std::move(k);
    else if (depth_ == 2) field_ = k == "dtype" ? Field::kDtype : k == "shape" ? Field::kShape
                                 : k == "data_offsets" ? Field::kOffsets : Field::kOther;
    return true;
  }
  bool end_object() override {
    if (depth_-- == 2) in_tensor_ = false;
    return true;
  }
  bool start_array(std::size_t) override { return ++depth_ <= kMaxDepth; }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  static constexpr std::size_t kMaxDepth = 64;
  enum class Field : std::uint8_t { kOther, kDtype, kShape, kOffsets };
  bool value(std::uint64_t v) {
    if (depth_ == 3 && in_tensor_) {
      if (field_ == Field::kShape) out.back().shape.push_back(v);
      else if (field_ == Field::kOffsets) out.back().offsets.push_back(v);
    }
    return true;
  }
  std::size_t depth_ = 0;
  bool in_tensor_ = false;
  Field field_ = Field::kOther;
  std::string key_;
};

std::vector<Entry> with_sax(std::string_view text) {
  Handler h;
  if (!nlohmann::json::sax_parse(text.data(), text.data() + text.size(), &h)) {
    std::fprintf(stderr, "sax_parse failed\n");
    std::exit(1);
  }
  return std::move(h.out);
}

long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::string_view(field).size());
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s reader|sax header N|flood MIB [--reps R]\n", argv[0]);
    return 2;
  }
  const std::string which = argv[1], input = argv[2];
  const std::size_t n = std::strtoull(argv[3], nullptr, 10);
  int reps = 5;
  for (int i = 4; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--reps") reps = std::atoi(argv[++i]);
  }
  if ((which != "reader" && which != "sax") || (input != "header" && input != "flood") || reps < 1) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  const std::string text = input == "header" ? header(n) : flood(n);
  const long rss_before = status_kb("VmRSS:");
  std::vector<double> times;
  std::size_t tensors = 0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto entries = which == "reader" ? with_reader(text) : with_sax(text);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    tensors = entries.size();
    if (tensors == 0 || entries.back().offsets.size() != 2 || entries.back().dtype.empty()) {
      std::fprintf(stderr, "%s read the header wrong\n", which.c_str());
      return 1;
    }
  }
  std::sort(times.begin(), times.end());
  std::printf("{\"reader\": \"%s\", \"input\": \"%s %zu\", \"bytes\": %zu, \"tensors\": %zu, \"best_s\": %.6f, "
              "\"median_s\": %.6f, \"mb_per_s\": %.1f, \"rss_before_kb\": %ld, \"rss_peak_kb\": %ld}\n",
              which.c_str(), input.c_str(), n, text.size(), tensors, times.front(), times[times.size() / 2],
              static_cast<double>(text.size()) / 1e6 / times[times.size() / 2], rss_before, status_kb("VmHWM:"));
  return 0;
}
