#include "config_file.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace skiff::cli {

const char* describe(toml_type t) noexcept {
    switch (t) {
    case toml_type::string: return "a string";
    case toml_type::integer: return "an integer";
    case toml_type::floating: return "a floating-point number";
    case toml_type::boolean: return "a boolean";
    case toml_type::other: break;
    }
    return "a table, an array or a date";
}

result<std::vector<config_entry>, std::string> read_config_file(const std::string& path) {
    // Read it ourselves: toml++ says only "could not be opened", not why.
    std::ifstream in(path, std::ios::binary);
    if (!in) return failure{fmt::format("cannot read the config file '{}': {}", path, std::strerror(errno))};
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return failure{fmt::format("cannot read the config file '{}': {}", path, std::strerror(errno))};
    const std::string body = std::move(text).str();

    toml::table doc;
    try {
        doc = toml::parse(body, path);
    } catch (const toml::parse_error& e) {
        return failure{fmt::format("{} (line {}) is not valid TOML: {}", path, e.source().begin.line,
                                   e.description())};
    }
    std::vector<config_entry> out;
    for (auto&& [k, v] : doc) {
        config_entry e;
        e.key = std::string(k.str());
        e.line = static_cast<int>(k.source().begin.line);
        if (auto* s = v.as_string()) {
            e.type = toml_type::string;
            e.value = s->get();
        } else if (auto* i = v.as_integer()) {
            e.type = toml_type::integer;
            e.value = std::to_string(i->get());
        } else if (auto* f = v.as_floating_point()) {
            e.type = toml_type::floating;
            e.value = fmt::format("{}", f->get());
        } else if (auto* b = v.as_boolean()) {
            e.type = toml_type::boolean;
            e.value = b->get() ? "true" : "false";
        }
        out.push_back(std::move(e));
    }
    // toml++ keeps a table's keys sorted; the file's order reads better in errors.
    std::stable_sort(out.begin(), out.end(), [](const config_entry& a, const config_entry& b) { return a.line < b.line; });
    return out;
}

} // namespace skiff::cli
