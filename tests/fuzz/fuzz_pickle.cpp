// fuzz_pickle.cpp - libFuzzer target: the pickle machine under tight limits, and the
// disassembler, which must agree with the machine on where STOP is.
#include <cstdint>
#include <span>
#include <sstream>

#include "fuzz_common.h"
#include "maploc/error.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace maploc;
  std::span<const std::uint8_t> stream(data, size);
  pickle::Options options;
  options.limits = fuzz::fuzz_limits();
  options.allow_trailing = true;  // find STOP; trailing bytes are the caller's business
  options.stream_name = "fuzz.pkl";

  bool machine_ok = false;
  std::uint64_t machine_end = 0;
  try {
    auto result = pickle::run(stream, options);
    machine_ok = true;
    machine_end = result.end_offset();
    if (machine_end == 0 || machine_end > size) fuzz::invariant_failed("machine end_offset outside the stream");
    (void)result.root().kind();
  } catch (const Error&) {
  }

  bool dis_ok = false;
  std::uint64_t dis_end = 0;
  std::ostringstream text;
  try {
    dis_end = pickle::disassemble(stream, text);
    dis_ok = true;
  } catch (const Error&) {
  }
  // Both read a whole pickle: they must stop at the same byte (a scanner and
  // a loader that disagree on STOP are the FRAME-divergence bypass of B.3).
  if (machine_ok && dis_ok && machine_end != dis_end) fuzz::invariant_failed("machine and disassembler disagree on STOP");

  // The same stream without trailing bytes allowed must fail exactly when bytes follow STOP.
  if (machine_ok) {
    options.allow_trailing = false;
    try {
      (void)pickle::run(stream, options);
      if (machine_end != size) fuzz::invariant_failed("trailing bytes accepted");
    } catch (const Error& e) {
      if (machine_end == size) fuzz::invariant_failed("second identical run failed");
      if (e.code() != ErrorCode::kPickleTrailingData) fuzz::invariant_failed("trailing bytes gave another code");
    }
  }
  return 0;
}
