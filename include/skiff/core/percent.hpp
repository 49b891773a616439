// Percent (%XX) decoding, one decoder for every place that reads escaped text. The two
// choices that differ between those places are parameters:
//   - '+' is a space in form encoding (HTML forms, our HTTP query strings, S3's
//     EncodingType=url listings) but a literal '+' in RFC 3986 paths (S3 object keys);
//   - a '%' not followed by two hex digits is kept as it is by lenient readers (query
//     strings typed by people) and rejected by strict ones (keys that must round-trip).
// Pure functions; callable from any core or thread.
#pragma once

#include <skiff/core/hex.hpp>
#include <skiff/core/result.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace skiff {

enum class plus_sign : bool { literal, space };
enum class bad_escape : bool { keep, reject };

// Decodes %XX escapes (and '+' as chosen). With bad_escape::reject, the error is the offset
// of the first '%' that is not followed by two hex digits; with bad_escape::keep it never fails.
result<std::string, std::size_t> percent_decode(std::string_view s, plus_sign plus, bad_escape bad);

// application/x-www-form-urlencoded, read leniently: '+' is a space, a malformed escape stays.
std::string form_decode(std::string_view s);

// The form-decoded value of the first `name=value` pair named `name` in a query string
// ("a=1&b=2", without the '?'); "" for a bare `name`; nullopt when the name is absent.
std::optional<std::string> form_value(std::string_view query, std::string_view name);

} // namespace skiff
