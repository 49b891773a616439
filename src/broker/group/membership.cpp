// Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalances, session expiry
// and static members. The state machine follows Apache Kafka's GroupCoordinator /
// GroupMetadata (kafka.coordinator.group, 3.x):
//
//   Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//     ▲                 ▲      ▲                                      │ leader's SyncGroup
//     │                 │      └────── join / leave / expiry ─────────┤
//     └─ last member ───┘                                             ▼
//        gone                         Stable ◀────────────────────────┘
//   Dead: being deleted (DeleteGroups), every request answers as if the group were gone.
//
// The request handlers are synchronous state transitions; a JoinGroup or SyncGroup that must
// wait gets a `oneshot` slot that a later transition (another member's request, a timer,
// close()) fills. Timers are the group's own (join deadline / initial delay, pending-sync
// deadline, one session timer per member and per MEMBER_ID_REQUIRED member); none of them owns
// a coroutine.
//
// Not persisted (a documented departure from Kafka): membership and assignments live in memory
// only — after a restart members rejoin (UNKNOWN_MEMBER_ID makes them). No group.max.size limit.
#include "group_manager.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/log.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace skiff::broker::groups {

void group_manager::reset_session(member& m, std::optional<ms> timeout) {
    m.session.arm_after(timeout.value_or(ms(m.session_timeout_ms)));
}

// Removes a member, answering whatever it waits for with `code`.
void group_manager::erase_member(group& g, const std::string& mid, kafka::error_code code) {
    auto it = g.members.find(mid);
    if (it == g.members.end()) return;
    std::unique_ptr<member> m = std::move(it->second);
    g.members.erase(it);
    if (m->join_waiter) std::exchange(m->join_waiter, nullptr)->set(join_error(code, mid));
    if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(code));
    if (m->instance_id) {
        auto s = g.static_members.find(*m->instance_id);
        if (s != g.static_members.end() && s->second == mid) g.static_members.erase(s);
    }
    g.pending_sync.erase(mid);
    if (g.is_leader(mid)) {
        g.leader.reset();
        // Prefer a member that is rejoining, so the rebalance can complete with it.
        for (const auto& [id, other] : g.members)
            if (other->join_waiter) {
                g.leader = id;
                break;
            }
        if (!g.leader && !g.members.empty()) g.leader = g.members.begin()->first;
    }
    // `m` (and its session timer) is destroyed here, possibly from inside that timer.
}

void group_manager::remove_member_and_update(group& g, const std::string& mid, std::string_view reason) {
    log::info("group '{}': removing member {}: {}", g.id, mid, reason);
    erase_member(g, mid, kerr::unknown_member_id);
    switch (g.st) {
    case gstate::stable:
    case gstate::completing_rebalance: maybe_prepare_rebalance(g, reason); break;
    case gstate::preparing_rebalance: try_complete_join(g); break;
    case gstate::empty:
    case gstate::dead: break;
    }
}

void group_manager::reset_and_propagate_assignment_error(group& g, kafka::error_code code) {
    for (auto& [_, m] : g.members) {
        m->assignment.clear();
        if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(code));
    }
}

void group_manager::propagate_assignment(group& g) {
    for (auto& [_, m] : g.members) {
        if (!m->sync_waiter) continue;
        SyncGroupResponse r;
        r.protocol_type = g.protocol_type;
        r.protocol_name = g.protocol_name;
        r.assignment = m->assignment;
        std::exchange(m->sync_waiter, nullptr)->set(std::move(r));
        reset_session(*m);
    }
}

void group_manager::maybe_prepare_rebalance(group& g, std::string_view reason) {
    if (g.st == gstate::stable || g.st == gstate::completing_rebalance || g.st == gstate::empty)
        prepare_rebalance(g, reason);
}

