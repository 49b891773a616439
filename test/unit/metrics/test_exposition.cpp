#include "schema_check.hpp"

#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/registry.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <sstream>

using namespace skiff;
using namespace skiff::metrics;
using skiff::test::schema_checker;

namespace {

const std::string schema_path = std::string(SKIFF_DOCS_DIR) + "/metrics.schema.json";

// Two cores' worth of metrics of every kind, labels with characters that need escaping.
std::vector<core_snapshot> sample_cores() {
    registry r0, r1;
    for (auto* r : {&r0, &r1}) {
        auto put = r->histogram("skiff_s3_request_duration_seconds", "S3 request latency.", unit::seconds,
                                {{"op", "put"}, {"kind", "kfs"}});
        auto size = r->histogram("skiff_flush_size_bytes", "Segment sizes.", unit::bytes);
        const std::uint64_t base = r == &r0 ? 1 : 1000;
        for (std::uint64_t i = 1; i <= 1000; ++i) {
            put.record(std::chrono::microseconds(base * i));
            size.record(base * i * 1024);
        }
        r->counter("skiff_flush_bytes_total", "Bytes uploaded by flushes.", {{"kind", "kfs"}}, unit::bytes)
            .inc(r == &r0 ? 100 : 23);
        r->gauge("skiff_buffered_bytes", "Bytes waiting for a flush.", {{"topic", "a\"b\\c\nd"}}, unit::bytes)
            .set(r == &r0 ? -5 : 10);
    }
    // Only on core 1: a series missing on core 0.
    r1.counter("skiff_only_one_core_total", "Help with a \\ backslash\nand a newline.").inc(2);
    r1.histogram("skiff_empty_seconds", "Never recorded.", unit::seconds);
    auto s0 = r0.snapshot();
    auto s1 = r1.snapshot();
    s0.core = 0;
    s1.core = 1;
    return {s0, s1};
}

struct prom_sample {
    std::string name;
    std::map<std::string, std::string> labels;
    std::string value;
};

// Parses one sample line of the text format strictly (name, optional labels, value).
bool parse_sample(const std::string& line, prom_sample& out) {
    static const std::regex re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
    std::smatch m;
    if (!std::regex_match(line, m, re)) return false;
    out.name = m[1];
    out.value = m[4];
    out.labels.clear();
    const std::string body = m[3];
    std::size_t i = 0;
    while (i < body.size()) {
        const auto eq = body.find('=', i);
        if (eq == std::string::npos || eq + 1 >= body.size() || body[eq + 1] != '"') return false;
        const std::string key = body.substr(i, eq - i);
        std::string val;
        std::size_t j = eq + 2;
        for (; j < body.size() && body[j] != '"'; ++j) {
            if (body[j] == '\\') {
                ++j;
                if (j >= body.size()) return false;
                val += body[j] == 'n' ? '\n' : body[j];
            } else {
                val += body[j];
            }
        }
        if (j >= body.size()) return false;
        out.labels[key] = val;
        i = j + 1;
        if (i < body.size()) {
            if (body[i] != ',') return false;
            ++i;
        }
    }
    return true;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) out.push_back(line);
    return out;
}

} // namespace

TEST_CASE("the schema checker itself rejects what it should", "[metrics][schema]") {
    const auto checker = schema_checker::from_file(schema_path);
    auto doc = nlohmann::json::parse(metrics_json(sample_cores(), 1700000000000));
    REQUIRE(checker.validate(doc).empty());

    auto missing = doc;
    missing.erase("gauges");
    CHECK_FALSE(checker.validate(missing).empty());

    auto extra = doc;
    extra["surprise"] = 1;
    CHECK_FALSE(checker.validate(extra).empty());

    auto bad_name = doc;
    bad_name["counters"]["skiff_not_a_counter"] = doc["counters"]["skiff_flush_bytes_total"];
    CHECK_FALSE(checker.validate(bad_name).empty());

    auto bad_type = doc;
    bad_type["histograms"]["skiff_s3_request_duration_seconds"]["series"][0]["total"]["p99"] = "fast";
    CHECK_FALSE(checker.validate(bad_type).empty());

    auto negative = doc;
    negative["counters"]["skiff_flush_bytes_total"]["series"][0]["value"] = -1;
    CHECK_FALSE(checker.validate(negative).empty());

    auto bad_unit = doc;
    bad_unit["gauges"]["skiff_buffered_bytes"]["unit"] = "parsecs";
    CHECK_FALSE(checker.validate(bad_unit).empty());

    auto bad_core = doc;
    bad_core["counters"]["skiff_flush_bytes_total"]["series"][0]["per_core"]["core0"] = 1;
    CHECK_FALSE(checker.validate(bad_core).empty());

    CHECK_THROWS(schema_checker(nlohmann::json{{"oneOf", nlohmann::json::array()}}).validate(doc));
}

