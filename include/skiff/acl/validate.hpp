// Validation of a binding before CreateAcls stores it.
//
// Kafka splits these checks between AclApis.handleCreateAcls (cluster name, empty name) and
// AclControlManager.validateNewAcl (types); skiff adds two that Kafka leaves to later failures
// or to nobody: the principal must be "Type:name" (StandardAcl.kafkaPrincipal throws on it
// only when the ACL is used), and the host must be "*" or an IPv4/IPv6 literal (Kafka accepts
// any string, which then never matches). Pure; any core or thread.
#pragma once

#include <skiff/acl/errc.hpp>
#include <skiff/acl/model.hpp>
#include <skiff/core/result.hpp>

#include <string_view>

namespace skiff::acl {

// ok, or errc::invalid_binding with Kafka's sentence (INVALID_REQUEST on the wire). Checked in
// this order, the first failure wins:
//   resource type UNKNOWN/ANY        "Invalid resourceType ANY"
//   pattern type not LITERAL/PREFIXED "Invalid patternType MATCH"
//   operation UNKNOWN/ANY            "Invalid operation ANY"
//   permission not DENY/ALLOW        "Invalid permissionType ANY"
//   empty resource name              "Invalid empty resource name"
//   CLUSTER named otherwise          "The only valid name for the CLUSTER resource is kafka-cluster"
//   principal without "Type:name"    "Invalid principal ..."
//   host neither "*" nor an IP       "Invalid host ..."
result<void, acl_error> validate_new_binding(const acl_binding& b);

// "*", or an IPv4 dotted quad / IPv6 literal that inet_pton accepts.
bool valid_host(std::string_view host) noexcept;

} // namespace skiff::acl
