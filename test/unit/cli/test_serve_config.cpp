// skiff serve's settings (src/cli/serve_config.*, config_file.*): the sources and their
// precedence, the config file's errors, contradictions, --print-config's output; and the
// start-up checks (serve_checks.*) that need no S3: the data directory's lock and the ports.
#include "config_file.hpp"
#include "serve_checks.hpp"
#include "serve_config.hpp"

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

using namespace skiff::cli;

namespace {

struct temp_dir {
    std::string path;
    temp_dir() {
        char tmpl[] = "/tmp/skiff-serve-config-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~temp_dir() { std::filesystem::remove_all(path); }
    std::string write(const std::string& name, const std::string& body) const {
        std::ofstream(path + "/" + name) << body;
        return path + "/" + name;
    }
};

env_fn env_of(std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

const env_fn no_env = env_of({});

std::string error_of(const std::vector<std::string>& args, const env_fn& env = no_env) {
    auto o = parse_serve_options(args, env);
    if (!o) return o.error();
    auto c = make_broker_config(*o);
    return c ? std::string() : c.error();
}

// A valid value, other than the default, for every key; a flag added without one fails the
// "every key" test below, so the config file and --print-config keep covering all of them.
const std::map<std::string, std::string> sample_values = {
    {"kafka-addr", "\"127.0.0.1:19092\""},
    {"advertised-addr", "\"broker.example:19092\""},
    {"http-addr", "\"127.0.0.1:19644\""},
    {"sasl-mechanisms", "\"SCRAM-SHA-256,PLAIN\""},
    {"authorizer", "\"acl\""},
    {"super-users", "\"User:admin;User:ops\""},
    {"allow-everyone-if-no-acl-found", "true"},
    {"tls-cert-file", "\"/etc/skiff/cert.pem\""},
    {"tls-key-file", "\"/etc/skiff/key.pem\""},
    {"tls-ca-file", "\"/etc/skiff/ca.pem\""},
    {"tls-client-auth", "\"requested\""},
    {"tls-min-version", "\"TLSv1.3\""},
    {"http-tls", "false"},
    {"max-reauth-ms", "60000"},
    {"failed-auth-delay-ms", "50"},
    {"data-dir", "\"/var/lib/skiff\""},
    {"namespace", "\"prod\""},
    {"upload-mode", "\"sequential\""},
    {"flush-linger-ms", "5"},
    {"flush-interval-ms", "250"},
    {"segment-bytes", "1048576"},
    {"max-inflight-flushes", "3"},
    {"max-puts-per-second", "400"},
    {"hedge-after-ms", "\"off\""},
    {"put-price-per-1000", "0.0045"},
    {"max-buffered-bytes", "268435456"},
    {"max-partition-buffered-bytes", "8388608"},
    {"max-cache-bytes", "134217728"},
    {"quota-produce-bytes-per-second", "1000000"},
    {"quota-fetch-bytes-per-second", "2000000"},
    {"client-quotas", "\"app:produce=1M,fetch=2M\""},
    {"auto-create-topics", "false"},
    {"default-partitions", "6"},
    {"etcd", "\"http://127.0.0.1:2379,http://127.0.0.1:22379\""},
    {"node-id", "3"},
    {"broker-id", "3"},
    {"lease-ttl-s", "5"},
    {"rack", "\"eu-west-1a\""},
    {"cores", "2"},
    {"max-frame-bytes", "33554432"},
    {"message-max-bytes", "2097152"},
    {"retention-ms", "86400000"},
    {"retention-bytes", "1073741824"},
    {"file-delete-delay-ms", "30000"},
    {"manifest-every-segments", "16"},
    {"time-index", "false"},
    {"merge-target-bytes", "16777216"},
    {"merge-age-ms", "300000"},
    {"compaction-interval-ms", "5000"},
    {"compaction-map-bytes", "1048576"},
    {"group-initial-rebalance-delay-ms", "100"},
    {"transaction-max-timeout-ms", "600000"},
    {"transactional-id-expiration-ms", "86400000"},
    {"iceberg-topics", "\"orders,clicks\""},
    {"iceberg-warehouse", "\"lake/prod\""},
    {"iceberg-location-base", "\"s3a://bucket\""},
    {"iceberg-partition-by", "\"partition\""},
    {"iceberg-project", "\"amount:double:$.amount;who:string:$.user.name\""},
    {"iceberg-commit-interval-ms", "5000"},
    {"log-level", "\"warn\""},
};
// The rest of the line that sets `key` in --print-config's output, from the "=" on.
std::string line_of(const std::string& out, const std::string& key) {
    std::size_t at = 0;
    while ((at = out.find("\n" + key + " ", at)) != std::string::npos) {
        auto end = out.find('\n', at + 1);
        auto line = out.substr(at + 1, end - at - 1);
        auto eq = line.find("= ");
        if (eq != std::string::npos) return line.substr(eq);
        at = end;
    }
    return {};
}

// Keep the S3 store's keys apart: they contradict data-dir.
bool s3_key(const std::string& k) { return k.starts_with("s3-"); }
// --listeners replaces --kafka-addr: the two cannot be in one file (their own test below).
bool listener_key(const std::string& k) { return k == "listeners" || k == "advertised-listeners"; }

} // namespace

TEST_CASE("a flag wins over the environment, which wins over the file, which wins over the default",
          "[cli][serve_config]") {
    temp_dir d;
    auto file = d.write("skiff.toml", "segment-bytes = 2048\n"
                                      "default-partitions = 4\n"
                                      "cores = 3\n");
    auto env = env_of({{"SKIFF_DEFAULT_PARTITIONS", "5"}, {"SKIFF_CORES", "6"}});
    auto o = parse_serve_options({"--config", file, "--cores", "7"}, env);
    REQUIRE(o);
    CHECK(o->values.at("segment-bytes").source == value_source::file);
    CHECK(o->values.at("segment-bytes").line == 1);
    CHECK(o->values.at("default-partitions").source == value_source::env);
    CHECK(o->values.at("cores").source == value_source::flag);
    CHECK(o->values.count("namespace") == 0);
    auto cfg = make_broker_config(*o);
    REQUIRE(cfg);
    CHECK(cfg->log.segment_bytes == 2048);
    CHECK(cfg->default_partitions == 5);
    CHECK(cfg->cores == 7);
    CHECK(cfg->ns == "default");
}

TEST_CASE("SKIFF_CONFIG names the file; --config wins over it", "[cli][serve_config]") {
    temp_dir d;
    auto a = d.write("a.toml", "default-partitions = 2\n");
    auto b = d.write("b.toml", "default-partitions = 3\n");
    auto o = parse_serve_options({}, env_of({{"SKIFF_CONFIG", a}}));
    REQUIRE(o);
    CHECK(o->config_path == a);
    CHECK(o->values.at("default-partitions").value == "2");
    o = parse_serve_options({"--config=" + b}, env_of({{"SKIFF_CONFIG", a}}));
    REQUIRE(o);
    CHECK(o->values.at("default-partitions").value == "3");
}

TEST_CASE("command-line forms: =value, a bare boolean, a repeated flag, a negative number", "[cli][serve_config]") {
    auto o = parse_serve_options({"--s3-path-style", "--auto-create-topics", "false", "--segment-bytes=4096",
                                  "--cores", "1", "--cores", "2", "--retention-ms", "-1"},
                                 no_env);
    REQUIRE(o);
    CHECK(o->values.at("s3-path-style").value == "true");
    CHECK(o->values.at("auto-create-topics").value == "false");
    CHECK(o->values.at("segment-bytes").value == "4096");
    CHECK(o->values.at("cores").value == "2");
    CHECK(o->values.at("retention-ms").value == "-1");
    auto h = parse_serve_options({"--help"}, no_env);
    REQUIRE(h);
    CHECK(h->help);
    auto modes = parse_serve_options({"--print-config", "--check"}, no_env);
    REQUIRE(modes);
    CHECK(modes->print_config);
    CHECK(modes->check);
}

TEST_CASE("command-line errors are one sentence naming the flag", "[cli][serve_config]") {
    CHECK(error_of({"--no-such-flag"}) == "unknown flag --no-such-flag (see skiff serve --help)");
    CHECK(error_of({"--no-such-flag=3"}) == "unknown flag --no-such-flag (see skiff serve --help)");
    CHECK(error_of({"stray"}) == "unexpected argument 'stray'");
    CHECK(error_of({"--segment-bytes"}) == "--segment-bytes needs a value (N)");
    CHECK(error_of({"--segment-bytes", "lots"}) ==
          "--segment-bytes must be an integer from 1024 to 1073741824, not 'lots'");
    CHECK(error_of({"--config"}) == "--config needs a value (FILE)");
}

TEST_CASE("a bad value from the environment or the file says where it came from", "[cli][serve_config]") {
    CHECK(error_of({}, env_of({{"SKIFF_DEFAULT_PARTITIONS", "0"}})) ==
          "--default-partitions must be an integer from 1 to 10000, not '0' (from SKIFF_DEFAULT_PARTITIONS)");
    temp_dir d;
    auto file = d.write("skiff.toml", "# tuning\n\nupload-mode = \"sideways\"\n");
    CHECK(error_of({"--config", file}) ==
          "--upload-mode must be parallel or sequential, not 'sideways' (from " + file + " line 3)");
    // An empty variable is an unset one.
    CHECK(error_of({"--data-dir", d.path}, env_of({{"SKIFF_SEGMENT_BYTES", ""}})).empty());
}

TEST_CASE("config file: unknown keys, wrong types, tables, syntax errors and missing files are refused",
          "[cli][serve_config]") {
    temp_dir d;
    auto unknown = d.write("u.toml", "segment-bytes = 2048\n\nfoo = 1\n");
    CHECK(error_of({"--config", unknown}) == "unknown key 'foo' in " + unknown + " (line 3)");
    auto typed = d.write("t.toml", "segment-bytes = \"2048\"\n");
    CHECK(error_of({"--config", typed}) ==
          "key 'segment-bytes' in " + typed + " (line 1) must be an integer, not a string");
    auto boolean = d.write("b.toml", "auto-create-topics = 1\n");
    CHECK(error_of({"--config", boolean}) ==
          "key 'auto-create-topics' in " + boolean + " (line 1) must be true or false, not an integer");
    auto table = d.write("s.toml", "[kafka-addr]\nport = 1\n");
    CHECK(error_of({"--config", table}) ==
          "key 'kafka-addr' in " + table + " (line 1) must be a string, not a table, an array or a date");
    auto section = d.write("n.toml", "[server]\nkafka-addr = \"127.0.0.1:1\"\n");
    CHECK(error_of({"--config", section}) == "unknown key 'server' in " + section + " (line 1)");
    auto broken = d.write("x.toml", "segment-bytes = 1\nsegment-bytes = 2\n");
    auto e = error_of({"--config", broken});
    CHECK(e.starts_with(broken + " (line 2) is not valid TOML: "));
    CHECK(error_of({"--config", d.path + "/missing.toml"}) ==
          "cannot read the config file '" + d.path + "/missing.toml': No such file or directory");
    // The file is checked whole, also keys a flag overrides.
    CHECK(error_of({"--config", typed, "--segment-bytes", "4096"}) ==
          "key 'segment-bytes' in " + typed + " (line 1) must be an integer, not a string");
}

TEST_CASE("contradictory settings are refused naming both", "[cli][serve_config]") {
    CHECK(error_of({"--data-dir", "/x", "--s3-bucket", "b"}) ==
          "--data-dir and --s3-bucket both choose where the log is kept; give one of them");
    CHECK(error_of({}, env_of({{"SKIFF_DATA_DIR", "/x"}, {"SKIFF_S3_BUCKET", "b"}})) ==
          "--data-dir (from SKIFF_DATA_DIR) and --s3-bucket (from SKIFF_S3_BUCKET) both choose where the log is "
          "kept; give one of them");
    CHECK(error_of({"--node-id", "1", "--broker-id", "2"}) ==
          "--node-id 1 and --broker-id 2 name one id differently; give one of them");
    CHECK(error_of({"--node-id", "2", "--broker-id", "2"}).empty());
    CHECK(error_of({"--s3-region", "eu-west-1"}) == "--s3-region needs --s3-bucket");
    // In the environment an S3 setting may be meant for `skiff s3`.
    CHECK(error_of({}, env_of({{"SKIFF_S3_REGION", "eu-west-1"}})).empty());
    CHECK(error_of({"--rack", "a"}) == "--rack is a cluster mode setting and needs --etcd");
    CHECK(error_of({"--etcd", "http://127.0.0.1:2379", "--kafka-addr", "0.0.0.0:9092"})
              .starts_with("cluster mode needs --advertised-addr"));
    CHECK(error_of({"--kafka-addr", "127.0.0.1:9100", "--http-addr", "0.0.0.0:9100"}) ==
          "--kafka-addr (127.0.0.1:9100) and --http-addr (0.0.0.0:9100) are the same port; give them different ports");
    CHECK(error_of({"--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}).empty());
}

TEST_CASE("a config file with every key, and --print-config's output read back as one", "[cli][serve_config]") {
    ::setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret-never-shown", 1);
    temp_dir d;
    std::string local, s3 = "s3-bucket = \"bucket/prefix\"\n";
    for (auto& f : serve_flags()) {
        const std::string name = f.name;
        if (s3_key(name) || listener_key(name)) continue;
        INFO("no sample value for key " << name);
        REQUIRE(sample_values.count(name) == 1);
        local += name + " = " + sample_values.at(name) + "\n";
    }
    s3 += "s3-endpoint = \"http://user:pa55word@127.0.0.1:9000\"\ns3-region = \"eu-west-1\"\ns3-path-style = true\n";

    auto path = d.write("every.toml", local);
    auto o = parse_serve_options({"--config", path}, no_env);
    REQUIRE(o);
    for (auto& f : serve_flags()) {
        if (s3_key(f.name) || listener_key(f.name)) continue;
        INFO(f.name);
        REQUIRE(o->values.count(f.name) == 1);
        CHECK(o->values.at(f.name).source == value_source::file);
    }
    auto cfg = make_broker_config(*o);
    REQUIRE(cfg);
    CHECK(cfg->kafka_addr == "127.0.0.1:19092");
    CHECK(cfg->log.mode == skiff::storage::upload_mode::sequential);
    CHECK(cfg->log.linger == std::chrono::milliseconds(5));
    CHECK(!cfg->hedge.enabled);
    CHECK(cfg->put_price_per_1000 == Approx(0.0045));
    CHECK(!cfg->auto_create_topics);
    CHECK(cfg->etcd_endpoints.size() == 2);
    CHECK(cfg->node_id == 3);
    CHECK(cfg->rack == "eu-west-1a");
    CHECK(cfg->log.compaction_map_bytes == 1048576);
    CHECK(cfg->quotas.defaults.fetch_bytes_per_second == Approx(2000000));
    CHECK(cfg->authorization);
    CHECK(cfg->super_users == std::set<std::string, std::less<>>{"User:admin", "User:ops"});
    CHECK(cfg->allow_everyone_if_no_acl_found);
    CHECK(cfg->tls.client_auth_mode == skiff::tls::client_auth::requested);
    CHECK(cfg->tls.min_version == "TLSv1.3");

    // --print-config: every value with its source, valid input for --config that gives the
    // same settings back.
    auto printed = render_config(*o, *cfg);
    CHECK(printed.find("segment-bytes") != std::string::npos);
    CHECK(printed.find("# file " + path + " line ") != std::string::npos);
    auto again_path = d.write("printed.toml", printed);
    auto again = parse_serve_options({"--config", again_path}, no_env);
    REQUIRE(again);
    for (auto& [k, v] : o->values) {
        INFO(k);
        REQUIRE(again->values.count(k) == 1);
        CHECK(again->values.at(k).value == v.value);
    }

    auto s3_path = d.write("s3.toml", s3);
    auto so = parse_serve_options({"--config", s3_path, "--log-level", "info"}, no_env);
    REQUIRE(so);
    auto scfg = make_broker_config(*so);
    REQUIRE(scfg);
    CHECK(scfg->s3_bucket == "bucket/prefix");
    REQUIRE(scfg->s3);
    CHECK(scfg->s3->region == "eu-west-1");
    CHECK(scfg->s3->path_style);
    CHECK(scfg->s3->endpoint == "http://user:pa55word@127.0.0.1:9000");
    auto s3_printed = render_config(*so, *scfg);
    CHECK(s3_printed.find("pa55word") == std::string::npos);
    CHECK(s3_printed.find("http://user:****@127.0.0.1:9000") != std::string::npos);
    CHECK(s3_printed.find("wJalrXUtnFEMI") == std::string::npos);
    CHECK(s3_printed.find("IOSFODNN7EXAMPLE") == std::string::npos);
    CHECK(s3_printed.find("# S3 credentials: ") != std::string::npos);
    CHECK(s3_printed.find("log-level") != std::string::npos);
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST_CASE("--print-config shows defaults and unset settings", "[cli][serve_config]") {
    auto o = parse_serve_options({"--segment-bytes", "2048", "--auto-create-topics", "no"},
                                 env_of({{"SKIFF_NAMESPACE", "ns1"}, {"SKIFF_DEFAULT_PARTITIONS", "007"}}));
    REQUIRE(o);
    auto cfg = make_broker_config(*o);
    REQUIRE(cfg);
    auto out = render_config(*o, *cfg);
    CHECK(line_of(out, "segment-bytes") == "= 2048  # flag");
    CHECK(line_of(out, "namespace") == "= \"ns1\"  # env SKIFF_NAMESPACE");
    CHECK(line_of(out, "kafka-addr") == "= \"0.0.0.0:9092\"  # default");
    // Printed as TOML takes them back: "007" is no TOML integer, "no" no TOML boolean.
    CHECK(line_of(out, "auto-create-topics") == "= false  # flag");
    CHECK(line_of(out, "default-partitions") == "= 7  # env SKIFF_DEFAULT_PARTITIONS");
    CHECK(line_of(out, "s3-path-style").empty());
    CHECK(out.find("\n# cores is not set (default: all cores)\n") != std::string::npos);
    CHECK(out.find("\n# s3-bucket is not set\n") != std::string::npos);
    CHECK(out.find("etcd") != std::string::npos);
}

TEST_CASE("--help lists every flag with its default", "[cli][serve_config]") {
    char* buf = nullptr;
    std::size_t len = 0;
    std::FILE* f = ::open_memstream(&buf, &len);
    print_serve_usage(f);
    std::fclose(f);
    std::string help(buf, len);
    std::free(buf);
    for (auto& fl : serve_flags()) {
        INFO(fl.name);
        CHECK(help.find(std::string("  --") + fl.name + " ") != std::string::npos);
    }
    CHECK(help.find("--segment-bytes N") != std::string::npos);
    CHECK(help.find("(default 4194304)") != std::string::npos);
    CHECK(help.find("(default \"default\")") != std::string::npos);
    CHECK(help.find("--config FILE") != std::string::npos);
    CHECK(help.find("(default )") == std::string::npos);
}

TEST_CASE("the data directory: created, locked against a second broker, shared in cluster mode",
          "[cli][serve_checks]") {
    temp_dir d;
    const std::string dir = d.path + "/a/b/data";
    std::string detail;
    {
        auto first = claim_data_dir(dir, false, detail);
        REQUIRE(first);
        CHECK(std::filesystem::is_directory(dir));
        CHECK(detail.find("created") != std::string::npos);
        // flock locks belong to the open file: a second claim in this process conflicts as a
        // second broker's would.
        auto second = claim_data_dir(dir, false, detail);
        REQUIRE(!second);
        CHECK(second.error() == "the data directory " + dir + " is in use by another skiff broker (pid " +
                                    std::to_string(::getpid()) + "); stop it or give another --data-dir");
        auto cluster = claim_data_dir(dir, true, detail);
        CHECK(!cluster);
    }
    {
        auto shared1 = claim_data_dir(dir, true, detail);
        auto shared2 = claim_data_dir(dir, true, detail);
        CHECK(shared1);
        CHECK(shared2);
        auto alone = claim_data_dir(dir, false, detail);
        REQUIRE(!alone);
        CHECK(alone.error().find("(brokers in cluster mode hold it)") != std::string::npos);
    }
    // Released with the last holder.
    CHECK(claim_data_dir(dir, false, detail));

    // A path below a regular file cannot be created.
    d.write("file", "x");
    auto bad = claim_data_dir(d.path + "/file/data", false, detail);
    REQUIRE(!bad);
    CHECK(bad.error().starts_with("cannot create the data directory " + d.path + "/file/data: "));
    // Nothing but the lock file is left in the directory.
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
    CHECK(names == std::vector<std::string>{".skiff.lock"});
}

TEST_CASE("a port in use is refused, a free one passes", "[cli][serve_checks]") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    const std::string addr = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    auto busy = check_port(addr, "kafka-addr");
    REQUIRE(!busy);
    CHECK(busy.error() == "cannot listen on " + addr + " (--kafka-addr): the port is in use by another process");
    ::close(fd);
    auto free_now = check_port(addr, "kafka-addr");
    CHECK(free_now);
    CHECK(check_port("127.0.0.1:0", "http-addr"));
}

TEST_CASE("listeners: protocols, advertised addresses, and what is refused", "[cli][serve_config]") {
    auto o = parse_serve_options({"--listeners", "PLAINTEXT://127.0.0.1:19092, sasl_plaintext://:19093",
                                  "--advertised-listeners", "SASL_PLAINTEXT://broker1.example:9093",
                                  "--sasl-mechanisms", "scram-sha-512", "--max-reauth-ms", "60000"},
                                 no_env);
    REQUIRE(o);
    auto cfg = make_broker_config(*o);
    INFO((cfg ? std::string() : cfg.error()));
    REQUIRE(cfg);
    REQUIRE(cfg->listeners.size() == 2);
    CHECK(cfg->listeners[0].protocol == skiff::broker::security_protocol::plaintext);
    CHECK(cfg->listeners[0].addr == "127.0.0.1:19092");
    CHECK(cfg->listeners[0].advertised.empty());
    CHECK(cfg->listeners[1].protocol == skiff::broker::security_protocol::sasl_plaintext);
    CHECK(cfg->listeners[1].addr == "0.0.0.0:19093");
    CHECK(cfg->listeners[1].advertised == "broker1.example:9093");
    CHECK(cfg->sasl_mechanisms == std::vector<std::string>{"SCRAM-SHA-512"});
    CHECK(cfg->max_reauth == std::chrono::milliseconds(60000));
    // Without --listeners: one PLAINTEXT listener on --kafka-addr, as before.
    auto plain = make_broker_config(*parse_serve_options({"--kafka-addr", "127.0.0.1:9999"}, no_env));
    REQUIRE(plain);
    REQUIRE(plain->effective_listeners().size() == 1);
    CHECK(plain->effective_listeners()[0].addr == "127.0.0.1:9999");

    CHECK(error_of({"--listeners", "KERBEROS://127.0.0.1:1"}).find("unknown security protocol 'KERBEROS'") !=
          std::string::npos);
    CHECK(error_of({"--listeners", "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}).find("PLAINTEXT twice") !=
          std::string::npos);
    CHECK(error_of({"--listeners", "PLAINTEXT://nowhere"}).find("--listeners") != std::string::npos);
    CHECK(error_of({"--listeners", "PLAINTEXT://127.0.0.1:1", "--kafka-addr", "127.0.0.1:2"})
              .find("replaces --kafka-addr") != std::string::npos);
    CHECK(error_of({"--listeners", "PLAINTEXT://127.0.0.1:1", "--advertised-listeners",
                    "SASL_PLAINTEXT://b.example:2"})
              .find("not in --listeners") != std::string::npos);
    CHECK(error_of({"--advertised-listeners", "PLAINTEXT://b.example:2"}).find("needs --listeners") !=
          std::string::npos);
    CHECK(error_of({"--sasl-mechanisms", "GSSAPI"}).find("unknown mechanism 'GSSAPI'") != std::string::npos);
    CHECK(error_of({"--listeners", "SASL_PLAINTEXT://127.0.0.1:9100", "--http-addr", "127.0.0.1:9100"})
              .find("the SASL_PLAINTEXT listener (127.0.0.1:9100) and --http-addr") != std::string::npos);
}

TEST_CASE("TLS and authorization settings are checked", "[cli][serve_config]") {
    CHECK(error_of({"--listeners", "SSL://127.0.0.1:1"}) ==
          "an SSL or SASL_SSL listener needs --tls-cert-file and --tls-key-file");
    CHECK(error_of({"--tls-client-auth", "required"}).find("needs --tls-ca-file") != std::string::npos);
    CHECK(error_of({"--http-tls"}) == "--http-tls needs --tls-cert-file and --tls-key-file");
    CHECK(error_of({"--tls-client-auth", "maybe"}) == "--tls-client-auth must be none, requested or required, not 'maybe'");
    CHECK(error_of({"--tls-min-version", "TLSv1.1"}) == "--tls-min-version must be TLSv1.2 or TLSv1.3, not 'TLSv1.1'");
    CHECK(error_of({"--authorizer", "ranger"}) == "--authorizer must be none or acl, not 'ranger'");
    CHECK(error_of({"--super-users", "admin"}).find("--super-users must be principals") != std::string::npos);
}
