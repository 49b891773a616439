// The object_store contract, written once and run against every backend (local directory,
// S3 through the fake server). A backend's test file supplies a factory for fresh, empty
// stores and calls check_object_store_contract() from a TEST_CASE.
#pragma once

#include <skiff/storage/object_store.hpp>

#include <functional>
#include <memory>

namespace skiff::storage::contract {

// Owns a store and whatever it needs (a temporary directory, an S3 client).
class store_harness {
public:
    virtual ~store_harness() = default;
    virtual object_store& store() = 0;
};

// Builds a fresh, empty store. Called on the reactor thread inside the test's task, and the
// harness is destroyed there too (an S3 client must live and die on its reactor).
using store_factory = std::function<std::unique_ptr<store_harness>()>;

// Runs each contract case as a Catch2 SECTION, each with a fresh store and a fresh reactor.
void check_object_store_contract(const store_factory& make);

} // namespace skiff::storage::contract
