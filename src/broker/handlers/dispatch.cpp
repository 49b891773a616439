// Dispatch: the served APIs and versions, ApiVersions, and the switch that decodes a request
// and hands it to its handler (one file per API under handlers/).
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/broker/quota.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/sasl/plain.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <chrono>

namespace skiff::broker {

namespace {
using kafka::api_key;
// Versions are capped where a newer one needs something skiff does not have (Fetch v13+
// addresses topics by id only; Produce v10+ is KIP-890 era; ListOffsets v7 adds the
// max-timestamp query, which needs a time index; Metadata v12 is the newest with names). Fetch
// starts at v4, the first that carries magic-2 record batches. Produce starts at v0 although
// only magic-2 batches are stored (a v0-2 request's message sets, magic 0/1, are refused per
// partition with UNSUPPORTED_FOR_MESSAGE_FORMAT): librdkafka up to at least 2.0 compresses
// with gzip, snappy or lz4 only when the broker lists Produce v0, and otherwise silently
// sends those batches uncompressed ("Broker does not support compression type").
constexpr std::array<served_api, 47> apis{{
    {api_key::produce, 0, 9},
    {api_key::fetch, 4, 12},
    {api_key::list_offsets, 1, 6},
    {api_key::metadata, 0, 12},
    {api_key::offset_commit, 0, 8},
    {api_key::offset_fetch, 0, 8},
    {api_key::find_coordinator, 0, 4},
    {api_key::join_group, 0, 9},
    {api_key::heartbeat, 0, 4},
    {api_key::leave_group, 0, 5},
    {api_key::sync_group, 0, 5},
    {api_key::describe_groups, 0, 5},
    {api_key::list_groups, 0, 4},
    {api_key::api_versions, 0, 3},
    {api_key::create_topics, 0, 7},
    {api_key::delete_topics, 0, 6},
    {api_key::init_producer_id, 0, 4},
    {api_key::add_partitions_to_txn, 0, 3},
    {api_key::add_offsets_to_txn, 0, 3},
    {api_key::end_txn, 0, 3},
    {api_key::write_txn_markers, 0, 1},
    {api_key::txn_offset_commit, 0, 3},
    {api_key::describe_transactions, 0, 0},
    {api_key::list_transactions, 0, 0},
    {api_key::offset_for_leader_epoch, 0, 4},
    {api_key::describe_configs, 0, 4},
    {api_key::create_partitions, 0, 3},
    {api_key::delete_groups, 0, 2},
    {api_key::describe_cluster, 0, 1},
    {api_key::delete_records, 0, 2},
    {api_key::alter_configs, 0, 2},
    {api_key::incremental_alter_configs, 0, 1},
    {api_key::describe_log_dirs, 0, 4},
    {api_key::elect_leaders, 0, 2},
    {api_key::alter_partition_reassignments, 0, 0},
    {api_key::list_partition_reassignments, 0, 0},
    {api_key::offset_delete, 0, 0},
    {api_key::describe_client_quotas, 0, 1},
    {api_key::alter_client_quotas, 0, 1},
    {api_key::describe_producers, 0, 0},
    {api_key::sasl_handshake, 0, 1},
    {api_key::sasl_authenticate, 0, 2},
    {api_key::describe_user_scram_credentials, 0, 0},
    {api_key::alter_user_scram_credentials, 0, 0},
    {api_key::describe_acls, 0, 3},
    {api_key::create_acls, 0, 3},
    {api_key::delete_acls, 0, 3},
}};

const served_api* find_served(std::int16_t key) {
    for (auto& a : apis) {
        if (static_cast<std::int16_t>(a.key) == key) return &a;
    }
    return nullptr;
}

std::string api_versions(const request_ctx& ctx, bool unsupported) {
    kafka::ApiVersionsResponse r;
    r.error_code = unsupported ? kerr::unsupported_version : kerr::none;
    for (auto& a : apis) {
        kafka::ApiVersionsResponse::ApiVersion v;
        v.api_key = static_cast<std::int16_t>(a.key);
        v.min_version = a.min_version;
        v.max_version = a.max_version;
        r.api_keys.push_back(v);
    }
    if (unsupported) {
        // KIP-511: an unknown ApiVersions version is answered in v0, which every client reads.
        request_ctx v0{ctx.sh, ctx.ci, 0, ctx.correlation_id, ctx.client_id};
        return respond(r, v0);
    }
    return respond(r, ctx);
}

// A request for an API or a version that is not served closes the connection, as Kafka does
// (SocketServer.parseRequestHeader: InvalidRequestException, "Closing socket ... because of
// error"; Kafka 4 answers versions KIP-896 removed the same way): there is no answer a client
// could decode, since the response's layout depends on the version. ApiVersions is the one
// exception (answered in v0, above). Counted by reason, and the log line names the API, the
// version, what is served and the client, which is what an operator needs to tell an old
// client from a hostile one.
[[noreturn]] void refuse_unserved(const request_ctx& ctx, std::int16_t key, const served_api* api) {
    const kafka::api_info* codec = kafka::find_api(key);
    const std::string name = codec ? std::string(codec->name) : "unknown API";
    std::string what;
    if (!api) {
        ctx.sh.unserved_requests[0].inc();
        what = fmt::format("{} (key {}) v{} is not served", name, key, ctx.version);
    } else {
        ctx.sh.unserved_requests[1].inc();
        what = fmt::format("{} (key {}) v{} is not served (versions {}-{} are)", name, key, ctx.version,
                           api->min_version, api->max_version);
    }
    throw unserved_request(fmt::format("{}, from client id '{}'", what, ctx.client_id));
}

} // namespace

std::span<const served_api> served_apis() noexcept { return apis; }

namespace {
std::pair<std::string, std::int32_t> split_host_port(const std::string& adv) {
    auto colon = adv.rfind(':');
    std::string host = adv.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return {host, static_cast<std::int32_t>(std::stoi(adv.substr(colon + 1)))};
}
} // namespace

std::pair<std::string, std::int32_t> advertised(const request_ctx& ctx) {
    const std::string& adv = ctx.ci.listener ? ctx.ci.listener->advertised : ctx.sh.cfg().advertised_addr;
    if (!adv.empty()) return split_host_port(adv);
    return {ctx.ci.local_host.empty() ? std::string("127.0.0.1") : ctx.ci.local_host, ctx.ci.local_port};
}

std::pair<std::string, std::int32_t> member_endpoint(const cluster::member& m, const request_ctx& ctx) {
    if (ctx.ci.listener) {
        auto it = m.listeners.find(std::string(ctx.ci.listener->name()));
        if (it != m.listeners.end() && it->second.rfind(':') != std::string::npos) return split_host_port(it->second);
    }
    return {m.host, m.port};
}

// Quotas (docs/quotas.md): counts a produce's or a fetch's bytes against the client id's rate.
// Over it, the answer asks the client to wait (throttle_time_ms, KIP-219) and the connection
// reads nothing more for as long, so clients that ignore the hint are held to the rate too.
namespace {
std::int32_t charge_quota(const request_ctx& ctx, quota_kind k, std::size_t bytes) {
    auto& sh = ctx.sh;
    if (!sh.quota || !sh.quota->meter().limits(k)) return 0;
    // By user (the SASL or certificate principal's name) and client id, as Kafka resolves quotas.
    std::string_view user = ctx.ci.principal;
    if (user.starts_with("User:")) user.remove_prefix(5);
    auto& entity = sh.quota->find(user, ctx.client_id);
    // The meter is shared by every core: it runs on the process's steady clock.
    const auto wall = std::chrono::steady_clock::now().time_since_epoch();
    const auto t = sh.quota->meter().record(entity, k, bytes, std::chrono::nanoseconds(wall).count());
    if (t.count() <= 0) return 0;
    const auto until = runtime::reactor::local().now() + t;
    if (until > ctx.ci.muted_until) ctx.ci.muted_until = until;
    const int i = static_cast<int>(k);
    sh.throttled[i].inc();
    sh.throttle_ms[i].inc(static_cast<std::uint64_t>(t.count()));
    return static_cast<std::int32_t>(t.count());
}
} // namespace

namespace {
// AlterConfigs / IncrementalAlterConfigs: ALTER_CONFIGS on each topic (on the cluster for a
// broker); the denied resources leave the request and come back as answers of their own.
template <typename Resp, typename Resources>
std::vector<typename Resp::AlterConfigsResourceResponse> take_denied_config_resources(const request_ctx& ctx,
                                                                                      Resources& resources) {
    std::vector<typename Resp::AlterConfigsResourceResponse> denied;
    if (!ctx.sh.cfg().authorization) return denied;
    constexpr std::int8_t topic_resource = 2;
    std::erase_if(resources, [&](const auto& res) {
        const bool topic = res.resource_type == topic_resource;
        const bool ok = topic ? authorized(ctx, acl::operation::alter_configs, acl::resource_type::topic,
                                           res.resource_name)
                              : authorized_cluster(ctx, acl::operation::alter_configs);
        if (ok) return false;
        typename Resp::AlterConfigsResourceResponse out;
        out.error_code = topic ? kerr::topic_authorization_failed : kerr::cluster_authorization_failed;
        out.error_message = "Authorization failed.";
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        denied.push_back(std::move(out));
        return true;
    });
    return denied;
}
} // namespace

runtime::task<std::optional<std::string>> handle_request(shard& sh, const conn_info& ci, std::string frame,
                                                         std::size_t at) {
    if (ci.needs_sasl() && ci.sasl.state == sasl_session::phase::raw_token) {
        // After SaslHandshake v0 the client sends bare size-prefixed tokens, no request header.
        auto out = co_await handle_raw_sasl_token(sh, ci, std::string_view(frame).substr(at));
        sasl::wipe_buffer(frame.data(), frame.size());
        co_return out;
    }
    auto hdr = kafka::parse_request_header(std::span<const char>(frame).subspan(at));
    if (!hdr) throw connection_error("malformed request header: " + hdr.error().message);
    const std::int16_t key = hdr->header.request_api_key;
    const std::int16_t version = hdr->header.request_api_version;
    request_ctx ctx{sh, ci, version, hdr->header.correlation_id, hdr->header.client_id.value_or("")};
    const served_api* api = find_served(key);
    if (ci.needs_sasl()) {
        // Kafka's SaslServerAuthenticator: before authentication only ApiVersions and the SASL
        // requests; a session past its lifetime (KIP-368) only re-authentication. Anything else
        // closes the connection unanswered.
        const bool sasl_api = key == static_cast<std::int16_t>(api_key::sasl_handshake) ||
                              key == static_cast<std::int16_t>(api_key::sasl_authenticate);
        if (!ci.sasl.authenticated() && !sasl_api && key != static_cast<std::int16_t>(api_key::api_versions)) {
            sh.sasl_closed[0].inc();
            const kafka::api_info* codec = kafka::find_api(key);
            throw unserved_request(fmt::format("{} (key {}) before SASL authentication, from client id '{}'",
                                               codec ? codec->name : "unknown API", key, ctx.client_id));
        }
        if (ci.sasl.authenticated() && ci.sasl.expires && runtime::reactor::local().now() >= *ci.sasl.expires &&
            !sasl_api) {
            sh.sasl_closed[1].inc();
            throw unserved_request(fmt::format("the SASL session of User:{} expired (--max-reauth-ms) without "
                                               "re-authentication",
                                               ci.sasl.user));
        }
    }
    if (key == static_cast<std::int16_t>(api_key::api_versions)) {
        if (!api || version < api->min_version || version > api->max_version) co_return api_versions(ctx, true);
        (void)decode_body<kafka::ApiVersionsRequest>(hdr->body, version);
        co_return api_versions(ctx, false);
    }
    if (!api || version < api->min_version || version > api->max_version) refuse_unserved(ctx, key, api);
    auto body = hdr->body;
    switch (static_cast<api_key>(key)) {
    case api_key::produce: {
        // The record sets stay in the frame (borrowed, not copied): `frame` outlives `req`.
        auto req = decode_body<kafka::ProduceRequest>(body, version, true);
        // KafkaApis.handleProduceRequest: WRITE on each topic; the others are answered
        // TOPIC_AUTHORIZATION_FAILED and never reach a partition.
        std::vector<kafka::ProduceResponse::TopicProduceResponse> denied;
        if (sh.cfg().authorization) {
            std::erase_if(req.topic_data, [&](const kafka::ProduceRequest::TopicProduceData& td) {
                if (authorized(ctx, acl::operation::write, acl::resource_type::topic, td.name)) return false;
                kafka::ProduceResponse::TopicProduceResponse tr;
                tr.name = td.name;
                for (const auto& pd : td.partition_data) {
                    kafka::ProduceResponse::PartitionProduceResponse pr;
                    pr.index = pd.index;
                    pr.error_code = kerr::topic_authorization_failed;
                    pr.error_message.reset();
                    tr.partition_responses.push_back(std::move(pr));
                }
                denied.push_back(std::move(tr));
                return true;
            });
        }
        // A produce waiting for room (admission) holds its bytes once: in the frame, which the
        // request's record sets view.
        const bool no_response = req.acks == 0;
        std::size_t bytes = 0;
        for (const auto& td : req.topic_data) {
            for (const auto& pd : td.partition_data) bytes += pd.records ? pd.records->size() : 0;
        }
        const bool txn_ok = !req.transactional_id ||
                            authorized(ctx, acl::operation::write, acl::resource_type::transactional_id, *req.transactional_id);
        auto r = co_await produce(sh, std::move(req), txn_ok);
        for (auto& tr : denied) r.responses.push_back(std::move(tr));
        r.throttle_time_ms = std::max(r.throttle_time_ms, charge_quota(ctx, quota_kind::produce, bytes));
        if (no_response) {
            // KafkaApis: an acks=0 produce that failed anywhere closes the connection, the only
            // way such a client learns of it (it refreshes its metadata and reconnects).
            for (const auto& tr : r.responses) {
                for (const auto& pr : tr.partition_responses) {
                    if (pr.error_code == kerr::none) continue;
                    log::info("connection from {}: closing it after an acks=0 produce failed on {}-{} ({})",
                              ctx.ci.client_host, tr.name, pr.index, kafka::name(pr.error_code));
                    ctx.ci.close_after_answer = true;
                    co_return std::nullopt;
                }
            }
            co_return std::nullopt;
        }
        co_return respond(r, ctx);
    }
    case api_key::fetch: {
        auto req = decode_body<kafka::FetchRequest>(body, version);
        // KafkaApis.handleFetchRequest: READ on each topic (consumers; skiff has no followers).
        std::vector<kafka::FetchResponse::FetchableTopicResponse> denied;
        if (sh.cfg().authorization) {
            std::erase_if(req.topics, [&](const kafka::FetchRequest::FetchTopic& ft) {
                if (authorized(ctx, acl::operation::read, acl::resource_type::topic, ft.topic)) return false;
                kafka::FetchResponse::FetchableTopicResponse tr;
                tr.topic = ft.topic;
                for (const auto& fp : ft.partitions) {
                    kafka::FetchResponse::PartitionData pd;
                    pd.partition_index = fp.partition;
                    pd.error_code = kerr::topic_authorization_failed;
                    pd.high_watermark = -1;
                    pd.records.emplace();
                    tr.partitions.push_back(std::move(pd));
                }
                denied.push_back(std::move(tr));
                return true;
            });
        }
        auto r = co_await fetch(sh, std::move(req));
        for (auto& tr : denied) r.responses.push_back(std::move(tr));
        std::size_t bytes = 0;
        for (const auto& tr : r.responses) {
            for (const auto& pd : tr.partitions) bytes += pd.records ? pd.records->size() : 0;
        }
        r.throttle_time_ms = std::max(r.throttle_time_ms, charge_quota(ctx, quota_kind::fetch, bytes));
        co_return respond(r, ctx);
    }
    case api_key::list_offsets: {
        auto req = decode_body<kafka::ListOffsetsRequest>(body, version);
        co_return co_await handle_list_offsets(ctx, std::move(req));
    }
    case api_key::metadata: {
        auto req = decode_body<kafka::MetadataRequest>(body, version);
        co_return co_await handle_metadata(ctx, std::move(req));
    }
    case api_key::create_topics: {
        auto req = decode_body<kafka::CreateTopicsRequest>(body, version);
        co_return co_await handle_create_topics(ctx, std::move(req));
    }
    case api_key::delete_topics: {
        auto req = decode_body<kafka::DeleteTopicsRequest>(body, version);
        co_return co_await handle_delete_topics(ctx, std::move(req));
    }
    case api_key::create_partitions: {
        auto req = decode_body<kafka::CreatePartitionsRequest>(body, version);
        co_return co_await handle_create_partitions(ctx, std::move(req));
    }
    case api_key::alter_configs: {
        auto req = decode_body<kafka::AlterConfigsRequest>(body, version);
        auto denied = take_denied_config_resources<kafka::AlterConfigsResponse>(ctx, req.resources);
        auto r = co_await alter_configs(sh, std::move(req));
        for (auto& d : denied) r.responses.push_back(std::move(d));
        co_return respond(r, ctx);
    }
    case api_key::incremental_alter_configs: {
        auto req = decode_body<kafka::IncrementalAlterConfigsRequest>(body, version);
        auto denied = take_denied_config_resources<kafka::IncrementalAlterConfigsResponse>(ctx, req.resources);
        auto r = co_await incremental_alter_configs(sh, std::move(req));
        for (auto& d : denied) r.responses.push_back(std::move(d));
        co_return respond(r, ctx);
    }
    case api_key::delete_records: {
        auto req = decode_body<kafka::DeleteRecordsRequest>(body, version);
        // DELETE on each topic.
        std::vector<kafka::DeleteRecordsResponse::DeleteRecordsTopicResult> denied;
        std::erase_if(req.topics, [&](const kafka::DeleteRecordsRequest::DeleteRecordsTopic& t) {
            if (authorized(ctx, acl::operation::del, acl::resource_type::topic, t.name)) return false;
            kafka::DeleteRecordsResponse::DeleteRecordsTopicResult tr;
            tr.name = t.name;
            for (const auto& p : t.partitions) {
                kafka::DeleteRecordsResponse::DeleteRecordsPartitionResult pr;
                pr.partition_index = p.partition_index;
                pr.low_watermark = -1;
                pr.error_code = kerr::topic_authorization_failed;
                tr.partitions.push_back(pr);
            }
            denied.push_back(std::move(tr));
            return true;
        });
        auto r = co_await delete_records(sh, std::move(req));
        for (auto& d : denied) r.topics.push_back(std::move(d));
        co_return respond(r, ctx);
    }
    case api_key::describe_log_dirs: {
        auto req = decode_body<kafka::DescribeLogDirsRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::describe)) {
            kafka::DescribeLogDirsResponse r;
            r.error_code = kerr::cluster_authorization_failed;
            co_return respond(r, ctx);
        }
        auto r = co_await describe_log_dirs(sh, std::move(req));
        co_return respond(r, ctx);
    }
    case api_key::describe_client_quotas: {
        auto req = decode_body<kafka::DescribeClientQuotasRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::describe_configs)) {
            kafka::DescribeClientQuotasResponse r;
            r.error_code = kerr::cluster_authorization_failed;
            r.error_message = "Cluster authorization failed.";
            r.entries.reset();
            co_return respond(r, ctx);
        }
        auto r = describe_client_quotas(sh, req);
        co_return respond(r, ctx);
    }
    case api_key::alter_client_quotas: {
        auto req = decode_body<kafka::AlterClientQuotasRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::alter_configs)) {
            kafka::AlterClientQuotasResponse r;
            for (const auto& e : req.entries) {
                kafka::AlterClientQuotasResponse::EntryData d;
                d.error_code = kerr::cluster_authorization_failed;
                d.error_message = "Cluster authorization failed.";
                for (const auto& en : e.entity) {
                    kafka::AlterClientQuotasResponse::EntityData ed;
                    ed.entity_type = en.entity_type;
                    ed.entity_name = en.entity_name;
                    d.entity.push_back(std::move(ed));
                }
                r.entries.push_back(std::move(d));
            }
            co_return respond(r, ctx);
        }
        auto r = co_await alter_client_quotas(sh, std::move(req));
        co_return respond(r, ctx);
    }
    case api_key::alter_partition_reassignments: {
        auto req = decode_body<kafka::AlterPartitionReassignmentsRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::alter)) {
            kafka::AlterPartitionReassignmentsResponse r;
            r.error_code = kerr::cluster_authorization_failed;
            r.error_message = "Cluster authorization failed.";
            co_return respond(r, ctx);
        }
        auto r = co_await alter_partition_reassignments(sh, std::move(req));
        co_return respond(r, ctx);
    }
    case api_key::list_partition_reassignments: {
        auto req = decode_body<kafka::ListPartitionReassignmentsRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::describe)) {
            kafka::ListPartitionReassignmentsResponse r;
            r.error_code = kerr::cluster_authorization_failed;
            r.error_message = "Cluster authorization failed.";
            co_return respond(r, ctx);
        }
        auto r = list_partition_reassignments(sh, req);
        co_return respond(r, ctx);
    }
    case api_key::elect_leaders: {
        auto req = decode_body<kafka::ElectLeadersRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::alter)) {
            kafka::ElectLeadersResponse r;
            r.error_code = kerr::cluster_authorization_failed;
            co_return respond(r, ctx);
        }
        auto r = co_await elect_leaders(sh, std::move(req), version);
        co_return respond(r, ctx);
    }
    case api_key::describe_producers: {
        auto req = decode_body<kafka::DescribeProducersRequest>(body, version);
        // READ on each topic (KafkaApis.handleDescribeProducersRequest).
        std::vector<kafka::DescribeProducersResponse::TopicResponse> denied;
        std::erase_if(req.topics, [&](const kafka::DescribeProducersRequest::TopicRequest& t) {
            if (authorized(ctx, acl::operation::read, acl::resource_type::topic, t.name)) return false;
            kafka::DescribeProducersResponse::TopicResponse tr;
            tr.name = t.name;
            for (auto p : t.partition_indexes) {
                kafka::DescribeProducersResponse::PartitionResponse pr;
                pr.partition_index = p;
                pr.error_code = kerr::topic_authorization_failed;
                tr.partitions.push_back(std::move(pr));
            }
            denied.push_back(std::move(tr));
            return true;
        });
        auto r = co_await describe_producers(sh, std::move(req));
        for (auto& d : denied) r.topics.push_back(std::move(d));
        co_return respond(r, ctx);
    }
    case api_key::sasl_handshake:
        co_return handle_sasl_handshake(ctx, decode_body<kafka::SaslHandshakeRequest>(body, version));
    case api_key::sasl_authenticate: {
        auto req = decode_body<kafka::SaslAuthenticateRequest>(body, version);
        // The request carried a password (PLAIN) or a proof: no copy outlives its use.
        sasl::wipe_buffer(frame.data(), frame.size());
        co_return co_await handle_sasl_authenticate(ctx, std::move(req));
    }
    case api_key::describe_user_scram_credentials: {
        auto req = decode_body<kafka::DescribeUserScramCredentialsRequest>(body, version);
        if (!authorized_cluster(ctx, acl::operation::describe)) {
            kafka::DescribeUserScramCredentialsResponse r;
            r.error_code = kerr::cluster_authorization_failed;
            r.error_message = "Cluster authorization failed.";
            co_return respond(r, ctx);
        }
        auto r = describe_user_scram_credentials(sh, req);
        co_return respond(r, ctx);
    }
    case api_key::alter_user_scram_credentials: {
        auto req = decode_body<kafka::AlterUserScramCredentialsRequest>(body, version);
        sasl::wipe_buffer(frame.data(), frame.size());
        if (!authorized_cluster(ctx, acl::operation::alter)) {
            kafka::AlterUserScramCredentialsResponse r;
            std::set<std::string> users;
            for (const auto& d : req.deletions) users.insert(d.name);
            for (const auto& u : req.upsertions) users.insert(u.name);
            for (const auto& u : users) {
                kafka::AlterUserScramCredentialsResponse::AlterUserScramCredentialsResult res;
                res.user = u;
                res.error_code = kerr::cluster_authorization_failed;
                res.error_message = "Cluster authorization failed.";
                r.results.push_back(std::move(res));
            }
            for (auto& u : req.upsertions) sasl::wipe_buffer(u.salted_password.data(), u.salted_password.size());
            co_return respond(r, ctx);
        }
        auto r = co_await alter_user_scram_credentials(sh, std::move(req));
        co_return respond(r, ctx);
    }
    case api_key::describe_acls: {
        auto req = decode_body<kafka::DescribeAclsRequest>(body, version);
        auto r = describe_acls(ctx, req);
        co_return respond(r, ctx);
    }
    case api_key::create_acls: {
        auto req = decode_body<kafka::CreateAclsRequest>(body, version);
        auto r = co_await create_acls(ctx, std::move(req));
        co_return respond(r, ctx);
    }
    case api_key::delete_acls: {
        auto req = decode_body<kafka::DeleteAclsRequest>(body, version);
        auto r = co_await delete_acls(ctx, std::move(req));
        co_return respond(r, ctx);
    }
    case api_key::describe_configs:
        co_return describe_configs(ctx, decode_body<kafka::DescribeConfigsRequest>(body, version));
    case api_key::describe_cluster:
        co_return describe_cluster(ctx, decode_body<kafka::DescribeClusterRequest>(body, version));
    case api_key::find_coordinator:
        co_return find_coordinator(ctx, decode_body<kafka::FindCoordinatorRequest>(body, version));
    case api_key::init_producer_id: {
        auto req = decode_body<kafka::InitProducerIdRequest>(body, version);
        co_return co_await handle_init_producer_id(ctx, std::move(req));
    }
    case api_key::add_partitions_to_txn: {
        auto req = decode_body<kafka::AddPartitionsToTxnRequest>(body, version);
        co_return co_await handle_add_partitions_to_txn(ctx, std::move(req));
    }
    case api_key::add_offsets_to_txn: {
        auto req = decode_body<kafka::AddOffsetsToTxnRequest>(body, version);
        co_return co_await handle_add_offsets_to_txn(ctx, std::move(req));
    }
    case api_key::end_txn: {
        auto req = decode_body<kafka::EndTxnRequest>(body, version);
        co_return co_await handle_end_txn(ctx, std::move(req));
    }
    case api_key::write_txn_markers: {
        auto req = decode_body<kafka::WriteTxnMarkersRequest>(body, version);
        co_return co_await handle_write_txn_markers(ctx, std::move(req));
    }
    case api_key::txn_offset_commit: {
        auto req = decode_body<kafka::TxnOffsetCommitRequest>(body, version);
        co_return co_await handle_txn_offset_commit(ctx, std::move(req));
    }
    case api_key::list_transactions: {
        auto req = decode_body<kafka::ListTransactionsRequest>(body, version);
        co_return co_await handle_list_transactions(ctx, std::move(req));
    }
    case api_key::describe_transactions: {
        auto req = decode_body<kafka::DescribeTransactionsRequest>(body, version);
        co_return co_await handle_describe_transactions(ctx, std::move(req));
    }
    case api_key::offset_for_leader_epoch: {
        auto req = decode_body<kafka::OffsetForLeaderEpochRequest>(body, version);
        co_return co_await handle_offset_for_leader_epoch(ctx, std::move(req));
    }
    case api_key::join_group: {
        auto req = decode_body<kafka::JoinGroupRequest>(body, version);
        co_return co_await handle_join_group(ctx, std::move(req));
    }
    case api_key::sync_group: {
        auto req = decode_body<kafka::SyncGroupRequest>(body, version);
        co_return co_await handle_sync_group(ctx, std::move(req));
    }
    case api_key::heartbeat: {
        auto req = decode_body<kafka::HeartbeatRequest>(body, version);
        co_return co_await handle_heartbeat(ctx, std::move(req));
    }
    case api_key::leave_group: {
        auto req = decode_body<kafka::LeaveGroupRequest>(body, version);
        co_return co_await handle_leave_group(ctx, std::move(req));
    }
    case api_key::offset_commit: {
        auto req = decode_body<kafka::OffsetCommitRequest>(body, version);
        co_return co_await handle_offset_commit(ctx, std::move(req));
    }
    case api_key::offset_fetch: {
        auto req = decode_body<kafka::OffsetFetchRequest>(body, version);
        co_return co_await handle_offset_fetch(ctx, std::move(req));
    }
    case api_key::list_groups: {
        auto req = decode_body<kafka::ListGroupsRequest>(body, version);
        co_return co_await handle_list_groups(ctx, std::move(req));
    }
    case api_key::describe_groups: {
        auto req = decode_body<kafka::DescribeGroupsRequest>(body, version);
        co_return co_await handle_describe_groups(ctx, std::move(req));
    }
    case api_key::offset_delete: {
        auto req = decode_body<kafka::OffsetDeleteRequest>(body, version);
        co_return co_await handle_offset_delete(ctx, std::move(req));
    }
    case api_key::delete_groups: {
        auto req = decode_body<kafka::DeleteGroupsRequest>(body, version);
        co_return co_await handle_delete_groups(ctx, std::move(req));
    }
    default:
        break;
    }
    throw connection_error("API key " + std::to_string(key) + " has no handler");
}

} // namespace skiff::broker
