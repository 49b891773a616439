#include "gateway_json.hpp"

#include <skiff/core/base64.hpp>
#include <skiff/core/printable.hpp>

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <stdexcept>

namespace skiff::etcd::detail {

namespace {

// Thrown by the readers below on a field of the wrong shape; caught at each parse_* entry
// point and turned into errc::bad_response, so nothing escapes this file.
struct malformed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string b64(std::string_view s) { return base64_encode(s); }

// etcd spells "the whole keyspace" and "to the end" with a single NUL byte: an empty key is
// not a key, and an empty range_end means "this key only".
constexpr std::string_view nul("\0", 1);

void set_range(json& j, std::string_view key, bool prefix) {
    if (!prefix) {
        j["key"] = b64(key);
        return;
    }
    j["key"] = b64(key.empty() ? nul : key);
    const auto end = prefix_end(key);
    j["range_end"] = b64(end.empty() ? nul : std::string_view(end));
}

std::int64_t read_i64(const json& o, const char* name) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return 0;
    if (it->is_number_integer()) return it->get<std::int64_t>();
    if (!it->is_string()) throw malformed(fmt::format("field {} is not an integer", name));
    const auto& s = it->get_ref<const std::string&>();
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) {
        throw malformed(fmt::format("field {} is not an integer: {}", name, printable(s, 40)));
    }
    return v;
}

std::string read_bytes(const json& o, const char* name) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return {};
    if (!it->is_string()) throw malformed(fmt::format("field {} is not a string", name));
    auto bytes = base64_decode(it->get_ref<const std::string&>());
    if (!bytes) throw malformed(fmt::format("field {} is not base64", name));
    return std::move(*bytes);
}

bool read_bool(const json& o, const char* name) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return false;
    if (!it->is_boolean()) throw malformed(fmt::format("field {} is not a boolean", name));
    return it->get<bool>();
}

const json& read_object(const json& o, const char* name) {
    static const json empty = json::object();
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return empty;
    if (!it->is_object()) throw malformed(fmt::format("field {} is not an object", name));
    return *it;
}

const json& read_array(const json& o, const char* name) {
    static const json empty = json::array();
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return empty;
    if (!it->is_array()) throw malformed(fmt::format("field {} is not an array", name));
    return *it;
}

void require_object(const json& j) {
    if (!j.is_object()) throw malformed("the answer is not a JSON object");
}

std::int64_t header_revision(const json& j) { return read_i64(read_object(j, "header"), "revision"); }

key_value read_kv(const json& o) {
    if (!o.is_object()) throw malformed("a key-value is not an object");
    key_value kv;
    kv.key = read_bytes(o, "key");
    kv.value = read_bytes(o, "value");
    kv.create_revision = read_i64(o, "create_revision");
    kv.mod_revision = read_i64(o, "mod_revision");
    kv.version = read_i64(o, "version");
    kv.lease = read_i64(o, "lease");
    return kv;
}

range_result read_range(const json& j, std::int64_t revision) {
    require_object(j);
    range_result r;
    r.revision = revision;
    for (const auto& kv : read_array(j, "kvs")) r.kvs.push_back(read_kv(kv));
    return r;
}

template <typename F>
auto guarded(const char* what, F&& f) -> result<decltype(f()), error> {
    try {
        return f();
    } catch (const std::exception& e) {
        // malformed, or nlohmann's own type errors on an unexpected shape.
        return failure{error{errc::bad_response, fmt::format("etcd's {} answer is malformed: {}", what, e.what())}};
    }
}

const char* target_name(compare::target t) {
    switch (t) {
    case compare::target::version: return "VERSION";
    case compare::target::create_revision: return "CREATE";
    case compare::target::mod_revision: return "MOD";
    case compare::target::value: return "VALUE";
    case compare::target::lease: return "LEASE";
    }
    return "VERSION";
}

const char* number_field(compare::target t) {
    switch (t) {
    case compare::target::version: return "version";
    case compare::target::create_revision: return "create_revision";
    case compare::target::mod_revision: return "mod_revision";
    case compare::target::lease: return "lease";
    case compare::target::value: break;
    }
    return "version";
}

