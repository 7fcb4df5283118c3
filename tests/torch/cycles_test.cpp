// cycles_test.cpp - object graphs with cycles and shared subgraphs (docs/torch.md, "Names"), and
// archives after a pickle in the same file: the torch-made fixtures through the library and the CLI,
// hand-written streams for the cost and the depth limit.
#include <algorithm>
#include <utility>
#include <map>
#include <string>
#include <vector>

#include "cpu_time.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "run_shell.h"
#include "torch/pickle_bytes.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using torch::Checkpoint;

const char* const kFixtures[] = {"cycle_self_dict.t113.pt",    "cycle_self_dict.t2x.pt",  "cycle_parent_child.t113.pt",
                                 "cycle_parent_child.t2x.pt", "cycle_class.t113.pt",     "cycle_class.t2x.pt",
                                 "zip_after_pickle.t113.pt",  "zip_after_pickle.t2x.pt"};

// One float32 tensor of 4 elements on storage '0', memoized as `memo` and popped.
std::string tensor(int memo) {
  return "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\nFloatStorage\n" + str("0") + str("cpu") +
         "K\x04tQ" + std::string("K\x00", 2) + "K\x04\x85K\x01\x85\x89NtR" + put(memo) + "0";
}

// {'top': L_n} where L_1 holds `bottom` (memo 1) twice and L_k holds L_{k-1} twice; with
// `back_to_root` every level also holds the root dict (memo 0), which puts every level on one cycle.
std::string dag(int levels, const std::string& bottom, bool back_to_root, const std::string& extra = {}) {
  std::string p = "\x80\x02}" + put(0) + bottom;
  for (int k = 1; k <= levels; ++k) {
    p += "]" + put(k + 1) + "(" + get(k) + get(k) + (back_to_root ? get(0) : "") + "e0";
  }
  return p + str("top") + get(levels + 1) + "s" + extra + ".";
}

