// tensor_state_test.cpp - a tensor's state (__dict__, slots; docs/torch.md, "Tensor state"): tensors in it
// named <tensor>.<attribute>, wrapper subclasses with their inner tensors and inert attributes, against
// the torch-made manifests (fixtures/generate.py: fx_tensor_state, fx_wrapper_subclasses), through the
// library and the CLI (ls --json --hash, load --hash, convert to safetensors, remap).
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "maploc/torch/safetensors.h"
#include "run_shell.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using nlohmann::json;
using torch::Checkpoint;

const char* const kFixtures[] = {"tensor_state.t113.pt",   "tensor_state.t2x.pt",        "two_tensor.t2x.pt",
                                 "torchao_int8wo.t2x.pt", "torchao_intx_int4wo.t2x.pt", "torchao_float8wo.t2x.pt"};

json manifest(const std::string& file) { return read_json(checkpoints_dir() / (file + ".manifest.json")); }

// Tensor::attributes as one JSON object, each value parsed from its JSON text.
json attributes_of(const torch::Tensor& t) {
  json out = json::object();
  for (const auto& a : t.attributes) out[a.name] = json::parse(a.json);
  return out;
}

const torch::Tensor* find(const Checkpoint& c, const std::string& name) {
  for (const auto& t : c.tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The manifest's wrapper subclasses: objects entries with wrapper_subclass.
std::vector<json> wrappers(const json& m) {
  std::vector<json> out;
  for (const auto& o : m["objects"]) {
    if (o.value("wrapper_subclass", false)) out.push_back(o);
  }
  return out;
}

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// The tensors with bytes of their own, in file order (the manifests list those).
std::vector<const torch::Tensor*> with_storage(const Checkpoint& ckpt) {
  std::vector<const torch::Tensor*> out;
  for (const auto& t : ckpt.tensors()) {
    if (t.storage) out.push_back(&t);
  }
  return out;
}

}  // namespace

TEST_CASE("tensor state: inner tensors, wrapper subclasses and attributes as torch's view has them",
          "[torch][tensor_state]") {
  for (const char* file : kFixtures) {
    DYNAMIC_SECTION(file) {
      const json m = manifest(file);
      const auto ckpt = Checkpoint::open(checkpoints_dir() / file);
      const auto stored = with_storage(ckpt);
      REQUIRE(stored.size() == m["tensors"].size());
      for (std::size_t i = 0; i < stored.size(); ++i) {
        const auto& e = m["tensors"][i];
        INFO(e["name"]);
        CHECK(stored[i]->name == e["name"].get<std::string>());
        CHECK(torch::dtype_name(stored[i]->dtype) == e["dtype"].get<std::string>());
        CHECK(json(stored[i]->shape) == e["shape"]);
        CHECK(torch::tensor_sha256(ckpt, *stored[i]) == e["sha256"].get<std::string>());
        CHECK(attributes_of(*stored[i]) == e.value("state", json::object()));
      }
      const auto ws = wrappers(m);
      std::size_t storageless = 0;
      for (const auto& t : ckpt.tensors()) storageless += t.storage ? 0 : 1;
      CHECK(storageless == ws.size());
      for (const auto& w : ws) {
        INFO(w["name"]);
        const torch::Tensor* t = find(ckpt, w["name"].get<std::string>());
        REQUIRE(t != nullptr);
        CHECK(t->kind == torch::TensorKind::kWrapperSubclass);
        CHECK(!t->storage);
        CHECK(t->subclass == w["type"].get<std::string>());
        CHECK(torch::dtype_name(t->dtype) == w["dtype"].get<std::string>());
        CHECK(json(t->shape) == w["shape"]);
        CHECK(attributes_of(*t) == w["state"]);
      }
    }
  }
}

TEST_CASE("tensor state: the fixtures hold what they are for", "[torch][tensor_state]") {
  // Guards against a regenerated fixture that lost its point (e.g. torch pickling no state).
  const auto ts = Checkpoint::open(checkpoints_dir() / "tensor_state.t2x.pt");
  for (const char* name : {"t", "t.extra", "sub", "sub.extra", "sub.more.pair.0", "p", "p.mask", "plain"}) {
    INFO(name);
    CHECK(find(ts, name) != nullptr);
  }
  CHECK(find(ts, "p")->parameter);
  CHECK(find(ts, "sub")->subclass == "__main__.Tagged");
  CHECK(attributes_of(*find(ts, "sub")) ==
        json::parse(R"({"scale":0.5,"kind":{"dtype":"bfloat16"},"shape_hint":[2,2]})"));
  const auto old = Checkpoint::open(checkpoints_dir() / "tensor_state.t113.pt");
  CHECK(find(old, "sub.extra") != nullptr);
  const auto int4 = Checkpoint::open(checkpoints_dir() / "torchao_intx_int4wo.t2x.pt");
  const json a = attributes_of(*find(int4, "0.weight"));
  CHECK(a["target_dtype"] == json::parse(R"({"dtype":"int4"})"));
  CHECK(a["block_size"] == json::parse("[1,64]"));
  const auto f8 = Checkpoint::open(checkpoints_dir() / "torchao_float8wo.t2x.pt");
  CHECK(attributes_of(*find(f8, "0.weight"))["kernel_preference"]["value"] == "auto");
  const auto two = Checkpoint::open(checkpoints_dir() / "two_tensor.t2x.pt");
  CHECK(find(two, "tt.a") != nullptr);
  CHECK(find(two, "tt.b") != nullptr);
}

TEST_CASE("tensor state: jagged nested tensors list values, offsets and lengths with torch's bytes",
          "[torch][tensor_state][nested]") {
  const json m = manifest("nested_jagged.t2x.pt");
  const auto ckpt = Checkpoint::open(checkpoints_dir() / "nested_jagged.t2x.pt");
  const auto stored = with_storage(ckpt);
  REQUIRE(stored.size() == m["tensors"].size());
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const auto& e = m["tensors"][i];
    INFO(e["name"]);
    CHECK(stored[i]->name == e["name"].get<std::string>());
    CHECK(json(stored[i]->shape) == e["shape"]);
    CHECK(torch::tensor_sha256(ckpt, *stored[i]) == e["sha256"].get<std::string>());
    CHECK(attributes_of(*stored[i]) == e.value("state", json::object()));
  }
  std::size_t jagged = 0;
  for (const auto& o : m["objects"]) {
    if (!o.value("nested_jagged", false)) continue;
    ++jagged;
    INFO(o["name"]);
    const torch::Tensor* t = find(ckpt, o["name"].get<std::string>());
    REQUIRE(t != nullptr);
    CHECK(t->kind == torch::TensorKind::kNestedJagged);
    CHECK(t->subclass == o["type"].get<std::string>());
    CHECK(torch::dtype_name(t->dtype) == o["dtype"].get<std::string>());
    const json a = attributes_of(*t);
    CHECK(a["ragged_idx"] == o["ragged_idx"]);
    CHECK(a["min_seqlen"] == o["min_seqlen"]);
    CHECK(a["max_seqlen"] == o["max_seqlen"]);
    std::vector<std::string> parts;
    for (const auto& c : t->components) parts.push_back(c.role);
    const bool lengths = find(ckpt, o["name"].get<std::string>() + ".lengths") != nullptr;
    CHECK(parts == (lengths ? std::vector<std::string>{"values", "offsets", "lengths"}
                            : std::vector<std::string>{"values", "offsets"}));
  }
  CHECK(jagged == 3);
  CHECK(find(ckpt, "narrowed.lengths") != nullptr);
}