void group_manager::prepare_rebalance(group& g, std::string_view reason) {
    if (g.st == gstate::completing_rebalance) reset_and_propagate_assignment_error(g, kerr::rebalance_in_progress);
    g.sync_timer.cancel();
    g.pending_sync.clear();
    bool initial = g.st == gstate::empty && _cfg.initial_rebalance_delay.count() > 0;
    g.st = gstate::preparing_rebalance;
    log::info("group '{}': preparing to rebalance (generation {}): {}", g.id, g.generation, reason);
    if (initial) {
        // Kafka's InitialDelayedJoin: wait initial_rebalance_delay for more members; each
        // new member extends the wait, up to the group's rebalance timeout in total.
        g.jk = group::join_kind::initial;
        g.initial_delay = _cfg.initial_rebalance_delay;
        g.initial_remaining = std::max(ms(g.rebalance_timeout_ms()) - _cfg.initial_rebalance_delay, ms(0));
        g.join_timer.arm_after(g.initial_delay);
    } else {
        g.jk = group::join_kind::normal;
        g.join_timer.arm_after(ms(g.rebalance_timeout_ms()));
        try_complete_join(g);
    }
}

void group_manager::try_complete_join(group& g) {
    if (g.st == gstate::preparing_rebalance && g.jk == group::join_kind::normal && g.all_joined()) complete_join(g);
}

void group_manager::on_join_timer(group& g) {
    if (_closed || g.st != gstate::preparing_rebalance) return;
    if (g.jk == group::join_kind::initial && g.new_member_added && g.initial_remaining.count() > 0) {
        g.new_member_added = false;
        ms delay = std::min(_cfg.initial_rebalance_delay, g.initial_remaining);
        g.initial_remaining = std::max(g.initial_remaining - g.initial_delay, ms(0));
        g.initial_delay = delay;
        g.join_timer.arm_after(delay);
        return;
    }
    complete_join(g);
}

// Kafka's maybeElectNewJoinedLeader: keep the leader if it rejoined, else pick one that did.
bool group_manager::elect_joined_leader(group& g) {
    if (!g.leader) return false;
    auto* l = g.find(*g.leader);
    if (l && l->join_waiter) return true;
    for (const auto& [id, m] : g.members)
        if (m->join_waiter) {
            g.leader = id;
            return true;
        }
    return false;
}

void group_manager::complete_join(group& g) {
    g.join_timer.cancel();
    g.jk = group::join_kind::none;
    // Dynamic members that did not rejoin in time are out; static ones stay (their
    // instance keeps its place until its session expires).
    std::vector<std::string> gone;
    for (const auto& [id, m] : g.members)
        if (!m->join_waiter && !m->instance_id) gone.push_back(id);
    for (const auto& id : gone) {
        log::info("group '{}': member {} did not rejoin in time", g.id, id);
        erase_member(g, id, kerr::unknown_member_id);
    }
    if (g.st == gstate::dead) return;
    if (!elect_joined_leader(g) && !g.members.empty()) {
        // Only static members that have not rejoined: wait another round (their sessions
        // will expire if they are gone).
        g.jk = group::join_kind::normal;
        g.join_timer.arm_after(ms(g.rebalance_timeout_ms()));
        return;
    }
    ++g.generation;
    ++_rebalances;
    if (g.members.empty()) {
        g.protocol_name.reset();
        g.leader.reset();
        g.st = gstate::empty;
        g.empty_since = now();
        log::info("group '{}' with generation {} is now empty", g.id, g.generation);
        return;
    }
    g.protocol_name = g.select_protocol();
    g.st = gstate::completing_rebalance;
    log::info("group '{}': generation {} with {} members, protocol '{}', leader {}", g.id, g.generation,
              g.members.size(), *g.protocol_name, g.leader.value_or(""));
    for (auto& [id, m] : g.members) {
        if (m->join_waiter) {
            auto r = g.current_generation(id, g.is_leader(id));
            std::exchange(m->join_waiter, nullptr)->set(std::move(r));
        }
        m->is_new = false;
        reset_session(*m);
        g.pending_sync.insert(id);
    }
    g.sync_timer.arm_after(ms(g.rebalance_timeout_ms()));
}

