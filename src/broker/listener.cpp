// Listener specs: parsing and printing.
#include <skiff/broker/listener.hpp>
#include <skiff/runtime/socket.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace skiff::broker {

namespace {
constexpr std::array<std::pair<security_protocol, std::string_view>, 4> names{{
    {security_protocol::plaintext, "PLAINTEXT"},
    {security_protocol::ssl, "SSL"},
    {security_protocol::sasl_plaintext, "SASL_PLAINTEXT"},
    {security_protocol::sasl_ssl, "SASL_SSL"},
}};

std::vector<std::string_view> split_commas(std::string_view s) {
    std::vector<std::string_view> out;
    while (!s.empty()) {
        auto comma = s.find(',');
        auto item = s.substr(0, comma);
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
        out.push_back(item);
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
    }
    return out;
}

struct entry {
    security_protocol protocol;
    std::string addr;
};

// Advertised addresses may be host names (resolved by clients, never here): HOST:PORT with a
// non-empty host and a port of 1..65535.
bool valid_host_port(std::string_view addr) {
    auto colon = addr.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == addr.size()) return false;
    int port = 0;
    for (char ch : addr.substr(colon + 1)) {
        if (ch < '0' || ch > '9') return false;
        port = port * 10 + (ch - '0');
        if (port > 65535) return false;
    }
    return port > 0;
}

result<entry, std::string> parse_entry(std::string_view item, const char* flag, bool numeric = true) {
    auto sep = item.find("://");
    if (sep == std::string_view::npos) {
        return failure{std::string(flag) + ": '" + std::string(item) + "' is not PROTOCOL://HOST:PORT"};
    }
    auto p = protocol_from_name(item.substr(0, sep));
    if (!p) {
        return failure{std::string(flag) + ": unknown security protocol '" + std::string(item.substr(0, sep)) +
                       "' (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"};
    }
    std::string addr(item.substr(sep + 3));
    if (addr.starts_with(":")) addr = "0.0.0.0" + addr;
    if (!numeric) {
        if (!valid_host_port(addr)) return failure{std::string(flag) + ": '" + std::string(item) + "' is not HOST:PORT"};
        return entry{*p, addr};
    }
    auto parsed = runtime::socket_address::parse(addr);
    if (!parsed) return failure{std::string(flag) + ": '" + std::string(item) + "': " + parsed.error()};
    return entry{*p, addr};
}
} // namespace

std::string_view protocol_name(security_protocol p) noexcept {
    for (auto& [k, n] : names) {
        if (k == p) return n;
    }
    return "PLAINTEXT";
}

std::optional<security_protocol> protocol_from_name(std::string_view name) noexcept {
    for (auto& [k, n] : names) {
        if (n.size() == name.size() &&
            std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
                return a == std::toupper(static_cast<unsigned char>(b));
            }))
            return k;
    }
    return std::nullopt;
}

result<std::vector<listener_config>, std::string> parse_listeners(std::string_view spec) {
    std::vector<listener_config> out;
    for (auto item : split_commas(spec)) {
        if (item.empty()) continue;
        auto e = parse_entry(item, "--listeners");
        if (!e) return failure{e.error()};
        for (const auto& l : out) {
            if (l.protocol == e->protocol) {
                return failure{"--listeners names " + std::string(protocol_name(e->protocol)) +
                               " twice (one listener per security protocol)"};
            }
        }
        listener_config l;
        l.protocol = e->protocol;
        l.addr = std::move(e->addr);
        out.push_back(std::move(l));
    }
    if (out.empty()) return failure{std::string("--listeners is empty")};
    return out;
}

result<void, std::string> apply_advertised_listeners(std::vector<listener_config>& ls, std::string_view spec) {
    for (auto item : split_commas(spec)) {
        if (item.empty()) continue;
        auto e = parse_entry(item, "--advertised-listeners", false);
        if (!e) return failure{e.error()};
        auto it = std::find_if(ls.begin(), ls.end(), [&](const listener_config& l) { return l.protocol == e->protocol; });
        if (it == ls.end()) {
            return failure{"--advertised-listeners names " + std::string(protocol_name(e->protocol)) +
                           ", which is not in --listeners"};
        }
        if (e->addr.starts_with("0.0.0.0:") || e->addr.starts_with("[::]:")) {
            return failure{"--advertised-listeners: '" + std::string(item) + "' is a wildcard, not an address clients can reach"};
        }
        it->advertised = std::move(e->addr);
    }
    return ok();
}

std::string format_listeners(const std::vector<listener_config>& ls) {
    std::string out;
    for (const auto& l : ls) {
        if (!out.empty()) out += ',';
        out += std::string(l.name()) + "://" + l.addr;
    }
    return out;
}

std::string format_advertised_listeners(const std::vector<listener_config>& ls) {
    std::string out;
    for (const auto& l : ls) {
        if (l.advertised.empty()) continue;
        if (!out.empty()) out += ',';
        out += std::string(l.name()) + "://" + l.advertised;
    }
    return out;
}

} // namespace skiff::broker
