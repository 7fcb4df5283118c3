// consumer.cpp - a real use of maploc through every installed header, each included on its own:
// open a checkpoint, plan and load it on the CPU, print a tensor's hash; then the lower layers
// (zip, pickle), the writers (torch zip, safetensors, a sharded set) read back, verify, DLPack,
// and the C API. Each step prints a line; the test matches the hash line.
#include <maploc/bytes.h>
#include <maploc/error.h>
#include <maploc/limits.h>
#include <maploc/mapped_file.h>
#include <maploc/maploc.h>
#include <maploc/maploc_c.h>
#include <maploc/pickle/disassemble.h>
#include <maploc/pickle/machine.h>
#include <maploc/pickle/opcodes.h>
#include <maploc/pickle/value.h>
#include <maploc/progress.h>
#include <maploc/remap/device.h>
#include <maploc/remap/dlpack.h>
#include <maploc/remap/loaded.h>
#include <maploc/remap/map_location.h>
#include <maploc/remap/plan.h>
#include <maploc/remap/slice.h>
#include <maploc/remote/object.h>
#include <maploc/torch/checkpoint.h>
#include <maploc/torch/dtype.h>
#include <maploc/torch/hash.h>
#include <maploc/torch/safetensors.h>
#include <maploc/torch/storage.h>
#include <maploc/torch/tensor.h>
#include <maploc/torch/verify.h>
#include <maploc/torch/write.h>
#include <maploc/torch/write_set.h>
#include <maploc/version.h>
#include <maploc/zip/archive.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "consumer: %s\n", what);
  return 1;
}

