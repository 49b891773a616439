// The Postgres v3 wire format, without I/O: framing and parsing of frontend messages (every read
// bounds-checked; a malformed message is an error string, never a crash) and builders that
// append backend messages to a buffer. Layouts follow "Message Formats" in the Postgres
// protocol documentation (chapter 55). Pure functions; any core or thread.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/pgwire/backend.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::pgwire::codec {

// Codes in the "version" word of an untyped startup-phase message.
inline constexpr std::uint32_t protocol_3_0 = 3u << 16;
inline constexpr std::uint32_t ssl_request_code = 80877103;
inline constexpr std::uint32_t gssenc_request_code = 80877104;
inline constexpr std::uint32_t cancel_request_code = 80877102;
// Postgres refuses startup packets above this (MAX_STARTUP_PACKET_LENGTH).
inline constexpr std::size_t max_startup_bytes = 10000;

// ---- framing ----

// One message at the front of a buffer. For startup-phase messages `type` is 0 and `body`
// starts after the length word.
struct frame {
    char type = 0;
    std::string_view body;
    std::size_t size = 0; // bytes consumed from the buffer
};

enum class frame_status { complete, need_more, bad_length, too_long };

struct frame_result {
    frame_status status = frame_status::need_more;
    frame f;
};

// A typed message: type byte, int32 length (counting itself), body. Lengths below 4 are
// bad_length; a message larger than `max_bytes` is too_long (known from the header alone).
frame_result next_message(std::string_view buf, std::size_t max_bytes);
// An untyped startup-phase message: int32 length, then the body (version code first).
frame_result next_startup(std::string_view buf);

// ---- frontend messages ----

struct startup_message {
    startup_message() = default;
    std::uint32_t code = 0; // protocol version or one of the request codes
    std::vector<std::pair<std::string, std::string>> params; // StartupMessage only
    std::int32_t cancel_pid = 0;                              // CancelRequest only
    std::int32_t cancel_secret = 0;
};
result<startup_message, std::string> parse_startup(std::string_view body);

struct parse_message {
    parse_message() = default;
    std::string statement;
    std::string query;
    std::vector<std::uint32_t> param_types;
};
struct bind_message {
    bind_message() = default;
    std::string portal;
    std::string statement;
    std::vector<std::int16_t> param_formats;
    std::vector<value> params; // raw bytes as sent; nullopt is NULL
    std::vector<std::int16_t> result_formats;
};
struct describe_message { // also Close: 'S' statement or 'P' portal
    describe_message() = default;
    char kind = 'S';
    std::string name;
};
struct execute_message {
    execute_message() = default;
    std::string portal;
    std::int32_t max_rows = 0;
};

result<std::string, std::string> parse_query(std::string_view body);
result<parse_message, std::string> parse_parse(std::string_view body);
result<bind_message, std::string> parse_bind(std::string_view body);
result<describe_message, std::string> parse_describe(std::string_view body); // and Close
result<execute_message, std::string> parse_execute(std::string_view body);

// True when a format-code list (Bind's parameter or result formats) asks only for text:
// empty, or every code 0.
bool all_text(const std::vector<std::int16_t>& formats) noexcept;

// ---- backend messages (appended to `out`) ----
// String fields are C strings on the wire: an embedded NUL would end them early, so builders
// drop NUL bytes from names, tags and messages.

void authentication_ok(std::string& out);
void parameter_status(std::string& out, std::string_view name, std::string_view value);
void backend_key_data(std::string& out, std::int32_t pid, std::int32_t secret);
void ready_for_query(std::string& out, char tx_status = 'I');
void row_description(std::string& out, const std::vector<column_desc>& cols);
void data_row(std::string& out, const row& r);
void command_complete(std::string& out, std::string_view tag);
void empty_query_response(std::string& out);
// severity: ERROR or FATAL (sent both as S and the non-localized V).
void error_response(std::string& out, const sql_error& e, std::string_view severity = "ERROR");
void notice_response(std::string& out, const sql_error& e, std::string_view severity = "NOTICE");
void parse_complete(std::string& out);
void bind_complete(std::string& out);
void close_complete(std::string& out);
void no_data(std::string& out);
void portal_suspended(std::string& out);
void parameter_description(std::string& out, const std::vector<std::uint32_t>& types);
// The newest minor version we speak and the startup options ("_pq_.*") we did not recognise.
void negotiate_protocol_version(std::string& out, std::int32_t newest_minor,
                                const std::vector<std::string>& unrecognized);

} // namespace skiff::pgwire::codec
