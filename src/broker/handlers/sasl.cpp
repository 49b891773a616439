// SaslHandshake and SaslAuthenticate (APIs 17, 36) and the raw tokens of SaslHandshake v0, as
// Kafka's SaslServerAuthenticator serves them, over the sasl module's PLAIN and SCRAM servers.
// Credentials come from the catalog snapshot's users (users.json), so a lookup never waits.
//
// What a client learns on failure is sasl::client_message(): a wrong password and an unknown
// user read the same. The log line names the user and the reason, never a password or a key.
// A failure is answered after broker_config::failed_auth_delay and closes the connection.
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/sasl/plain.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace skiff::broker {

namespace {
using phase = sasl_session::phase;

bool enabled(const broker_config& cfg, std::string_view mechanism) {
    return std::find(cfg.sasl_mechanisms.begin(), cfg.sasl_mechanisms.end(), mechanism) != cfg.sasl_mechanisms.end();
}

// The label of skiff_sasl_authentications_total: a mechanism skiff does not offer (a refused
// handshake) counts as "other", never as one of the three.
int mechanism_index(std::string_view m) {
    if (m == "PLAIN") return 0;
    if (m == "SCRAM-SHA-256") return 1;
    if (m == "SCRAM-SHA-512") return 2;
    return 3;
}

// The result of one step of an exchange.
struct step_outcome {
    std::string server_bytes;
    bool complete = false;
    std::error_code error;    // set: the exchange failed
    std::string log_reason;   // for the log line on failure
};

step_outcome step(const request_ctx& ctx, std::string_view client_bytes) {
    auto& s = ctx.ci.sasl;
    const auto users = ctx.sh.cat->users; // the snapshot the lookups read
    step_outcome out;
    if (s.mechanism == "PLAIN") {
        auto user = sasl::plain_authenticate(client_bytes, [users](std::string_view name) { return users->find_any(name); });
        if (!user) {
            out.error = user.error();
            out.log_reason = user.error().message();
            return out;
        }
        s.scram.reset();
        out.complete = true;
        s.user = std::move(*user); // taken as authenticated by finish()
        return out;
    }
    if (!s.scram) {
        out.error = sasl::errc::bad_state;
        out.log_reason = "no SCRAM exchange in progress";
        return out;
    }
    auto r = s.scram->step(client_bytes);
    if (!r) {
        out.error = r.error();
        out.log_reason = r.error().message();
        return out;
    }
    out.server_bytes = std::move(*r);
    if (s.scram->complete()) {
        out.complete = true;
        s.user = s.scram->username();
    }
    return out;
}

// After a completed exchange: the principal, the session's end, the counters. Re-authentication
// must keep the principal (Kafka: "Cannot change principals during re-authentication").
std::optional<std::string> finish(const request_ctx& ctx, const std::string& previous_user) {
    auto& s = ctx.ci.sasl;
    if (s.reauthenticating && s.user != previous_user) {
        const std::string why = fmt::format("Cannot change principals during re-authentication from User:{} to User:{}",
                                            previous_user, s.user);
        s.user = previous_user;
        return why;
    }
    s.state = phase::authenticated;
    s.scram.reset();
    s.reauthenticating = false;
    s.authenticated_mechanism = s.mechanism;
    ++s.authentications;
    ctx.ci.principal = "User:" + s.user;
    const auto lifetime = ctx.sh.cfg().max_reauth;
    if (lifetime.count() > 0) {
        s.expires = runtime::reactor::local().now() + lifetime;
    } else {
        s.expires.reset();
    }
    ctx.sh.sasl_authentications[mechanism_index(s.mechanism)][0].inc();
    log::debug("connection from {}: authenticated as User:{} with {}{}", ctx.ci.client_host, s.user, s.mechanism,
               s.authentications > 1 ? " (re-authentication)" : "");
    return std::nullopt;
}

// A failed exchange: counted, logged without secrets, the session failed, the connection to close.
void fail(const request_ctx& ctx, std::string_view reason, std::string_view user) {
    auto& s = ctx.ci.sasl;
    ctx.sh.sasl_authentications[mechanism_index(s.mechanism)][1].inc();
    log::warn("connection from {}: SASL {} authentication failed{}: {}", ctx.ci.client_host, s.mechanism,
              user.empty() ? std::string() : fmt::format(" for user '{}'", user), reason);
    s.state = phase::failed;
    s.scram.reset();
    s.user.clear();
    ctx.ci.principal = "User:ANONYMOUS";
    ctx.ci.close_after_answer = true;
}

std::string attempted_user(const sasl_session& s) {
    if (s.scram) return s.scram->first().username;
    return {};
}

kafka::SaslHandshakeResponse handshake_refusal(const request_ctx& ctx, kafka::error_code code) {
    kafka::SaslHandshakeResponse r;
    r.error_code = code;
    for (const auto& m : ctx.sh.cfg().sasl_mechanisms) r.mechanisms.push_back(m);
    return r;
}
} // namespace

void refuse_sasl_state(const request_ctx& ctx, std::string_view what) {
    ctx.sh.sasl_closed[2].inc();
    ctx.ci.sasl.state = phase::failed;
    ctx.ci.close_after_answer = true;
    log::warn("connection from {}: {}; closing it after the answer", ctx.ci.client_host, what);
}

std::string handle_sasl_handshake(const request_ctx& ctx, const kafka::SaslHandshakeRequest& req) {
    auto& s = ctx.ci.sasl;
    if (!ctx.ci.needs_sasl()) {
        // KafkaApis on a listener without SASL: answered, the connection stays.
        auto r = handshake_refusal(ctx, kerr::illegal_sasl_state);
        r.mechanisms.clear();
        return respond(r, ctx);
    }
    const bool reauth = s.state == phase::authenticated;
    if (!(s.state == phase::handshake || (reauth && ctx.version >= 1))) {
        refuse_sasl_state(ctx, fmt::format("SaslHandshake v{} out of order", ctx.version));
        auto r = handshake_refusal(ctx, kerr::illegal_sasl_state);
        return respond(r, ctx);
    }
    if (!enabled(ctx.sh.cfg(), req.mechanism)) {
        ctx.sh.sasl_authentications[mechanism_index(req.mechanism)][1].inc();
        log::warn("connection from {}: SASL mechanism '{}' is not enabled; closing it after the answer",
                  ctx.ci.client_host, req.mechanism.substr(0, 64));
        s.state = phase::failed;
        ctx.ci.close_after_answer = true;
        auto r = handshake_refusal(ctx, kerr::unsupported_sasl_mechanism);
        return respond(r, ctx);
    }
    s.mechanism = req.mechanism;
    s.reauthenticating = reauth;
    s.scram.reset();
    if (auto m = sasl::mechanism_from_name(req.mechanism)) {
        sasl::scram_server::options o;
        o.mechanism = *m;
        const auto users = ctx.sh.cat->users;
        const auto mech = *m;
        o.lookup = [users, mech](const sasl::client_first& first, sasl::scram_mechanism) {
            return users->find(first.username, mech);
        };
        s.scram = std::make_unique<sasl::scram_server>(std::move(o));
    }
    // v0: the tokens that follow are raw (no Kafka header); v1: in SaslAuthenticate requests.
    s.state = ctx.version == 0 ? phase::raw_token : phase::authenticate;
    auto r = handshake_refusal(ctx, kerr::none);
    return respond(r, ctx);
}

runtime::task<std::string> handle_sasl_authenticate(request_ctx ctx, kafka::SaslAuthenticateRequest req) {
    auto& s = ctx.ci.sasl;
    kafka::SaslAuthenticateResponse r;
    if (!ctx.ci.needs_sasl() || s.state != phase::authenticate) {
        r.error_code = kerr::illegal_sasl_state;
        r.error_message = ctx.ci.needs_sasl() ? "SaslAuthenticate is only valid after a SaslHandshake"
                                              : "this listener does not use SASL";
        if (ctx.ci.needs_sasl()) refuse_sasl_state(ctx, "SaslAuthenticate before SaslHandshake");
        co_return respond(r, ctx);
    }
    const std::string previous = s.user;
    if (s.reauthenticating && s.mechanism != s.authenticated_mechanism) {
        // SaslServerAuthenticator.reauthenticate: a session keeps its mechanism.
        sasl::wipe_buffer(req.auth_bytes.data(), req.auth_bytes.size());
        const std::string why = fmt::format("SASL mechanism '{}' requested by client is not supported for "
                                            "re-authentication of mechanism '{}'",
                                            s.mechanism, s.authenticated_mechanism);
        fail(ctx, why, previous);
        r.error_code = kerr::sasl_authentication_failed;
        r.error_message = why;
        co_return respond(r, ctx);
    }
    auto out = step(ctx, req.auth_bytes);
    sasl::wipe_buffer(req.auth_bytes.data(), req.auth_bytes.size());
    std::optional<std::string> refused;
    if (!out.error && out.complete) refused = finish(ctx, previous);
    if (out.error || refused) {
        const std::string user = refused ? s.user : attempted_user(s);
        fail(ctx, refused ? *refused : out.log_reason, user);
        r.error_code = kerr::sasl_authentication_failed;
        r.error_message = refused ? *refused
                                  : fmt::format("Authentication failed during authentication due to invalid "
                                                "credentials with SASL mechanism {}: {}",
                                                s.mechanism, sasl::client_message(out.error));
        // Answered late: a password guesser gets fewer tries per second.
        (void)co_await runtime::sleep(ctx.sh.cfg().failed_auth_delay, ctx.sh.stop.get_token());
        co_return respond(r, ctx);
    }
    r.auth_bytes = std::move(out.server_bytes);
    r.error_message.reset();
    if (out.complete && s.expires) {
        r.session_lifetime_ms = std::chrono::duration_cast<std::chrono::milliseconds>(ctx.sh.cfg().max_reauth).count();
    }
    co_return respond(r, ctx);
}

runtime::task<std::optional<std::string>> handle_raw_sasl_token(shard& sh, const conn_info& ci, std::string_view token) {
    request_ctx ctx{sh, ci, 0, 0, std::string()};
    auto& s = ci.sasl;
    const std::string previous = s.user;
    auto out = step(ctx, token);
    std::optional<std::string> refused;
    if (!out.error && out.complete) refused = finish(ctx, previous);
    if (out.error || refused) {
        // SaslHandshake v0 has no way to carry an error: the connection closes (Kafka does so).
        fail(ctx, refused ? *refused : out.log_reason, refused ? s.user : attempted_user(s));
        (void)co_await runtime::sleep(sh.cfg().failed_auth_delay, sh.stop.get_token());
        co_return std::nullopt;
    }
    if (!out.complete) s.state = phase::raw_token; // more tokens follow (SCRAM's client-final)
    std::string framed(4, '\0');
    const auto n = static_cast<std::uint32_t>(out.server_bytes.size());
    framed[0] = static_cast<char>(n >> 24);
    framed[1] = static_cast<char>(n >> 16);
    framed[2] = static_cast<char>(n >> 8);
    framed[3] = static_cast<char>(n);
    framed += out.server_bytes;
    co_return framed;
}

} // namespace skiff::broker
