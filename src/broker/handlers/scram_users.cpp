// DescribeUserScramCredentials and AlterUserScramCredentials (APIs 50, 51; KIP-554), with the
// checks and messages of Kafka's ScramControlManager and ControllerApis. Credentials arrive
// salted (the client runs Hi()), so no password reaches the broker; none is ever returned.
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include "../routing.hpp"

#include <skiff/sasl/plain.hpp>

#include <fmt/format.h>

#include <map>
#include <set>

namespace skiff::broker {

namespace {
// KIP-554's mechanism codes.
std::optional<sasl::scram_mechanism> mechanism_of(std::int8_t code) {
    if (code == 1) return sasl::scram_mechanism::sha_256;
    if (code == 2) return sasl::scram_mechanism::sha_512;
    return std::nullopt;
}
std::int8_t code_of(sasl::scram_mechanism m) { return m == sasl::scram_mechanism::sha_256 ? 1 : 2; }

struct user_error {
    kafka::error_code code = kerr::none;
    std::string message;
};
} // namespace

namespace {
runtime::task<admin_outcome> change_scram_users_locked(shard& sh0, std::vector<scram_change> changes) {
    auto next = std::make_shared<scram_user_table>(*sh0.cat->users);
    for (auto& c : changes) {
        auto& creds = next->users[c.user];
        if (c.credential) {
            creds[c.mechanism] = std::move(*c.credential);
        } else {
            creds.erase(c.mechanism);
        }
        if (creds.empty()) next->users.erase(c.user);
    }
    if (*next == *sh0.cat->users) co_return admin_outcome{};
    auto put = co_await sh0.store->put(scram_users_key(sh0.cfg().ns), encode_scram_users(*next), false, {});
    if (!put) co_return admin_outcome{kerr::kafka_storage_error, put.error().message};
    auto snap = std::make_shared<catalog>(*sh0.cat);
    snap->users = std::move(next);
    ++snap->version;
    log::info("SCRAM users changed: {} user(s) with credentials", snap->users->users.size());
    co_await install_catalog(sh0, std::move(snap));
    co_return admin_outcome{};
}
} // namespace

runtime::task<admin_outcome> change_scram_users(shard& sh0, std::vector<scram_change> changes) {
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) co_return co_await change_scram_users_locked(sh0, std::move(changes));
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    // Re-checked against the stored users: another broker may have removed what a deletion names.
    auto out = co_await change_scram_users_locked(sh0, std::move(changes));
    co_await cluster_catalog_end(sh0, out.error == kerr::none);
    co_return out;
}

kafka::DescribeUserScramCredentialsResponse describe_user_scram_credentials(
    const shard& sh, const kafka::DescribeUserScramCredentialsRequest& req) {
    kafka::DescribeUserScramCredentialsResponse r;
    const auto& table = *sh.cat->users;
    auto describe = [&](const std::string& user) {
        kafka::DescribeUserScramCredentialsResponse::DescribeUserScramCredentialsResult res;
        res.user = user;
        auto it = table.users.find(user);
        if (it == table.users.end()) {
            res.error_code = kerr::resource_not_found;
            res.error_message = "Attempt to describe a user credential that does not exist: " + user;
        } else {
            res.error_message.reset();
            for (const auto& [m, c] : it->second) {
                kafka::DescribeUserScramCredentialsResponse::CredentialInfo info;
                info.mechanism = code_of(m);
                info.iterations = c.iterations;
                res.credential_infos.push_back(info);
            }
        }
        return res;
    };
    r.error_message.reset();
    if (!req.users || req.users->empty()) {
        for (const auto& [user, _] : table.users) r.results.push_back(describe(user));
        return r;
    }
    std::map<std::string, int> seen;
    for (const auto& u : *req.users) ++seen[u.name];
    std::set<std::string> answered;
    for (const auto& u : *req.users) {
        if (!answered.insert(u.name).second) continue;
        if (seen[u.name] > 1) {
            kafka::DescribeUserScramCredentialsResponse::DescribeUserScramCredentialsResult res;
            res.user = u.name;
            res.error_code = kerr::duplicate_resource;
            res.error_message = "Cannot describe SCRAM credentials for the same user twice in a single request: " + u.name;
            r.results.push_back(std::move(res));
            continue;
        }
        r.results.push_back(describe(u.name));
    }
    return r;
}