#ifdef MAPLOC_CLI_PATH
TEST_CASE("tensor state: maploc ls lists every qdata, scale and zero_point of a torchao int8 state_dict",
          "[torch][tensor_state][cli]") {
  // Issue 27's acceptance line: each with torch's bytes.
  const auto path = checkpoints_dir() / "torchao_int8wo.t2x.pt";
  const json m = manifest("torchao_int8wo.t2x.pt");
  const Run table = run_shell(std::string("'") + MAPLOC_CLI_PATH + "' ls " + quoted(path));
  REQUIRE(table.exit_code == 0);
  const Run ls = run_shell(std::string("'") + MAPLOC_CLI_PATH + "' ls " + quoted(path) + " --json --hash");
  REQUIRE(ls.exit_code == 0);
  std::map<std::string, std::string> sha;
  const json listed = json::parse(ls.out);
  for (const auto& t : listed["tensors"]) {
    if (t["sha256"].is_string()) sha[t["name"].get<std::string>()] = t["sha256"].get<std::string>();
  }
  std::map<std::string, std::string> want;
  for (const auto& e : m["tensors"]) want[e["name"].get<std::string>()] = e["sha256"].get<std::string>();
  for (const char* name : {"0.weight.qdata", "0.weight.scale", "0.weight.zero_point"}) {
    INFO(name);
    REQUIRE(want.count(name) == 1);
    CHECK(sha[name] == want[name]);
    CHECK(table.out.find(std::string(name) + "  ") != std::string::npos);
  }
}

