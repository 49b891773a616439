// Standard base64 (RFC 4648 §4, with padding): S3 checksum headers carry base64 digests.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace skiff {

std::string base64_encode(std::string_view bytes);
// nullopt on any character outside the alphabet or bad padding.
std::optional<std::string> base64_decode(std::string_view text);

} // namespace skiff
