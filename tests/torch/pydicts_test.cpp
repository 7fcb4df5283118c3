// pydicts_test.cpp - dicts built every way torch's unpickler accepts (Python 2's OrderedDict(list of
// [key, value] lists), dict(pairs), empty + SETITEMS, BUILD state, nesting, bytes/int/tuple keys)
// name their tensors as torch.load does (fixtures/pydicts/generate.py wrote the files and manifests).
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "torch/torch_test_util.h"

namespace maploc::test {

TEST_CASE("Python-2 and other dict constructions read as torch.load reads them", "[torch]") {
  const auto dir = std::filesystem::path(MAPLOC_FIXTURES_DIR) / "pydicts";
  const auto index = read_json(dir / "index.json");
  REQUIRE(index.size() >= 26);
  for (const auto& entry : index) {
    const std::string file = entry["file"].get<std::string>();
    DYNAMIC_SECTION(file) {
      const auto want = read_json(dir / entry["manifest"].get<std::string>());
      const auto c = torch::Checkpoint::open(dir / file);
      CHECK(torch::format_name(c.format()) == want["format"].get<std::string>());
      std::vector<const torch::Tensor*> mine;
      for (const auto& t : c.tensors()) {
        if (t.storage && t.kind != torch::TensorKind::kStorage) mine.push_back(&t);
      }
      const auto& tensors = want["tensors"];
      REQUIRE(mine.size() == tensors.size());
      for (std::size_t i = 0; i < mine.size(); ++i) {
        INFO("tensor " << i);
        CHECK(mine[i]->name == tensors[i]["name"].get<std::string>());
        CHECK(torch::dtype_name(mine[i]->dtype) == tensors[i]["dtype"].get<std::string>());
        CHECK(mine[i]->shape == tensors[i]["shape"].get<std::vector<std::int64_t>>());
        CHECK(torch::tensor_sha256(c, *mine[i]) == tensors[i]["sha256"].get<std::string>());
      }
    }
  }
}

}  // namespace maploc::test