// The hash of `name` in the checkpoint at `path`, through a plain CPU load.
std::string hash_of(const std::filesystem::path& path, const char* name) {
  const auto checkpoint = maploc::torch::Checkpoint::open(path);
  for (const maploc::torch::Tensor& t : checkpoint.tensors()) {
    if (t.name == name) return maploc::torch::tensor_sha256(checkpoint, t);
  }
  return "(missing)";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer CHECKPOINT TENSOR\n");
    return 2;
  }
  const std::filesystem::path path = argv[1];
  const char* name = argv[2];
  try {
    // torch/checkpoint.h, tensor.h, storage.h, dtype.h; remap/map_location.h, device.h, plan.h, loaded.h, progress.h
    maploc::torch::Options open_options;
    open_options.limits = maploc::Limits{};
    open_options.remote.parallel = 4;  // remote/object.h: how a URL source (http, https, s3) is read
    if (maploc::remote::is_url(path.string()) ||
        maploc::remote::display_url("https://user:secret@example.com/m.pt?X-Amz-Signature=s") !=
            "https://example.com/m.pt") {
      std::fprintf(stderr, "remote: is_url/display_url answer wrongly\n");
      return 1;
    }
    const auto checkpoint = maploc::torch::Checkpoint::open(path, open_options);
    const maploc::torch::Storage& first = checkpoint.storages().at(0);
    std::printf("open: %s, %zu tensors, storage 0 is %s on '%s'\n",
                std::string(maploc::torch::format_name(checkpoint.format())).c_str(), checkpoint.tensors().size(),
                std::string(maploc::torch::dtype_name(first.dtype)).c_str(), first.location.c_str());
    const auto map = maploc::remap::MapLocation::parse("cuda:*->cpu");
    const auto plan = maploc::remap::make_plan(checkpoint, map, maploc::remap::DeviceInventory::simulated({}));
    maploc::remap::check_fits(plan);
    std::printf("plan: %zu storages to %s\n", plan.targets.size(), plan.totals.at(0).device.str().c_str());
    maploc::remap::LoadOptions options;
    options.map = map;
    options.host = maploc::remap::HostMemory::kOwnedCopy;  // private copies, counted by the progress callback
    std::uint64_t reported = 0;
    options.progress = maploc::Progress([&](std::uint64_t done, std::uint64_t) { reported = done; });
    const auto loaded = maploc::remap::load(checkpoint, options);
    const auto index = loaded.find(name);
    if (!index) return fail("the tensor is not in the checkpoint");
    std::printf("maploc %s: %s %s\n", maploc::kVersion, name, loaded.tensor_sha256(*index).c_str());
    std::printf("progress: %llu bytes copied\n", static_cast<unsigned long long>(reported));

    // remap/slice.h: this tensor's rows of rank 0 of 2.
    const auto spec = maploc::remap::SliceSpec::parse("rows:*");
    const auto rows = maploc::remap::slice_bounds(loaded.tensors()[*index].shape.at(0), 0, 2);
    std::printf("slice: %zu rule(s), rank 0 of 2 owns rows [%lld, %lld)\n", spec.rules.size(),
                static_cast<long long>(rows.first), static_cast<long long>(rows.second));

    // remap/dlpack.h
    DLManagedTensor* dl = maploc::remap::to_dlpack(loaded, *index);
    std::printf("dlpack: %d dims, dtype code %d\n", dl->dl_tensor.ndim, static_cast<int>(dl->dl_tensor.dtype.code));
    dl->deleter(dl);

    // mapped_file.h, bytes.h, zip/archive.h, pickle/machine.h, value.h, disassemble.h, opcodes.h
    const auto archive = maploc::zip::Archive::open(path);
    const maploc::Bytes data_pkl = archive.read(archive.at("data.pkl"));
    maploc::pickle::Options pickle_options;
    pickle_options.persistent_load = [](const maploc::pickle::Value&, std::uint64_t) {
      return std::optional<maploc::pickle::Value>(maploc::pickle::Value::external(0));
    };
    const maploc::pickle::Result result = maploc::pickle::run(data_pkl, pickle_options);
    const std::string text = maploc::pickle::disassemble(data_pkl.span());
    const maploc::pickle::OpcodeInfo* proto = maploc::pickle::find_opcode(data_pkl.span()[0]);
    std::printf("pickle: %zu records, root is a %s, %llu opcodes, first %s, %zu bytes of disassembly\n",
                archive.records().size(), std::string(maploc::pickle::kind_name(result.root().kind())).c_str(),
                static_cast<unsigned long long>(result.opcode_count()), proto ? std::string(proto->name).c_str() : "?",
                text.size());
    const auto file = maploc::MappedFile::open(path);
    std::printf("mapped: %zu bytes\n", file.bytes.size());

    // torch/write.h, safetensors.h, write_set.h, verify.h, hash.h: written, read back, equal.
    const auto dir = std::filesystem::temp_directory_path() / ("maploc-consumer-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    struct RemoveAtExit {
      std::filesystem::path dir;
      ~RemoveAtExit() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } remove_at_exit{dir};
    maploc::torch::save_archive(checkpoint, dir / "copy.pt");
    maploc::torch::save_safetensors(checkpoint, dir / "copy.safetensors");
    maploc::torch::SetWriteOptions set_options;
    set_options.max_shard_bytes = 1;
    maploc::torch::save_set(checkpoint, dir / "set", set_options);
    const maploc::torch::VerifyReport report = maploc::torch::verify(dir / "copy.pt");
    const std::string want = loaded.tensor_sha256(*index);
    const bool same = hash_of(dir / "copy.pt", name) == want && hash_of(dir / "copy.safetensors", name) == want &&
                      hash_of(dir / "set", name) == want;
    if (!report.ok() || !same) return fail("a written copy does not read back the same");
    std::printf("write: zip, safetensors and a sharded set read back equal; verify ok\n");

    // error.h: a clear error, as a code.
    try {
      maploc::torch::Checkpoint::open(dir / "absent.pt");
      return fail("opening a missing file did not throw");
    } catch (const maploc::Error& e) {
      std::printf("error: %s\n", std::string(maploc::error_code_name(e.code())).c_str());
    }

    // maploc_c.h, from C++.
    std::printf("c api: %s\n", maploc_version());
  } catch (const maploc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
