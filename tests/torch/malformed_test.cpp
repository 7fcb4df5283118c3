// malformed_test.cpp - corrupted fixtures and hand-written legacy streams, each with its ErrorCode.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using torch::Checkpoint;

Buffer bytes_of(const std::string& s) { return Buffer(s.begin(), s.end()); }

std::string u32(std::uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  return out;
}

std::string u64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  return out;
}

std::string str(const std::string& s) { return "X" + u32(static_cast<std::uint32_t>(s.size())) + s; }

// Pieces of a legacy stream (pytorch-format.md §2.1), written opcode by opcode.
struct LegacyTensor {
  std::string rebuild = "ctorch._utils\n_rebuild_tensor_v2\n";
  std::string pid_type = "ctorch\nFloatStorage\n";
  std::string typename_ = "storage";
  std::string key = "0";
  std::string numel = "K\x04";
  std::string offset = std::string("K\x00", 2);
  std::string size = "K\x02K\x02\x86";
  std::string stride = "K\x02K\x01\x86";
  std::string extra;  // more rebuild arguments (v3's dtype)
  std::string pid_override;  // a whole persistent id instead of the tuple

  std::string pickle() const {
    const std::string pid = pid_override.empty()
                                ? "(" + str(typename_) + pid_type + str(key) + str("cpu") + numel + "Nt"
                                : pid_override;
    return "\x80\x02" + rebuild + "(" + pid + "Q" + offset + size + stride + "\x89N" + extra + "tR.";
  }
};

std::string legacy_stream(const std::string& object, const std::string& keys_pickle, const std::string& data) {
  const std::string magic = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
  const std::string version = "\x80\x02M\xe9\x03.";
  const std::string sys_info = "\x80\x02}.";
  return magic + version + sys_info + object + keys_pickle + data;
}

const std::string kKeys0 = "\x80\x02](" + str("0") + "e.";

std::string floats(std::uint64_t count, std::uint64_t stored) { return u64(count) + std::string(stored * 4, '\0'); }

Buffer legacy(const LegacyTensor& t, const std::string& keys = kKeys0, const std::string& data = floats(4, 4)) {
  return bytes_of(legacy_stream(t.pickle(), keys, data));
}

struct Case {
  const char* name;
  Buffer bytes;
  ErrorCode expected;
};

std::vector<Case> legacy_cases() {
  std::vector<Case> cases;
  LegacyTensor t;
  cases.push_back({"storage shorter than its numel", legacy(t, kKeys0, floats(3, 3)), ErrorCode::kTorchRecordSize});
  t = {};
  t.offset = "K\x01";
  cases.push_back({"tensor past its storage", legacy(t), ErrorCode::kTorchTensorOutOfBounds});
  t = {};
  t.stride = "J\xff\xff\xff\xffK\x01\x86";
  cases.push_back({"negative stride", legacy(t), ErrorCode::kTorchBadTensor});
  t = {};
  t.size = "(" + std::string(65 * 2, '\0') + "t";
  for (std::size_t i = 0; i < 65; ++i) t.size[1 + 2 * i] = 'K', t.size[2 + 2 * i] = '\x01';
  t.stride = t.size;
  cases.push_back({"rank above 64", legacy(t), ErrorCode::kTorchBadTensor});
  t = {};
  t.stride = "\x8a\x08" + u64(std::uint64_t{1} << 62) + "K\x01\x86";
  cases.push_back({"stride overflowing int64", legacy(t), ErrorCode::kTorchTensorOutOfBounds});
  t = {};
  t.pid_type = "ctorch\nFlxatStorage\n";
  cases.push_back({"storage type that does not exist", legacy(t), ErrorCode::kTorchUnknownDType});
  t = {};
  t.rebuild = "ctorch._utils\n_rebuild_tensor_v3\n";
  t.pid_type = "ctorch.storage\nUntypedStorage\n";
  t.numel = "K\x10";
  t.extra = "ctorch\nfloat31\n";
  cases.push_back({"dtype that does not exist", legacy(t, kKeys0, u64(16) + std::string(16, '\0')),
                   ErrorCode::kTorchUnknownDType});
  t = {};
  t.pid_override = str("not a tuple");
  cases.push_back({"persistent id that is not a storage", legacy(t), ErrorCode::kTorchBadPersistentId});
  t = {};
  t.typename_ = "storagx";
  cases.push_back({"persistent id with another typename", legacy(t), ErrorCode::kTorchBadPersistentId});
  t = {};
  cases.push_back({"storage missing from the key list", legacy(t, "\x80\x02].", ""), ErrorCode::kTorchStorageMissing});
  cases.push_back({"key list naming an unknown storage",
                   legacy(t, "\x80\x02](" + str("0") + str("9") + "e.", floats(4, 4) + floats(1, 1)),
                   ErrorCode::kTorchBadLegacy});
  cases.push_back({"storage count past the end of the file", legacy(t, kKeys0, u64(1000) + std::string(16, '\0')),
                   ErrorCode::kTorchBadLegacy});
  Buffer bad_version = legacy(t);
  bad_version[18] = 0xEA;  // protocol version 1002
  cases.push_back({"wrong protocol version", bad_version, ErrorCode::kTorchBadLegacy});
  return cases;
}

}  // namespace