const char* op_name(compare::op o) {
    switch (o) {
    case compare::op::equal: return "EQUAL";
    case compare::op::not_equal: return "NOT_EQUAL";
    case compare::op::greater: return "GREATER";
    case compare::op::less: return "LESS";
    }
    return "EQUAL";
}

json op_json(const txn_op& op) {
    json j;
    if (const auto* p = std::get_if<put_op>(&op)) {
        json put{{"key", b64(p->key)}, {"value", b64(p->value)}};
        if (p->lease != 0) put["lease"] = std::to_string(p->lease);
        j["request_put"] = std::move(put);
    } else if (const auto* d = std::get_if<delete_op>(&op)) {
        json del;
        set_range(del, d->key, d->prefix);
        j["request_delete_range"] = std::move(del);
    } else {
        const auto& r = std::get<range_op>(op);
        json range;
        set_range(range, r.key, r.prefix);
        j["request_range"] = std::move(range);
    }
    return j;
}

} // namespace

std::string range_body(std::string_view key, bool prefix) {
    json j;
    set_range(j, key, prefix);
    return j.dump();
}

std::string put_body(std::string_view key, std::string_view value, std::int64_t lease) {
    json j{{"key", b64(key)}, {"value", b64(value)}};
    if (lease != 0) j["lease"] = std::to_string(lease);
    return j.dump();
}

std::string delete_body(std::string_view key, bool prefix) { return range_body(key, prefix); }

std::string txn_body(const txn_request& req) {
    json compares = json::array();
    for (const auto& c : req.compares) {
        json cj{{"key", b64(c.key)}, {"target", target_name(c.what)}, {"result", op_name(c.how)}};
        if (c.what == compare::target::value) {
            cj["value"] = b64(c.value);
        } else {
            cj[number_field(c.what)] = std::to_string(c.number);
        }
        compares.push_back(std::move(cj));
    }
    json success = json::array();
    for (const auto& op : req.success) success.push_back(op_json(op));
    json fail = json::array();
    for (const auto& op : req.failure) fail.push_back(op_json(op));
    return json{{"compare", std::move(compares)}, {"success", std::move(success)}, {"failure", std::move(fail)}}.dump();
}

std::string grant_body(std::chrono::seconds ttl) { return json{{"TTL", std::to_string(ttl.count())}}.dump(); }

std::string lease_id_body(std::int64_t lease) { return json{{"ID", std::to_string(lease)}}.dump(); }

std::string watch_body(std::string_view key, bool prefix, std::int64_t start_revision) {
    json create;
    set_range(create, key, prefix);
    if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
    return json{{"create_request", std::move(create)}}.dump();
}

result<range_result, error> parse_range(const json& j) {
    return guarded("range", [&] { return read_range(j, header_revision(j)); });
}

result<std::int64_t, error> parse_revision(const json& j) {
    return guarded("write", [&] {
        require_object(j);
        const auto rev = header_revision(j);
        if (rev <= 0) throw malformed("no revision in the header");
        return rev;
    });
}

result<txn_result, error> parse_txn(const json& j) {
    return guarded("txn", [&] {
        require_object(j);
        txn_result t;
        t.revision = header_revision(j);
        t.succeeded = read_bool(j, "succeeded");
        for (const auto& resp : read_array(j, "responses")) {
            if (!resp.is_object()) throw malformed("a txn response is not an object");
            if (auto it = resp.find("response_range"); it != resp.end()) t.ranges.push_back(read_range(*it, t.revision));
        }
        return t;
    });
}

result<lease_grant, error> parse_grant(const json& j) {
    return guarded("lease grant", [&] {
        require_object(j);
        if (auto it = j.find("error"); it != j.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
            throw malformed(printable(it->get_ref<const std::string&>()));
        }
        lease_grant g;
        g.id = read_i64(j, "ID");
        g.ttl = std::chrono::seconds(read_i64(j, "TTL"));
        if (g.id == 0 || g.ttl.count() <= 0) throw malformed("no lease ID or TTL");
        return g;
    });
}

