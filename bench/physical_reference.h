// physical_reference.h - the report shared by the CPU and GPU physical references (bench only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

/// Rows of GB/s figures, printed as one JSON object.
struct Report {
  struct Row {
    std::string name;
    double median, min, max;
    std::string note;
  };
  std::vector<Row> rows;
  void add(const std::string& name, std::vector<double> gbps, const std::string& note);
  void print(const std::string& file, std::uint64_t bytes, unsigned threads) const;
};

/// R5-R7 (pinned and pageable host-to-device copies, pread -> pinned ring ->
/// device). Adds nothing in a build without CUDA or on a machine without a device.
void gpu_references(int fd, std::size_t size, unsigned threads, std::size_t chunk, int reps, Report& report);

}  // namespace bench
