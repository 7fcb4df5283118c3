// sniff.cpp - content-based file classification (pytorch-format.md §0.1).
#include "support/sniff.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>

namespace maploc {
namespace {

bool starts_with(std::span<const std::uint8_t> head, std::string_view prefix) {
  return head.size() >= prefix.size() && std::memcmp(head.data(), prefix.data(), prefix.size()) == 0;
}

bool starts_with_nocase(std::span<const std::uint8_t> head, std::string_view prefix) {
  if (head.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(head[i]) != prefix[i]) return false;
  }
  return true;
}

// The LONG1 magic number torch's legacy writer pickles first (0x1950a86a20f9469cfc6c).
constexpr std::uint8_t kLegacyMagic[] = {0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46,
                                         0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19};

// Protocols 0 and 1 (torch.save(..., pickle_protocol=1)) write it as a decimal LONG:
// 0x1950a86a20f9469cfc6c = 119547037146038801333356.
constexpr std::string_view kLegacyTextMagic = "L119547037146038801333356L\n.";

bool has_legacy_magic(std::span<const std::uint8_t> head) {
  if (starts_with(head, kLegacyTextMagic)) return true;
  // Protocol 2 puts it right after PROTO; protocols 4/5 add a FRAME first.
  auto window = head.subspan(0, std::min<std::size_t>(head.size(), 32));
  return std::search(window.begin(), window.end(), std::begin(kLegacyMagic), std::end(kLegacyMagic)) !=
         window.end();
}

bool looks_like_html(std::span<const std::uint8_t> head) {
  std::size_t i = 0;
  if (starts_with(head, "\xEF\xBB\xBF")) i = 3;
  while (i < head.size() && std::isspace(head[i])) ++i;
  auto rest = head.subspan(i);
  return starts_with_nocase(rest, "<!doctype html") || starts_with_nocase(rest, "<html") ||
         starts_with_nocase(rest, "<head") || starts_with_nocase(rest, "<!--");
}

bool looks_like_safetensors(std::span<const std::uint8_t> head) {
  if (head.size() < 9 || head[8] != '{') return false;
  std::uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | head[static_cast<std::size_t>(b)];
  return n >= 2 && n < (std::uint64_t{1} << 32);
}

}  // namespace

ContentKind sniff_content(std::span<const std::uint8_t> head) {
  if (head.empty()) return ContentKind::kEmpty;
  if (starts_with(head, "PK\x03\x04")) return ContentKind::kZip;
  if (starts_with(head, "PYTORCH1")) return ContentKind::kTorchPreview;
  if (head.size() >= 8 && std::memcmp(head.data() + 4, "PTMF", 4) == 0) return ContentKind::kTorchMobile;
  if ((head[0] == 0x80 || head[0] == 'L') && has_legacy_magic(head)) return ContentKind::kTorchLegacy;
  if (head.size() >= 262 && std::memcmp(head.data() + 257, "ustar", 5) == 0) return ContentKind::kTorchTar;
  if (starts_with(head, "version https://git-lfs.github.com/spec/")) return ContentKind::kGitLfsPointer;
  if (starts_with(head, "\x93NUMPY")) return ContentKind::kNumpy;
  if (looks_like_safetensors(head)) return ContentKind::kSafetensors;
  if (looks_like_html(head)) return ContentKind::kHtml;
  if (head[0] == 0x80 && head.size() >= 2 && head[1] <= 5) return ContentKind::kPickle;
  return ContentKind::kUnknown;
}

std::string describe_content(ContentKind kind) {
  switch (kind) {
    case ContentKind::kEmpty: return "an empty file";
    case ContentKind::kZip: return "a zip archive";
    case ContentKind::kTorchLegacy: return "a legacy (pre-1.6) torch checkpoint";
    case ContentKind::kTorchTar: return "a torch 0.1.x tar checkpoint";
    case ContentKind::kTorchPreview: return "a torch preview-release (PYTORCH1) archive";
    case ContentKind::kTorchMobile: return "a TorchScript-mobile flatbuffer";
    case ContentKind::kPickle: return "a bare pickle stream";
    case ContentKind::kHtml:
      return "an HTML page (the download returned a web page, not the checkpoint)";
    case ContentKind::kGitLfsPointer:
      return "a git-lfs pointer file (run 'git lfs pull' to fetch the real checkpoint)";
    case ContentKind::kSafetensors: return "a safetensors file";
    case ContentKind::kNumpy: return "a numpy .npy array";
    case ContentKind::kUnknown: return "an unrecognised file";
  }
  return "an unrecognised file";
}

}  // namespace maploc
