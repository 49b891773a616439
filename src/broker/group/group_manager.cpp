// The group table of one core: creation, lookup, retention sweep, member ids, close and stats.
#include "group_manager.hpp"

#include <skiff/core/hex.hpp>
#include <skiff/core/uuid.hpp>
#include <skiff/runtime/reactor.hpp>


#include <array>
#include <chrono>

namespace skiff::broker::groups {

group_manager::group_manager(storage::object_store& store, group_config cfg)
    : _store(store), _cfg(std::move(cfg)), _rng(std::random_device{}()) {}

std::int64_t group_manager::wall_ms() const {
    if (_cfg.wall_ms) return _cfg.wall_ms();
    return std::chrono::duration_cast<ms>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string group_manager::new_member_id(std::string_view prefix) {
    const auto b = random_uuid_v4(_rng);
    std::string id(prefix);
    id.push_back('-');
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) id.push_back('-'); // 8-4-4-4-12
        append_hex(id, b[i]);
    }
    return id;
}

group* group_manager::find_group(std::string_view id) {
    auto it = _groups.find(id);
    return it == _groups.end() ? nullptr : it->second.get();
}
group& group_manager::create_group(const std::string& id) {
    auto g = std::make_shared<group>(this, id);
    g->empty_since = now();
    auto* raw = g.get();
    _groups[id] = std::move(g);
    return *raw;
}

void group_manager::sweep() {
    auto t = now();
    if (t - _last_sweep < std::chrono::seconds(1)) return;
    _last_sweep = t;
    for (auto it = _groups.begin(); it != _groups.end();) {
        if (it->second->prunable() && t - it->second->empty_since >= _cfg.empty_group_retention)
            it = _groups.erase(it);
        else
            ++it;
    }
}

runtime::task<void> group_manager::close() {
    if (!_closed) {
        _closed = true;
        for (auto& [_, g] : _groups) {
            g->join_timer.cancel();
            g->sync_timer.cancel();
            g->pending.clear();
            for (auto& [mid, m] : g->members) {
                m->session.cancel();
                if (m->join_waiter)
                    std::exchange(m->join_waiter, nullptr)->set(join_error(kerr::not_coordinator, mid));
                if (m->sync_waiter)
                    std::exchange(m->sync_waiter, nullptr)->set(sync_error(kerr::not_coordinator));
            }
        }
    }
    co_await _writes.close();
}

group_stats group_manager::stats() const noexcept {
    group_stats st;
    st.groups = _groups.size();
    for (const auto& [_, g] : _groups) st.members += g->members.size();
    st.rebalances = _rebalances;
    st.offset_commits = _offset_commits;
    return st;
}

// The timers of group.hpp call into their group's manager.
void member::on_session_timer(void* self) {
    auto* m = static_cast<member*>(self);
    m->g->mgr->on_session_expired(*m->g, m->id);
}
void pending_member::on_expiry(void* self) {
    auto* p = static_cast<pending_member*>(self);
    p->g->mgr->on_pending_expired(*p->g, p->id);
}
void group::on_join_timer(void* self) {
    auto* g = static_cast<group*>(self);
    g->mgr->on_join_timer(*g);
}
void group::on_sync_timer(void* self) {
    auto* g = static_cast<group*>(self);
    g->mgr->on_sync_timer(*g);
}

} // namespace skiff::broker::groups
