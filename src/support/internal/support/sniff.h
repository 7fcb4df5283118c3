// sniff.h - says what a file looks like from its first bytes, for error messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace maploc {

/// What the leading bytes of a file suggest it is.
enum class ContentKind : std::uint8_t {
  kEmpty,
  kZip,             ///< starts with PK\x03\x04
  kTorchLegacy,     ///< the pre-1.6 magic-number pickle stream
  kTorchTar,        ///< torch 0.1.x tar (ustar at offset 257)
  kTorchPreview,    ///< "PYTORCH1" preview-release archive
  kTorchMobile,     ///< TorchScript-mobile flatbuffer (PTMF)
  kPickle,          ///< a bare pickle (PROTO opcode)
  kHtml,            ///< an HTML page (a download that returned a web page)
  kGitLfsPointer,   ///< a git-lfs pointer file instead of the real object
  kSafetensors,     ///< u64 header length followed by '{'
  kNumpy,           ///< \x93NUMPY
  kUnknown,
};

/// Classifies by content only, never by file name.
ContentKind sniff_content(std::span<const std::uint8_t> head);

/// A phrase for messages: "an HTML page", "a git-lfs pointer file", ...
std::string describe_content(ContentKind kind);

}  // namespace maploc
