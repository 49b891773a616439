// credential_provider: one refresher thread per process, snapshots for every core
// (include/skiff/s3/credential_provider.hpp, docs/credentials.md).
#include <skiff/core/backoff.hpp>
#include <skiff/core/iso_time.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/s3/credential_provider.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <ctime>

#include <pthread.h>

namespace skiff::s3 {


credential_provider::credential_provider(std::unique_ptr<credential_source> source, provider_options opts)
    : _source(std::move(source)), _opts(std::move(opts)) {
    if (!_opts.wall_clock) _opts.wall_clock = [] { return std::chrono::system_clock::now(); };
    _describe = _source->describe();
}

result<std::shared_ptr<credential_provider>, std::string> credential_provider::start(
    std::unique_ptr<credential_source> source, provider_options opts) {
    std::shared_ptr<credential_provider> p(new credential_provider(std::move(source), std::move(opts)));
    // The thread starts with every signal blocked: `skiff serve` turns SIGINT/SIGTERM into a
    // drain on one thread of its own, and blocks them only after the configuration (and so
    // this provider) exists; a thread with them unblocked would let SIGTERM kill the process.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p->_thread = std::thread([raw = p.get()] { raw->thread_main(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    std::unique_lock lk(p->_mu);
    p->_cv.wait(lk, [&] { return p->_reactor != nullptr || p->_thread_done; });
    if (p->_thread_done) {
        std::string why = p->_thread_error;
        lk.unlock();
        p->_thread.join();
        return failure{"cannot start the AWS credential refresher: " + why};
    }
    return p;
}

credential_provider::~credential_provider() {
    {
        std::lock_guard lk(_mu);
        if (_reactor != nullptr) _reactor->post([this] { _stop.request_stop(); });
    }
    if (_thread.joinable()) _thread.join();
}

void credential_provider::thread_main() {
    auto r = runtime::reactor::create(0);
    if (!r) {
        std::lock_guard lk(_mu);
        _thread_error = r.error();
        _thread_done = true;
        _cv.notify_all();
        return;
    }
    {
        std::lock_guard lk(_mu);
        _reactor = r->get();
    }
    _cv.notify_all();
    (*r)->run_until_complete(run(_stop.get_token()));
    std::vector<waiter> left;
    {
        std::lock_guard lk(_mu);
        _reactor = nullptr;
        _thread_done = true;
        left.swap(_waiters);
    }
    _cv.notify_all();
    for (auto& w : left) w.home->post([l = w.latch] { l->set(); });
}

wall_time credential_provider::refresh_at(const credential_snapshot& s) const {
    if (!s.expires) return wall_time::max();
    const auto lifetime = *s.expires - s.obtained;
    // refresh_before ahead of expiry, or at 80% of a shorter lifetime.
    const auto margin = std::min<std::chrono::system_clock::duration>(_opts.refresh_before, lifetime / 5);
    return *s.expires - margin;
}

bool credential_provider::usable_locked(wall_time now) const {
    if (!_current) return false;
    if (_current->generation == _refused_generation) return false;
    return !_current->expires || now < *_current->expires;
}

std::string credential_provider::unusable_reason_locked(wall_time now) const {
    const std::string err = _last_error.empty() ? std::string("no fetch has finished yet") : _last_error;
    if (!_current) return fmt::format("no AWS credentials from {}: {}", _describe, err);
    if (_current->generation == _refused_generation) {
        return fmt::format("S3 refused the AWS credentials from {} as expired and no new ones came: {}", _describe, err);
    }
    (void)now;
    return fmt::format("the AWS credentials from {} expired at {} and could not be refreshed: {}", _describe,
                       iso8601_utc(*_current->expires), err);
}

bool credential_provider::fetch_due_locked(wall_time now, wall_time& next) const {
    next = wall_time::max();
    if (!usable_locked(now)) {
        if (_failures_in_row == 0) return true;
        // Someone waits: one fetch per min_retry_interval; else the backoff's time.
        if (!_waiters.empty() && _last_failure_at && now - *_last_failure_at >= _opts.min_retry_interval) return true;
        if (now >= _retry_at) return true;
        next = _retry_at;
        if (!_waiters.empty() && _last_failure_at) next = std::min(next, *_last_failure_at + _opts.min_retry_interval);
        return false;
    }
    const wall_time at = refresh_at(*_current);
    if (now < at) {
        next = at;
        return false;
    }
    if (_failures_in_row > 0 && now < _retry_at) {
        next = _retry_at;
        return false;
    }
    return true;
}

void credential_provider::notify_locked(std::vector<waiter>& out) {
    out.swap(_waiters);
    _cv.notify_all();
}

void credential_provider::kick() {
    if (_kick_pending.exchange(true)) return;
    std::lock_guard lk(_mu);
    if (_reactor == nullptr) return;
    _reactor->post([this] {
        if (_wake != nullptr) _wake->set();
    });
}

runtime::task<void> credential_provider::run(std::stop_token st) {
    http::client_config hc;
    hc.max_response_bytes = 1 << 20;
    http::client http(hc);
    full_jitter_backoff backoff(_opts.retry_base, _opts.retry_cap,
                                _opts.backoff_seed != 0 ? _opts.backoff_seed : std::random_device{}());
    while (!st.stop_requested()) {
        wall_time now = _opts.wall_clock();
        wall_time next{};
        bool due = false;
        {
            std::lock_guard lk(_mu);
            due = fetch_due_locked(now, next);
        }
        if (!due) {
            runtime::oneshot<void> wake;
            _wake = &wake;
            _kick_pending.store(false);
            // Sleep on this thread's steady clock until the wall-clock time is due, at most a
            // minute (a suspended laptop or a stepped clock is noticed within one).
            auto wait = std::chrono::duration_cast<runtime::duration>(next - now);
            wait = std::clamp<runtime::duration>(wait, std::chrono::milliseconds(1), std::chrono::seconds(60));
            auto woke = co_await wake.wait(wait, st);
            _wake = nullptr;
            (void)woke;
            continue;
        }
        {
            std::lock_guard lk(_mu);
            ++_attempts;
        }
        auto got = co_await _source->fetch(http, st);
        if (st.stop_requested()) break;
        now = _opts.wall_clock();
        std::vector<waiter> wake_up;
        if (got && got->expires && *got->expires <= now) {
            got = failure{fmt::format("{}: the credentials it gave expired already ({})", _describe,
                                      iso8601_utc(*got->expires))};
        }
        if (got) {
            auto snap = std::make_shared<credential_snapshot>();
            snap->creds = std::move(got->creds);
            snap->expires = got->expires;
            snap->obtained = now;
            std::string valid = snap->expires ? "until " + iso8601_utc(*snap->expires) : std::string("without expiry");
            std::string who = s3::describe(snap->creds);
            {
                std::lock_guard lk(_mu);
                snap->generation = ++_successes;
                _current = std::move(snap);
                _failures_in_row = 0;
                _last_error.clear();
                _last_failure_at.reset();
                notify_locked(wake_up);
            }
            log::info("AWS credentials from {}: {}, valid {}", _describe, who, valid);
        } else {
            std::string still;
            std::chrono::milliseconds delay{};
            {
                std::lock_guard lk(_mu);
                delay = std::chrono::duration_cast<std::chrono::milliseconds>(backoff.delay(_failures_in_row));
                delay = std::max(delay, std::chrono::milliseconds(100));
                ++_failures_in_row;
                ++_failures;
                _last_error = got.error();
                _last_failure_at = now;
                _retry_at = now + delay;
                if (usable_locked(now) && _current->expires) still = iso8601_utc(*_current->expires);
                notify_locked(wake_up);
            }
            if (!still.empty()) {
                log::warn("cannot refresh AWS credentials: {}; the current ones stay valid until {}; retrying in {} ms",
                          got.error(), still, delay.count());
            } else {
                log::warn("cannot get AWS credentials: {}; retrying in {} ms", got.error(), delay.count());
            }
        }
        for (auto& w : wake_up) w.home->post([l = w.latch] { l->set(); });
    }
}

result<void, std::string> credential_provider::wait_ready(std::chrono::milliseconds timeout) {
    std::unique_lock lk(_mu);
    const bool done = _cv.wait_for(lk, timeout, [&] { return _current || _failures_in_row > 0 || _thread_done; });
    if (_current) return {};
    if (!done) return failure{fmt::format("no AWS credentials from {} within {} s", _describe, timeout.count() / 1000)};
    if (!_last_error.empty()) return failure{_last_error};
    return failure{fmt::format("no AWS credentials from {}: the refresher stopped", _describe)};
}

runtime::task<result<std::shared_ptr<const credential_snapshot>, std::string>> credential_provider::get(
    std::stop_token st) {
    wall_time now = _opts.wall_clock();
    std::shared_ptr<runtime::oneshot<void>> latch;
    {
        std::unique_lock lk(_mu);
        if (usable_locked(now)) {
            auto snap = _current;
            const bool refresh = now >= refresh_at(*snap);
            lk.unlock();
            if (refresh) kick(); // the refresher fetches; this request signs with what is still valid
            co_return snap;
        }
        if (_thread_done) co_return failure{unusable_reason_locked(now)};
        if (_failures_in_row > 0 && _last_failure_at && now - *_last_failure_at < _opts.min_retry_interval) {
            co_return failure{unusable_reason_locked(now)};
        }
        latch = std::make_shared<runtime::oneshot<void>>();
        _waiters.push_back(waiter{&runtime::reactor::local(), latch});
    }
    kick();
    auto woke = co_await latch->wait(_opts.wait_timeout, st);
    std::unique_lock lk(_mu);
    std::erase_if(_waiters, [&](const waiter& w) { return w.latch == latch; });
    now = _opts.wall_clock();
    if (usable_locked(now)) co_return _current;
    if (!woke && woke.error() == runtime::errc::cancelled) co_return failure{std::string("cancelled")};
    if (!woke && woke.error() == runtime::errc::timed_out) {
        co_return failure{fmt::format("no AWS credentials from {} within {} ms{}", _describe, _opts.wait_timeout.count(),
                                      _last_error.empty() ? std::string() : " (last error: " + _last_error + ")")};
    }
    co_return failure{unusable_reason_locked(now)};
}

void credential_provider::refused(std::uint64_t generation) {
    {
        std::lock_guard lk(_mu);
        if (!_current || _current->generation != generation) return; // already replaced
        _refused_generation = generation;
    }
    log::warn("S3 refused the AWS credentials from {} as expired; fetching new ones", _describe);
    kick();
}

std::shared_ptr<const credential_snapshot> credential_provider::current() const {
    std::lock_guard lk(_mu);
    return _current;
}

std::string credential_provider::describe() const { return _describe; }

std::uint64_t credential_provider::fetch_attempts() const {
    std::lock_guard lk(_mu);
    return _attempts;
}

std::uint64_t credential_provider::fetch_successes() const {
    std::lock_guard lk(_mu);
    return _successes;
}

std::uint64_t credential_provider::fetch_failures() const {
    std::lock_guard lk(_mu);
    return _failures;
}

std::string credential_provider::last_error() const {
    std::lock_guard lk(_mu);
    return _last_error;
}

// --- the chain -------------------------------------------------------------------------------

namespace {

std::optional<std::string> non_empty(const env_lookup& env, std::string_view name) {
    auto v = env(name);
    if (v && !v->empty()) return v;
    return std::nullopt;
}

std::string region_from(const env_lookup& env, const profile_settings* p) {
    if (auto r = non_empty(env, "AWS_REGION")) return *r;
    if (auto r = non_empty(env, "AWS_DEFAULT_REGION")) return *r;
    return p ? p->value("region") : std::string{};
}

std::unique_ptr<credential_source> web_identity(const env_lookup& env, std::string role_arn, std::string token_file,
                                                std::string session, const std::string& region) {
    web_identity_settings s;
    s.role_arn = std::move(role_arn);
    s.token_file = std::move(token_file);
    s.session_name = std::move(session);
    if (auto e = non_empty(env, "AWS_ENDPOINT_URL_STS")) {
        s.sts_endpoint = *e;
    } else if (!region.empty()) {
        s.sts_endpoint = "https://sts." + region + ".amazonaws.com";
    } else {
        s.sts_endpoint = "https://sts.amazonaws.com";
    }
    return make_web_identity_source(std::move(s));
}

bool is_true(const std::optional<std::string>& v) {
    if (!v) return false;
    std::string s = *v;
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s == "true" || s == "1";
}

} // namespace

result<credential_chain, std::string> resolve_credential_chain(const env_lookup& env) {
    credential_chain out;
    // 1. environment keys (load_credentials reports half-filled pairs).
    if (non_empty(env, "AWS_ACCESS_KEY_ID") || non_empty(env, "AWS_SECRET_ACCESS_KEY")) {
        auto l = load_credentials(env);
        if (!l) return failure{std::move(l).error()};
        out.static_creds = l->creds;
        out.region = l->region;
        out.source_name = l->source;
        return out;
    }
    // 2. web identity from the environment.
    auto role = non_empty(env, "AWS_ROLE_ARN");
    auto token_file = non_empty(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
    if (role || token_file) {
        if (!role || !token_file) {
            return failure{std::string(role ? "AWS_ROLE_ARN is set but AWS_WEB_IDENTITY_TOKEN_FILE is not"
                                            : "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not") +
                           "; web identity needs both"};
        }
        out.region = region_from(env, nullptr);
        if (out.region.empty()) {
            auto p = load_profile_settings(env);
            if (p) out.region = p->value("region");
        }
        out.source = web_identity(env, *role, *token_file, non_empty(env, "AWS_ROLE_SESSION_NAME").value_or(""),
                                  out.region);
        out.source_name = out.source->describe();
        return out;
    }
    // 3. shared files: keys, else the profile's web identity or credential_process.
    auto found = find_static_credentials(env);
    if (!found) return failure{std::move(found).error()};
    if (*found) {
        out.static_creds = (*found)->creds;
        out.region = (*found)->region;
        out.source_name = (*found)->source;
        return out;
    }
    auto profile = load_profile_settings(env);
    if (!profile) return failure{std::move(profile).error()};
    out.region = region_from(env, &*profile);
    if (auto arn = profile->value("role_arn"); !arn.empty() && !profile->value("web_identity_token_file").empty()) {
        out.source = web_identity(env, arn, profile->value("web_identity_token_file"), profile->value("role_session_name"),
                                  out.region);
        out.source_name = out.source->describe();
        return out;
    }
    if (auto cmd = profile->value("credential_process"); !cmd.empty()) {
        out.source = make_process_source(cmd, profile->profile);
        out.source_name = out.source->describe();
        return out;
    }
    // 4. container.
    auto token = non_empty(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN").value_or("");
    auto token_path = non_empty(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").value_or("");
    if (auto rel = non_empty(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
        std::string path = *rel;
        if (path.front() != '/') path.insert(path.begin(), '/');
        out.source = make_container_source("http://169.254.170.2" + path, token, token_path);
        out.source_name = out.source->describe();
        return out;
    }
    if (auto full = non_empty(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
        // As the SDKs: plain http only to loopback or the ECS / EKS Pod Identity agents.
        const std::string& u = *full;
        const bool https = u.rfind("https://", 0) == 0;
        const bool http_ok = u.rfind("http://127.", 0) == 0 || u.rfind("http://localhost", 0) == 0 ||
                             u.rfind("http://[::1]", 0) == 0 || u.rfind("http://169.254.170.2", 0) == 0 ||
                             u.rfind("http://169.254.170.23", 0) == 0 || u.rfind("http://[fd00:ec2::23]", 0) == 0;
        if (!https && !http_ok) {
            return failure{std::string("AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback "
                                       "address or the ECS/EKS credential agent")};
        }
        out.source = make_container_source(u, token, token_path);
        out.source_name = out.source->describe();
        return out;
    }
    // 5. IMDSv2.
    if (is_true(env("AWS_EC2_METADATA_DISABLED"))) {
        return failure{"no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_ROLE_ARN with "
                       "AWS_WEB_IDENTITY_TOKEN_FILE, a profile with keys or credential_process (profile '" +
                       profile->profile + "'), or AWS_CONTAINER_CREDENTIALS_FULL_URI/_RELATIVE_URI "
                       "(the EC2 instance metadata service is disabled by AWS_EC2_METADATA_DISABLED)"};
    }
    out.source = make_imds_source(non_empty(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or("http://169.254.169.254"),
                                  std::chrono::seconds(1));
    out.source_name = out.source->describe();
    out.imds_fallback = true;
    return out;
}

result<client_credentials, std::string> load_client_credentials(const env_lookup& env,
                                                                std::chrono::milliseconds first_fetch_timeout) {
    auto chain = resolve_credential_chain(env);
    if (!chain) return failure{std::move(chain).error()};
    client_credentials out;
    out.region = chain->region;
    out.source = chain->source_name;
    if (chain->static_creds) {
        out.creds = *chain->static_creds;
        return out;
    }
    auto p = credential_provider::start(std::move(chain->source));
    if (!p) return failure{std::move(p).error()};
    if (auto r = (*p)->wait_ready(first_fetch_timeout); !r) {
        if (!chain->imds_fallback) return failure{std::move(r).error()};
        return failure{"no AWS credentials found: none configured (AWS_ACCESS_KEY_ID, AWS_ROLE_ARN, a profile in "
                       "~/.aws, AWS_CONTAINER_CREDENTIALS_*), and " + r.error()};
    }
    out.provider = std::move(*p);
    return out;
}

} // namespace skiff::s3
