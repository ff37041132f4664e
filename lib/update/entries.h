// systemd-boot loader entries as A/B updates name them: sprout-GEN-SLOT[+LEFT[-DONE]].conf
// (docs/updates.md). Pure parsing and naming, no ESP access.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sprout::update {

// EntryName is a parsed entry file name.
struct EntryName {
  int generation = 0;
  char slot = 'a';       // 'a' or 'b'
  bool counted = false;  // carries a boot counter: on trial, or failed
  int tries_left = 0;    // with counted
  int tries_done = 0;    // with counted
  std::string file;      // the file name as found
};

// ParseEntryName reads "sprout-2-b+2-1.conf"; other names (not sprout's) give nullopt.
std::optional<EntryName> ParseEntryName(const std::string& file);

// TrialEntryName is the name a new entry starts with: "sprout-GEN-SLOT+TRIES.conf".
std::string TrialEntryName(int generation, char slot, int tries);

// CommittedName is the entry's name without its counter, what blessing renames it to.
std::string CommittedName(const EntryName& e);

// EntryState is how an entry stands.
enum class EntryState { kCommitted, kTrial, kFailed };

// StateOf: no counter is committed; a counter with tries left is on trial; +0 failed.
EntryState StateOf(const EntryName& e);

// DescribeState renders a state for status output ("trial: 2 tries left").
std::string DescribeState(const EntryName& e);

// EntryRootHash is the sprout.roothash= value of an entry's options line, or "".
std::string EntryRootHash(const std::string& entry_text);

// CmdlineWords are the words of a kernel command line (/proc/cmdline), empty ones dropped.
std::vector<std::string> CmdlineWords(const std::string& cmdline);

// EntryOptionsWords are the words of all of an entry's options lines (systemd-boot joins them).
std::vector<std::string> EntryOptionsWords(const std::string& entry_text);

// RootHashOfCmdline is the sprout.roothash= value of a kernel command line, or "".
std::string RootHashOfCmdline(const std::string& cmdline);

// Entry is one entry file with its text.
struct Entry {
  EntryName name;
  std::string text;
};

// BootedEntry is the entry whose root hash is the booted one: a counted one first (it
// is the one systemd-boot just tried), else a committed one; nullopt when none.
std::optional<Entry> BootedEntry(const std::vector<Entry>& entries, const std::string& booted_hash);

// NextBoot is the entry systemd-boot boots next by loader.conf's "default sprout-*":
// entries with tries left (or no counter) before failed ones, then the newest
// generation first; nullopt when there is none.
std::optional<EntryName> NextBoot(const std::vector<EntryName>& entries);

// HealthyStatus says whether sprout-firstboot's systemd status text of this boot means
// the node is healthy: a member of the cluster, or a worker with its credentials.
bool HealthyStatus(const std::string& status_text);

}  // namespace sprout::update
