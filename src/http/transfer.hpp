// One HTTP exchange on one curl easy handle: option setup from a request, the easy handle's
// data callbacks (request body out, status/headers/body in), and the outcome.
//
// Private to src/http. A transfer lives in the frame of the coroutine awaiting it; its
// address is the easy handle's CURLOPT_PRIVATE, so the multi glue finds it from curl's
// completion messages. The callbacks here only copy bytes and record state: they never call
// libcurl and never resume anything.
#pragma once

#include <skiff/http/client.hpp>

#include <curl/curl.h>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::http::detail {

// Parses the header lines curl hands to CURLOPT_HEADERFUNCTION, one call per line.
// Every status line ("HTTP/1.1 100 Continue", then "HTTP/1.1 200 OK") starts a new block and
// drops what the previous one collected, so interim 1xx headers never leak into the final
// response. Names are lowercased and values trimmed (RFC 9110 5.5: surrounding whitespace is
// not part of a field value); an obs-fold continuation line (RFC 9112 5.2) is joined to the
// previous value with one space.
class header_parser {
public:
    enum class verdict { more, end_of_block };
    verdict feed(std::string_view line);

    int status() const noexcept { return _status; }
    header_list& headers() noexcept { return _headers; }
    // Content-Length of the current block, if it had a well-formed one.
    std::optional<std::uint64_t> content_length() const noexcept { return _content_length; }

private:
    int _status = 0;
    header_list _headers;
    std::optional<std::uint64_t> _content_length;
};

class transfer {
public:
    transfer(request req, std::size_t max_response_bytes);
    ~transfer();
    transfer(const transfer&) = delete;
    transfer& operator=(const transfer&) = delete;

    // Creates the easy handle and sets every option; on failure the transfer must not be
    // added to a multi handle and the error says which option curl refused.
    std::optional<transport_error> setup(const client_config& cfg);

    CURL* easy() const noexcept { return _easy; }
    // curl_easy_cleanup; the multi glue calls it right after curl_multi_remove_handle so a
    // finished or cancelled transfer holds no curl resources while its coroutine waits to run.
    void release_easy() noexcept;

    // Outcome, recorded by the multi glue (never from inside a curl callback).
    void finished(CURLcode code, long status) noexcept {
        _code = code;
        _curl_status = status;
        done = true;
    }
    void cancelled_by_caller() noexcept {
        _cancelled = true;
        done = true;
    }
    // Failed before reaching curl's multi handle (setup or add_handle).
    void failed_to_start(transport_error e) {
        _start_error = std::move(e);
        done = true;
    }
    bool is_cancelled() const noexcept { return _cancelled; }

    // The result for the caller. Call once, after `done`.
    result<response, transport_error> take_result();

    // Set by the multi glue: who to resume, and whether the outcome is in.
    std::coroutine_handle<> waiter;
    bool done = false;

private:
    static std::size_t on_header(char* buf, std::size_t size, std::size_t n, void* self) noexcept;
    static std::size_t on_write(char* buf, std::size_t size, std::size_t n, void* self) noexcept;
    static std::size_t on_read(char* buf, std::size_t size, std::size_t n, void* self) noexcept;
    static int on_seek(void* self, curl_off_t offset, int origin) noexcept;

    request _req;
    std::size_t _max_body;
    bool _head = false;
    CURL* _easy = nullptr;
    curl_slist* _header_list = nullptr;

    // Request body cursor for READFUNCTION; SEEKFUNCTION rewinds it when curl resends the
    // request (a reused keep-alive connection that turned out dead, for instance).
    std::size_t _body_offset = 0;

    header_parser _parser;
    std::string _body;
    bool _too_large = false;
    bool _sink_refused = false;

    CURLcode _code = CURLE_OK;
    long _curl_status = 0;
    bool _cancelled = false;
    std::optional<transport_error> _start_error;
    char _errbuf[CURL_ERROR_SIZE] = {};
};

} // namespace skiff::http::detail
