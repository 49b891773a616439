// Committed offsets: commit validation, the one-PUT-at-a-time write batching of a group's
// offsets object, DeleteGroups, OffsetFetch lookups and the start-up load. The object's bytes
// are offsets_format's; this file decides when they are written and what an answer waits for.
//
// Not persisted (a documented departure from Kafka): offsets never expire (Kafka's
// offsets.retention.minutes); they go with DeleteGroups.
#include "group_manager.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <span>

namespace skiff::broker::groups {

// Kafka's GroupMetadata.validateOffsetCommit. May create the group (a standalone commit).
kafka::error_code group_manager::validate_commit(const kafka::OffsetCommitRequest& req, std::int16_t version, group*& out) {
    out = nullptr;
    if (_closed) return kerr::not_coordinator;
    if (req.group_id.empty()) return kerr::invalid_group_id;
    const std::int32_t gen = version >= 1 ? req.generation_id_or_member_epoch : -1;
    const std::string mid = version >= 1 ? req.member_id : std::string();
    std::optional<std::string> instance;
    if (version >= 7 && req.group_instance_id && !req.group_instance_id->empty()) instance = req.group_instance_id;
    group* g = find_group(req.group_id);
    if (!g) {
        // Not managed by this coordinator: only a commit outside group management may
        // create it; otherwise it is a commit from an older generation.
        if (gen >= 0) return kerr::illegal_generation;
        g = &create_group(req.group_id);
    }
    if (g->st == gstate::dead) return kerr::coordinator_not_available;
    if (gen >= 0 || !mid.empty() || instance) {
        if (g->fenced(mid, instance)) return kerr::fenced_instance_id;
        member* m = g->find(mid);
        if (!m) return kerr::unknown_member_id;
        if (gen != g->generation) return kerr::illegal_generation;
        // A commit is as good as a heartbeat.
        reset_session(*m);
    } else if (g->st != gstate::empty) {
        // generation -1 (admin tools, manual assignment) may only commit for an Empty group.
        return kerr::unknown_member_id;
    }
    if (g->st == gstate::completing_rebalance) return kerr::rebalance_in_progress;
    out = g;
    return kerr::none;
}

runtime::task<void> group_manager::write_loop(std::shared_ptr<group> g) {
    // Each round writes everything accepted so far: commits arriving during a PUT share
    // the next one.
    while (!g->write_waiters.empty() || !g->next_write.empty() || !g->next_delete.empty()) {
        offset_map batch = std::exchange(g->next_write, {});
        auto removed = std::exchange(g->next_delete, {});
        auto waiters = std::exchange(g->write_waiters, {});
        offset_map next = g->offsets;
        for (auto& [topic, parts] : batch)
            for (auto& [p, o] : parts) next[topic][p] = std::move(o);
        for (auto& [topic, parts] : removed) {
            auto t = next.find(topic);
            if (t == next.end()) continue;
            for (auto p : parts) t->second.erase(p);
            if (t->second.empty()) next.erase(t);
        }
        std::string body = serialize_offsets(g->id, next);
        std::string key = group_offsets_key(_cfg.ns, g->id);
        std::span<const char> bytes(body.data(), body.size());
        runtime::deadline_scope scope(now() + _cfg.offset_write_timeout);
        auto r = co_await _store.put(std::move(key), bytes, false, scope.token());
        kafka::error_code code = kerr::none;
        if (r) {
            g->offsets = std::move(next);
            _offset_commits += waiters.size();
        } else {
            code = scope.expired() ? kerr::request_timed_out : kerr::coordinator_not_available;
            log::warn("group '{}': storing committed offsets failed ({}): {}; {} commit(s) not acknowledged", g->id,
                      storage::to_string(r.error().code), r.error().message, waiters.size());
        }
        for (auto& w : waiters) w->set(code);
    }
    g->writing = false;
    for (auto& w : std::exchange(g->idle_waiters, {})) w->set();
}

std::shared_ptr<oneshot<kafka::error_code>> group_manager::enqueue_commit(group& g, offset_map entries) {
    for (auto& [topic, parts] : entries) {
        auto d = g.next_delete.find(topic);
        for (auto& [p, o] : parts) {
            g.next_write[topic][p] = std::move(o);
            if (d != g.next_delete.end()) d->second.erase(p); // the later commit wins
        }
        if (d != g.next_delete.end() && d->second.empty()) g.next_delete.erase(d);
    }
    return start_write(g);
}

std::shared_ptr<oneshot<kafka::error_code>> group_manager::enqueue_delete(group& g,
                                                                          std::map<std::string, std::set<std::int32_t>> parts) {
    for (auto& [topic, ps] : parts) {
        auto w = g.next_write.find(topic);
        for (auto p : ps) {
            g.next_delete[topic].insert(p);
            if (w != g.next_write.end()) w->second.erase(p); // the later delete wins
        }
        if (w != g.next_write.end() && w->second.empty()) g.next_write.erase(w);
    }
    return start_write(g);
}

std::shared_ptr<oneshot<kafka::error_code>> group_manager::start_write(group& g) {
    auto slot = std::make_shared<oneshot<kafka::error_code>>();
    g.write_waiters.push_back(slot);
    if (!g.writing) {
        auto self = _groups.find(g.id);
        if (self == _groups.end() || self->second.get() != &g) {
            // Cannot happen (handlers only see groups in the map); fail safe.
            g.next_write.clear();
            g.next_delete.clear();
            for (auto& w : std::exchange(g.write_waiters, {})) w->set(kerr::coordinator_not_available);
            return slot;
        }
        g.writing = true;
        auto spawned = _writes.spawn(write_loop(self->second));
        if (!spawned) {
            g.writing = false;
            g.next_write.clear();
            g.next_delete.clear();
            for (auto& w : std::exchange(g.write_waiters, {})) w->set(kerr::coordinator_not_available);
        }
    }
    return slot;
}

std::set<std::string> group_manager::subscribed_topics(const group& g) const {
    std::set<std::string> out;
    if (g.protocol_type != std::optional<std::string>("consumer") || !g.protocol_name) return out;
    for (const auto& [mid, m] : g.members) {
        const std::string* md = m->metadata_for(*g.protocol_name);
        if (!md || md->size() < 2) continue;
        // A consumer-protocol subscription: its version, then the body. Newer versions only
        // add fields, so the newest one known here reads the topics of any.
        kafka::reader rd(std::span<const char>(md->data(), md->size()));
        std::int16_t version = 0;
        if (!rd.read_int16(version) || version < 0) continue;
        version = std::min<std::int16_t>(version, kafka::ConsumerProtocolSubscription::max_version);
        auto sub = kafka::ConsumerProtocolSubscription::decode(rd, version);
        if (!sub) continue;
        out.insert(sub->topics.begin(), sub->topics.end());
    }
    return out;
}

runtime::task<group_manager::offset_delete_outcome> group_manager::delete_offsets(std::string name,
                                                                                  topic_partitions tps) {
    offset_delete_outcome out;
    if (_closed) {
        out.error = kerr::not_coordinator;
        co_return out;
    }
    if (name.empty()) {
        out.error = kerr::invalid_group_id;
        co_return out;
    }
    auto it = _groups.find(name);
    if (it == _groups.end() || it->second->st == gstate::dead) {
        out.error = kerr::group_id_not_found;
        co_return out;
    }
    std::shared_ptr<group> g = it->second;
    const bool empty = g->st == gstate::empty;
    if (!empty && g->protocol_type != std::optional<std::string>("consumer")) {
        out.error = kerr::non_empty_group;
        co_return out;
    }
    const auto subscribed = empty ? std::set<std::string>{} : subscribed_topics(*g);
    std::map<std::string, std::set<std::int32_t>> remove;
    bool any_stored = false;
    for (const auto& [topic, parts] : tps) {
        for (auto p : parts) {
            if (subscribed.count(topic)) {
                out.partitions[{topic, p}] = kerr::group_subscribed_to_topic;
                continue;
            }
            out.partitions[{topic, p}] = kerr::none;
            remove[topic].insert(p);
            auto t = g->offsets.find(topic);
            auto w = g->next_write.find(topic);
            if ((t != g->offsets.end() && t->second.count(p)) || (w != g->next_write.end() && w->second.count(p))) {
                any_stored = true;
            }
        }
    }
    // Nothing committed for those partitions: nothing to write.
    if (!any_stored) co_return out;
    auto slot = enqueue_delete(*g, std::move(remove));
    auto aw = slot->wait();
    auto waited = co_await aw;
    const kafka::error_code code = waited ? *waited : kerr::coordinator_not_available;
    for (auto& [tp, e] : out.partitions) {
        if (e == kerr::none) e = code;
    }
    co_return out;
}

runtime::task<kafka::error_code> group_manager::delete_one(std::string name) {
    if (_closed) co_return kerr::not_coordinator;
    if (name.empty()) co_return kerr::invalid_group_id;
    auto it = _groups.find(name);
    if (it == _groups.end()) co_return kerr::group_id_not_found;
    std::shared_ptr<group> g = it->second;
    if (g->st == gstate::dead) co_return kerr::group_id_not_found;
    if (g->st != gstate::empty || !g->members.empty()) co_return kerr::non_empty_group;
    auto holder = _writes.enter();
    if (!holder) co_return kerr::coordinator_not_available;
    g->st = gstate::dead;
    g->pending.clear();
    // Writes already accepted land first; the delete then removes what they stored.
    while (g->writing) {
        auto idle = std::make_shared<oneshot<void>>();
        g->idle_waiters.push_back(idle);
        auto aw = idle->wait();
        auto idle_done = co_await aw;
        if (!idle_done) { // cannot break while we hold it; never report a delete we did not do
            g->st = gstate::empty;
            g->empty_since = now();
            co_return kerr::coordinator_not_available;
        }
    }
    std::string key = group_offsets_key(_cfg.ns, g->id);
    runtime::deadline_scope scope(now() + _cfg.offset_write_timeout);
    auto r = co_await _store.remove(std::move(key), scope.token());
    if (!r) {
        log::warn("group '{}': deleting its offsets failed ({}): {}", g->id, storage::to_string(r.error().code),
                  r.error().message);
        g->st = gstate::empty;
        g->empty_since = now();
        co_return scope.expired() ? kerr::request_timed_out : kerr::coordinator_not_available;
    }
    auto again = _groups.find(name);
    if (again != _groups.end() && again->second == g) _groups.erase(again);
    log::info("group '{}' deleted", name);
    co_return kerr::none;
}

void group_manager::forget_topics(const std::set<std::string>& gone) {
    if (_closed) return;
    for (auto& [id, g] : _groups) {
        if (g->st == gstate::dead) continue;
        std::map<std::string, std::set<std::int32_t>> remove;
        for (const auto& topic : gone) {
            if (auto t = g->offsets.find(topic); t != g->offsets.end()) {
                for (const auto& [p, o] : t->second) remove[topic].insert(p);
            }
            if (auto w = g->next_write.find(topic); w != g->next_write.end()) {
                for (const auto& [p, o] : w->second) remove[topic].insert(p);
            }
        }
        // Nobody waits for this write: its outcome is the group's next state.
        if (!remove.empty()) (void)enqueue_delete(*g, std::move(remove));
    }
}

fetched_group group_manager::fetch_group(const std::string& gid, const std::optional<topic_partitions>& topics) {
    fetched_group out;
    kafka::error_code err = kerr::none;
    if (_closed)
        err = kerr::not_coordinator;
    else if (gid.empty())
        err = kerr::invalid_group_id;
    group* g = err == kerr::none ? find_group(gid) : nullptr;
    out.error = err;
    if (!topics) {
        if (g) {
            for (const auto& [t, parts] : g->offsets) {
                fetched_topic ft;
                ft.name = t;
                for (const auto& [p, o] : parts)
                    ft.partitions.push_back(fetched_partition{p, o.offset, o.leader_epoch, o.metadata, kerr::none});
                out.topics.push_back(std::move(ft));
            }
        }
        return out;
    }
    for (const auto& [t, parts] : *topics) {
        fetched_topic ft;
        ft.name = t;
        const std::map<std::int32_t, committed_offset>* have = nullptr;
        if (g) {
            auto it = g->offsets.find(t);
            if (it != g->offsets.end()) have = &it->second;
        }
        for (auto p : parts) {
            fetched_partition fp;
            fp.partition = p;
            fp.error = err;
            if (have) {
                auto o = have->find(p);
                if (o != have->end()) {
                    fp.offset = o->second.offset;
                    fp.leader_epoch = o->second.leader_epoch;
                    fp.metadata = o->second.metadata;
                }
            }
            ft.partitions.push_back(std::move(fp));
        }
        out.topics.push_back(std::move(ft));
    }
    return out;
}

runtime::task<result<void, storage::store_error>> group_manager::load(std::function<bool(std::string_view)> owns) {
    const std::string prefix = groups_prefix(_cfg.ns);
    std::string token;
    std::size_t loaded = 0, skipped = 0;
    do {
        std::string pfx = prefix;
        std::string page_token = token;
        auto page = co_await _store.list(std::move(pfx), std::string(), std::move(page_token), 1000, {});
        if (!page) co_return failure{page.error()};
        for (const auto& entry : page->objects) {
            offsets_key name = classify_offsets_key(_cfg.ns, entry.key);
            if (name.kind == offsets_key_kind::other) continue;
            if (name.kind == offsets_key_kind::malformed) {
                log::warn("group offsets object {} has a malformed name; skipping it", entry.key);
                ++skipped;
                continue;
            }
            const bool hashed = name.kind == offsets_key_kind::hashed;
            if (!hashed && owns && !owns(name.group_id)) continue;
            std::string key = entry.key;
            auto got = co_await _store.get(std::move(key), std::nullopt, {});
            if (!got) {
                if (got.error().code == storage::errc::not_found) continue; // deleted meanwhile
                co_return failure{got.error()};
            }
            auto parsed = parse_offsets(got->data);
            if (!parsed) {
                log::warn("group offsets object {} is corrupt ({}); skipping it: its committed offsets are not loaded",
                          entry.key, parsed.error());
                ++skipped;
                continue;
            }
            if (group_offsets_key(_cfg.ns, parsed->group_id) != entry.key ||
                (!hashed && name.group_id != parsed->group_id)) {
                log::warn("group offsets object {} names group '{}', which is stored elsewhere; skipping it",
                          entry.key, parsed->group_id);
                ++skipped;
                continue;
            }
            if (hashed && owns && !owns(parsed->group_id)) continue;
            if (find_group(parsed->group_id)) continue;
            group& g = create_group(parsed->group_id);
            g.offsets = std::move(parsed->offsets);
            ++loaded;
        }
        token = page->next_token;
    } while (!token.empty());
    // Quiet when there was nothing: in cluster mode every claimed group slot loads.
    if (loaded == 0 && skipped == 0) co_return ok();
    log::info("group coordinator: loaded the committed offsets of {} group(s) from {}{}", loaded, _store.describe(),
              skipped ? fmt::format(" ({} object(s) skipped)", skipped) : std::string());
    co_return ok();
}

} // namespace skiff::broker::groups
