// Reading a flat TOML file of `key = value` lines (`skiff serve --config`). The file is parsed
// here; which keys exist and which types they take is the caller's business.
#pragma once

#include <skiff/core/result.hpp>

#include <string>
#include <vector>

namespace skiff::cli {

enum class toml_type { string, integer, floating, boolean, other };

// "a string", "an integer", ... for error sentences.
const char* describe(toml_type t) noexcept;

struct config_entry {
    config_entry() = default;
    std::string key;
    std::string value; // the text of a scalar: 42, 0.005, true, the string's characters
    toml_type type = toml_type::other; // other: a table, an array or a date, whose value is empty
    int line = 0;
};

// The top-level entries of the TOML file at `path`, in file order. Fails with one sentence
// naming the file (and the line, for a syntax error) when the file cannot be read or is not
// TOML; a repeated key is a syntax error in TOML.
result<std::vector<config_entry>, std::string> read_config_file(const std::string& path);

} // namespace skiff::cli