void group_manager::on_sync_timer(group& g) {
    if (_closed) return;
    if (g.st != gstate::completing_rebalance && g.st != gstate::stable) return;
    if (g.pending_sync.empty()) return;
    std::vector<std::string> late(g.pending_sync.begin(), g.pending_sync.end());
    for (const auto& id : late) {
        log::info("group '{}': member {} did not sync in time", g.id, id);
        erase_member(g, id, kerr::unknown_member_id);
    }
    prepare_rebalance(g, "members did not sync in time");
}

void group_manager::on_session_expired(group& g, std::string mid) {
    if (_closed) return;
    member* m = g.find(mid);
    if (!m) return;
    if (!m->is_new && (m->join_waiter || m->sync_waiter)) {
        // Members waiting in a rebalance need not heartbeat (Kafka's hasSatisfiedHeartbeat).
        reset_session(*m);
        return;
    }
    remove_member_and_update(g, mid, m->is_new ? "new member did not complete its join in time"
                                               : "session timeout expired");
}

void group_manager::on_pending_expired(group& g, std::string mid) {
    if (_closed) return;
    g.pending.erase(mid);
    if (g.st == gstate::preparing_rebalance) try_complete_join(g);
}

void group_manager::add_member_and_rebalance(group& g, const std::string& mid, std::optional<std::string> instance,
                              const kafka::JoinGroupRequest& req, std::int32_t rebalance_ms,
                              std::vector<protocol> protocols, const std::string& client_id,
                              const std::string& client_host, std::shared_ptr<oneshot<JoinGroupResponse>> slot) {
    auto m = std::make_unique<member>(&g, mid);
    m->instance_id = std::move(instance);
    m->client_id = client_id;
    m->client_host = client_host;
    m->rebalance_timeout_ms = rebalance_ms;
    m->session_timeout_ms = req.session_timeout_ms;
    m->protocol_type = req.protocol_type;
    m->protocols = std::move(protocols);
    m->is_new = true;
    m->join_waiter = std::move(slot);
    if (g.st == gstate::preparing_rebalance && g.generation == 0) g.new_member_added = true;
    if (g.members.empty()) g.protocol_type = m->protocol_type;
    if (!g.leader) g.leader = mid;
    if (m->instance_id) g.static_members[*m->instance_id] = mid;
    auto* raw = m.get();
    g.members[mid] = std::move(m);
    // A new member cannot heartbeat until its join completes: bound that wait instead.
    reset_session(*raw, _cfg.new_member_join_timeout);
    maybe_prepare_rebalance(g, fmt::format("adding new member {}", mid));
}

void group_manager::update_member_and_rebalance(group& g, member& m, const kafka::JoinGroupRequest& req,
                                 std::int32_t rebalance_ms, std::vector<protocol> protocols,
                                 std::shared_ptr<oneshot<JoinGroupResponse>> slot, std::string_view reason) {
    m.protocols = std::move(protocols);
    m.rebalance_timeout_ms = rebalance_ms;
    m.session_timeout_ms = req.session_timeout_ms;
    if (m.join_waiter) {
        // The same member joined again while its previous JoinGroup waits (a client-side
        // timeout and retry): the newer request is the one that gets the result.
        std::exchange(m.join_waiter, nullptr)->set(join_error(kerr::rebalance_in_progress, m.id));
    }
    m.join_waiter = std::move(slot);
    reset_session(m);
    maybe_prepare_rebalance(g, reason);
}

