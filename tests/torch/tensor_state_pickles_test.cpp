// tensor_state_pickles_test.cpp - hand-written streams for what the torch-made fixtures cannot show:
// a tensor state shared through the memo, a state on a cycle, enum/dtype rendering without import,
// a state torch could not apply, and the rendering's byte budget (docs/torch.md, "Tensor state").
#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "torch/pickle_bytes.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using nlohmann::json;
using torch::Checkpoint;

// _rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, (storage '0', 0, (4,), (1,), False, None), state)
std::string tensor_with_state(const std::string& state) {
  const std::string pid = "(" + str("storage") + "ctorch\nFloatStorage\n" + str("0") + str("cpu") + "K\x04tQ";
  const std::string v2_args = "(" + pid + std::string("K\x00", 2) + "K\x04\x85K\x01\x85\x89Nt";
  return "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor_v2\nctorch\nTensor\n" + v2_args +
         state + "tR";
}

json attributes_of(const torch::Tensor& t) {
  json out = json::object();
  for (const auto& a : t.attributes) out[a.name] = json::parse(a.json);
  return out;
}

std::vector<std::string> names(const Checkpoint& c) {
  std::vector<std::string> out;
  for (const auto& t : c.tensors()) out.push_back(t.name);
  return out;
}

}  // namespace

TEST_CASE("tensor state: enums, dtypes and tuples are rendered from the pickle, nothing imported",
          "[torch][tensor_state]") {
  const std::string state = "}(" + str("kp") + "cmymod.sub\nKP\n" + str("auto") + "\x85R" + str("dt") +
                            "ctorch\nint4\n" + str("bs") + "K\x01K\x40\x86" + str("f") + "G\x7f\xf8" +
                            std::string(6, '\0') + str("n") + "N" + "u";
  const auto c = open_bytes(legacy("\x80\x02}(" + str("w") + tensor_with_state(state) + "u."));
  REQUIRE(names(c) == std::vector<std::string>{"w"});
  CHECK(attributes_of(c.tensors()[0]) ==
        json::parse(R"({"kp":{"class":"mymod.sub.KP","value":"auto"},"dt":{"dtype":"int4"},"bs":[1,64],)"
                    R"("f":{"float":"nan"},"n":null})"));
  // The class is reported as a global torch would have to import, never imported here.
  const auto& unknown = c.unknown_globals();
  CHECK(std::find(unknown.begin(), unknown.end(), "mymod.sub.KP") != unknown.end());
}

TEST_CASE("tensor state: a state shared through the memo gives every tensor its attributes",
          "[torch][tensor_state]") {
  // {'a': T(S), 'b': T(S)} with S = {'note': 'n', 'x': <tensor>} the first time, then a memo reference.
  SECTION("a tensor-free state: walked once, rendered for both") {
    const std::string s = "}" + put(5) + "(" + str("note") + str("n") + "u";
    const auto c = open_bytes(legacy("\x80\x02}(" + str("a") + tensor_with_state(s) + str("b") +
                                     tensor_with_state(get(5)) + "u."));
    REQUIRE(names(c) == (std::vector<std::string>{"a", "b"}));
    CHECK(attributes_of(c.tensors()[0]) == json::parse(R"({"note":"n"})"));
    CHECK(attributes_of(c.tensors()[1]) == json::parse(R"({"note":"n"})"));
  }
  SECTION("a state holding a tensor: its tensor named under each path, as tied weights are") {
    const std::string s = "}" + put(5) + "(" + str("x") + tensor_with_state("}") + str("note") + str("n") + "u";
    const auto c = open_bytes(legacy("\x80\x02}(" + str("a") + tensor_with_state(s) + str("b") +
                                     tensor_with_state(get(5)) + "u."));
    CHECK(names(c) == (std::vector<std::string>{"a", "a.x", "b", "b.x"}));
    CHECK(attributes_of(c.tensors()[2]) == json::parse(R"({"note":"n"})"));
  }
}

TEST_CASE("tensor state: a state that leads back to the root is walked once and ends", "[torch][tensor_state]") {
  // root = {'t': T({'back': root})}: the path back is not followed; the attribute is kept, inert.
  const auto c = open_bytes(legacy("\x80\x02}" + put(0) + str("t") +
                                   tensor_with_state("}(" + str("back") + get(0) + "u") + "s."));
  REQUIRE(!c.tensors().empty());
  CHECK(c.tensors()[0].name == "t");
  for (const auto& t : c.tensors()) CHECK(t.name.rfind("t", 0) == 0);
  CHECK(c.tensors().size() <= 2);
}

TEST_CASE("tensor state: a state torch could not apply is refused, naming the tensor", "[torch][tensor_state]") {
  const Error e =
      error_of([&] { open_bytes(legacy("\x80\x02}(" + str("weird") + tensor_with_state("K\x05") + "u.")); });
  CHECK(e.code() == ErrorCode::kTorchBadTensor);
  CHECK_THAT(e.message(), Catch::Contains("'weird'") && Catch::Contains("not a dict"));
}

TEST_CASE("tensor state: an attribute that expands through shared references hits the walk-bytes limit",
          "[torch][tensor_state][limits]") {
  // 40 lists, each holding the one below twice: 2^40 leaves when rendered.
  std::string object = "\x80\x02" + str("x") + put(1) + "0";
  for (int k = 1; k <= 40; ++k) object += "]" + put(k + 1) + "(" + get(k) + get(k) + "e0";
  object += "}(" + str("w") + tensor_with_state("}(" + str("deep") + get(41) + "u") + "u.";
  torch::Options options;
  options.limits.torch_max_walk_bytes = 1 << 20;
  const Error e = error_of([&] { open_bytes(legacy(object), options); });
  CHECK(e.code() == ErrorCode::kTorchLimitWalkBytes);
  CHECK_THAT(e.message(), Catch::Contains("w.deep"));
}

}  // namespace maploc::test
