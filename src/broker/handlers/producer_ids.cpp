// InitProducerId: ids for idempotent producers, allocated on core 0 in persisted blocks.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

runtime::task<std::string> handle_init_producer_id(request_ctx ctx, kafka::InitProducerIdRequest req) {
    kafka::InitProducerIdResponse r;
    r.producer_id = -1;
    r.producer_epoch = -1;
    if (req.transactional_id) {
        r.error_code = kerr::transactional_id_authorization_failed;
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
