// Today's produce checks only (one magic-2 batch per partition, its CRC, no transactions);
// the full rule set (LogValidator) comes from the validation work on its own branch.
#include "produce_validation.hpp"

namespace skiff::broker {

result<topic_policy, std::string> make_topic_policy(const std::map<std::string, std::string>& /*topic_configs*/,
                                                    const topic_policy& broker_defaults) {
    return broker_defaults;
}

result<validated_batch, produce_rejection> validate_produce(std::span<const char> record_set,
                                                            const topic_policy& /*policy*/, std::int64_t /*now_ms*/) {
    using kafka::error_code;
    auto b = storage::parse_batch(record_set, true);
    if (!b) {
        const auto code = b.error().code == storage::format_errc::old_message_format
                              ? error_code::unsupported_for_message_format
                              : error_code::corrupt_message;
        return failure{produce_rejection(code, b.error().message)};
    }
    // Produce v3+ carries exactly one batch per partition, as Kafka enforces.
    if (b->size() != record_set.size()) {
        return failure{produce_rejection(error_code::invalid_record,
                                         "a produce request must carry exactly one record batch per partition")};
    }
    if (b->is_transactional() || b->is_control()) {
        return failure{
            produce_rejection(error_code::transactional_id_authorization_failed, "transactions are not supported")};
    }
    validated_batch out;
    out.view = *b;
    return out;
}

} // namespace skiff::broker
