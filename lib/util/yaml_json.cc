#include "util/yaml_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <regex>
#include <set>
#include <vector>

namespace sprout {

namespace {

// ParseGoInt reads text as Go's strconv.ParseInt(text, 0, 64) does (the sign, then 0x,
// 0o or 0b, or a leading 0 for octal, else decimal); nullopt when it does not, or when it
// overflows int64.
std::optional<std::int64_t> ParseGoInt(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    base = 8;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  std::uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(INT64_MAX);
  if (!negative && magnitude > kMax) return std::nullopt;
  if (negative && magnitude > kMax + 1) return std::nullopt;
  if (negative) return magnitude == kMax + 1 ? INT64_MIN : -static_cast<std::int64_t>(magnitude);
  return static_cast<std::int64_t>(magnitude);
}

// ParseGoUint is strconv.ParseUint(text, 0, 64): no sign, the same prefixes.
std::optional<std::uint64_t> ParseGoUint(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    base = 8;
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
  }
  if (base != 10) {
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Number is a double as Go's encoding/json writes it: an integral value that fits an
// int64 is an integer (a Kubernetes int field refuses 80.0).
nlohmann::ordered_json Number(double d) {
  if (std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
  return d;
}

const std::set<std::string_view> kTrue{"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"};
const std::set<std::string_view> kFalse{"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"};
const std::set<std::string_view> kNull{"", "~", "null", "Null", "NULL"};
const std::set<std::string_view> kNotJson{".nan",  ".NaN",  ".NAN",  ".inf",  ".Inf",  ".INF",
                                          "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"};

constexpr const char* kStrTag = "tag:yaml.org,2002:str";

class Converter {
 public:
  Converter(const std::string& file, int line_offset, Diagnostics& diags)
      : file_(file), offset_(line_offset), diags_(diags) {}

  std::optional<nlohmann::ordered_json> Convert(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Null:
        return nlohmann::ordered_json(nullptr);
      case YAML::NodeType::Scalar:
        return Scalar(n);
      case YAML::NodeType::Sequence: {
        auto out = nlohmann::ordered_json::array();
        bool ok = true;
        for (const auto& item : n) {
          auto v = Convert(item);
          if (!v) {
            ok = false;
            continue;
          }
          out.push_back(std::move(*v));
        }
        if (!ok) return std::nullopt;
        return out;
      }
      case YAML::NodeType::Map:
        return Mapping(n);
      default:
        Report(n, "this value is undefined", "give it a value");
        return std::nullopt;
    }
  }

 private:
  void Report(const YAML::Node& n, const std::string& message, const std::string& hint) {
    auto m = n.Mark();
    if (m.line < 0) {
      diags_.Error({file_, 0, 0}, message, hint);
    } else {
      diags_.Error({file_, m.line + 1 + offset_, m.column + 1}, message, hint);
    }
  }

  std::optional<nlohmann::ordered_json> Scalar(const YAML::Node& n) {
    const std::string& tag = n.Tag();
    // "!" is a quoted or block scalar; an explicit !!str too: both are text.
    if (tag == "!" || tag == kStrTag) return nlohmann::ordered_json(n.Scalar());
    if (tag != "?" && !tag.starts_with("tag:yaml.org,2002:")) return nlohmann::ordered_json(n.Scalar());
    auto v = ResolvePlainScalar(n.Scalar());
    if (!v) {
      Report(n, "'" + n.Scalar() + "' is a floating-point value that JSON cannot hold",
             "quote it to make it text, or write a number");
    }
    return v;
  }

  // Key is the JSON name of a mapping key, as sigs.k8s.io/yaml writes a resolved key.
  std::optional<std::string> Key(const YAML::Node& k) {
    if (k.IsNull()) return "null";
    if (!k.IsScalar()) {
      Report(k, std::string("a key here is ") + (k.IsMap() ? "a mapping" : "a list") + ", which JSON cannot hold",
             "use a plain word as the key");
      return std::nullopt;
    }
    auto v = Scalar(k);
    if (!v) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    return v->dump();
  }

  std::optional<nlohmann::ordered_json> Mapping(const YAML::Node& n) {
    auto out = nlohmann::ordered_json::object();
    bool ok = true;
    std::set<std::string> explicit_keys;
    std::vector<std::pair<std::size_t, YAML::Node>> merges;  // (position, merged value)
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (it->first.IsScalar() && it->first.Tag() == "?" && it->first.Scalar() == "<<") {
        merges.emplace_back(out.size(), it->second);
        continue;
      }
      auto key = Key(it->first);
      if (!key) {
        ok = false;
        continue;
      }
      if (!explicit_keys.insert(*key).second) {
        Report(it->first, "key '" + *key + "' appears twice in this mapping",
               "keep one of them; YAML readers keep only one, and not all the same one");
        ok = false;
        continue;
      }
      auto v = Convert(it->second);
      if (!v) {
        ok = false;
        continue;
      }
      out[*key] = std::move(*v);
    }
    if (!ok) return std::nullopt;
    if (merges.empty()) return out;
    // Merge keys: the mapping's own keys win, then the merged mappings in their order.
    auto merged = nlohmann::ordered_json::object();
    auto add = [&](const nlohmann::ordered_json& from) {
      for (auto& [k, v] : from.items()) {
        if (!merged.contains(k) && !explicit_keys.contains(k)) merged[k] = v;
      }
    };
    std::size_t next = 0;
    std::size_t position = 0;
    for (auto& [k, v] : out.items()) {
      while (next < merges.size() && merges[next].first == position) {
        if (!MergeInto(merges[next].second, add)) ok = false;
        ++next;
      }
      merged[k] = v;
      ++position;
    }
    for (; next < merges.size(); ++next) {
      if (!MergeInto(merges[next].second, add)) ok = false;
    }
    if (!ok) return std::nullopt;
    return merged;
  }

  template <typename Add>
  bool MergeInto(const YAML::Node& value, Add& add) {
    std::vector<YAML::Node> sources;
    if (value.IsMap()) {
      sources.push_back(value);
    } else if (value.IsSequence()) {
      for (const auto& item : value) sources.push_back(item);
    }
    for (const auto& s : sources) {
      if (!s.IsMap()) {
        Report(value, "a merge key ('<<') takes a mapping or a list of mappings",
               "merge an anchored mapping: <<: *name");
        return false;
      }
    }
    if (sources.empty()) {
      Report(value, "a merge key ('<<') takes a mapping or a list of mappings", "merge an anchored mapping: <<: *name");
      return false;
    }
    for (const auto& s : sources) {
      auto v = Mapping(s);
      if (!v) return false;
      add(*v);
    }
    return true;
  }

  const std::string& file_;
  int offset_;
  Diagnostics& diags_;
};

}  // namespace

std::optional<nlohmann::ordered_json> ResolvePlainScalar(std::string_view s) {
  if (kNull.contains(s)) return nlohmann::ordered_json(nullptr);
  if (kTrue.contains(s)) return nlohmann::ordered_json(true);
  if (kFalse.contains(s)) return nlohmann::ordered_json(false);
  if (kNotJson.contains(s)) return std::nullopt;
  const char first = s.front();
  if (first == '.') {
    // go-yaml tries ParseFloat on what starts with '.', such as .5.
    static const std::regex dot_float(R"(^\.[0-9]+([eE][-+]?[0-9]+)?$)");
    if (std::regex_match(s.begin(), s.end(), dot_float)) {
      double d = std::strtod(std::string(s).c_str(), nullptr);
      // Out of a double's range, Go's ParseFloat fails and go-yaml keeps the text.
      return std::isinf(d) ? nlohmann::ordered_json(std::string(s)) : Number(d);
    }
    return nlohmann::ordered_json(std::string(s));
  }
  if (!((first >= '0' && first <= '9') || first == '+' || first == '-')) return nlohmann::ordered_json(std::string(s));
  std::string plain;
  for (char c : s) {
    if (c != '_') plain += c;
  }
  if (auto i = ParseGoInt(plain)) return nlohmann::ordered_json(*i);
  if (auto u = ParseGoUint(plain)) return nlohmann::ordered_json(*u);
  static const std::regex yaml_float(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(plain, yaml_float)) {
    double d = std::strtod(plain.c_str(), nullptr);
    return std::isinf(d) ? nlohmann::ordered_json(std::string(s)) : Number(d);
  }
  return nlohmann::ordered_json(std::string(s));
}

std::optional<nlohmann::ordered_json> YamlToJson(const YAML::Node& n, const std::string& file, int line_offset,
                                                 Diagnostics& diags) {
  Converter c(file, line_offset, diags);
  return c.Convert(n);
}

}  // namespace sprout
