// `skiff serve --print-config`: the effective settings as TOML that --config accepts again,
// each with its source; secrets and passwords inside URLs masked, S3 credentials described.
#include "serve_config.hpp"

#include <skiff/s3/client.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

namespace skiff::cli {

namespace {

// TOML's basic string: quotes, backslashes and control characters escaped.
std::string toml_string(std::string_view v) {
    std::string out = "\"";
    for (char c : v) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20 || u == 0x7f) {
            out += fmt::format("\\u{:04x}", u);
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// "http://user:secret@host" -> "http://user:****@host": etcd and S3 endpoints may carry one.
std::string mask_url_password(const std::string& v, bool& masked) {
    std::string out;
    std::string_view rest = v;
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::string url(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (auto scheme = url.find("://"); scheme != std::string::npos) {
            auto host_start = scheme + 3;
            auto at = url.find('@', host_start);
            auto slash = url.find('/', host_start);
            if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
                auto colon = url.find(':', host_start);
                if (colon != std::string::npos && colon < at) {
                    url = url.substr(0, colon + 1) + "****" + url.substr(at);
                    masked = true;
                }
            }
        }
        if (!out.empty()) out += ',';
        out += url;
    }
    return out;
}

std::string render_value(const serve_flag& f, const std::string& v) {
    switch (f.kind) {
    case value_kind::number: {
        // "007" is a valid flag value but not a TOML integer.
        auto n = parse_flag_int(v);
        return n ? std::to_string(*n) : v;
    }
    case value_kind::boolean: return v.empty() || parse_flag_bool(v).value_or(false) ? "true" : "false";
    case value_kind::text: break;
    }
    return toml_string(v);
}

} // namespace

std::string render_config(const serve_options& o, const broker::broker_config& cfg) {
    std::string out = "# skiff serve: the effective settings (a flag wins over SKIFF_* variables, which win over\n"
                      "# the --config file, which wins over the defaults). Valid input for --config.\n";
    const broker::broker_config defaults;
    std::size_t width = 0;
    for (auto& f : serve_flags()) width = std::max(width, std::strlen(f.name));
    for (auto& f : serve_flags()) {
        auto it = o.values.find(f.name);
        if (it == o.values.end()) {
            std::string d = f.default_of ? f.default_of(defaults) : std::string();
            const bool usable = f.default_of && (f.kind != value_kind::number || parse_flag_int(d));
            // A cluster setting given without --etcd is refused: as a line it would make the
            // output a file that is refused.
            const bool cluster_only = !cfg.clustered() && std::string_view(f.name) == "lease-ttl-s";
            if (usable && cluster_only) {
                out += fmt::format("# {} = {}  # default, cluster mode only\n", f.name, render_value(f, d));
            } else if (usable) {
                out += fmt::format("{:<{}} = {}  # default\n", f.name, width, render_value(f, d));
            } else if (f.default_of) {
                out += fmt::format("# {} is not set (default: {})\n", f.name, d);
            } else {
                out += fmt::format("# {} is not set\n", f.name);
            }
            continue;
        }
        const setting& st = it->second;
        std::string from;
        switch (st.source) {
        case value_source::flag: from = "flag"; break;
        case value_source::env: from = "env " + env_name(f.name); break;
        case value_source::file: from = fmt::format("file {} line {}", o.config_path, st.line); break;
        case value_source::default_value: from = "default"; break;
        }
        if (f.secret) {
            out += fmt::format("# {} is set ({}), not shown\n", f.name, from);
            continue;
        }
        bool masked = false;
        const std::string v = f.kind == value_kind::text ? mask_url_password(st.value, masked) : st.value;
        const bool unused = std::string_view(f.name) == "data-dir" && !cfg.s3_bucket.empty();
        out += fmt::format("{:<{}} = {}  # {}{}{}\n", f.name, width, render_value(f, v), from,
                           masked ? ", password masked" : "", unused ? ", unused: the log is kept in S3" : "");
    }
    if (cfg.s3) {
        // Not settings of skiff serve, but what it will sign with; never the secret itself.
        out += fmt::format("# S3 credentials: {}\n", s3::describe_credentials(*cfg.s3));
        bool masked = false;
        out += fmt::format("# S3 region {}, endpoint {}\n", cfg.s3->region,
                           cfg.s3->endpoint.empty() ? std::string("AWS") : mask_url_password(cfg.s3->endpoint, masked));
    }
    return out;
}

} // namespace skiff::cli