TEST_CASE("a hand-written legacy stream loads", "[torch]") {
  const auto ckpt = open_bytes(legacy(LegacyTensor{}));
  CHECK(ckpt.format() == torch::Format::kLegacy);
  REQUIRE(ckpt.tensors().size() == 1);
  CHECK(ckpt.tensors()[0].shape == std::vector<std::int64_t>{2, 2});
  REQUIRE(ckpt.storages().size() == 1);
  CHECK(ckpt.storages()[0].nbytes == 16);
}

TEST_CASE("malformed legacy streams give their ErrorCode", "[torch][malformed]") {
  for (const auto& c : legacy_cases()) {
    DYNAMIC_SECTION(c.name) { CHECK(code_of([&] { open_bytes(c.bytes); }) == c.expected); }
  }
}

TEST_CASE("corrupted zip fixtures give their ErrorCode and name the tensor", "[torch][malformed]") {
  const Buffer good = read_file(checkpoints_dir() / "protocol2.t2x.pt");
  struct Patch {
    const char* name;
    std::string from, to;
    ErrorCode expected;
  };
  const Patch patches[] = {
      {"storage record shorter than numel", std::string("cpuq\x06K\x06t", 8), std::string("cpuq\x06K\x07t", 8),
       ErrorCode::kTorchRecordSize},
      {"tensor past its storage", std::string("QK\x00K\x03", 5), std::string("QK\x05K\x03", 5),
       ErrorCode::kTorchTensorOutOfBounds},
      {"storage type that does not exist", "FloatStorage", "FlxatStorage", ErrorCode::kTorchUnknownDType},
      {"persistent id that is not a storage", "storageq", "storxgeq", ErrorCode::kTorchBadPersistentId},
  };
  for (const auto& p : patches) {
    DYNAMIC_SECTION(p.name) {
      Buffer b = good;
      patch(b, p.from, p.to);
      if (p.expected == ErrorCode::kTorchRecordSize) {
        patch(b, std::string("h\x06K\x06t", 5), std::string("h\x06K\x07t", 5));  // w_t shares the storage
      }
      try {
        open_bytes(b);
        FAIL("no error");
      } catch (const Error& e) {
        CHECK(e.code() == p.expected);
        CHECK(e.stage() == Stage::kTorch);
        if (p.expected == ErrorCode::kTorchRecordSize || p.expected == ErrorCode::kTorchTensorOutOfBounds) {
          CHECK_THAT(e.what(), Catch::Contains("'w'"));
        }
        if (p.expected == ErrorCode::kTorchRecordSize) {
          CHECK_THAT(e.what(), Catch::Contains("24") && Catch::Contains("28"));
        }
      }
    }
  }
}

// Archives of 1,024 records and more read their local headers on a second
// thread while data.pkl runs: errors there must come out as they do
// sequentially, and before an error of the pickle.
TEST_CASE("a large archive's corrupt local header is reported, before a pickle error", "[torch][malformed]") {
  const Buffer good = read_file(checkpoints_dir() / "many_small_20k.t113.pt");
  const std::string late_name = "data/19990";  // one of the last records: located on the other thread
  Buffer bad_header = good;
  {
    // The local header of that record: "PK\3\4" 26 bytes before its name.
    const std::string needle = "/" + late_name;
    auto it = std::search(bad_header.begin(), bad_header.end(), needle.begin(), needle.end());
    REQUIRE(it != bad_header.end());
    while (!(it[0] == 'P' && it[1] == 'K' && it[2] == 3 && it[3] == 4)) --it;
    it[3] = 9;
  }
  SECTION("the local header alone") {
    const ErrorCode code = code_of([&] { open_bytes(bad_header); });
    CHECK(code == ErrorCode::kZipBadSignature);
  }
  SECTION("with data.pkl naming a storage that has no record") {
    Buffer both = bad_header;
    patch(both, "storage", "storxge");  // the first persistent id: kTorchBadPersistentId on its own
    CHECK(code_of([&] { open_bytes(both); }) == ErrorCode::kZipBadSignature);
    Buffer pickle_only = good;
    patch(pickle_only, "storage", "storxge");
    CHECK(code_of([&] { open_bytes(pickle_only); }) == ErrorCode::kTorchBadPersistentId);
  }
  SECTION("the good file still opens, every storage where its record says") {
    const auto ck = open_bytes(good);
    REQUIRE(ck.storages().size() == 20000);
    const auto& ar = *ck.archive();
    for (const auto& s : ck.storages()) {
      const auto* rec = ar.find(s.record);
      REQUIRE(rec != nullptr);
      REQUIRE(s.file_offset == rec->data_offset);
    }
  }
}