TEST_CASE("tensor state: ls --json --hash, load --hash, convert and remap see every inner tensor",
          "[torch][tensor_state][cli]") {
  const std::string cli = std::string("'") + MAPLOC_CLI_PATH + "'";
  const auto tmp = std::filesystem::temp_directory_path() / ("maploc_tensor_state_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  for (const char* file : kFixtures) {
    DYNAMIC_SECTION(file) {
      const auto path = checkpoints_dir() / file;
      const json m = manifest(file);
      // The JSON listing: tensors with their hashes, attributes on the outer tensor.
      const Run ls = run_shell(cli + " ls " + quoted(path) + " --json --hash");
      REQUIRE(ls.exit_code == 0);
      const json out = json::parse(ls.out);
      std::map<std::string, json> by_name;
      for (const auto& t : out["tensors"]) by_name[t["name"].get<std::string>()] = t;
      for (const auto& e : m["tensors"]) {
        INFO(e["name"]);
        const json& t = by_name[e["name"].get<std::string>()];
        REQUIRE(t.is_object());
        CHECK(t["sha256"] == e["sha256"]);
        CHECK(t.value("attributes", json::object()) == e.value("state", json::object()));
      }
      for (const auto& w : wrappers(m)) {
        INFO(w["name"]);
        const json& t = by_name[w["name"].get<std::string>()];
        REQUIRE(t.is_object());
        CHECK(t["kind"] == "wrapper_subclass");
        CHECK(t.value("subclass", "") == w["type"].get<std::string>());
        CHECK(t["storage"].is_null());
        CHECK(t.value("attributes", json::object()) == w["state"]);
      }
      // load: every inner tensor placed and hashed.
      const Run load = run_shell(cli + " load " + quoted(path) + " --hash");
      REQUIRE(load.exit_code == 0);
      for (const auto& e : m["tensors"]) {
        INFO(e["name"]);
        CHECK(load.out.find(e["sha256"].get<std::string>() + "  " + e["name"].get<std::string>() + "\n") !=
              std::string::npos);
      }
      // convert: every inner tensor under its name, with its values.
      const auto st = tmp / (std::string(file) + ".safetensors");
      const Run conv = run_shell(cli + " convert " + quoted(path) + " " + quoted(st) + " 2>&1");
      INFO(conv.out);
      REQUIRE(conv.exit_code == 0);
      const Run st_ls = run_shell(cli + " ls " + quoted(st) + " --json --hash");
      REQUIRE(st_ls.exit_code == 0);
      std::map<std::string, std::string> st_sha;
      const json st_listed = json::parse(st_ls.out);
      for (const auto& t : st_listed["tensors"]) {
        st_sha[t["name"].get<std::string>()] = t["sha256"].get<std::string>();
      }
      CHECK(st_sha.size() == m["tensors"].size());
      std::map<std::string, std::string> md;
      const auto converted = Checkpoint::open(st);
      for (const auto& [k, v] : converted.metadata()) md[k] = v;
      for (const auto& w : wrappers(m)) {  // the outer tensor, bytes-less, as metadata
        INFO(w["name"]);
        const std::string key = std::string(torch::kWrapperSubclassPrefix) + w["name"].get<std::string>();
        REQUIRE(md.count(key) == 1);
        const json described = json::parse(md[key]);
        CHECK(described["subclass"] == w["type"]);
        CHECK(described["shape"] == w["shape"]);
        CHECK(described["attributes"] == w["state"]);
      }
      for (const auto& e : m["tensors"]) {
        INFO(e["name"]);
        CHECK(st_sha[e["name"].get<std::string>()] == e["sha256"].get<std::string>());
      }
      // remap: the pickle is re-emitted with its state, so the rewritten file lists the same.
      const auto re = tmp / file;
      const Run remap = run_shell(cli + " remap " + quoted(path) + " " + quoted(re) + " --map-location cpu 2>&1");
      INFO(remap.out);
      REQUIRE(remap.exit_code == 0);
      const Run re_ls = run_shell(cli + " ls " + quoted(re) + " --json --hash");
      REQUIRE(re_ls.exit_code == 0);
      json a = out["tensors"], b = json::parse(re_ls.out)["tensors"];
      for (auto* list : {&a, &b}) {
        for (auto& t : *list) {
          t.erase("storage");  // record keys may be renumbered
        }
      }
      CHECK(a == b);
    }
  }
  std::filesystem::remove_all(tmp);
}
TEST_CASE("tensor state: a sharded safetensors set maps every inner tensor, not the bytes-less wrapper",
          "[torch][tensor_state][cli]") {
  const std::string cli = std::string("'") + MAPLOC_CLI_PATH + "'";
  const auto path = checkpoints_dir() / "torchao_int8wo.t2x.pt";
  const auto dir = std::filesystem::temp_directory_path() / ("maploc_tensor_state_set_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const Run conv = run_shell(cli + " convert " + quoted(path) + " " + quoted(dir) + " --to safetensors --shard-size 1KB 2>&1");
  INFO(conv.out);
  REQUIRE(conv.exit_code == 0);
  const json index = read_json(dir / "model.safetensors.index.json");
  CHECK(!index["weight_map"].contains("0.weight"));
  const json m = manifest("torchao_int8wo.t2x.pt");
  const Run ls = run_shell(cli + " ls " + quoted(dir) + " --json --hash");
  REQUIRE(ls.exit_code == 0);
  const json listed = json::parse(ls.out);
  std::map<std::string, std::string> sha;
  for (const auto& t : listed["tensors"]) sha[t["name"].get<std::string>()] = t["sha256"].get<std::string>();
  CHECK(sha.size() == m["tensors"].size());
  for (const auto& e : m["tensors"]) {
    INFO(e["name"]);
    CHECK(index["weight_map"].contains(e["name"].get<std::string>()));
    CHECK(sha[e["name"].get<std::string>()] == e["sha256"].get<std::string>());
  }
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace maploc::test
