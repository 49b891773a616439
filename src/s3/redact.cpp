#include <skiff/s3/redact.hpp>
#include <skiff/core/ascii.hpp>

#include <skiff/s3/uri.hpp>

#include <algorithm>
#include <array>
#include <vector>

namespace skiff::s3 {

namespace {

bool istarts_with(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string redact_sigv4_authorization(std::string_view value) {
    // Components are separated by ',' with or without a following space (both are accepted
    // by AWS); rebuild them with the separator they came with.
    std::string out;
    size_t pos = 0;
    while (pos <= value.size()) {
        size_t comma = value.find(',', pos);
        std::string_view part = value.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        std::string_view trimmed = part;
        while (!trimmed.empty() && trimmed.front() == ' ') trimmed.remove_prefix(1);
        if (istarts_with(trimmed, "Signature=")) {
            out.append(part.substr(0, part.size() - trimmed.size()));
            out.append(trimmed.substr(0, 10));
            out.append(redacted);
        } else {
            out.append(part);
        }
        if (comma == std::string_view::npos) break;
        out.push_back(',');
        pos = comma + 1;
    }
    return out;
}

} // namespace

std::string redact_header(std::string_view name, std::string_view value) {
    if (iequals(name, "authorization")) {
        if (istarts_with(value, "AWS4-")) return redact_sigv4_authorization(value);
        auto space = value.find(' ');
        if (space == std::string_view::npos) return std::string(redacted);
        return std::string(value.substr(0, space + 1)) + std::string(redacted);
    }
    static constexpr std::array<std::string_view, 4> secret_headers{
        "proxy-authorization", "x-amz-security-token", "x-amz-s3session-token", "cookie"};
    for (auto h : secret_headers) {
        if (iequals(name, h)) return std::string(redacted);
    }
    return std::string(value);
}

std::string redact_url(std::string_view url) {
    static constexpr std::array<std::string_view, 3> secret_params{
        "X-Amz-Signature=", "X-Amz-Security-Token=", "X-Amz-S3session-Token="};
    std::string out;
    size_t pos = 0;
    while (pos < url.size()) {
        // A parameter starts at the beginning of a query string (after '?') or after '&'.
        size_t start = pos;
        bool at_param = start == 0 || url[start - 1] == '?' || url[start - 1] == '&';
        bool secret = false;
        if (at_param) {
            for (auto p : secret_params) {
                if (istarts_with(url.substr(start), p)) {
                    out.append(url.substr(start, p.size()));
                    out.append(redacted);
                    size_t end = url.find_first_of("&#", start);
                    pos = end == std::string_view::npos ? url.size() : end;
                    secret = true;
                    break;
                }
            }
        }
        if (!secret) {
            out.push_back(url[pos]);
            ++pos;
        }
    }
    return out;
}

std::string redact_text(std::string_view text, const credentials& creds) {
    std::vector<std::string> needles;
    for (const std::string* s : {&creds.secret_access_key, &creds.session_token}) {
        if (s->empty()) continue;
        needles.push_back(*s);
        std::string encoded = uri_encode(*s, true);
        if (encoded != *s) needles.push_back(std::move(encoded));
    }
    // Longest first, so a needle that contains another is replaced whole.
    std::sort(needles.begin(), needles.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    std::string out(text);
    for (const auto& needle : needles) {
        size_t at = 0;
        while ((at = out.find(needle, at)) != std::string::npos) {
            out.replace(at, needle.size(), redacted);
            at += redacted.size();
        }
    }
    return out;
}

} // namespace skiff::s3
