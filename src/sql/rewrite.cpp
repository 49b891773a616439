#include "rewrite.hpp"

#include <skiff/core/ascii.hpp>

#include <cctype>

namespace skiff::sql {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80; }
bool ident_char(char c) { return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$'; }

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Length of a quoted run starting at s[i] (the quote char), closing quote included; doubled
// quotes stay inside. An unterminated run extends to the end.
std::size_t quoted_len(std::string_view s, std::size_t i) {
    char q = s[i];
    std::size_t j = i + 1;
    while (j < s.size()) {
        if (s[j] == q) {
            if (j + 1 < s.size() && s[j + 1] == q) {
                j += 2;
                continue;
            }
            return j + 1 - i;
        }
        ++j;
    }
    return s.size() - i;
}

// Length of a comment at s[i] ("--" or "/*"), 0 when none starts there.
std::size_t comment_len(std::string_view s, std::size_t i) {
    if (s.substr(i, 2) == "--") {
        auto nl = s.find('\n', i);
        return (nl == std::string_view::npos ? s.size() : nl) - i;
    }
    if (s.substr(i, 2) == "/*") {
        auto end = s.find("*/", i + 2);
        return (end == std::string_view::npos ? s.size() : end + 2) - i;
    }
    return 0;
}

std::size_t skip_space(std::string_view s, std::size_t i) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return i;
}

// An identifier or quoted identifier at i; returns its end (i when none).
std::size_t scan_ident(std::string_view s, std::size_t i) {
    if (i < s.size() && s[i] == '"') return i + quoted_len(s, i);
    std::size_t j = i;
    if (j < s.size() && ident_start(s[j]))
        while (j < s.size() && ident_char(s[j])) ++j;
    return j;
}

// A type name after "::": [schema.]name, multi-word names, (n[,m]) and [] suffixes.
std::size_t scan_type(std::string_view s, std::size_t i) {
    i = skip_space(s, i);
    std::size_t j = scan_ident(s, i);
    if (j == i) return i;
    while (j < s.size() && s[j] == '.') {
        auto k = scan_ident(s, j + 1);
        if (k == j + 1) break;
        i = j + 1;
        j = k;
    }
    auto word = lower(s.substr(i, j - i));
    auto next_word = [&](std::size_t from, std::string_view w) -> std::size_t {
        auto a = skip_space(s, from);
        auto b = scan_ident(s, a);
        return lower(s.substr(a, b - a)) == w ? b : from;
    };
    if (word == "double") j = next_word(j, "precision");
    if (word == "character") j = next_word(j, "varying");
    if (word == "timestamp" || word == "time") {
        auto k = next_word(j, "with");
        if (k == j) k = next_word(j, "without");
        if (k != j) {
            auto t = next_word(k, "time");
            auto z = next_word(t, "zone");
            if (t != k && z != t) j = z;
        }
    }
    auto k = skip_space(s, j);
    if (k < s.size() && s[k] == '(') {
        auto close = s.find(')', k);
        if (close != std::string_view::npos) j = close + 1;
    }
    while (true) {
        k = skip_space(s, j);
        if (s.substr(k, 2) == "[]") j = k + 2;
        else break;
    }
    return j;
}

const char* regexp_operator(std::string_view op) {
    if (op == "~") return " REGEXP ";
    if (op == "!~") return " NOT REGEXP ";
    if (op == "~*") return " MATCH ";
    if (op == "!~*") return " NOT MATCH ";
    return nullptr;
}

} // namespace

std::vector<std::string> split_statements(std::string_view sql) {
    std::vector<std::string> out;
    std::size_t start = 0, i = 0;
    bool meaningful = false;
    auto flush = [&](std::size_t end) {
        if (meaningful) {
            auto a = skip_space(sql, start);
            auto b = end;
            while (b > a && std::isspace(static_cast<unsigned char>(sql[b - 1]))) --b;
            out.emplace_back(sql.substr(a, b - a));
        }
        meaningful = false;
    };
    while (i < sql.size()) {
        char c = sql[i];
        if (c == '\'' || c == '"') {
            i += quoted_len(sql, i);
            meaningful = true;
        } else if (auto n = comment_len(sql, i)) {
            i += n;
        } else if (c == ';') {
            flush(i);
            start = ++i;
        } else {
            if (!std::isspace(static_cast<unsigned char>(c))) meaningful = true;
            ++i;
        }
    }
    flush(sql.size());
    return out;
}

