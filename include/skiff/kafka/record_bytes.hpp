// The bytes of a `records` field (a Kafka record set): either owned, or borrowed from the buffer
// the message was decoded from.
//
// Why: a Produce request's record set is most of its frame. Decoding it as a std::string copied
// every produced byte once more before the append copied it into its segment; the broker now
// decodes Produce with borrowing on (kafka::reader::borrow_records) and keeps the frame alive
// until the append is done, so a produced byte is copied once, into the segment. Everything
// else (Fetch answers the broker builds, what clients build and decode) owns its bytes, as a
// std::string did: assigning a std::string makes an owning value.
//
// A borrowed value is only valid while the decoded buffer lives; copying one copies the view,
// not the bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace skiff::kafka {

class record_bytes {
public:
    record_bytes() = default;
    // Owning (implicit, so that `field = some_string` keeps working).
    record_bytes(std::string s) : _owned(std::move(s)) {}
    record_bytes(const char* s) : _owned(s) {}

    // A view of bytes someone else keeps alive.
    static record_bytes borrow(std::span<const char> bytes) noexcept {
        record_bytes r;
        r._view = std::string_view(bytes.data(), bytes.size());
        r._borrowed = true;
        return r;
    }

    bool borrowed() const noexcept { return _borrowed; }
    std::string_view view() const noexcept { return _borrowed ? _view : std::string_view(_owned); }
    const char* data() const noexcept { return view().data(); }
    std::size_t size() const noexcept { return view().size(); }
    bool empty() const noexcept { return view().empty(); }
    operator std::string_view() const noexcept { return view(); }
    operator std::span<const char>() const noexcept {
        auto v = view();
        return {v.data(), v.size()};
    }
    // The owned string (a copy is made first when borrowed), for callers that keep the bytes.
    std::string& own() {
        if (_borrowed) {
            _owned.assign(_view);
            _view = {};
            _borrowed = false;
        }
        return _owned;
    }

    friend bool operator==(const record_bytes& a, const record_bytes& b) noexcept { return a.view() == b.view(); }
    friend bool operator==(const record_bytes& a, std::string_view b) noexcept { return a.view() == b; }
    // Exact for std::string, which converts both to string_view and to record_bytes.
    friend bool operator==(const record_bytes& a, const std::string& b) noexcept { return a.view() == b; }

private:
    std::string _owned;
    std::string_view _view;
    bool _borrowed = false;
};

} // namespace skiff::kafka