// A known group.instance.id joined with an unknown member id: the new id replaces the old
// one (the old holder is fenced). In a Stable group whose protocol would not change, this
// completes without a rebalance (Kafka's updateStaticMemberAndRebalance).
void group_manager::static_member_rejoin(group& g, const std::string& old_id, const std::string& new_id, std::int16_t version,
                          const kafka::JoinGroupRequest& req, std::int32_t rebalance_ms,
                          std::vector<protocol> protocols,
                          std::shared_ptr<oneshot<JoinGroupResponse>> slot) {
    auto it = g.members.find(old_id);
    if (it == g.members.end()) {
        slot->set(join_error(kerr::unknown_member_id, new_id));
        return;
    }
    std::optional<std::string> old_leader = g.leader;
    std::unique_ptr<member> m = std::move(it->second);
    g.members.erase(it);
    if (m->join_waiter) std::exchange(m->join_waiter, nullptr)->set(join_error(kerr::fenced_instance_id, old_id));
    if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(kerr::fenced_instance_id));
    m->id = new_id;
    if (g.is_leader(old_id)) g.leader = new_id;
    if (g.pending_sync.erase(old_id)) g.pending_sync.insert(new_id);
    g.static_members[*m->instance_id] = new_id;
    member& mm = *m;
    g.members[new_id] = std::move(m);
    std::vector<protocol> old_protocols = mm.protocols;
    mm.protocols = std::move(protocols);
    mm.rebalance_timeout_ms = rebalance_ms;
    mm.session_timeout_ms = req.session_timeout_ms;
    reset_session(mm);
    log::info("group '{}': static member {} replaces {} in {}", g.id, new_id, old_id, state_name(g.st));
    switch (g.st) {
    case gstate::stable: {
        if (g.protocol_name && g.select_protocol() == *g.protocol_name) {
            bool leader = g.is_leader(new_id);
            auto r = g.current_generation(new_id, leader && version >= 9);
            // The old leader id keeps the new member from running a pointless assignment
            // that a Stable group would not broadcast; v9+ says so with skip_assignment.
            if (version >= 9) {
                r.skip_assignment = leader;
            } else {
                r.leader = old_leader.value_or("");
            }
            slot->set(std::move(r));
        } else {
            mm.join_waiter = std::move(slot);
            prepare_rebalance(g, "a static member rejoined with other protocols");
        }
        break;
    }
    case gstate::completing_rebalance:
        // The leader may have computed an assignment for the old id: start over.
        mm.join_waiter = std::move(slot);
        prepare_rebalance(g, "a static member rejoined during CompletingRebalance");
        break;
    case gstate::preparing_rebalance:
        mm.join_waiter = std::move(slot);
        break;
    case gstate::empty:
    case gstate::dead:
        mm.protocols = std::move(old_protocols);
        slot->set(join_error(kerr::unknown_member_id, new_id));
        break;
    }
}

