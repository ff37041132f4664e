#include "update/entries.h"

#include <cctype>

#include "util/text.h"

namespace sprout::update {

namespace {

// Number reads a non-negative decimal at s[i..], advancing i; nullopt when none.
std::optional<int> Number(const std::string& s, std::size_t& i) {
  std::size_t start = i;
  long v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0) {
    v = v * 10 + (s[i] - '0');
    if (v > 1000000) return std::nullopt;
    ++i;
  }
  if (i == start) return std::nullopt;
  return static_cast<int>(v);
}

std::string WordValue(std::string text, const std::string& key) {
  for (char& c : text) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  for (const auto& w : Split(text, ' ')) {
    if (w.starts_with(key)) return w.substr(key.size());
  }
  return "";
}

}  // namespace

std::optional<EntryName> ParseEntryName(const std::string& file) {
  const std::string prefix = "sprout-", suffix = ".conf";
  if (!file.starts_with(prefix) || !file.ends_with(suffix)) return std::nullopt;
  const std::string body = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
  EntryName e;
  e.file = file;
  std::size_t i = 0;
  auto gen = Number(body, i);
  if (!gen || *gen < 1 || i + 2 > body.size() || body[i] != '-') return std::nullopt;
  e.generation = *gen;
  e.slot = body[i + 1];
  if (e.slot != 'a' && e.slot != 'b') return std::nullopt;
  i += 2;
  if (i == body.size()) return e;
  if (body[i] != '+') return std::nullopt;
  ++i;
  auto left = Number(body, i);
  if (!left) return std::nullopt;
  e.counted = true;
  e.tries_left = *left;
  if (i < body.size()) {
    if (body[i] != '-') return std::nullopt;
    ++i;
    auto done = Number(body, i);
    if (!done) return std::nullopt;
    e.tries_done = *done;
  }
  if (i != body.size()) return std::nullopt;
  return e;
}

std::string TrialEntryName(int generation, char slot, int tries) {
  return "sprout-" + std::to_string(generation) + "-" + std::string(1, slot) + "+" + std::to_string(tries) + ".conf";
}

std::string CommittedName(const EntryName& e) {
  return "sprout-" + std::to_string(e.generation) + "-" + std::string(1, e.slot) + ".conf";
}

EntryState StateOf(const EntryName& e) {
  if (!e.counted) return EntryState::kCommitted;
  return e.tries_left > 0 ? EntryState::kTrial : EntryState::kFailed;
}

std::string DescribeState(const EntryName& e) {
  switch (StateOf(e)) {
    case EntryState::kCommitted:
      return "committed";
    case EntryState::kTrial:
      return "trial: " + std::to_string(e.tries_left) + (e.tries_left == 1 ? " try" : " tries") + " left, " +
             std::to_string(e.tries_done) + " done";
    case EntryState::kFailed:
      return "failed: no tries left after " + std::to_string(e.tries_done) + " boots";
  }
  return "?";
}

std::string EntryRootHash(const std::string& entry_text) { return WordValue(entry_text, "sprout.roothash="); }

std::string RootHashOfCmdline(const std::string& cmdline) { return WordValue(cmdline, "sprout.roothash="); }

std::vector<std::string> CmdlineWords(const std::string& cmdline) {
  std::vector<std::string> out;
  for (const auto& w : Split(std::string(Trim(cmdline)), ' ')) {
    if (!w.empty()) out.push_back(w);
  }
  return out;
}

std::vector<std::string> EntryOptionsWords(const std::string& entry_text) {
  std::vector<std::string> out;
  for (const auto& raw : Split(entry_text, '\n')) {
    const std::string line(Trim(raw));
    if (!line.starts_with("options ")) continue;
    for (auto& w : CmdlineWords(line.substr(8))) out.push_back(std::move(w));
  }
  return out;
}

std::optional<Entry> BootedEntry(const std::vector<Entry>& entries, const std::string& booted_hash) {
  if (booted_hash.empty()) return std::nullopt;
  std::optional<Entry> committed;
  for (const auto& e : entries) {
    if (EntryRootHash(e.text) != booted_hash) continue;
    if (e.name.counted) return e;
    if (!committed) committed = e;
  }
  return committed;
}

std::optional<EntryName> NextBoot(const std::vector<EntryName>& entries) {
  std::optional<EntryName> best;
  auto rank = [](const EntryName& e) { return std::pair{StateOf(e) != EntryState::kFailed, e.generation}; };
  for (const auto& e : entries) {
    if (!best || rank(e) > rank(*best)) best = e;
  }
  return best;
}

bool HealthyStatus(const std::string& status_text) {
  std::string s(Trim(status_text));
  return s == "member" || s.starts_with("worker: credentials saved");
}

}  // namespace sprout::update
