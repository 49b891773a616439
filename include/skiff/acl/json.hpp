// The ACL bindings as JSON, for the store (docs/acl.md):
//
//   {"version":1,"acls":[{"resourceType":"Topic","resourceName":"orders","patternType":"Literal",
//     "principal":"User:alice","host":"*","operation":"Read","permissionType":"Allow"}, ...]}
//
// Member names are those of Kafka's AccessControlEntryRecord; values are Kafka's printed names
// (SecurityUtils.resourceTypeName and friends). Parsing is strict: exactly these members, none
// twice, strings only, version 1, every binding valid for CreateAcls (validate_new_binding),
// no binding twice. Each error is one sentence naming the place at fault. Pure; any core.
#pragma once

#include <skiff/acl/model.hpp>
#include <skiff/core/result.hpp>

#include <nlohmann/json_fwd.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::acl {

inline constexpr int store_format_version = 1;

nlohmann::json binding_to_json(const acl_binding& b);
result<acl_binding, std::string> binding_from_json(const nlohmann::json& j);

// Written in the order given (authorizer::bindings() is sorted, so the text is deterministic).
nlohmann::json acls_to_json(const std::set<acl_binding>& bindings);
nlohmann::json acls_to_json(const std::vector<acl_binding>& bindings);
std::string acls_to_json_text(const std::set<acl_binding>& bindings);

// The bindings in file order, ready for authorizer::replace_all.
result<std::vector<acl_binding>, std::string> acls_from_json(const nlohmann::json& j);
result<std::vector<acl_binding>, std::string> acls_from_json_text(std::string_view text);

} // namespace skiff::acl