TEST_CASE("files that are not checkpoints say what they look like", "[torch][malformed]") {
  const Buffer zip = read_file(checkpoints_dir() / "protocol2.t2x.pt");
  struct NotCase {
    const char* name;
    Buffer bytes;
    ErrorCode expected;
    const char* phrase;
  };
  const NotCase cases[] = {
      {"empty", {}, ErrorCode::kTorchNotCheckpoint, "empty"},
      {"HTML page", bytes_of("<!DOCTYPE html><html><body>Not Found</body></html>"), ErrorCode::kTorchNotCheckpoint,
       "HTML"},
      {"git-lfs pointer",
       bytes_of("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n"),
       ErrorCode::kTorchNotCheckpoint, "git-lfs"},
      // Safetensors files are read since docs/write.md; this one's tensor entry is empty.
      {"safetensors", bytes_of(std::string("\x10\0\0\0\0\0\0\0{\"a\":{}}        ", 24)),
       ErrorCode::kTorchBadSafetensors, "safetensors"},
      {"numpy", bytes_of("\x93NUMPY\x01\x00v\x00{'descr': '<f4'}"), ErrorCode::kTorchNotCheckpoint, "numpy"},
      {"truncated zip", Buffer(zip.begin(), zip.begin() + 200), ErrorCode::kTorchNotCheckpoint, "truncated"},
      {"preview PYTORCH1", bytes_of("PYTORCH1 and some more bytes"), ErrorCode::kTorchPreviewFormat, "preview"},
      {"mobile flatbuffer", bytes_of(std::string("\x18\0\0\0PTMF\0\0\0\0\0\0", 14)), ErrorCode::kTorchUnsupportedFormat, "flatbuffer"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      try {
        open_bytes(c.bytes);
        FAIL("no error");
      } catch (const Error& e) {
        CHECK(e.code() == c.expected);
        CHECK_THAT(e.what(), Catch::Contains(c.phrase));
      }
    }
  }
}

// Issue 27, part 6: files torch writes and reads that maploc listed wrongly or hashed without end.
namespace {
std::filesystem::path attack(const char* name) {
  return std::filesystem::path(MAPLOC_FIXTURES_DIR) / "malicious" / "attacks" / name;
}
}  // namespace

TEST_CASE("a stride-0 view of 2^62 float32 elements is refused: its byte count wraps", "[torch][malformed]") {
  const Error e = error_of([] { (void)Checkpoint::open(attack("expand_2p62.pt")); });
  CHECK(e.code() == ErrorCode::kTorchBadTensor);
  INFO(e.what());
  CHECK(std::string(e.what()).find("tensor 'big'") != std::string::npos);
  CHECK(std::string(e.what()).find("byte count") != std::string::npos);
}