runtime::task<kafka::AlterUserScramCredentialsResponse> alter_user_scram_credentials(
    shard& sh, kafka::AlterUserScramCredentialsRequest req) {
    kafka::AlterUserScramCredentialsResponse r;
    // One answer per user, in the order users first appear. A user named twice in the request
    // (in either list) is refused as a whole, as Kafka refuses it.
    std::vector<std::string> order;
    std::map<std::string, int> count;
    for (const auto& d : req.deletions) {
        if (count[d.name]++ == 0) order.push_back(d.name);
    }
    for (const auto& u : req.upsertions) {
        if (count[u.name]++ == 0) order.push_back(u.name);
    }
    std::map<std::string, user_error> errors;
    std::vector<scram_change> changes;
    const auto& table = *sh.cat->users;
    for (const auto& d : req.deletions) {
        if (count[d.name] > 1) {
            errors[d.name] = {kerr::duplicate_resource, "A user credential cannot be altered twice in the same request"};
            continue;
        }
        if (d.name.empty()) {
            errors[d.name] = {kerr::unacceptable_credential, "Username must not be empty"};
            continue;
        }
        auto m = mechanism_of(d.mechanism);
        if (!m) {
            errors[d.name] = {kerr::unsupported_sasl_mechanism, "Unknown SCRAM mechanism"};
            continue;
        }
        if (!table.find(d.name, *m)) {
            errors[d.name] = {kerr::resource_not_found, "Attempt to delete a user credential that does not exist"};
            continue;
        }
        changes.push_back(scram_change{d.name, *m, std::nullopt});
    }
    for (auto& u : req.upsertions) {
        if (count[u.name] > 1) {
            errors[u.name] = {kerr::duplicate_resource, "A user credential cannot be altered twice in the same request"};
            continue;
        }
        if (u.name.empty() || u.name.size() > sasl::max_name_bytes) {
            errors[u.name] = {kerr::unacceptable_credential,
                              u.name.empty() ? "Username must not be empty" : "Username must not exceed 255 bytes"};
            continue;
        }
        auto m = mechanism_of(u.mechanism);
        if (!m) {
            errors[u.name] = {kerr::unsupported_sasl_mechanism, "Unknown SCRAM mechanism"};
            continue;
        }
        if (u.iterations < sasl::min_iterations) {
            errors[u.name] = {kerr::unacceptable_credential, "Too few iterations"};
            continue;
        }
        if (u.iterations > sasl::max_iterations) {
            errors[u.name] = {kerr::unacceptable_credential, "Too many iterations"};
            continue;
        }
        auto c = sasl::scram_credential_from_salted(*m, u.salted_password, u.salt, u.iterations);
        // The request's copy of the salted password is a secret: not kept past this point.
        sasl::wipe_buffer(u.salted_password.data(), u.salted_password.size());
        if (!c) {
            errors[u.name] = {kerr::unacceptable_credential,
                              u.salt.empty() ? "Salt must not be empty"
                                             : fmt::format("The salted password must have {} bytes for {}",
                                                           sasl::hash_size(*m), sasl::mechanism_name(*m))};
            continue;
        }
        changes.push_back(scram_change{u.name, *m, std::move(*c)});
    }
    admin_outcome stored;
    if (!changes.empty()) {
        // Stored by core 0, which owns the catalog.
        std::vector<scram_change>* cs = &changes;
        stored = co_await on_core(sh, 0, [cs](shard& sh0) { return change_scram_users(sh0, std::move(*cs)); });
    }
    for (const auto& user : order) {
        kafka::AlterUserScramCredentialsResponse::AlterUserScramCredentialsResult res;
        res.user = user;
        if (auto e = errors.find(user); e != errors.end()) {
            res.error_code = e->second.code;
            res.error_message = e->second.message;
        } else if (stored.error != kerr::none) {
            res.error_code = stored.error;
            res.error_message = stored.message;
        } else {
            res.error_message.reset();
        }
        r.results.push_back(std::move(res));
    }
    co_return r;
}

} // namespace skiff::broker