std::shared_ptr<oneshot<JoinGroupResponse>> group_manager::handle_join(const kafka::JoinGroupRequest& req, std::int16_t version,
                                                         const std::string& client_id,
                                                         const std::string& client_host) {
    auto slot = std::make_shared<oneshot<JoinGroupResponse>>();
    auto fail = [&](kafka::error_code code, const std::string& mid) {
        slot->set(join_error(code, mid));
        return slot;
    };
    if (_closed) return fail(kerr::not_coordinator, req.member_id);
    sweep();
    if (req.group_id.empty()) return fail(kerr::invalid_group_id, req.member_id);
    if (req.session_timeout_ms < _cfg.min_session_timeout.count() ||
        req.session_timeout_ms > _cfg.max_session_timeout.count())
        return fail(kerr::invalid_session_timeout, req.member_id);
    // v0 has no rebalance timeout: Kafka uses the session timeout.
    std::int32_t rebalance_ms =
        (version >= 1 && req.rebalance_timeout_ms > 0) ? req.rebalance_timeout_ms : req.session_timeout_ms;
    std::optional<std::string> instance;
    if (version >= 5 && req.group_instance_id && !req.group_instance_id->empty())
        instance = req.group_instance_id;
    std::vector<protocol> protocols;
    protocols.reserve(req.protocols.size());
    for (const auto& p : req.protocols) {
        bool dup = false;
        for (const auto& q : protocols) dup = dup || q.name == p.name;
        if (!dup) protocols.push_back(protocol{p.name, p.metadata});
    }

    const bool unknown = req.member_id.empty();
    group* gp = find_group(req.group_id);
    if (!gp) {
        if (!unknown) return fail(kerr::unknown_member_id, req.member_id);
        gp = &create_group(req.group_id);
    }
    group& g = *gp;
    if (g.st == gstate::dead) return fail(kerr::coordinator_not_available, req.member_id);
    if (!g.supports_protocols(req.protocol_type, protocols))
        return fail(kerr::inconsistent_group_protocol, req.member_id);

    if (unknown) {
        std::string new_id = new_member_id(instance ? *instance : client_id);
        if (instance) {
            auto s = g.static_members.find(*instance);
            if (s != g.static_members.end()) {
                std::string old_id = s->second;
                static_member_rejoin(g, old_id, new_id, version, req, rebalance_ms, std::move(protocols), slot);
            } else {
                add_member_and_rebalance(g, new_id, instance, req, rebalance_ms, std::move(protocols), client_id,
                                         client_host, slot);
            }
        } else if (version >= 4) {
            // KIP-394: hand out the id first; the member joins again with it.
            auto pm = std::make_unique<pending_member>(&g, new_id);
            pm->expiry.arm_after(ms(req.session_timeout_ms));
            g.pending[new_id] = std::move(pm);
            slot->set(join_error(kerr::member_id_required, new_id));
        } else {
            add_member_and_rebalance(g, new_id, std::nullopt, req, rebalance_ms, std::move(protocols), client_id,
                                     client_host, slot);
        }
    } else if (auto pit = g.pending.find(req.member_id); pit != g.pending.end()) {
        g.pending.erase(pit);
        add_member_and_rebalance(g, req.member_id, std::nullopt, req, rebalance_ms, std::move(protocols),
                                 client_id, client_host, slot);
    } else {
        if (g.fenced(req.member_id, instance)) return fail(kerr::fenced_instance_id, req.member_id);
        member* m = g.find(req.member_id);
        if (!m || (instance && !g.static_members.count(*instance)))
            return fail(kerr::unknown_member_id, req.member_id);
        switch (g.st) {
        case gstate::preparing_rebalance:
            update_member_and_rebalance(g, *m, req, rebalance_ms, std::move(protocols), slot,
                                        fmt::format("member {} rejoins", m->id));
            break;
        case gstate::completing_rebalance:
            if (m->protocols == protocols) {
                // Lost our JoinGroup answer: repeat it.
                reset_session(*m);
                slot->set(g.current_generation(m->id, g.is_leader(m->id)));
            } else {
                update_member_and_rebalance(g, *m, req, rebalance_ms, std::move(protocols), slot,
                                            fmt::format("member {} changed its metadata", m->id));
            }
            break;
        case gstate::stable:
            if (g.is_leader(m->id) || m->protocols != protocols) {
                // A leader's join forces a rebalance (topic metadata changes it noticed).
                update_member_and_rebalance(g, *m, req, rebalance_ms, std::move(protocols), slot,
                                            fmt::format("member {} rejoins a stable group", m->id));
            } else {
                reset_session(*m);
                slot->set(g.current_generation(m->id, false));
            }
            break;
        case gstate::empty:
        case gstate::dead: return fail(kerr::unknown_member_id, req.member_id);
        }
    }
    if (g.st == gstate::preparing_rebalance) try_complete_join(g);
    return slot;
}