std::vector<std::string> names(const Checkpoint& c) {
  std::vector<std::string> out;
  for (const auto& t : c.tensors()) out.push_back(t.name);
  return out;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("cycles: the torch-made fixtures name what torch's view names, through the library", "[torch][cycles]") {
  for (const char* file : kFixtures) {
    DYNAMIC_SECTION(file) {
      const auto m = read_json(checkpoints_dir() / (std::string(file) + ".manifest.json"));
      const auto ckpt = Checkpoint::open(checkpoints_dir() / file);
      REQUIRE(ckpt.tensors().size() == m["tensors"].size());
      for (std::size_t i = 0; i < ckpt.tensors().size(); ++i) {
        const auto& t = ckpt.tensors()[i];
        const auto& e = m["tensors"][i];
        INFO(e["name"]);
        CHECK(t.name == e["name"].get<std::string>());
        CHECK(torch::dtype_name(t.dtype) == e["dtype"].get<std::string>());
        CHECK(nlohmann::json(t.shape) == e["shape"]);
        CHECK(torch::tensor_sha256(ckpt, t) == e["sha256"].get<std::string>());
      }
    }
  }
}

TEST_CASE("cycles: a tensor shared outside a cycle keeps a name per path, one on a cycle is named once",
          "[torch][cycles]") {
  const auto ckpt = Checkpoint::open(checkpoints_dir() / "cycle_parent_child.t2x.pt");
  // a and b are on one cycle: walked under 'a' only ('b' is not followed); a['x'] is also 'tied'.
  CHECK(names(ckpt) == std::vector<std::string>{"a.x", "a.child.y", "tied", "z"});
  CHECK(ckpt.tensors()[0].storage == ckpt.tensors()[2].storage);
  // Tied weights without a cycle: one name per path, as before.
  const auto views = Checkpoint::open(checkpoints_dir() / "views_shared.t2x.pt");
  const auto n = names(views);
  CHECK(std::count(n.begin(), n.end(), "tied_a") == 1);
  CHECK(std::count(n.begin(), n.end(), "tied_b") == 1);
}

#ifdef MAPLOC_CLI_PATH
TEST_CASE("cycles: maploc ls --json --hash and load --hash agree with the manifests", "[torch][cycles][cli]") {
  for (const char* file : kFixtures) {
    DYNAMIC_SECTION(file) {
      const auto path = checkpoints_dir() / file;
      const auto m = read_json(checkpoints_dir() / (std::string(file) + ".manifest.json"));
      const Run ls = run_shell(std::string("'") + MAPLOC_CLI_PATH + "' ls '" + path.string() + "' --json --hash");
      REQUIRE(ls.exit_code == 0);
      const auto out = nlohmann::json::parse(ls.out);
      REQUIRE(out["tensors"].size() == m["tensors"].size());
      for (std::size_t i = 0; i < m["tensors"].size(); ++i) {
        const auto& e = m["tensors"][i];
        INFO(e["name"]);
        CHECK(out["tensors"][i]["name"] == e["name"]);
        CHECK(out["tensors"][i]["dtype"] == e["dtype"]);
        CHECK(out["tensors"][i]["shape"] == e["shape"]);
        CHECK(out["tensors"][i]["sha256"] == e["sha256"]);
      }
      const Run load = run_shell(std::string("'") + MAPLOC_CLI_PATH + "' load '" + path.string() + "' --hash");
      REQUIRE(load.exit_code == 0);
      for (const auto& e : m["tensors"]) {
        INFO(e["name"]);
        CHECK(load.out.find(e["sha256"].get<std::string>() + "  " + e["name"].get<std::string>() + "\n") !=
              std::string::npos);
      }
    }
  }
}
#endif

TEST_CASE("cycles: a DAG of 60 levels, each holding the one below twice, costs one walk per object",
          "[torch][cycles][limits]") {
  const maploc::test::CpuTimer cpu;
  SECTION("every level also holds the root: one cycle, each level walked once") {
    const auto ckpt = open_bytes(legacy(dag(60, tensor(1), true)));
    // The bottom list holds the tensor twice (a name per path); the way back to the root is not followed,
    // nor is the second reference to each level (open: on the cycle being walked).
    CHECK(names(ckpt) == std::vector<std::string>{"top" + repeat(".0", 60), "top" + repeat(".0", 59) + ".1"});
  }
  SECTION("no cycle and no tensor below: the shared levels are walked once") {
    const auto ckpt = open_bytes(legacy(dag(60, "}" + put(1) + "0", false, str("w") + tensor(70) + get(70) + "s")));
    CHECK(names(ckpt) == std::vector<std::string>{"w"});
  }
  SECTION("no cycle and a tensor below: 2^60 names, refused by a limit, not walked") {
    torch::Options options;
    options.limits.torch_max_tensors = 4096;
    const Error e = error_of([&] { open_bytes(legacy(dag(60, tensor(1), false)), options); });
    CHECK(e.code() == ErrorCode::kTorchLimitTensors);
  }
  INFO("cpu " << cpu.seconds() << " s");
  CHECK(cpu.seconds() < 20.0 * maploc::test::kSanitizerSlowdown);
}

TEST_CASE("cycles: a dict holding itself 1,500 times is one level deep", "[torch][cycles][limits]") {
  std::string object = "\x80\x02}" + put(0) + tensor(1) + "(";
  for (int i = 0; i < 1500; ++i) object += str("s" + std::to_string(i)) + get(0);
  object += "u" + str("w") + get(1) + "s.";
  CHECK(names(open_bytes(legacy(object))) == std::vector<std::string>{"w"});
}

TEST_CASE("cycles: hostile deep nesting is still refused, with the limit named", "[torch][cycles][limits]") {
  SECTION("a list nested 100,000 deep") {
    const std::string object = "\x80\x02" + repeat("]", 100000) + repeat("a", 99999) + ".";
    const Error e = error_of([&] { open_bytes(legacy(object)); });
    CHECK(e.code() == ErrorCode::kPickleLimitNesting);
    CHECK_THAT(e.message(), Catch::Contains("pickle_max_nesting_depth"));
  }
  SECTION("1,100 dicts chained through the memo after they were made") {
    // d_0 ... d_1100 first (each memoized), then d_k['c'] = d_{k+1}: no cycle, 1,100 deep.
    std::string object = "\x80\x02";
    for (int k = 0; k <= 1100; ++k) object += "}r" + u32(static_cast<std::uint32_t>(k)) + "0";
    for (int k = 0; k < 1100; ++k) {
      object += "j" + u32(static_cast<std::uint32_t>(k)) + str("c") + "j" + u32(static_cast<std::uint32_t>(k + 1)) + "s0";
    }
    object += "j" + u32(0) + ".";
    const Error e = error_of([&] { open_bytes(legacy(object)); });
    CHECK(e.code() == ErrorCode::kPickleLimitNesting);
  }
}

// {'meta': 1} as pickle.dumps(protocol=2) writes it: 20 bytes.
const std::string kMetaPickle("\x80\x02}q\x00X\x04\x00\x00\x00metaq\x01K\x01s.", 20);

TEST_CASE("zip after other bytes: read whatever the sniff said first, else the message says what the file is",
          "[torch][cycles][sniff]") {
  const Buffer zip = read_file(checkpoints_dir() / "protocol2.t2x.pt");
  const auto want = names(open_bytes(zip));
  REQUIRE(!want.empty());
  const std::pair<const char*, std::string> prefixes[] = {
      {"a pickle", kMetaPickle},
      {"a numpy header", std::string("\x93NUMPY\x01\x00\x06\x00{}    ", 16)},
      {"an HTML page", "<html><body>readme</body></html>\n"},
  };
  for (const auto& [what, prefix] : prefixes) {
    DYNAMIC_SECTION("after " << what) {
      Buffer file(prefix.begin(), prefix.end());
      file.insert(file.end(), zip.begin(), zip.end());
      CHECK(names(open_bytes(file)) == want);
    }
  }
  SECTION("a pickle and nothing after it") {
    const std::string pickle = kMetaPickle;
    const Error e = error_of([&] { open_bytes(Buffer(pickle.begin(), pickle.end())); });
    CHECK(e.code() == ErrorCode::kTorchNotCheckpoint);
    CHECK_THAT(e.message(), Catch::Contains("bare pickle stream") && Catch::Contains("maploc dis"));
    CHECK(e.item() == "test.pt");
  }
}

}  // namespace maploc::test