std::string rewrite_postgres(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        char c = s[i];
        if (c == '\'' || c == '"') {
            auto n = quoted_len(s, i);
            out.append(s.substr(i, n));
            i += n;
            continue;
        }
        if (auto n = comment_len(s, i)) {
            out.append(s.substr(i, n));
            i += n;
            continue;
        }
        if (c == ':' && s.substr(i, 2) == "::") {
            auto j = scan_type(s, i + 2);
            if (j > i + 2) {
                i = j;
                continue;
            }
        }
        if (c == '!' || c == '~') {
            std::size_t j = i;
            if (s[j] == '!') ++j;
            if (j < s.size() && s[j] == '~') {
                ++j;
                if (j < s.size() && s[j] == '*') ++j;
                if (auto* op = regexp_operator(s.substr(i, j - i))) {
                    out += op;
                    i = j;
                    continue;
                }
            }
        }
        if (c == '$' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
            (out.empty() || !ident_char(out.back()))) {
            out += '?';
            ++i;
            continue;
        }
        if (ident_start(c)) {
            auto j = scan_ident(s, i);
            auto word = lower(s.substr(i, j - i));
            if (word == "operator") {
                auto k = skip_space(s, j);
                if (k < s.size() && s[k] == '(') {
                    auto close = s.find(')', k);
                    if (close != std::string_view::npos) {
                        auto inner = s.substr(k + 1, close - k - 1);
                        auto dot = inner.rfind('.');
                        auto op = inner.substr(dot == std::string_view::npos ? 0 : dot + 1);
                        while (!op.empty() && std::isspace(static_cast<unsigned char>(op.front()))) op.remove_prefix(1);
                        while (!op.empty() && std::isspace(static_cast<unsigned char>(op.back()))) op.remove_suffix(1);
                        if (auto* rop = regexp_operator(op)) out += rop;
                        else {
                            out += ' ';
                            out.append(op);
                            out += ' ';
                        }
                        i = close + 1;
                        continue;
                    }
                }
            } else if (word == "collate") {
                auto k = skip_space(s, j);
                auto e = scan_ident(s, k);
                auto name = lower(s.substr(k, e - k));
                if (name == "pg_catalog" && e < s.size() && s[e] == '.') {
                    auto k2 = e + 1;
                    e = scan_ident(s, k2);
                    name = lower(s.substr(k2, e - k2));
                }
                if (name == "default" || name == "\"default\"" || name == "\"c\"" || name == "\"posix\"") {
                    i = e;
                    continue;
                }
            } else if (word == "pg_catalog" && j < s.size() && s[j] == '.') {
                auto e = scan_ident(s, j + 1);
                auto k = skip_space(s, e);
                if (e > j + 1 && k < s.size() && s[k] == '(') {
                    i = j + 1; // drop the schema of a function call
                    continue;
                }
            } else if (word == "array" || word == "any") {
                // array(subquery) -> (subquery): a scalar subquery; x = any (list) -> x IN (list).
                auto k = skip_space(s, j);
                if (k < s.size() && s[k] == '(') {
                    if (word == "any") {
                        while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
                        if (!out.empty() && out.back() == '=') {
                            out.pop_back();
                            out += " IN ";
                        } else {
                            out += " IN ";
                        }
                    }
                    i = k;
                    continue;
                }
            } else if (word == "ilike") {
                out += "LIKE";
                i = j;
                continue;
            }
            out.append(s.substr(i, j - i));
            i = j;
            continue;
        }
        out += c;
        ++i;
    }
    return out;
}

classified classify(std::string_view stmt) {
    auto i = skip_space(stmt, 0);
    while (auto n = comment_len(stmt, i)) i = skip_space(stmt, i + n);
    auto j = scan_ident(stmt, i);
    auto first = lower(stmt.substr(i, j - i));
    classified c;
    if (first.empty() && i >= stmt.size()) {
        c.kind = statement_kind::empty;
        return c;
    }
    if (first == "set") {
        c.kind = statement_kind::set;
        c.tag = "SET";
    } else if (first == "reset") {
        c.kind = statement_kind::set;
        c.tag = "RESET";
    } else if (first == "begin") {
        c.kind = statement_kind::begin;
        c.tag = "BEGIN";
    } else if (first == "start") {
        c.kind = statement_kind::begin;
        c.tag = "START TRANSACTION";
    } else if (first == "commit" || first == "end") {
        c.kind = statement_kind::commit;
        c.tag = "COMMIT";
    } else if (first == "rollback" || first == "abort") {
        c.kind = statement_kind::rollback;
        c.tag = "ROLLBACK";
    } else if (first == "show") {
        c.kind = statement_kind::show;
        c.tag = "SHOW";
        auto rest = stmt.substr(j);
        std::string name;
        for (char ch : rest) {
            if (ch == ';') break;
            if (std::isspace(static_cast<unsigned char>(ch))) {
                if (!name.empty() && name.back() != '_') name += '_';
                continue;
            }
            if (ch == '"') continue;
            name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        }
        while (!name.empty() && name.back() == '_') name.pop_back();
        if (name == "transaction_isolation_level") name = "transaction_isolation";
        c.name = name;
    } else if (first == "discard") {
        c.kind = statement_kind::ignored;
        c.tag = "DISCARD ALL";
    } else if (first == "deallocate") {
        c.kind = statement_kind::ignored;
        c.tag = "DEALLOCATE";
    } else if (first == "listen" || first == "unlisten") {
        c.kind = statement_kind::ignored;
        c.tag = first == "listen" ? "LISTEN" : "UNLISTEN";
    }
    return c;
}

} // namespace skiff::sql
