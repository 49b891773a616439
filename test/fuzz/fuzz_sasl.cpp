// libFuzzer target for the SASL parsers and the SCRAM state machine: arbitrary bytes go to
// the client-first, client-final and PLAIN parsers, and, split at the first '\n', through a
// whole SCRAM-SHA-256 exchange (RFC 7677's credential and server nonce, so the seed exchange
// reaches proof verification). Whatever parses must satisfy the invariants below (a violation
// aborts, so the fuzzer reports it like a crash).
//
//   CXX=clang++-14 meson setup build-fuzz -Dfuzzers=true -Db_lundef=false
//   ninja -C build-fuzz test/fuzz/fuzz_sasl
//   build-fuzz/test/fuzz/fuzz_sasl -max_total_time=60 <scratch dir> test/fuzz/corpus/sasl
#include <skiff/core/base64.hpp>
#include <skiff/sasl/plain.hpp>
#include <skiff/sasl/scram.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace skiff;
using namespace skiff::sasl;

namespace {

void require(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_sasl: invariant violated: %s\n", what);
        std::abort();
    }
}

const scram_credential& rfc_credential() {
    static const scram_credential c =
        make_scram_credential(scram_mechanism::sha_256, "pencil", base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==").value(),
                              4096)
            .value();
    return c;
}

void check_first(std::string_view m) {
    auto f = parse_client_first(m);
    if (!f) return;
    require(!f->username.empty() && f->username.size() <= max_name_bytes, "username size");
    require(m.size() >= f->bare.size() && m.substr(m.size() - f->bare.size()) == f->bare, "bare is the tail");
    require(m.substr(0, f->gs2_header.size()) == f->gs2_header, "gs2 header is the head");
    require(decode_saslname(encode_saslname(f->username)).value() == f->username, "saslname round trip");
}

void check_final(std::string_view m) {
    auto f = parse_client_final(m);
    if (!f) return;
    require(!f->proof.empty() && !f->channel_binding.empty(), "proof and binding present");
    require(m.substr(0, f->without_proof.size()) == f->without_proof, "without-proof is the head");
}

void check_plain(std::string_view m) {
    auto p = parse_plain(m);
    if (!p) return;
    require(!p->authcid.empty() && !p->password.empty(), "plain fields");
    require(p->authzid.size() + p->authcid.size() + p->password.size() + 2 == m.size(), "plain sizes");
}

void exchange(std::string_view input) {
    auto nl = input.find('\n');
    scram_server::options o;
    o.mechanism = scram_mechanism::sha_256;
    o.lookup = [](const client_first& f, scram_mechanism) -> std::optional<scram_credential> {
        if (f.username == "user") return rfc_credential();
        return std::nullopt;
    };
    o.server_nonce = [] { return std::string("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"); };
    o.fake_credential_key = "fuzz";
    scram_server s(std::move(o));
    auto first = s.step(input.substr(0, nl));
    if (!first) {
        require(s.current_state() == scram_server::state::failed, "failed after first error");
        return;
    }
    if (nl == std::string_view::npos) return;
    auto fin = s.step(input.substr(nl + 1));
    require(fin.has_value() == s.complete(), "complete iff server-final");
    if (fin) require(fin->rfind("v=", 0) == 0 && s.username() == "user", "server-final");
    require(!s.step("x"), "nothing after the end");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    check_first(in);
    check_final(in);
    check_plain(in);
    exchange(in);
    return 0;
}
