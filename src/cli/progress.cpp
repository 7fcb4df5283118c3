// progress.cpp - the stderr progress bar.
#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "format.h"

namespace maploc::cli {
namespace {

constexpr auto kDelay = std::chrono::seconds(1);           // silent for short operations
constexpr auto kRedraw = std::chrono::milliseconds(100);   // at most ten frames a second
constexpr int kWidth = 30;

}  // namespace

ProgressBar::ProgressBar(const Args& args, std::string label)
    : enabled_(::isatty(STDERR_FILENO) == 1 && !args.has("quiet")), label_(std::move(label)) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputs("\r\033[2K", stderr);
}

Progress ProgressBar::callback() {
  if (!enabled_) return {};
  return [this](std::uint64_t done, std::uint64_t total) { draw(done, total); };
}

void ProgressBar::draw(std::uint64_t done, std::uint64_t total) {
  if (done >= total) {  // finished: leave the line to what the command prints next
    if (drawn_) std::fputs("\r\033[2K", stderr);
    drawn_ = false;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < kDelay || now - last_ < kRedraw) return;
  last_ = now;
  const double frac = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * kWidth);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%  %s / %s  %s\033[K", label_.c_str(), filled,
               "##############################", kWidth - filled, "", static_cast<int>(frac * 100),
               human_bytes(done).c_str(), human_bytes(total).c_str(), human_rate(done, seconds).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace maploc::cli