TEST_CASE("GET /metrics JSON follows docs/metrics.schema.json and sums cores", "[metrics][json]") {
    const auto checker = schema_checker::from_file(schema_path);
    const auto cores = sample_cores();
    const auto doc = nlohmann::json::parse(metrics_json(cores, 1700000000000));
    const auto errors = checker.validate(doc);
    INFO(skiff::test::join(errors));
    REQUIRE(errors.empty());

    CHECK(doc["schema"] == "skiff.metrics.v1");
    CHECK(doc["timestamp_unix_ms"] == 1700000000000);
    CHECK(doc["cores"] == nlohmann::json::array({0, 1}));

    const auto& flush = doc["counters"]["skiff_flush_bytes_total"];
    CHECK(flush["unit"] == "bytes");
    CHECK(flush["help"] == "Bytes uploaded by flushes.");
    REQUIRE(flush["series"].size() == 1);
    CHECK(flush["series"][0]["labels"] == nlohmann::json{{"kind", "kfs"}});
    CHECK(flush["series"][0]["value"] == 123);
    CHECK(flush["series"][0]["per_core"]["0"] == 100);
    CHECK(flush["series"][0]["per_core"]["1"] == 23);

    const auto& gauge = doc["gauges"]["skiff_buffered_bytes"]["series"][0];
    CHECK(gauge["value"] == 5);
    CHECK(gauge["labels"]["topic"] == "a\"b\\c\nd");

    const auto& only = doc["counters"]["skiff_only_one_core_total"]["series"][0];
    CHECK(only["value"] == 2);
    CHECK_FALSE(only["per_core"].contains("0"));

    const auto& put = doc["histograms"]["skiff_s3_request_duration_seconds"];
    CHECK(put["unit"] == "seconds");
    const auto& s = put["series"][0];
    CHECK(s["labels"] == nlohmann::json{{"kind", "kfs"}, {"op", "put"}});
    // Core 0: 1 µs .. 1 ms; core 1: 1 ms .. 1 s. In seconds.
    CHECK(s["per_core"]["0"]["count"] == 1000);
    CHECK(s["per_core"]["0"]["max"].get<double>() == Approx(0.001));
    CHECK(s["per_core"]["0"]["p50"].get<double>() == Approx(0.0005).epsilon(0.02));
    CHECK(s["per_core"]["1"]["p99"].get<double>() == Approx(0.99).epsilon(0.02));
    CHECK(s["total"]["count"] == 2000);
    CHECK(s["total"]["min"].get<double>() == Approx(1e-6));
    CHECK(s["total"]["max"].get<double>() == Approx(1.0));
    CHECK(s["total"]["p50"].get<double>() == Approx(0.001).epsilon(0.02));
    CHECK(s["total"]["p999"].get<double>() == Approx(0.998).epsilon(0.02));
    CHECK(s["total"]["sum"].get<double>() == Approx(500.5 * 1e-3 + 500500 * 1e-3));

    const auto& size = doc["histograms"]["skiff_flush_size_bytes"]["series"][0]["total"];
    CHECK(size["max"] == 1000 * 1000 * 1024);
    CHECK(size["min"] == 1024);

    const auto& empty = doc["histograms"]["skiff_empty_seconds"]["series"][0]["total"];
    CHECK(empty["count"] == 0);
    CHECK(empty["p99"] == 0);
}

TEST_CASE("an empty scrape is still a valid document", "[metrics][json]") {
    const auto checker = schema_checker::from_file(schema_path);
    core_snapshot none;
    const auto doc = nlohmann::json::parse(metrics_json({none}, 1));
    CHECK(checker.validate(doc).empty());
    CHECK(doc["counters"].empty());
}

