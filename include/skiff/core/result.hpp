// result<T, E>: a value or an error, the currency at module boundaries.
//
// std::expected is C++23 and clang 14 cannot compile libstdc++'s version, so skiff carries
// its own. It is deliberately small: construct from a value or from an error, test, read.
// Reading the wrong alternative is a programming error and aborts (never UB).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace skiff {

// Tag that makes "this is the error" explicit where T and E could be confused.
template <typename E>
struct failure {
    E error;
};
template <typename E>
failure(E) -> failure<E>;

// `co_return ok();` from any result<void, E> function.
struct ok_t {};
inline constexpr ok_t ok() noexcept { return {}; }

namespace detail {
[[noreturn]] inline void bad_result_access(const char* what) {
    std::fprintf(stderr, "skiff: bad result access: %s\n", what);
    std::abort();
}
} // namespace detail

template <typename T, typename E = std::error_code>
class [[nodiscard]] result {
public:
    using value_type = T;
    using error_type = E;

    template <typename U = T,
              typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                          !std::is_same_v<std::decay_t<U>, result> &&
                                          !std::is_same_v<std::decay_t<U>, failure<E>>>>
    result(U&& v) : _v(std::in_place_index<0>, std::forward<U>(v)) {} // NOLINT(implicit)

    template <typename G>
    result(failure<G> f) : _v(std::in_place_index<1>, std::move(f.error)) {} // NOLINT

    // The error converts implicitly where it cannot be mistaken for a value.
    result(const E& e) requires(!std::is_constructible_v<T, const E&>) // NOLINT
        : _v(std::in_place_index<1>, e) {}

    // An error_code enum (e.g. runtime::errc) converts straight into the error.
    template <typename Enum, typename = std::enable_if_t<std::is_error_code_enum_v<Enum> &&
                                                         std::is_same_v<E, std::error_code>>>
    result(Enum e) : _v(std::in_place_index<1>, make_error_code(e)) {} // NOLINT

    bool has_value() const noexcept { return _v.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    T& value() & {
        if (!has_value()) detail::bad_result_access("value() on error");
        return std::get<0>(_v);
    }
    const T& value() const& {
        if (!has_value()) detail::bad_result_access("value() on error");
        return std::get<0>(_v);
    }
    T&& value() && {
        if (!has_value()) detail::bad_result_access("value() on error");
        return std::get<0>(std::move(_v));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const E& error() const& {
        if (has_value()) detail::bad_result_access("error() on value");
        return std::get<1>(_v);
    }
    E&& error() && {
        if (has_value()) detail::bad_result_access("error() on value");
        return std::get<1>(std::move(_v));
    }

    template <typename U>
    T value_or(U&& fallback) const& {
        return has_value() ? std::get<0>(_v) : static_cast<T>(std::forward<U>(fallback));
    }

private:
    std::variant<T, E> _v;
};

// result<void>: success carries nothing.
template <typename E>
class [[nodiscard]] result<void, E> {
public:
    result() = default;
    result(ok_t) noexcept {} // NOLINT
    template <typename G>
    result(failure<G> f) : _err(std::move(f.error)), _ok(false) {} // NOLINT
    result(const E& e) : _err(e), _ok(false) {} // NOLINT
    template <typename Enum, typename = std::enable_if_t<std::is_error_code_enum_v<Enum> &&
                                                         std::is_same_v<E, std::error_code>>>
    result(Enum e) : _err(make_error_code(e)), _ok(false) {} // NOLINT

    bool has_value() const noexcept { return _ok; }
    explicit operator bool() const noexcept { return _ok; }
    void value() const {
        if (!_ok) detail::bad_result_access("value() on error");
    }
    const E& error() const& {
        if (_ok) detail::bad_result_access("error() on value");
        return _err;
    }
    E&& error() && {
        if (_ok) detail::bad_result_access("error() on value");
        return std::move(_err);
    }

private:
    E _err{};
    bool _ok = true;
};

} // namespace skiff
