// S3 Express One Zone against the fake S3 taught the session flow (fake_s3_options::express):
// CreateSession signed for "s3express" with the long-term keys, data requests signed with the
// session's keys and carrying x-amz-s3session-token, one session shared by concurrent
// requests, renewal before expiry and after ExpiredToken, conditional writes, zonal endpoints.
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/s3/xml.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::fake_s3;
using skiff::test::make_client;

namespace {

const std::string bucket = "logs--use1-az4--x-s3";

skiff::test::fake_s3_options express_server(std::chrono::seconds ttl = 300s) {
    skiff::test::fake_s3_options o;
    o.buckets = {bucket};
    o.express = skiff::test::fake_express_options{"AKIDEXPRESS", "express/secret+key", ttl};
    return o;
}

s3::client_config config_for(const fake_s3& srv) {
    s3::client_config cfg = skiff::test::fake_s3_client_config(srv);
    cfg.creds = {"AKIDEXPRESS", "express/secret+key", ""};
    return cfg;
}

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

} // namespace

TEST_CASE("directory bucket names and their zones", "[s3][express]") {
    CHECK(s3::is_directory_bucket("logs--use1-az4--x-s3"));
    CHECK(s3::directory_bucket_zone("logs--use1-az4--x-s3") == "use1-az4");
    CHECK(s3::directory_bucket_zone("a--b--c--usw2-az1--x-s3") == "usw2-az1");
    CHECK_FALSE(s3::is_directory_bucket("logs"));
    CHECK_FALSE(s3::is_directory_bucket("--x-s3"));
    CHECK_FALSE(s3::is_directory_bucket("logs--x-s3"));
    CHECK_FALSE(s3::is_directory_bucket("logs----x-s3"));
}

TEST_CASE("CreateSession answers parse; a bad one is refused without quoting secrets", "[s3][express][xml]") {
    auto ok = s3::parse_create_session(
        "<CreateSessionResult><Credentials><SessionToken>tok</SessionToken><SecretAccessKey>sec</SecretAccessKey>"
        "<AccessKeyId>ASIA1</AccessKeyId><Expiration>2026-12-05T13:05:00Z</Expiration></Credentials>"
        "</CreateSessionResult>");
    REQUIRE(ok.has_value());
    CHECK(ok->access_key_id == "ASIA1");
    CHECK(ok->session_token == "tok");
    auto missing = s3::parse_create_session(
        "<CreateSessionResult><Credentials><SessionToken>tok-secret-xyz</SessionToken><AccessKeyId>A</AccessKeyId>"
        "<Expiration>2026-12-05T13:05:00Z</Expiration></Credentials></CreateSessionResult>");
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().message.find("SecretAccessKey") != std::string::npos);
    CHECK(missing.error().message.find("tok-secret-xyz") == std::string::npos);
    CHECK_FALSE(s3::parse_create_session("<Error><Code>AccessDenied</Code></Error>").has_value());
    CHECK_FALSE(s3::parse_create_session("not xml").has_value());
}

