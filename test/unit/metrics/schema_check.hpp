// A JSON Schema validator for the subset docs/metrics.schema.json uses: type, required,
// properties, additionalProperties, patternProperties, items, enum, const, minimum and local
// $ref ("#/$defs/..."). Unknown keywords are errors, so the schema cannot quietly rely on
// something this checker ignores.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace skiff::test {

class schema_checker {
public:
    explicit schema_checker(nlohmann::json schema) : _root(std::move(schema)) {}

    static schema_checker from_file(const std::string& path) {
        std::ifstream in(path);
        if (!in) throw std::runtime_error("cannot open schema " + path);
        std::stringstream ss;
        ss << in.rdbuf();
        return schema_checker(nlohmann::json::parse(ss.str()));
    }

    // Every violation, as "path: what". Empty when the document conforms.
    std::vector<std::string> validate(const nlohmann::json& doc) const {
        std::vector<std::string> errors;
        check(_root, doc, "$", errors, 0);
        return errors;
    }

private:
    const nlohmann::json& resolve(const std::string& ref) const {
        const std::string prefix = "#/$defs/";
        if (ref.rfind(prefix, 0) != 0) throw std::runtime_error("unsupported $ref " + ref);
        return _root.at("$defs").at(ref.substr(prefix.size()));
    }

    static bool has_type(const nlohmann::json& v, const std::string& t) {
        if (t == "object") return v.is_object();
        if (t == "array") return v.is_array();
        if (t == "string") return v.is_string();
        if (t == "boolean") return v.is_boolean();
        if (t == "null") return v.is_null();
        if (t == "number") return v.is_number();
        if (t == "integer") {
            if (v.is_number_integer()) return true;
            if (v.is_number_float()) {
                const double d = v.get<double>();
                return std::isfinite(d) && std::floor(d) == d;
            }
            return false;
        }
        throw std::runtime_error("unknown type " + t);
    }

    void check(const nlohmann::json& s, const nlohmann::json& v, const std::string& path,
               std::vector<std::string>& errors, int depth) const {
        if (depth > 64) throw std::runtime_error("schema recursion too deep");
        static const std::set<std::string> known = {
            "$schema", "$id", "title", "description", "$defs", "$ref", "type", "required", "properties",
            "additionalProperties", "patternProperties", "items", "enum", "const", "minimum"};
        for (auto it = s.begin(); it != s.end(); ++it) {
            if (!known.contains(it.key())) throw std::runtime_error("unsupported schema keyword " + it.key());
        }
        if (s.contains("$ref")) {
            check(resolve(s["$ref"].get<std::string>()), v, path, errors, depth + 1);
        }
        if (s.contains("type")) {
            bool ok = false;
            if (s["type"].is_string()) ok = has_type(v, s["type"].get<std::string>());
            else
                for (const auto& t : s["type"]) ok = ok || has_type(v, t.get<std::string>());
            if (!ok) {
                errors.push_back(path + ": expected type " + s["type"].dump() + ", got " + v.type_name());
                return;
            }
        }
        if (s.contains("const") && v != s["const"]) errors.push_back(path + ": expected " + s["const"].dump());
        if (s.contains("enum")) {
            bool found = false;
            for (const auto& e : s["enum"]) found = found || e == v;
            if (!found) errors.push_back(path + ": " + v.dump() + " is not one of " + s["enum"].dump());
        }
        if (s.contains("minimum") && v.is_number() && v.get<double>() < s["minimum"].get<double>()) {
            errors.push_back(path + ": " + v.dump() + " is below the minimum " + s["minimum"].dump());
        }
        if (v.is_object()) {
            if (s.contains("required")) {
                for (const auto& r : s["required"]) {
                    if (!v.contains(r.get<std::string>())) errors.push_back(path + ": missing " + r.get<std::string>());
                }
            }
            for (auto it = v.begin(); it != v.end(); ++it) {
                const std::string child = path + "." + it.key();
                bool matched = false;
                if (s.contains("properties") && s["properties"].contains(it.key())) {
                    matched = true;
                    check(s["properties"][it.key()], it.value(), child, errors, depth + 1);
                }
                if (s.contains("patternProperties")) {
                    for (auto p = s["patternProperties"].begin(); p != s["patternProperties"].end(); ++p) {
                        if (std::regex_search(it.key(), std::regex(p.key()))) {
                            matched = true;
                            check(p.value(), it.value(), child, errors, depth + 1);
                        }
                    }
                }
                if (!matched && s.contains("additionalProperties")) {
                    const auto& ap = s["additionalProperties"];
                    if (ap.is_boolean()) {
                        if (!ap.get<bool>()) errors.push_back(child + ": property not allowed");
                    } else {
                        check(ap, it.value(), child, errors, depth + 1);
                    }
                }
            }
        }
        if (v.is_array() && s.contains("items")) {
            for (std::size_t i = 0; i < v.size(); ++i) {
                check(s["items"], v[i], path + "[" + std::to_string(i) + "]", errors, depth + 1);
            }
        }
    }

    nlohmann::json _root;
};

inline std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += s + "\n";
    return out;
}

} // namespace skiff::test