TEST_CASE("hashing or copying an expanded view is bounded by torch_max_expanded_bytes", "[torch][limits]") {
  const Checkpoint huge = Checkpoint::open(attack("expand_2p40.pt"));
  REQUIRE(huge.tensors().size() == 1);
  const torch::Tensor& big = huge.tensors()[0];
  CHECK(big.numel() == (std::uint64_t{1} << 40));
  const Error e = error_of([&] { (void)torch::tensor_sha256(huge, big); });
  CHECK(e.code() == ErrorCode::kTorchLimitExpandedBytes);
  const std::string what = e.what();
  INFO(what);
  CHECK(what.find("tensor 'big'") != std::string::npos);
  CHECK(what.find("Limits::torch_max_expanded_bytes (4294967296)") != std::string::npos);
  CHECK(what.find("--limit torch_max_expanded_bytes=") != std::string::npos);
  CHECK(code_of([&] { (void)torch::contiguous_bytes(huge, big); }) == ErrorCode::kTorchLimitExpandedBytes);

  // 16 KiB of values from 16 stored bytes: under the default, over a lowered limit, and a
  // contiguous tensor of any size is never counted against it.
  const Checkpoint rows = Checkpoint::open(attack("expand_16k.pt"));
  const torch::Tensor& r = rows.tensors()[0];
  const auto bytes = torch::contiguous_bytes(rows, r);
  REQUIRE(bytes.size() == 16384);
  float last = 0;
  std::memcpy(&last, bytes.data() + bytes.size() - 4, 4);
  CHECK(last == 3.0f);
  torch::Options low;
  low.limits.torch_max_expanded_bytes = 4096;
  const Checkpoint rows_low = Checkpoint::open(attack("expand_16k.pt"), low);
  CHECK(code_of([&] { (void)torch::tensor_sha256(rows_low, rows_low.tensors()[0]); }) ==
        ErrorCode::kTorchLimitExpandedBytes);
  low.limits.torch_max_expanded_bytes = 0;
  const Checkpoint plain = Checkpoint::open(checkpoints_dir() / "protocol2.t113.pt", low);
  for (const auto& t : plain.tensors()) {
    if (t.storage) CHECK_NOTHROW(torch::tensor_sha256(plain, t));
  }
}

TEST_CASE("unknown_globals covers every pickle torch.load unpickles", "[torch][globals]") {
  // Legacy: magic, version, sys info, object and storage keys are all unpickled by torch.load.
  const Checkpoint legacy = Checkpoint::open(attack("legacy_payload_every_pickle.pt"));
  CHECK(legacy.unknown_globals() ==
        std::vector<std::string>{"nt.system", "os.system", "subprocess.call", "subprocess.getoutput"});
  CHECK(legacy.tensors().size() == 1);
  CHECK(Checkpoint::open(attack("legacy_payload_sys_info.pt")).unknown_globals() ==
        std::vector<std::string>{"os.system"});
  // TorchScript: constants.pkl, which torch.jit.load unpickles.
  const Checkpoint script = Checkpoint::open(attack("torchscript_constants_global.pt"));
  CHECK(script.format() == torch::Format::kTorchScript);
  const auto& g = script.unknown_globals();  // data.pkl's __torch__ classes, and constants.pkl's call
  CHECK(std::find(g.begin(), g.end(), "os.system") != g.end());
  CHECK(std::is_sorted(g.begin(), g.end()));
  // ... and its code/**/*.debug_pkl source ranges, which torch.jit.load unpickles as well.
  const Checkpoint debug = Checkpoint::open(attack("torchscript_debug_pkl_global.pt"));
  const auto& d = debug.unknown_globals();
  CHECK(std::find(d.begin(), d.end(), "posix.system") != d.end());
  CHECK(std::find(g.begin(), g.end(), "posix.system") == g.end());
}

TEST_CASE("legacy streams of every pickle protocol torch writes (1-5) open", "[torch][legacy]") {
  for (int p = 1; p <= 5; ++p) {
    const auto path = checkpoints_dir() / ("legacy_protocol" + std::to_string(p) + ".t113.pt");
    INFO(path);
    const Checkpoint c = Checkpoint::open(path);
    CHECK(c.format() == torch::Format::kLegacy);
    CHECK(c.tensors().size() == 3);
    CHECK(c.unknown_globals().empty());
  }
}

TEST_CASE("safetensors names and metadata that are not UTF-8 are refused", "[torch][safetensors][malformed]") {
  for (const char* name : {"st_name_not_utf8.safetensors", "st_name_surrogate.safetensors",
                           "st_name_escaped_surrogate.safetensors", "st_metadata_not_utf8.safetensors",
                           "st_metadata_key_escaped_surrogate.safetensors"}) {
    INFO(name);
    const Error e = error_of([&] { (void)Checkpoint::open(attack(name)); });
    CHECK(e.code() == ErrorCode::kTorchBadSafetensors);
    CHECK(std::string(e.what()).find("UTF-8") != std::string::npos);
  }
  // The raw byte is named by its file offset: 8 (the size) + 3 ('{"w').
  const Error raw = error_of([] { (void)Checkpoint::open(attack("st_name_not_utf8.safetensors")); });
  INFO(raw.what());
  CHECK(std::string(raw.what()).find("file byte 11 (0xff)") != std::string::npos);
  CHECK(raw.offset() == std::optional<std::uint64_t>{11});
}

}  // namespace maploc::test
