// Credentials loading: environment vs shared files, profile selection, and errors that
// explain the cause without ever containing a secret.
#include <skiff/s3/credentials.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace skiff::s3;

namespace {

// A private directory that disappears with the test.
class temp_dir {
public:
    temp_dir() {
        std::string pattern = (fs::temp_directory_path() / "skiff-creds-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        _path = pattern;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(_path, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    const fs::path& path() const { return _path; }

    fs::path write(const std::string& rel, const std::string& text) const {
        fs::path p = _path / rel;
        fs::create_directories(p.parent_path());
        std::ofstream out(p, std::ios::binary);
        out << text;
        REQUIRE(out.good());
        return p;
    }

private:
    fs::path _path;
};

// The environment the loader sees; the real one is never consulted.
struct fake_env {
    std::map<std::string, std::string, std::less<>> vars;

    env_lookup lookup() const {
        return [this](std::string_view name) -> std::optional<std::string> {
            auto it = vars.find(name);
            if (it == vars.end()) return std::nullopt;
            return it->second;
        };
    }
};

const std::string env_secret = "ENVsecretENVsecretENVsecretENVsecret0001";
const std::string default_secret = "DEFAULTsecretDEFAULTsecretDEFAULTsecre02";
const std::string prod_secret = "PRODsecretPRODsecretPRODsecretPRODsecre03";
const std::string config_secret = "CONFIGsecretCONFIGsecretCONFIGsecretCO04";

const std::string credentials_file =
    "# written by aws configure\n"
    "[default]\n"
    "aws_access_key_id = AKIADEFAULT000000001\n"
    "aws_secret_access_key = " + default_secret + "\n"
    "\n"
    "[prod]\r\n" // CRLF files occur when edited on Windows
    "aws_access_key_id=ASIAPROD00000000003\r\n"
    "aws_secret_access_key=" + prod_secret + "\r\n"
    "aws_session_token = prod-token\r\n";

const std::string config_file =
    "; comment\n"
    "[default]\n"
    "region = us-west-2\n"
    "s3 =\n"
    "    addressing_style = path\n"
    "[profile prod]\n"
    "region = eu-central-1\n"
    "[profile dev]\n"
    "region=ap-south-1\n"
    "aws_access_key_id = AKIADEV0000000000004\n"
    "aws_secret_access_key = " + config_secret + "\n";

void check_no_secrets(const std::string& text) {
    for (const auto* s : {&env_secret, &default_secret, &prod_secret, &config_secret}) {
        CHECK(text.find(*s) == std::string::npos);
    }
}

} // namespace

TEST_CASE("environment credentials win over the shared files", "[s3][credentials]") {
    temp_dir home;
    home.write(".aws/credentials", credentials_file);
    home.write(".aws/config", config_file);
    fake_env env{{{"HOME", home.path().string()},
                  {"AWS_ACCESS_KEY_ID", "AKIAENV0000000000000"},
                  {"AWS_SECRET_ACCESS_KEY", env_secret},
                  {"AWS_SESSION_TOKEN", "env-token"},
                  {"AWS_REGION", "eu-north-1"},
                  {"AWS_DEFAULT_REGION", "us-east-2"}}};
    auto r = load_credentials(env.lookup());
    REQUIRE(r);
    CHECK(r->creds.access_key_id == "AKIAENV0000000000000");
    CHECK(r->creds.secret_access_key == env_secret);
    CHECK(r->creds.session_token == "env-token");
    CHECK(r->source == "environment");
    CHECK(r->region == "eu-north-1"); // AWS_REGION beats AWS_DEFAULT_REGION

    SECTION("AWS_DEFAULT_REGION when AWS_REGION is unset") {
        env.vars.erase("AWS_REGION");
        CHECK(load_credentials(env.lookup())->region == "us-east-2");
    }
    SECTION("region from the config file when neither variable is set") {
        env.vars.erase("AWS_REGION");
        env.vars.erase("AWS_DEFAULT_REGION");
        CHECK(load_credentials(env.lookup())->region == "us-west-2");
    }
    SECTION("empty variables count as unset") {
        env.vars["AWS_ACCESS_KEY_ID"] = "";
        env.vars["AWS_SECRET_ACCESS_KEY"] = "";
        auto f = load_credentials(env.lookup());
        REQUIRE(f);
        CHECK(f->creds.access_key_id == "AKIADEFAULT000000001");
    }
}

TEST_CASE("environment-only setup does not read (possibly broken) files", "[s3][credentials]") {
    temp_dir home;
    home.write(".aws/credentials", "this is not an ini file\n");
    fake_env env{{{"HOME", home.path().string()},
                  {"AWS_ACCESS_KEY_ID", "AKIAENV0000000000000"},
                  {"AWS_SECRET_ACCESS_KEY", env_secret},
                  {"AWS_REGION", "us-east-1"}}};
    auto r = load_credentials(env.lookup());
    REQUIRE(r);
    CHECK(r->creds.session_token.empty());
}

TEST_CASE("half-set environment credentials are an error", "[s3][credentials]") {
    fake_env env{{{"AWS_SECRET_ACCESS_KEY", env_secret}}};
    auto r = load_credentials(env.lookup());
    REQUIRE(!r);
    CHECK(r.error().find("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not") != std::string::npos);
    check_no_secrets(r.error());

    fake_env only_id{{{"AWS_ACCESS_KEY_ID", "AKIAENV0000000000000"}}};
    auto r2 = load_credentials(only_id.lookup());
    REQUIRE(!r2);
    CHECK(r2.error().find("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not") != std::string::npos);
}

TEST_CASE("shared files: profile selection", "[s3][credentials]") {
    temp_dir home;
    auto creds_path = home.write(".aws/credentials", credentials_file);
    auto config_path = home.write(".aws/config", config_file);
    fake_env env{{{"HOME", home.path().string()}}};

    SECTION("default profile") {
        auto r = load_credentials(env.lookup());
        REQUIRE(r);
        CHECK(r->creds.access_key_id == "AKIADEFAULT000000001");
        CHECK(r->creds.secret_access_key == default_secret);
        CHECK(r->creds.session_token.empty());
        CHECK(r->region == "us-west-2");
        CHECK(r->source == creds_path.string() + " [default]");
    }
    SECTION("AWS_PROFILE picks [prod] in credentials and [profile prod] in config") {
        env.vars["AWS_PROFILE"] = "prod";
        auto r = load_credentials(env.lookup());
        REQUIRE(r);
        CHECK(r->creds.access_key_id == "ASIAPROD00000000003");
        CHECK(r->creds.secret_access_key == prod_secret);
        CHECK(r->creds.session_token == "prod-token");
        CHECK(r->region == "eu-central-1");
    }
    SECTION("keys may live in the config file's [profile NAME]") {
        env.vars["AWS_PROFILE"] = "dev";
        auto r = load_credentials(env.lookup());
        REQUIRE(r);
        CHECK(r->creds.access_key_id == "AKIADEV0000000000004");
        CHECK(r->creds.secret_access_key == config_secret);
        CHECK(r->region == "ap-south-1");
        CHECK(r->source == config_path.string() + " [profile dev]");
    }
    SECTION("the credentials file wins over the config file for the same profile") {
        home.write(".aws/config", config_file + "[profile prod]\naws_access_key_id = AKIACONFIGPROD000005\n"
                                                "aws_secret_access_key = " + config_secret + "\n");
        env.vars["AWS_PROFILE"] = "prod";
        auto r = load_credentials(env.lookup());
        REQUIRE(r);
        CHECK(r->creds.access_key_id == "ASIAPROD00000000003");
    }
    SECTION("a profile name in the credentials file is not confused with 'profile NAME'") {
        home.write(".aws/credentials", "[profile prod]\naws_access_key_id=AKIAWRONG00000000000\n"
                                       "aws_secret_access_key=" + prod_secret + "\n");
        env.vars["AWS_PROFILE"] = "prod";
        auto r = load_credentials(env.lookup());
        REQUIRE(!r); // [profile prod] in the credentials file is a profile named "profile prod"
        check_no_secrets(r.error());
    }
}

TEST_CASE("AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE override the paths", "[s3][credentials]") {
    temp_dir dir;
    auto creds_path = dir.write("elsewhere/creds.ini", credentials_file);
    auto config_path = dir.write("elsewhere/conf.ini", "[profile default]\nregion = sa-east-1\n");
    dir.write("home/.aws/credentials", "[default]\naws_access_key_id=AKIAHOME000000000000\n"
                                       "aws_secret_access_key=home-secret-value-000000\n");
    fake_env env{{{"HOME", (dir.path() / "home").string()},
                  {"AWS_SHARED_CREDENTIALS_FILE", creds_path.string()},
                  {"AWS_CONFIG_FILE", config_path.string()}}};
    auto r = load_credentials(env.lookup());
    REQUIRE(r);
    CHECK(r->creds.access_key_id == "AKIADEFAULT000000001");
    CHECK(r->region == "sa-east-1"); // [profile default] is accepted for the default profile

    SECTION("'~/' in an override expands to HOME") {
        dir.write("home/my/creds", "[default]\naws_access_key_id=AKIATILDE00000000000\n"
                                   "aws_secret_access_key=tilde-secret-value-00000\n");
        env.vars["AWS_SHARED_CREDENTIALS_FILE"] = "~/my/creds";
        auto t = load_credentials(env.lookup());
        REQUIRE(t);
        CHECK(t->creds.access_key_id == "AKIATILDE00000000000");
    }
}

TEST_CASE("missing credentials: the error names the cause", "[s3][credentials]") {
    temp_dir home;
    fake_env env{{{"HOME", home.path().string()}}};

    SECTION("no files at all") {
        auto r = load_credentials(env.lookup());
        REQUIRE(!r);
        INFO(r.error());
        CHECK(r.error().rfind("no AWS credentials found", 0) == 0);
        CHECK(r.error().find("AWS_ACCESS_KEY_ID") != std::string::npos);
        CHECK(r.error().find("profile 'default'") != std::string::npos);
        CHECK(r.error().find((home.path() / ".aws/credentials").string() + " does not exist") != std::string::npos);
    }
    SECTION("no HOME and no overrides") {
        auto r = load_credentials(fake_env{}.lookup());
        REQUIRE(!r);
        CHECK(r.error().find("HOME is unset") != std::string::npos);
    }
    SECTION("files exist but the default profile has no keys") {
        home.write(".aws/credentials", "[prod]\naws_access_key_id=AKIAPROD000000000000\n"
                                       "aws_secret_access_key=" + prod_secret + "\n");
        home.write(".aws/config", "[default]\nregion=us-east-1\n");
        auto r = load_credentials(env.lookup());
        REQUIRE(!r);
        INFO(r.error());
        CHECK(r.error().find("has no such profile") != std::string::npos);
        CHECK(r.error().find("has the profile but no keys") != std::string::npos);
        check_no_secrets(r.error());
    }
    SECTION("AWS_PROFILE names a profile that exists nowhere") {
        home.write(".aws/credentials", credentials_file);
        env.vars["AWS_PROFILE"] = "staging";
        auto r = load_credentials(env.lookup());
        REQUIRE(!r);
        INFO(r.error());
        CHECK(r.error().find("'staging'") != std::string::npos);
        CHECK(r.error().find("neither") != std::string::npos);
        check_no_secrets(r.error());
    }
    SECTION("a profile with an id but no secret") {
        home.write(".aws/credentials", "[default]\naws_access_key_id = AKIAHALF000000000000\n");
        auto r = load_credentials(env.lookup());
        REQUIRE(!r);
        CHECK(r.error().find("has aws_access_key_id but no aws_secret_access_key") != std::string::npos);
        CHECK(r.error().find("profile 'default'") != std::string::npos);
    }
    SECTION("a profile with a secret but no id") {
        home.write(".aws/credentials", "[default]\naws_secret_access_key = " + default_secret + "\n");
        auto r = load_credentials(env.lookup());
        REQUIRE(!r);
        CHECK(r.error().find("has aws_secret_access_key but no aws_access_key_id") != std::string::npos);
        check_no_secrets(r.error());
    }
}

TEST_CASE("malformed files fail with the line number, never the line", "[s3][credentials]") {
    temp_dir home;
    fake_env env{{{"HOME", home.path().string()}}};
    auto path = home.write(".aws/credentials", "[default]\naws_access_key_id = AKIADEFAULT000000001\n"
                                               "aws_secret_access_key " + default_secret + "\n");
    auto r = load_credentials(env.lookup());
    REQUIRE(!r);
    INFO(r.error());
    CHECK(r.error().find(path.string() + ":3:") != std::string::npos);
    check_no_secrets(r.error());

    home.write(".aws/credentials", "key = before any section\n");
    auto r2 = load_credentials(env.lookup());
    REQUIRE(!r2);
    CHECK(r2.error().find(":1: setting appears before any [section]") != std::string::npos);

    home.write(".aws/credentials", "[default\n");
    auto r3 = load_credentials(env.lookup());
    REQUIRE(!r3);
    CHECK(r3.error().find("closing ']'") != std::string::npos);
}

TEST_CASE("an unreadable credentials file is an error, not a silent skip", "[s3][credentials]") {
    if (::geteuid() == 0) {
        WARN("running as root: file permissions are not enforced, skipping");
        return;
    }
    temp_dir home;
    auto path = home.write(".aws/credentials", credentials_file);
    fs::permissions(path, fs::perms::none);
    fake_env env{{{"HOME", home.path().string()}}};
    auto r = load_credentials(env.lookup());
    REQUIRE(!r);
    CHECK(r.error().find("cannot open") != std::string::npos);
    fs::permissions(path, fs::perms::owner_all);
}

TEST_CASE("describe and fmt show credentials redacted", "[s3][credentials][redact]") {
    credentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "tok"};
    CHECK(describe(c) == "AKIA\u2026MPLE, secret <redacted>, session token <redacted>");
    CHECK(fmt::format("{}", c) == describe(c));
    CHECK(fmt::format("{}", c).find(c.secret_access_key) == std::string::npos);
    CHECK(describe(credentials{"AKID", "s", ""}) == "<4-char access key id>, secret <redacted>, no session token");
    CHECK(describe(credentials{}) == "<no access key id>, no secret, no session token");
    CHECK(c.complete());
    CHECK(!credentials{"id", "", ""}.complete());
}

TEST_CASE("process_env reads the real environment", "[s3][credentials]") {
    auto env = process_env();
    CHECK(!env("SKIFF_TEST_SURELY_UNSET_VARIABLE_7f3a").has_value());
}