TEST_CASE("S3 Express: one session signs every request; the fake verifies each signature", "[s3][express]") {
    fake_s3 srv(express_server());
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "segment bytes";
        auto put = co_await c->put_object(bucket, "ns/t/0/00000000000000000000.kfs", bytes(body));
        INFO((put ? std::string() : put.error().message));
        REQUIRE(put.has_value());
        // Several requests at once share the one session (a single CreateSession).
        std::vector<task<result<s3::get_result, s3::error>>> gets;
        for (int i = 0; i < 8; ++i) gets.push_back(c->get_object(bucket, "ns/t/0/00000000000000000000.kfs"));
        auto got = co_await when_all(std::move(gets));
        for (auto& g : got) {
            REQUIRE(g.has_value());
            CHECK(g->body == body);
        }
        auto listed = co_await c->list_objects_v2(bucket, s3::list_request("ns/"));
        REQUIRE(listed.has_value());
        CHECK(listed->objects.size() == 1);
        // Conditional writes work on a directory bucket: a second create-only PUT is refused.
        s3::put_options create_only;
        create_only.if_none_match = true;
        auto again = co_await c->put_object(bucket, "ns/t/0/00000000000000000000.kfs", bytes(body), create_only);
        REQUIRE_FALSE(again.has_value());
        CHECK(again.error().code == s3::errc::precondition_failed);
        CHECK(c->express_sessions_created() == 1);
    };
    run_task(t(&srv));
    const auto st = srv.stats();
    CHECK(st.sessions_created == 1);
    CHECK(st.auth_failures == 0);
    // Every data request carried the session token, and none carried the long-term key id.
    for (const auto& r : srv.request_log()) {
        if (r.target.find("?session") != std::string::npos) {
            CHECK(r.headers.count("x-amz-s3session-token") == 0);
            CHECK(r.headers.at("authorization").find("Credential=AKIDEXPRESS/") != std::string::npos);
            CHECK(r.headers.at("authorization").find("/s3express/aws4_request") != std::string::npos);
        } else {
            CHECK(r.headers.count("x-amz-s3session-token") == 1);
            CHECK(r.headers.at("authorization").find("AKIDEXPRESS") == std::string::npos);
            CHECK(r.headers.at("authorization").find("x-amz-s3session-token") != std::string::npos);
        }
    }
}

TEST_CASE("S3 Express: a session is renewed before it expires, and at once after ExpiredToken", "[s3][express]") {
    SECTION("renewed ahead of expiry") {
        // A 4 s session: renewed once half of it is gone (the 60 s margin is longer than it).
        fake_s3 srv(express_server(4s));
        auto t = [](fake_s3* s) -> task<void> {
            auto c = make_client(config_for(*s));
            std::string body = "x";
            auto p1 = co_await c->put_object(bucket, "a", bytes(body));
            REQUIRE(p1.has_value());
            auto p2 = co_await c->put_object(bucket, "b", bytes(body));
            REQUIRE(p2.has_value());
            CHECK(c->express_sessions_created() == 1);
            (void)co_await runtime::sleep(2500ms);
            auto p3 = co_await c->put_object(bucket, "c", bytes(body));
            REQUIRE(p3.has_value());
            CHECK(c->express_sessions_created() == 2);
        };
        run_task(t(&srv));
        CHECK(srv.stats().auth_failures == 0);
    }
    SECTION("an expired session is replaced and the request sent again, even a single-attempt one") {
        fake_s3 srv(express_server());
        auto t = [](fake_s3* s) -> task<void> {
            auto c = make_client(config_for(*s));
            std::string body = "x";
            auto p4 = co_await c->put_object(bucket, "a", bytes(body));
            REQUIRE(p4.has_value());
            s->expire_sessions();
            s3::put_options once;
            once.max_attempts = 1;
            once.if_none_match = true;
            auto r = co_await c->put_object(bucket, "b", bytes(body), once);
            INFO((r ? std::string() : r.error().message));
            REQUIRE(r.has_value());
            CHECK(c->express_sessions_created() == 2);
        };
        run_task(t(&srv));
        CHECK(srv.stats().auth_failures == 1); // the one ExpiredToken
        CHECK(srv.has_object(bucket, "b"));
    }
}

TEST_CASE("S3 Express: wrong long-term keys fail CreateSession with a clear error, no secret in it", "[s3][express]") {
    fake_s3 srv(express_server());
    auto t = [](fake_s3* s) -> task<void> {
        auto cfg = config_for(*s);
        cfg.creds.secret_access_key = "wrong-secret-xyz";
        auto c = make_client(cfg);
        std::string body = "x";
        auto r = co_await c->put_object(bucket, "a", bytes(body));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().message.find("CreateSession") != std::string::npos);
        CHECK(r.error().message.find("wrong-secret-xyz") == std::string::npos);
        CHECK(r.error().http_status == 403);
    };
    run_task(t(&srv));
    CHECK(srv.stats().sessions_created == 0);
}
