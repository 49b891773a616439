// Quoting untrusted bytes (object keys, server replies, header values) inside messages for
// operators: bounded, so a hostile peer cannot flood a log, and free of control characters,
// so it cannot forge log lines or terminal escapes. Pure; callable from any core or thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace skiff {

// The first `limit` bytes of s with every control byte (below 0x20, and 0x7f) replaced by
// `replacement`, followed by "..." when s was longer. Bytes >= 0x80 are kept (UTF-8 names).
std::string printable(std::string_view s, std::size_t limit = 200, char replacement = '?');

} // namespace skiff