result<std::chrono::seconds, error> parse_keepalive(const json& j) {
    auto ttl = guarded("lease keepalive", [&] {
        require_object(j);
        return read_i64(read_object(j, "result"), "TTL");
    });
    if (!ttl) return failure{std::move(ttl).error()};
    // etcd answers a keep-alive of an unknown lease with a result that has no TTL.
    if (*ttl <= 0) return failure{error{errc::lease_not_found, "etcd: the lease expired or was revoked"}};
    return std::chrono::seconds(*ttl);
}

result<std::vector<event>, error> parse_watch_message(const json& j) {
    if (j.is_object()) {
        if (auto it = j.find("error"); it != j.end()) {
            // grpc-gateway's stream error: {"error": {"grpc_code": N, "http_code": N, "message": ...}}.
            int status = 0;
            if (it->is_object()) {
                if (auto h = it->find("http_code"); h != it->end() && h->is_number_integer()) status = h->get<int>();
            }
            return failure{classify_failure(status, it->dump(), "watch")};
        }
    }
    bool ended = false;
    std::int64_t compact_rev = 0;
    auto events = guarded("watch", [&] {
        require_object(j);
        const json& r = read_object(j, "result");
        compact_rev = read_i64(r, "compact_revision");
        ended = read_bool(r, "canceled");
        std::vector<event> out;
        for (const auto& e : read_array(r, "events")) {
            if (!e.is_object()) throw malformed("an event is not an object");
            event ev;
            auto type = e.find("type");
            if (type != e.end() && type->is_string() && type->get_ref<const std::string&>() == "DELETE") {
                ev.type = event::kind::del;
            } else if (type != e.end() && !(type->is_string() && type->get_ref<const std::string&>() == "PUT")) {
                throw malformed("an event has an unknown type");
            }
            ev.kv = read_kv(read_object(e, "kv"));
            out.push_back(std::move(ev));
        }
        return out;
    });
    if (!events) return events;
    if (compact_rev > 0 || ended) {
        // A watch etcd cancels has lost its place (compaction is the one reason etcd gives
        // without auth): the caller reads afresh and watches again, as for compaction.
        return failure{error{errc::compacted,
                             compact_rev > 0
                                 ? fmt::format("etcd compacted the watch's start revision (compacted up to {})", compact_rev)
                                 : std::string("etcd cancelled the watch")}};
    }
    return events;
}

error classify_failure(int status, std::string_view body, std::string_view what) {
    std::string msg;
    std::int64_t code = -1;
    try {
        auto j = json::parse(body);
        if (j.is_object()) {
            if (auto it = j.find("message"); it != j.end() && it->is_string()) msg = it->get<std::string>();
            else if (auto e = j.find("error"); e != j.end() && e->is_string()) msg = e->get<std::string>();
            if (auto it = j.find("code"); it != j.end() && it->is_number_integer()) code = it->get<std::int64_t>();
            else if (auto g = j.find("grpc_code"); g != j.end() && g->is_number_integer()) code = g->get<std::int64_t>();
        }
    } catch (const std::exception&) {
        msg = std::string(body);
    }
    const auto text = fmt::format("etcd {} failed ({}{}): {}", what, status > 0 ? fmt::format("HTTP {}", status) : "stream",
                                  code >= 0 ? fmt::format(", code {}", code) : "", printable(msg));
    errc c;
    if (msg.find("requested lease not found") != std::string::npos) {
        c = errc::lease_not_found;
    } else if (msg.find("required revision has been compacted") != std::string::npos) {
        c = errc::compacted;
    } else if (code == 4 || status == 504) { // gRPC DeadlineExceeded
        c = errc::timeout;
    } else if (code == 14 || status >= 500 || code == 1 || code == 10 || code == 13) {
        // Unavailable (no leader, stopping), Canceled, Aborted, Internal: etcd's side, transient.
        c = errc::unavailable;
    } else if (status == 0 && code < 0) {
        c = errc::bad_response;
    } else {
        c = errc::invalid_argument;
    }
    return error{c, text};
}

} // namespace skiff::etcd::detail
