// A raw Postgres v3 client for the server tests: it builds frontend messages byte by byte and
// splits the backend's answers into (type, body) pairs, written independently of the codec so a
// codec bug cannot hide a server bug. Every read has a deadline: a hung server fails the test.
#pragma once

#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace skiff::test {

struct wire_msg {
    char type = 0;
    std::string body;
};

// ---- frontend messages ----
std::string startup_bytes(const std::vector<std::pair<std::string, std::string>>& params,
                          std::uint32_t version = 3u << 16);
std::string ssl_request_bytes();
std::string gssenc_request_bytes();
std::string cancel_request_bytes(std::int32_t pid, std::int32_t secret);
std::string query_bytes(const std::string& sql);
std::string parse_bytes(const std::string& name, const std::string& sql, const std::vector<std::uint32_t>& types = {});
std::string bind_bytes(const std::string& portal, const std::string& stmt, const std::vector<std::optional<std::string>>& params,
                       const std::vector<std::int16_t>& param_formats = {},
                       const std::vector<std::int16_t>& result_formats = {});
std::string describe_bytes(char kind, const std::string& name);
std::string close_bytes(char kind, const std::string& name);
std::string execute_bytes(const std::string& portal, std::int32_t max_rows = 0);
std::string sync_bytes();
std::string flush_bytes();
std::string terminate_bytes();
// Any typed message with the given body.
std::string typed_bytes(char type, const std::string& body);

// ---- reading backend messages ----
// A field of an ErrorResponse/NoticeResponse body ('C' SQLSTATE, 'M', 'S', 'V', 'H', 'D').
std::string error_field(const std::string& body, char field);
// The values of a DataRow body (nullopt = NULL).
std::vector<std::optional<std::string>> data_row_values(const std::string& body);
// Column names and type oids of a RowDescription body.
std::vector<std::pair<std::string, std::uint32_t>> row_description_columns(const std::string& body);
// The C string at the start of a body (CommandComplete tag).
std::string cstring_body(const std::string& body);
// "TDDCZ": the message types of a sequence, for compact checks.
std::string types_of(const std::vector<wire_msg>& msgs);

class wire_client {
public:
    static runtime::task<std::optional<wire_client>> connect(runtime::socket_address addr);
    // Connects and completes a startup as `user`; pid/secret from BackendKeyData.
    static runtime::task<std::optional<wire_client>> session(runtime::socket_address addr, const char* user = "alice");

    runtime::task<bool> send(std::string bytes);
    // One message, or nullopt on EOF, error or the deadline.
    runtime::task<std::optional<wire_msg>> read_msg(std::chrono::milliseconds deadline = std::chrono::seconds(10));
    // Messages up to and including the first of `type`, stopping early at EOF.
    runtime::task<std::vector<wire_msg>> read_until(char type, std::chrono::milliseconds deadline = std::chrono::seconds(10));
    // Reads a single raw byte (SSLRequest answer).
    runtime::task<std::optional<char>> read_byte();
    // True when the server closed the connection (reading yields EOF) before the deadline.
    runtime::task<bool> closed_by_server(std::chrono::milliseconds deadline = std::chrono::seconds(10));
    void close() { _s.close(); }

    std::int32_t pid = 0;
    std::int32_t secret = 0;
    std::vector<wire_msg> startup_messages;

private:
    runtime::tcp_stream _s;
    std::string _buf;
};

} // namespace skiff::test