std::shared_ptr<oneshot<SyncGroupResponse>> group_manager::handle_sync(const kafka::SyncGroupRequest& req, std::int16_t version) {
    auto slot = std::make_shared<oneshot<SyncGroupResponse>>();
    auto fail = [&](kafka::error_code code) {
        slot->set(sync_error(code));
        return slot;
    };
    if (_closed) return fail(kerr::not_coordinator);
    sweep();
    if (req.group_id.empty()) return fail(kerr::invalid_group_id);
    group* gp = find_group(req.group_id);
    if (!gp) return fail(kerr::unknown_member_id);
    group& g = *gp;
    if (g.st == gstate::dead) return fail(kerr::coordinator_not_available);
    std::optional<std::string> instance;
    if (version >= 3 && req.group_instance_id && !req.group_instance_id->empty()) instance = req.group_instance_id;
    if (g.fenced(req.member_id, instance)) return fail(kerr::fenced_instance_id);
    member* m = g.find(req.member_id);
    if (!m) return fail(kerr::unknown_member_id);
    if (req.generation_id != g.generation) return fail(kerr::illegal_generation);
    if (version >= 5) {
        if (req.protocol_type && g.protocol_type != req.protocol_type) return fail(kerr::inconsistent_group_protocol);
        if (req.protocol_name && g.protocol_name != req.protocol_name) return fail(kerr::inconsistent_group_protocol);
    }
    switch (g.st) {
    case gstate::empty:
    case gstate::dead: return fail(kerr::unknown_member_id);
    case gstate::preparing_rebalance: return fail(kerr::rebalance_in_progress);
    case gstate::completing_rebalance:
        if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(kerr::rebalance_in_progress));
        m->sync_waiter = slot;
        g.pending_sync.erase(m->id);
        if (g.is_leader(m->id)) {
            for (auto& [_, other] : g.members) other->assignment.clear();
            for (const auto& a : req.assignments)
                if (member* target = g.find(a.member_id)) target->assignment = a.assignment;
            g.st = gstate::stable;
            log::info("group '{}': generation {} is stable", g.id, g.generation);
            propagate_assignment(g);
        }
        return slot;
    case gstate::stable: {
        g.pending_sync.erase(m->id);
        SyncGroupResponse r;
        r.protocol_type = g.protocol_type;
        r.protocol_name = g.protocol_name;
        r.assignment = m->assignment;
        reset_session(*m);
        slot->set(std::move(r));
        return slot;
    }
    }
    return slot;
}

kafka::error_code group_manager::handle_heartbeat(const kafka::HeartbeatRequest& req, std::int16_t version) {
    if (_closed) return kerr::not_coordinator;
    sweep();
    if (req.group_id.empty()) return kerr::invalid_group_id;
    group* gp = find_group(req.group_id);
    if (!gp) return kerr::unknown_member_id;
    group& g = *gp;
    if (g.st == gstate::dead) return kerr::coordinator_not_available;
    std::optional<std::string> instance;
    if (version >= 3 && req.group_instance_id && !req.group_instance_id->empty()) instance = req.group_instance_id;
    if (g.fenced(req.member_id, instance)) return kerr::fenced_instance_id;
    member* m = g.find(req.member_id);
    if (!m) return kerr::unknown_member_id;
    if (req.generation_id != g.generation) return kerr::illegal_generation;
    switch (g.st) {
    case gstate::empty:
    case gstate::dead: return kerr::unknown_member_id;
    case gstate::completing_rebalance:
    case gstate::stable: reset_session(*m); return kerr::none;
    case gstate::preparing_rebalance: reset_session(*m); return kerr::rebalance_in_progress;
    }
    return kerr::none;
}

kafka::error_code group_manager::leave_one(group& g, std::string mid, const std::optional<std::string>& instance) {
    if (mid.empty() && instance) {
        auto s = g.static_members.find(*instance);
        if (s == g.static_members.end()) return kerr::unknown_member_id;
        mid = s->second;
    }
    if (auto p = g.pending.find(mid); p != g.pending.end()) {
        g.pending.erase(p);
        if (g.st == gstate::preparing_rebalance) try_complete_join(g);
        return kerr::none;
    }
    if (g.fenced(mid, instance)) return kerr::fenced_instance_id;
    if (!g.find(mid)) return kerr::unknown_member_id;
    remove_member_and_update(g, mid, "the member left the group");
    return kerr::none;
}

} // namespace skiff::broker::groups
