// Small text helpers: edit distance for "did you mean", sizes, trimming.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sprout {

// EditDistance is the Levenshtein distance between a and b.
std::size_t EditDistance(std::string_view a, std::string_view b);

// ClosestMatch returns the candidate nearest to word, if it is near enough to be a typo.
std::optional<std::string> ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// ParseSize reads "512", "64KiB", "128MiB", "2GiB" (also K/M/G/T, KB/MB/GB as powers of 1024).
std::optional<std::uint64_t> ParseSize(std::string_view text);

// HumanSize renders bytes as "1.5 GiB".
std::string HumanSize(std::uint64_t bytes);

// Trim removes leading and trailing white space.
std::string_view Trim(std::string_view s);

// Split cuts s at every sep; empty fields are kept.
std::vector<std::string> Split(std::string_view s, char sep);

// StartsWith and EndsWith exist in C++20 std::string_view; these read better at call sites.
inline bool HasPrefix(std::string_view s, std::string_view p) { return s.starts_with(p); }

// Join concatenates parts with sep between them.
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

// WithoutTimings replaces each number followed by " ms" with "N ms": curl's errors say
// how long a failed connect took ("... after 9 ms: ..."), so two reports of the same
// problem differ only there; a retry loop compares them without it and logs once.
std::string WithoutTimings(std::string_view s);

// UtcTime renders Unix seconds in UTC with a strftime format, such as
// "%Y-%m-%dT%H:%M:%SZ" (RFC 3339).
std::string UtcTime(std::int64_t unix_seconds, const char* format);

// Hex renders bytes as lower-case hexadecimal.
std::string Hex(const std::uint8_t* data, std::size_t size);

// Base64Encode encodes bytes (standard alphabet, padded).
std::string Base64Encode(std::string_view bytes);
// Base64Decode decodes standard padded base64, or nullopt if text is not that.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace sprout
