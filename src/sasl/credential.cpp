#include <skiff/sasl/credential.hpp>
#include <skiff/sasl/errc.hpp>

#include "crypto.hpp"

#include <skiff/core/base64.hpp>
#include <skiff/core/printable.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <vector>
#include <cstdint>

namespace skiff::sasl {

std::string_view mechanism_name(scram_mechanism m) noexcept {
    return m == scram_mechanism::sha_256 ? "SCRAM-SHA-256" : "SCRAM-SHA-512";
}

std::optional<scram_mechanism> mechanism_from_name(std::string_view name) noexcept {
    if (name == "SCRAM-SHA-256") return scram_mechanism::sha_256;
    if (name == "SCRAM-SHA-512") return scram_mechanism::sha_512;
    return std::nullopt;
}

std::size_t hash_size(scram_mechanism m) noexcept { return m == scram_mechanism::sha_256 ? 32 : 64; }

scram_credential::~scram_credential() {
    detail::wipe(stored_key);
    detail::wipe(server_key);
}

bool valid(const scram_credential& c) noexcept {
    return (c.mechanism == scram_mechanism::sha_256 || c.mechanism == scram_mechanism::sha_512) &&
           c.iterations >= min_iterations && c.iterations <= max_iterations && !c.salt.empty() &&
           c.salt.size() <= max_salt_bytes && c.stored_key.size() == hash_size(c.mechanism) &&
           c.server_key.size() == hash_size(c.mechanism);
}

result<scram_credential> make_scram_credential(scram_mechanism m, std::string_view password, std::string_view salt,
                                               int iterations) {
    if (password.empty() || salt.empty() || salt.size() > max_salt_bytes || iterations < min_iterations ||
        iterations > max_iterations)
        return errc::invalid_credential;
    std::string salted = detail::pbkdf2(m, password, salt, iterations);
    auto c = detail::credential_from_salted(m, std::string(salt), iterations, salted);
    detail::wipe(salted);
    return c;
}

result<scram_credential> make_scram_credential(scram_mechanism m, std::string_view password, int iterations) {
    return make_scram_credential(m, password, detail::random_bytes(default_salt_bytes), iterations);
}

result<std::string> salt_password(scram_mechanism m, std::string_view password, std::string_view salt,
                                  int iterations) {
    if (password.empty() || salt.empty() || salt.size() > max_salt_bytes || iterations < min_iterations ||
        iterations > max_iterations)
        return errc::invalid_credential;
    return detail::pbkdf2(m, password, salt, iterations);
}

std::string random_salt() { return detail::random_bytes(default_salt_bytes); }

result<scram_credential> scram_credential_from_salted(scram_mechanism m, std::string_view salted_password,
                                                      std::string_view salt, int iterations) {
    if (salted_password.size() != hash_size(m) || salt.empty() || salt.size() > max_salt_bytes ||
        iterations < min_iterations || iterations > max_iterations)
        return errc::invalid_credential;
    return detail::credential_from_salted(m, std::string(salt), iterations, salted_password);
}

std::string describe(const scram_credential& c) {
    return fmt::format("{}, {} iterations, salt of {} bytes, keys <redacted>", mechanism_name(c.mechanism),
                       c.iterations,
                       c.salt.size());
}

nlohmann::json credential_to_json(const scram_credential& c) {
    return nlohmann::json{{"mechanism", std::string(mechanism_name(c.mechanism))},
                          {"iterations", c.iterations},
                          {"salt", base64_encode(c.salt)},
                          {"stored_key", base64_encode(c.stored_key)},
                          {"server_key", base64_encode(c.server_key)}};
}

std::string credential_to_json_text(const scram_credential& c) { return credential_to_json(c).dump(); }

namespace {

failure<std::string> bad(std::string message) { return failure<std::string>{std::move(message)}; }

constexpr std::array<std::string_view, 5> members = {"mechanism", "iterations", "salt", "stored_key", "server_key"};

result<std::string, std::string> base64_member(const nlohmann::json& j, const char* name) {
    const auto& v = j.at(name);
    if (!v.is_string()) return bad(fmt::format("SCRAM credential: '{}' is not a string", name));
    auto bytes = detail::base64_decode_strict(v.get_ref<const std::string&>());
    if (!bytes) return bad(fmt::format("SCRAM credential: '{}' is not canonical padded base64", name));
    return std::move(*bytes);
}

} // namespace

result<scram_credential, std::string> credential_from_json(const nlohmann::json& j) {
    if (!j.is_object()) return bad("SCRAM credential: not a JSON object");
    for (const auto& [key, value] : j.items()) {
        (void)value;
        bool known = false;
        for (auto m : members) known = known || key == m;
        if (!known) return bad(fmt::format("SCRAM credential: unknown member '{}'", printable(key, 64)));
    }
    for (auto m : members)
        if (!j.contains(m)) return bad(fmt::format("SCRAM credential: missing member '{}'", m));

    const auto& mech = j.at("mechanism");
    if (!mech.is_string()) return bad("SCRAM credential: 'mechanism' is not a string");
    auto m = mechanism_from_name(mech.get_ref<const std::string&>());
    if (!m)
        return bad("SCRAM credential: 'mechanism' is neither SCRAM-SHA-256 nor SCRAM-SHA-512");

    const auto& it = j.at("iterations");
    if (!it.is_number_integer())
        return bad("SCRAM credential: 'iterations' is not an integer");
    auto iterations = it.get<std::int64_t>();
    if (iterations < min_iterations || iterations > max_iterations)
        return bad(fmt::format("SCRAM credential: 'iterations' {} is outside [{}, {}]", iterations, min_iterations,
                                   max_iterations));

    auto salt = base64_member(j, "salt");
    if (!salt) return bad(std::move(salt).error());
    if (salt->empty() || salt->size() > max_salt_bytes)
        return bad(fmt::format("SCRAM credential: 'salt' must be 1 to {} bytes", max_salt_bytes));
    auto stored = base64_member(j, "stored_key");
    if (!stored) return bad(std::move(stored).error());
    auto server = base64_member(j, "server_key");
    if (!server) return bad(std::move(server).error());
    if (stored->size() != hash_size(*m) || server->size() != hash_size(*m)) {
        detail::wipe(*stored);
        detail::wipe(*server);
        return bad(fmt::format("SCRAM credential: 'stored_key' and 'server_key' must be {} bytes for {}",
                                   hash_size(*m), mechanism_name(*m)));
    }
    return scram_credential(*m, std::move(*salt), static_cast<int>(iterations), std::move(*stored), std::move(*server));
}

result<scram_credential, std::string> credential_from_json_text(std::string_view text) {
    // nlohmann keeps the last of duplicate members; a strict reader refuses them instead, so
    // a file edited by hand cannot carry two salts of which one is silently ignored.
    std::vector<std::vector<std::string>> open_objects;
    bool duplicate = false;
    auto cb = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
        using ev_t = nlohmann::json::parse_event_t;
        if (ev == ev_t::object_start) {
            open_objects.emplace_back();
        } else if (ev == ev_t::object_end) {
            if (!open_objects.empty()) open_objects.pop_back();
        } else if (ev == ev_t::key && !open_objects.empty() && parsed.is_string()) {
            auto& keys = open_objects.back();
            const auto& k = parsed.get_ref<const std::string&>();
            if (std::find(keys.begin(), keys.end(), k) != keys.end()) duplicate = true;
            keys.push_back(k);
        }
        return true;
    };
    auto j = nlohmann::json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad("SCRAM credential: not valid JSON");
    if (duplicate) return bad("SCRAM credential: a member appears twice");
    return credential_from_json(j);
}

} // namespace skiff::sasl
