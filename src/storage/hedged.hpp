// Runs one store request with a hedge (include/skiff/storage/hedge.hpp): the attempt starts;
// if it has not answered after the policy's delay and the policy grants a hedge, a second
// identical attempt starts; the first *success* wins and the other is stopped. When the first
// attempt fails before the delay, that failure is the answer (the caller's retry loop decides
// what next). When both fail, the answer is a failure, preferring precondition_failed (a
// create-only PUT whose twin landed first: the caller reads the object back).
//
// The attempts run in `gate` (the loser may still be finishing after run_hedged returned), so
// `attempt` must own or share everything it touches. Private to src/storage. One core.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/hedge.hpp>
#include <skiff/storage/object_store.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>

namespace skiff::storage::detail {

template <typename T>
struct hedge_race {
    runtime::oneshot<int> decided; // the index whose result is the answer
    std::optional<result<T, store_error>> res[2];
    runtime::time_point began[2]{};
    std::stop_source stops[2];
    int started = 0, finished = 0;
    bool done = false;
};

template <typename T>
using hedge_attempt = std::function<runtime::task<result<T, store_error>>(std::stop_token)>;

template <typename T>
runtime::task<void> hedge_runner(std::shared_ptr<hedge_race<T>> race, int i, hedge_attempt<T> attempt) {
    auto r = co_await attempt(race->stops[i].get_token());
    race->res[i] = std::move(r);
    ++race->finished;
    if (race->done) co_return;
    if (race->res[i]->has_value() || race->finished == race->started) {
        race->done = true;
        race->decided.set(i);
    }
}

// `attempt` is called with the stop token of its own attempt (it fires when the caller's `st`
// does, and for the loser). `kind_name` is for nothing but readability at call sites.
template <typename T>
runtime::task<result<T, store_error>> run_hedged(hedge_policy* policy, runtime::gate& gate, hedge_attempt<T> attempt,
                                                 std::stop_token st, bool* hedged = nullptr) {
    if (hedged) *hedged = false;
    if (!policy || !policy->config().enabled) co_return co_await attempt(st);
    policy->on_request();
    const auto t0 = runtime::reactor::local().now();
    auto race = std::make_shared<hedge_race<T>>();
    race->started = 1;
    race->began[0] = t0;
    if (!gate.spawn(hedge_runner<T>(race, 0, attempt))) co_return co_await attempt(st);
    std::stop_callback on_stop(st, [race] {
        race->stops[0].request_stop();
        race->stops[1].request_stop();
    });
    if (auto delay = policy->delay()) {
        auto first = co_await race->decided.wait(*delay, st);
        if (!first && first.error() == make_error_code(runtime::errc::timed_out) && !race->done &&
            policy->try_hedge()) {
            race->started = 2;
            race->began[1] = runtime::reactor::local().now();
            if (gate.spawn(hedge_runner<T>(race, 1, attempt))) {
                if (hedged) *hedged = true;
            } else {
                race->started = 1;
            }
        }
    }
    auto got = co_await race->decided.wait(st);
    if (!got) {
        race->stops[0].request_stop();
        race->stops[1].request_stop();
        co_return failure{store_error(errc::cancelled, "cancelled")};
    }
    const int winner = *got;
    race->stops[1 - winner].request_stop();
    auto answer = std::move(*race->res[winner]);
    if (answer) {
        // The winner's own time, not the race's: a hedged request's total would pull the p99 up
        // toward "slow request + hedge", and the next hedges would wait longer and longer.
        policy->record(runtime::reactor::local().now() - race->began[winner]);
        if (winner == 1) policy->on_win();
    } else if (race->res[1 - winner] && !*race->res[1 - winner] &&
               race->res[1 - winner]->error().code == errc::precondition_failed) {
        co_return failure{race->res[1 - winner]->error()};
    }
    co_return answer;
}

} // namespace skiff::storage::detail
