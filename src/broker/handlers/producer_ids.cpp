// InitProducerId: ids for idempotent producers, allocated on core 0 in persisted blocks.
#include "../handlers.hpp"
#include "../routing.hpp"
#include "../transactions.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

runtime::task<std::string> handle_init_producer_id(request_ctx ctx, kafka::InitProducerIdRequest req) {
    kafka::InitProducerIdResponse r;
    r.producer_id = -1;
    r.producer_epoch = -1;
    if (req.transactional_id) {
        // A transactional producer (KIP-98): its coordinator hands out the id and bumps the
        // epoch, fencing an older instance and ending what it left open.
        const std::string& id = *req.transactional_id;
        if (id.empty()) {
            r.error_code = kerr::invalid_request;
            co_return respond(r, ctx);
        }
        if (!authorized(ctx, acl::operation::write, acl::resource_type::transactional_id, id)) {
            r.error_code = kerr::transactional_id_authorization_failed;
            co_return respond(r, ctx);
        }
        constexpr std::int16_t fenced_since = 4; // KIP-588
        const bool fenced_known = ctx.version >= fenced_since;
        auto got = co_await on_core(ctx.sh, txn_owner(id, ctx.sh.shared->cores),
                                    [&](shard& o) -> runtime::task<txn::coordinator::init_result> {
                                        auto* c = txn_coordinator_for(o, id);
                                        if (!c) {
                                            txn::coordinator::init_result none;
                                            none.error = txn_coordinator_missing(o, id);
                                            co_return none;
                                        }
                                        co_return co_await c->init_producer_id(
                                            id, req.transaction_timeout_ms, req.producer_id, req.producer_epoch,
                                            fenced_known);
                                    });
        r.error_code = got.error;
        r.producer_id = got.producer_id;
        r.producer_epoch = got.producer_epoch;
        co_return respond(r, ctx);
    }
    // KafkaApis.handleInitProducerIdRequest: an idempotent producer needs IDEMPOTENT_WRITE on
    // the cluster, or WRITE on some topic (authorizeByResourceType).
    if (!authorized_cluster(ctx, acl::operation::idempotent_write) &&
        !authorized_any(ctx, acl::operation::write, acl::resource_type::topic)) {
        r.error_code = kerr::cluster_authorization_failed;
        co_return respond(r, ctx);
    }
    // KIP-360: a producer that lost track of its sequences asks for its id with a bumped epoch.
    if (req.producer_id >= 0 && req.producer_epoch >= 0 && req.producer_epoch < 32766) {
        r.producer_id = req.producer_id;
        r.producer_epoch = static_cast<std::int16_t>(req.producer_epoch + 1);
        co_return respond(r, ctx);
    }
    auto id = co_await on_core(ctx.sh, 0, [](shard& sh0) { return allocate_producer_id(sh0); });
    if (!id) {
        log::warn("allocating a producer id: {}", id.error().message);
        r.error_code = kerr::coordinator_not_available;
        co_return respond(r, ctx);
    }
    r.producer_id = *id;
    r.producer_epoch = 0;
    co_return respond(r, ctx);
}

} // namespace skiff::broker
