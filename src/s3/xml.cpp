#include <skiff/s3/xml.hpp>

#include <skiff/core/parse_int.hpp>
#include <skiff/core/percent.hpp>
#include <skiff/core/printable.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>
#include <pugixml.hpp>

namespace skiff::s3 {
namespace {

constexpr std::size_t max_error_document_size = 1024 * 1024;

// Whitespace-only text matters in keys (" " is a valid key), so such text nodes are kept when
// they are an element's only child. EOL normalisation stays on: that is XML 1.0, and S3
// writes CR as a character reference, which normalisation leaves alone.
constexpr unsigned parse_options = pugi::parse_default | pugi::parse_ws_pcdata_single;

error bad_response(std::string message) {
    error e;
    e.code = errc::bad_response;
    e.message = std::move(message);
    return e;
}

std::string_view trim(std::string_view s) {
    constexpr std::string_view ws = " \t\r\n";
    const auto first = s.find_first_not_of(ws);
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(ws);
    return s.substr(first, last - first + 1);
}

std::string_view text_of(const pugi::xml_node& parent, const char* name) {
    return parent.child(name).child_value();
}

// Shortens untrusted text quoted in a message so a hostile server cannot flood logs.
std::string quote_for_message(std::string_view s) { return printable(s, 64); }

// S3's EncodingType=url follows form encoding ('+' is a space, a literal '+' arrives as %2B),
// as botocore's unquote_plus assumes; servers that write %20 decode the same way.
std::optional<std::string> url_decode(std::string_view s) {
    auto decoded = percent_decode(s, plus_sign::space, bad_escape::reject);
    if (!decoded) return std::nullopt;
    return std::move(*decoded);
}

// XML text may carry whitespace around a number (pretty-printed documents).
std::optional<std::uint64_t> parse_trimmed_u64(std::string_view s) { return parse_u64(trim(s)); }

std::optional<bool> parse_bool(std::string_view s) {
    s = trim(s);
    if (s == "true") return true;
    if (s == "false") return false;
    return std::nullopt;
}

bool has_element_sibling(const pugi::xml_node& node) {
    for (pugi::xml_node n = node.next_sibling(); n; n = n.next_sibling()) {
        if (n.type() == pugi::node_element) return true;
    }
    return false;
}

bool load(pugi::xml_document& doc, std::string_view body) {
    const auto res = doc.load_buffer(body.data(), body.size(), parse_options, pugi::encoding_utf8);
    return static_cast<bool>(res);
}

} // namespace

result<list_page, error> parse_list_objects_v2(std::string_view body) {
    if (body.empty()) return failure{bad_response("empty ListObjectsV2 response")};
    if (body.size() > max_xml_document_size) {
        return failure{
            bad_response(fmt::format("ListObjectsV2 response of {} bytes exceeds the {} byte limit",
                                     body.size(), max_xml_document_size))};
    }
    pugi::xml_document doc;
    {
        const auto res = doc.load_buffer(body.data(), body.size(), parse_options, pugi::encoding_utf8);
        if (!res) {
            return failure{bad_response(fmt::format(
                "ListObjectsV2 response is not valid XML ({} at offset {})", res.description(), res.offset))};
        }
    }
    const pugi::xml_node root = doc.document_element();
    // pugixml accepts several top-level elements; XML does not, and neither do we.
    if (has_element_sibling(root)) {
        return failure{bad_response("ListObjectsV2 response is not valid XML (more than one root element)")};
    }
    if (std::string_view(root.name()) != "ListBucketResult") {
        return failure{bad_response(
            fmt::format("ListObjectsV2 response has root element <{}>, expected <ListBucketResult>",
                        quote_for_message(root.name())))};
    }

    const bool url_encoded = trim(text_of(root, "EncodingType")) == "url";
    auto decode = [&](std::string_view raw, std::string_view what) -> result<std::string, error> {
        if (!url_encoded) return std::string(raw);
        auto decoded = url_decode(raw);
        if (!decoded) {
            return failure{bad_response(fmt::format("ListObjectsV2 response has a badly URL-encoded {} '{}'",
                                                    what, quote_for_message(raw)))};
        }
        return std::move(*decoded);
    };

    list_page page;
    for (const pugi::xml_node contents : root.children("Contents")) {
        const pugi::xml_node key_node = contents.child("Key");
        if (!key_node) return failure{bad_response("ListObjectsV2 response has an object without <Key>")};
        auto key = decode(key_node.child_value(), "key");
        if (!key) return failure{std::move(key).error()};
        if (key->empty())
            return failure{bad_response("ListObjectsV2 response has an object with an empty key")};

        const pugi::xml_node size_node = contents.child("Size");
        if (!size_node) {
            return failure{bad_response(
                fmt::format("ListObjectsV2 response has no <Size> for key '{}'", quote_for_message(*key)))};
        }
        const auto size = parse_trimmed_u64(size_node.child_value());
        if (!size) {
            return failure{bad_response(
                fmt::format("ListObjectsV2 response has an invalid size '{}' for key '{}'",
                            quote_for_message(size_node.child_value()), quote_for_message(*key)))};
        }
        object_info info;
        info.key = std::move(*key);
        info.size = *size;
        info.etag = std::string(text_of(contents, "ETag"));
        info.last_modified = std::string(trim(text_of(contents, "LastModified")));
        page.objects.push_back(std::move(info));
    }

    for (const pugi::xml_node cp : root.children("CommonPrefixes")) {
        const pugi::xml_node prefix_node = cp.child("Prefix");
        if (!prefix_node) {
            return failure{bad_response("ListObjectsV2 response has <CommonPrefixes> without <Prefix>")};
        }
        auto prefix = decode(prefix_node.child_value(), "common prefix");
        if (!prefix) return failure{std::move(prefix).error()};
        page.common_prefixes.push_back(std::move(*prefix));
    }

    const pugi::xml_node truncated_node = root.child("IsTruncated");
    if (truncated_node) {
        const auto truncated = parse_bool(truncated_node.child_value());
        if (!truncated) {
            return failure{
                bad_response(fmt::format("ListObjectsV2 response has an invalid <IsTruncated> '{}'",
                                         quote_for_message(truncated_node.child_value())))};
        }
        page.is_truncated = *truncated;
    }
    // The token is opaque and never URL-encoded, even with EncodingType=url.
    page.next_continuation_token = std::string(text_of(root, "NextContinuationToken"));
    if (page.is_truncated && page.next_continuation_token.empty()) {
        return failure{
            bad_response("ListObjectsV2 response is truncated but has no <NextContinuationToken>")};
    }

    if (const pugi::xml_node sa = root.child("StartAfter")) {
        auto start_after = decode(sa.child_value(), "StartAfter");
        if (!start_after) return failure{std::move(start_after).error()};
        page.start_after = std::move(*start_after);
    }

    const std::size_t returned = page.objects.size() + page.common_prefixes.size();
    if (const pugi::xml_node kc = root.child("KeyCount")) {
        const auto count = parse_trimmed_u64(kc.child_value());
        if (!count || *count > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
            return failure{bad_response(fmt::format("ListObjectsV2 response has an invalid <KeyCount> '{}'",
                                                    quote_for_message(kc.child_value())))};
        }
        page.key_count = static_cast<int>(*count);
    } else {
        // Some S3-compatible servers omit KeyCount; what came back is the count.
        page.key_count = static_cast<int>(std::min<std::size_t>(returned, std::numeric_limits<int>::max()));
    }
    return page;
}

result<session_credentials, error> parse_create_session(std::string_view body) {
    pugi::xml_document doc;
    if (body.size() > max_error_document_size || !load(doc, body)) {
        return failure{bad_response("CreateSession: the answer is not an XML document")};
    }
    const auto root = doc.child("CreateSessionResult");
    if (!root) return failure{bad_response("CreateSession: the answer is not a CreateSessionResult")};
    const auto c = root.child("Credentials");
    session_credentials out;
    out.access_key_id = std::string(trim(text_of(c, "AccessKeyId")));
    out.secret_access_key = std::string(trim(text_of(c, "SecretAccessKey")));
    out.session_token = std::string(trim(text_of(c, "SessionToken")));
    out.expiration = std::string(trim(text_of(c, "Expiration")));
    // Names only: the values are secrets.
    for (auto [name, v] : {std::pair<const char*, const std::string*>{"AccessKeyId", &out.access_key_id},
                           {"SecretAccessKey", &out.secret_access_key},
                           {"SessionToken", &out.session_token},
                           {"Expiration", &out.expiration}}) {
        if (v->empty()) return failure{bad_response(fmt::format("CreateSession: the answer has no {}", name))};
    }
    return out;
}

std::optional<s3_error_body> parse_error_body(std::string_view body) {
    if (body.empty() || body.size() > max_error_document_size) return std::nullopt;
    pugi::xml_document doc;
    if (!load(doc, body)) return std::nullopt;
    const pugi::xml_node root = doc.document_element();
    if (std::string_view(root.name()) != "Error") return std::nullopt;

    s3_error_body out;
    out.code = std::string(trim(text_of(root, "Code")));
    out.message = std::string(trim(text_of(root, "Message")));
    out.request_id = std::string(trim(text_of(root, "RequestId")));
    out.resource = std::string(text_of(root, "Resource"));
    out.bucket_name = std::string(text_of(root, "BucketName"));
    out.key = std::string(text_of(root, "Key"));
    out.endpoint = std::string(trim(text_of(root, "Endpoint")));
    out.region = std::string(trim(text_of(root, "Region")));
    out.request_time = std::string(trim(text_of(root, "RequestTime")));
    out.server_time = std::string(trim(text_of(root, "ServerTime")));
    return out;
}

} // namespace skiff::s3
