// Kafka's produce validation. The order of the checks and the error of each follow Apache
// Kafka: ProduceRequest.validateRecords (one magic-2 batch), UnifiedLog.analyzeAndValidateRecords
// (size, then CRC), LogValidator.validateBatch (offsets vs count, producer fields) and
// validateRecord (key on compacted topics, then timestamp), then the rewrite LogValidator does
// (LogAppendTime, the topic's codec) and the size check again on what will be stored.
#include "produce_validation.hpp"

#include <skiff/core/ascii.hpp>
#include <skiff/core/crc32c.hpp>
#include <skiff/storage/compression.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <limits>

namespace skiff::broker {

namespace {

using kafka::error_code;

std::string_view trim(std::string_view s);

// Long.parseLong of ConfigDef's trimmed value: an optional sign, then digits.
std::optional<std::int64_t> parse_long(std::string_view s) {
    s = trim(s);
    if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

std::string bad_value(std::string_view name, std::string_view value, std::string_view why) {
    return fmt::format("invalid value '{}' for topic config '{}': {}", value, name, why);
}

std::int64_t sat_add(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? std::numeric_limits<std::int64_t>::max()
                                                       : std::numeric_limits<std::int64_t>::min();
    return r;
}

produce_rejection reject(error_code c, std::string m) { return produce_rejection(c, std::move(m)); }

// The top-level answer to per-record errors, as LogValidator.processRecordErrors words it: any
// timestamp error makes the whole batch INVALID_TIMESTAMP, else INVALID_RECORD.
produce_rejection record_rejection(std::vector<record_error> errors, bool any_timestamp) {
    produce_rejection r;
    if (any_timestamp) {
        r.code = error_code::invalid_timestamp;
        r.message = "One or more records have been rejected due to invalid timestamp";
    } else {
        r.code = error_code::invalid_record;
        std::string first;
        for (std::size_t i = 0; i < errors.size() && i < 3; ++i) {
            first += fmt::format("{}RecordError(batchIndex={}, message='{}')", i ? ", " : "", errors[i].batch_index,
                                 errors[i].message);
        }
        r.message = fmt::format("One or more records have been rejected due to {} record errors in total, and "
                                "only showing the first three errors at most: [{}]",
                                errors.size(), first);
    }
    r.record_errors = std::move(errors);
    return r;
}

// Rewrites the attributes and max timestamp of a (copied) batch and its CRC, leaving the
// records alone: what Kafka's in-place RecordBatch.setMaxTimestamp does.
std::string patch_header(const storage::batch_view& v, std::int16_t attributes, std::int64_t max_timestamp) {
    std::string out(v.bytes.data(), v.bytes.size());
    char* p = out.data();
    storage::be::write_i16(p + storage::batch_field::attributes, attributes);
    storage::be::write_i64(p + storage::batch_field::max_timestamp, max_timestamp);
    storage::be::write_u32(p + storage::batch_field::crc,
                           crc32c(p + storage::batch_field::attributes, out.size() - storage::batch_field::attributes));
    return out;
}

} // namespace

result<topic_policy, std::string> make_topic_policy(const std::map<std::string, std::string>& topic_configs,
                                                    const topic_policy& broker_defaults) {
    topic_policy p = broker_defaults;
    for (const auto& [name, value] : topic_configs) {
        if (name == "max.message.bytes") {
            auto v = parse_long(value);
            if (!v || *v < 0 || *v > std::numeric_limits<std::int32_t>::max()) {
                return failure{bad_value(name, value, "expected an integer between 0 and 2147483647")};
            }
            p.max_message_bytes = *v;
        } else if (name == "cleanup.policy") {
            // A list: "delete", "compact", or both, comma-separated (Kafka's ValidList).
            bool compact = false, deletes = false;
            std::string_view rest = value;
            // The empty list is valid in Kafka (neither: nothing is deleted or compacted).
            if (trim(rest).empty()) rest = {};
            while (!rest.empty()) {
                const auto comma = rest.find(',');
                const std::string_view item = trim(rest.substr(0, comma));
                if (item == "compact") {
                    compact = true;
                } else if (item == "delete") {
                    deletes = true;
                } else {
                    return failure{bad_value(name, value, "each item must be 'delete' or 'compact'")};
                }
                if (comma == std::string_view::npos) break;
                rest.remove_prefix(comma + 1);
            }
            p.compact = compact;
            p.deletes = deletes;
        } else if (name == "delete.retention.ms" || name == "min.compaction.lag.ms") {
            // Kafka's LONG, atLeast(0).
            auto v = parse_long(value);
            if (!v || *v < 0) return failure{bad_value(name, value, "expected a non-negative integer")};
            (name == "delete.retention.ms" ? p.delete_retention_ms : p.min_compaction_lag_ms) = *v;
        } else if (name == "retention.ms" || name == "retention.bytes") {
            // Kafka's LONG, atLeast(-1): -1 keeps everything.
            auto v = parse_long(value);
            if (!v || *v < -1) return failure{bad_value(name, value, "expected -1 (unlimited) or a non-negative integer")};
            (name == "retention.ms" ? p.retention_ms : p.retention_bytes) = *v;
        } else if (name == "message.timestamp.type") {
            if (trim(value) == "CreateTime") {
                p.log_append_time = false;
            } else if (trim(value) == "LogAppendTime") {
                p.log_append_time = true;
            } else {
                return failure{bad_value(name, value, "expected CreateTime or LogAppendTime")};
            }
        } else if (name == "message.timestamp.difference.max.ms" || name == "message.timestamp.before.max.ms" ||
                   name == "message.timestamp.after.max.ms") {
            auto v = parse_long(value);
            if (!v || *v < 0) return failure{bad_value(name, value, "expected a non-negative integer")};
            (name == "message.timestamp.difference.max.ms" ? p.timestamp_difference_max_ms
             : name == "message.timestamp.before.max.ms"   ? p.timestamp_before_max_ms
                                                           : p.timestamp_after_max_ms) = *v;
        } else if (name == "compression.type") {
            // Kafka's BrokerCompressionType names, matched without regard to case.
            using c = storage::compression_codec;
            if (iequals(trim(value), "producer")) {
                p.compression = std::nullopt;
            } else if (iequals(trim(value), "uncompressed")) {
                p.compression = c::none;
            } else if (iequals(trim(value), "gzip")) {
                p.compression = c::gzip;
            } else if (iequals(trim(value), "snappy")) {
                p.compression = c::snappy;
            } else if (iequals(trim(value), "lz4")) {
                p.compression = c::lz4;
            } else if (iequals(trim(value), "zstd")) {
                p.compression = c::zstd;
            } else {
                return failure{
                    bad_value(name, value, "expected one of uncompressed, zstd, lz4, snappy, gzip, producer")};
            }
        }
    }
    return p;
}

result<validated_batch, produce_rejection> validate_produce(std::span<const char> record_set,
                                                            const topic_policy& policy, std::int64_t now_ms) {
    // ProduceRequest.validateRecords (v3+): at least one batch, of magic 2, and only one.
    if (record_set.empty()) {
        return failure{reject(error_code::invalid_record,
                              "a produce request must carry exactly one record batch per partition (it has none)")};
    }
    // The CRC is checked below, after the size, in Kafka's order.
    auto first = storage::parse_batch(record_set, false);
    if (!first) {
        const auto code = first.error().code == storage::format_errc::old_message_format
                              ? error_code::unsupported_for_message_format
                              : error_code::corrupt_message;
        return failure{reject(code, first.error().message)};
    }
    const storage::batch_view& v = *first;
    if (v.size() != record_set.size()) {
        return failure{reject(error_code::invalid_record,
                              "a produce request must carry exactly one record batch per partition")};
    }
    // UnifiedLog.analyzeAndValidateRecords: the size as sent, then the CRC.
    if (static_cast<std::int64_t>(v.size()) > policy.max_message_bytes) {
        return failure{reject(error_code::message_too_large,
                              fmt::format("the batch is {} bytes, larger than the maximum of {} (max.message.bytes)",
                                          v.size(), policy.max_message_bytes))};
    }
    {
        auto crc = storage::parse_batch(record_set, true);
        if (!crc) return failure{reject(error_code::corrupt_message, crc.error().message)};
        first->crc_verified = true; // the segment builder reuses it (segment_builder::append)
    }
    if (v.compression() > storage::compression_codec::zstd) {
        return failure{reject(error_code::corrupt_message,
                              fmt::format("unknown compression codec {}", static_cast<int>(v.compression())))};
    }
    // LogValidator: only a transaction coordinator writes control batches (markers); a
    // transactional batch belongs to a producer id (the produce handler checks the rest).
    if (v.is_control()) {
        return failure{reject(error_code::invalid_record, "Clients are not allowed to write control records")};
    }
    if (v.is_transactional() && v.producer_id < 0) {
        return failure{reject(error_code::invalid_record, "a transactional batch without a producer id")};
    }
    // LogValidator.validateBatch.
    if (v.record_count <= 0) {
        return failure{reject(error_code::invalid_record,
                              fmt::format("Invalid reported count for record batch: {}", v.record_count))};
    }
    if (!v.count_matches_offsets()) {
        return failure{reject(error_code::invalid_record,
                              fmt::format("Inconsistent batch offset range [{}, {}] and count of records {}",
                                          v.base_offset, v.last_offset(), v.record_count))};
    }
    if (v.producer_id >= 0 && v.base_sequence < 0) {
        return failure{reject(error_code::invalid_record,
                              fmt::format("Invalid sequence number {} in record batch with producerId {}",
                                          v.base_sequence, v.producer_id))};
    }

    // Every record is read, compressed or not, as Kafka's validator iterates them all: a count
    // or a record length that disagrees with the bytes is DefaultRecord's InvalidRecordException
    // (INVALID_RECORD); a body that does not decompress fails the batch as corrupt.
    std::string plain;
    std::span<const char> section = v.records();
    if (v.is_compressed()) {
        auto d = storage::decompress(v.compression(), section, policy.max_uncompressed_bytes);
        if (!d) {
            const auto code = d.error().code == storage::format_errc::too_large ? error_code::message_too_large
                                                                                : error_code::corrupt_message;
            return failure{reject(code, d.error().message)};
        }
        plain = std::move(*d);
        section = std::span<const char>(plain.data(), plain.size());
    }
    auto records = storage::parse_record_section(section, v.record_count);
    if (!records) return failure{reject(error_code::invalid_record, records.error().message)};

    // LogValidator.validateRecord: the key first, then the timestamp; one error per record.
    std::vector<record_error> errors;
    bool timestamp_error = false;
    std::int64_t max_ts = -1; // RecordBatch.NO_TIMESTAMP
    const bool sent_log_append_time = v.log_append_time();
    // LogConfig.getMessageTimestampBeforeMaxMs / AfterMaxMs: each, unless left at its default,
    // replaces the deprecated message.timestamp.difference.max.ms on its side.
    constexpr auto unset = std::numeric_limits<std::int64_t>::max();
    const std::int64_t before_max_ms =
        policy.timestamp_before_max_ms != unset ? policy.timestamp_before_max_ms : policy.timestamp_difference_max_ms;
    const std::int64_t after_max_ms =
        policy.timestamp_after_max_ms != unset ? policy.timestamp_after_max_ms : policy.timestamp_difference_max_ms;
    for (std::size_t i = 0; i < records->size(); ++i) {
        const auto& r = (*records)[i];
        const auto index = static_cast<std::int32_t>(i);
        // Wrapping addition: an absurd delta is a timestamp out of range, never UB.
        const auto ts = static_cast<std::int64_t>(static_cast<std::uint64_t>(v.base_timestamp) +
                                                  static_cast<std::uint64_t>(r.timestamp_delta));
        max_ts = std::max(max_ts, ts);
        if (policy.compact && !r.key) {
            errors.push_back(record_error{index, "Compacted topic cannot accept message without key."});
            continue;
        }
        if (!policy.log_append_time && ts != -1) {
            // |ts - now| without overflow.
            const auto diff = ts > now_ms ? static_cast<std::uint64_t>(ts) - static_cast<std::uint64_t>(now_ms)
                                          : static_cast<std::uint64_t>(now_ms) - static_cast<std::uint64_t>(ts);
            // LogValidator.recordHasInvalidTimestamp: older than before.max, newer than after.max.
            const std::int64_t limit = ts > now_ms ? after_max_ms : before_max_ms;
            if (diff > static_cast<std::uint64_t>(limit)) {
                timestamp_error = true;
                const auto lo = sat_add(now_ms, -before_max_ms);
                const auto hi = sat_add(now_ms, after_max_ms);
                errors.push_back(record_error{index, fmt::format("Timestamp {} of message with offset {} is out of "
                                                                 "range. The timestamp should be within [{}, {}]",
                                                                 ts, index, lo, hi)});
                continue;
            }
        }
        if (sent_log_append_time) {
            timestamp_error = true;
            errors.push_back(record_error{
                index, "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."});
        }
    }
    if (!errors.empty()) return failure{record_rejection(std::move(errors), timestamp_error)};

    // What is stored: the topic's codec, the timestamp type, and the max timestamp Kafka
    // recomputes from the records (setMaxTimestamp).
    const auto target = policy.compression.value_or(v.compression());
    std::int16_t attributes = v.attributes;
    std::int64_t stored_max_ts = max_ts;
    if (policy.log_append_time) {
        attributes = static_cast<std::int16_t>(attributes | storage::attr_log_append_time);
        stored_max_ts = now_ms;
    }
    validated_batch out;
    if (target != v.compression()) {
        auto rebuilt = storage::rebuild_batch(v, section, target, attributes, stored_max_ts);
        if (!rebuilt) return failure{reject(error_code::corrupt_message, rebuilt.error().message)};
        out.owned = std::move(*rebuilt);
    } else if (attributes != v.attributes || stored_max_ts != v.max_timestamp) {
        out.owned = patch_header(v, attributes, stored_max_ts);
    } else {
        out.view = v;
        return out;
    }
    // Recompression can grow a batch: the limit applies to what the log stores.
    if (static_cast<std::int64_t>(out.owned.size()) > policy.max_message_bytes) {
        return failure{reject(error_code::message_too_large,
                              fmt::format("the batch is {} bytes once stored as {}, larger than the maximum of {} "
                                          "(max.message.bytes)",
                                          out.owned.size(), storage::to_string(target), policy.max_message_bytes))};
    }
    auto parsed = storage::parse_batch(std::span<const char>(out.owned.data(), out.owned.size()), false);
    if (!parsed) return failure{reject(error_code::corrupt_message, parsed.error().message)};
    out.view = *parsed;
    out.view.crc_verified = true; // rebuild_batch / patch_header just computed it
    return out;
}

} // namespace skiff::broker