TEST_CASE("Prometheus text format: HELP/TYPE, _total, _bucket/_sum/_count, per core", "[metrics][prometheus]") {
    const auto text = metrics_prometheus(sample_cores());
    const auto lines = lines_of(text);
    REQUIRE(!lines.empty());
    CHECK(text.back() == '\n');

    std::map<std::string, std::string> types;
    std::map<std::string, int> helps;
    std::vector<prom_sample> samples;
    std::string current; // family of the last TYPE line
    for (const auto& line : lines) {
        INFO(line);
        if (line.rfind("# HELP ", 0) == 0) {
            const auto name = line.substr(7, line.find(' ', 7) - 7);
            ++helps[name];
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            const auto rest = line.substr(7);
            const auto sp = rest.find(' ');
            current = rest.substr(0, sp);
            REQUIRE(!types.contains(current)); // one TYPE per family
            types[current] = rest.substr(sp + 1);
            REQUIRE(helps[current] == 1);      // HELP comes first
            continue;
        }
        REQUIRE(line.find('#') != 0);
        prom_sample s;
        REQUIRE(parse_sample(line, s));
        // Every sample belongs to the family announced last.
        const bool belongs = s.name == current || s.name == current + "_bucket" || s.name == current + "_sum" ||
                             s.name == current + "_count";
        REQUIRE(belongs);
        REQUIRE(s.labels.contains("core"));
        samples.push_back(s);
    }
    CHECK(types["skiff_flush_bytes_total"] == "counter");
    CHECK(types["skiff_buffered_bytes"] == "gauge");
    CHECK(types["skiff_s3_request_duration_seconds"] == "histogram");
    CHECK(text.find("# HELP skiff_only_one_core_total Help with a \\\\ backslash\\nand a newline.\n") !=
          std::string::npos);
    CHECK(text.find("skiff_flush_bytes_total{core=\"0\",kind=\"kfs\"} 100\n") != std::string::npos);
    CHECK(text.find("skiff_flush_bytes_total{core=\"1\",kind=\"kfs\"} 23\n") != std::string::npos);
    CHECK(text.find("skiff_buffered_bytes{core=\"0\",topic=\"a\\\"b\\\\c\\nd\"} -5\n") != std::string::npos);

    // Histogram series: cumulative buckets ending in +Inf == _count, _sum in seconds.
    for (const std::string core : {"0", "1"}) {
        std::vector<std::pair<double, std::uint64_t>> buckets;
        std::uint64_t count = 0, inf = 0;
        double sum = -1;
        for (const auto& s : samples) {
            if (s.labels.at("core") != core || s.labels.count("op") == 0) continue;
            if (s.name == "skiff_s3_request_duration_seconds_bucket") {
                if (s.labels.at("le") == "+Inf") inf = std::stoull(s.value);
                else buckets.emplace_back(std::stod(s.labels.at("le")), std::stoull(s.value));
            } else if (s.name == "skiff_s3_request_duration_seconds_count") {
                count = std::stoull(s.value);
            } else if (s.name == "skiff_s3_request_duration_seconds_sum") {
                sum = std::stod(s.value);
            }
        }
        REQUIRE(buckets.size() > 10);
        CHECK(count == 1000);
        CHECK(inf == 1000);
        for (std::size_t i = 1; i < buckets.size(); ++i) {
            CHECK(buckets[i].first > buckets[i - 1].first);
            CHECK(buckets[i].second >= buckets[i - 1].second);
        }
        if (core == "0") {
            CHECK(sum == Approx(0.5005));
            // 1..1000 µs: exactly the values <= 2^20 ns (1.048576 ms) are all of them; <= 2^19 ns: 524.
            for (const auto& [le, n] : buckets) {
                if (le == Approx(0.000524288)) CHECK(n == 524);
                if (le == Approx(0.001048576)) CHECK(n == 1000);
            }
        }
    }
    // Byte histograms use integral byte bounds.
    CHECK(text.find("skiff_flush_size_bytes_bucket{core=\"0\",le=\"1024\"} 1\n") != std::string::npos);
}

TEST_CASE("Prometheus aggregate mode has sums and no core label", "[metrics][prometheus]") {
    const auto text = metrics_prometheus(sample_cores(), prometheus_options{false});
    CHECK(text.find("core=") == std::string::npos);
    CHECK(text.find("skiff_flush_bytes_total{kind=\"kfs\"} 123\n") != std::string::npos);
    CHECK(text.find("skiff_s3_request_duration_seconds_count{kind=\"kfs\",op=\"put\"} 2000\n") != std::string::npos);
    CHECK(text.find("skiff_s3_request_duration_seconds_bucket{kind=\"kfs\",op=\"put\",le=\"+Inf\"} 2000\n") !=
          std::string::npos);
    CHECK(text.find("skiff_flush_size_bytes_count 2000\n") != std::string::npos);
}
