// The parser of one profile file (a Layer), shared by profile.cc, which merges the
// layers of an extends: chain, and the files that parse its sections. Internal to
// lib/profile.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profile/profile.h"

namespace sprout {

// Layer is what one profile file says by itself, before merging with what it extends.
struct Layer {
  std::filesystem::path file;
  std::optional<std::filesystem::path> extends;
  Location extends_where;
  std::optional<std::string> name, description, hostname;
  std::optional<std::filesystem::path> base;
  Location base_where;
  std::optional<Role> role;
  std::optional<Arch> arch;
  Location arch_where;
  std::optional<std::vector<Format>> formats;
  std::vector<std::string> cmdline;
  std::vector<std::filesystem::path> overlays;
  std::vector<ProfileFile> files;
  std::vector<ProfileImage> images;
  std::vector<ProfileWorkload> workloads;
  std::optional<std::uint64_t> esp_size, state_size, root_size;
  std::optional<StateEncryption> state_encryption;
  std::optional<WithoutTpm> without_tpm;
  Location without_tpm_where;
  std::optional<std::int64_t> source_date_epoch;
  std::optional<std::int64_t> update_serial;
  std::optional<std::string> update_profile;
  std::optional<std::filesystem::path> shoot;
  Location shoot_where;
  std::vector<std::filesystem::path> static_pods;
  std::vector<std::string> without_static_pods;
  std::optional<PodHost> pod_host;
  std::optional<KubeletSettings> kubelet;
  std::optional<BackupProfile> backup;
  std::optional<std::int64_t> cert_validity;  // certificates.validity, seconds
};

// KindName names a YAML node's kind for messages ("a mapping", "a list", ...).
const char* KindName(const YAML::Node& n);

// LayerParser turns one file's YAML into a Layer, recording every problem.
class LayerParser {
 public:
  // file is the name messages show; dir is the absolute folder relative paths start at.
  LayerParser(std::filesystem::path file, std::filesystem::path dir, Diagnostics& diags)
      : file_(std::move(file)), dir_(std::move(dir)), diags_(diags) {}

  Layer Parse(const YAML::Node& root);

 private:
  Location At(const YAML::Node& n) const;
  std::filesystem::path Resolve(const std::string& s) const;
  static bool ValidName(const std::string& s);
  void CheckKeys(const YAML::Node& map, const std::string& context, const std::vector<std::string>& allowed);
  bool ExpectMap(const YAML::Node& n, const std::string& what);
  std::optional<std::string> String(const YAML::Node& n, const std::string& what);
  std::vector<YAML::Node> Seq(const YAML::Node& n, const std::string& what);
  std::vector<std::string> StringList(const YAML::Node& n, const std::string& what);
  std::optional<std::uint64_t> Size(const YAML::Node& n, const std::string& what, std::uint64_t minimum);
  // Folders are the folders the list n names (relative paths start at dir_), item_what
  // naming one item in errors; one that is not a folder is reported as
  // "LABEL 'ITEM' is not a directory (looked for PATH)", with hint.
  std::vector<std::filesystem::path> Folders(const YAML::Node& n, const std::string& what, const std::string& item_what,
                                             const std::string& label, const std::string& hint);
  // OneOf is the value whose name the string at n is. Any other string is reported as
  // "'WHAT' must be 'A' or 'B'; got 'X'", with the nearest name as hint when it looks
  // like a typo of one, else with hint.
  template <typename E>
  std::optional<E> OneOf(const YAML::Node& n, const std::string& what,
                         const std::vector<std::pair<std::string, E>>& names, const std::string& hint) {
    auto s = String(n, what);
    if (!s) return std::nullopt;
    std::vector<std::string> known;
    for (const auto& [name, value] : names) {
      if (*s == name) return value;
      known.push_back(name);
    }
    ReportNotOneOf(n, what, *s, known, hint);
    return std::nullopt;
  }
  void ReportNotOneOf(const YAML::Node& n, const std::string& what, const std::string& got,
                      const std::vector<std::string>& known, const std::string& hint);
  // Checked is the string at n if check (a parser such as oci::ParseReference, whose
  // error says what is wrong) accepts it; otherwise that error is reported with hint.
  template <typename Check>
  std::optional<std::string> Checked(const YAML::Node& n, const std::string& what, Check check,
                                     const std::string& hint);
  // The sections, each in its own file (section_*.cc) beside its test.
  // section_base.cc: name, description, hostname, base, role, arch, kernel, reproducible, update.
  void ParseIdentity(const YAML::Node& root, Layer& layer);
  // ParseUpdate reads `update: {serial, profile}` (section_base.cc).
  void ParseUpdate(const YAML::Node& n, Layer& layer);
  // section_disk.cc: formats, the partition sizes and the state's encryption.
  void ParseDisk(const YAML::Node& root, Layer& layer);
  void ParseFormats(const YAML::Node& n, Layer& layer);
  // section_files.cc: overlays and files.
  void ParseFiles(const YAML::Node& root, Layer& layer);
  void ParseFile(const YAML::Node& item, Layer& layer);
  // ParseFetched reads the 'url' and 'sha256' of a files entry (or of kubelet).
  bool ParseFetched(const YAML::Node& item, ProfileFile& f);
  // section_images.cc: one `images:` entry (docs/images.md).
  void ParseImage(const YAML::Node& item, Layer& layer);
  // section_workloads.cc: one `workloads:` entry (docs/workloads.md).
  void ParseWorkload(const YAML::Node& item, Layer& layer);
  // section_cluster.cc: shoot, staticPods, withoutStaticPods, podHost, then backup and kubelet.
  void ParseCluster(const YAML::Node& root, Layer& layer);
  // section_kubelet.cc: `kubelet: {recipe | url | source, sha256, config}`.
  void ParseKubelet(const YAML::Node& n, Layer& layer);
  // section_backup.cc: `backup: {dir, interval, keep}`.
  void ParseBackup(const YAML::Node& n, Layer& layer);
  void ParseCertificates(const YAML::Node& n, Layer& layer);
  // ParseDuration reads seconds ("3600") or a number with one unit: s, m, h, d.
  static std::optional<std::int64_t> ParseDuration(const std::string& s);

  std::filesystem::path file_;
  std::filesystem::path dir_;
  Diagnostics& diags_;
  std::vector<std::string> workload_names_;  // every `workloads:` name of this file, valid entry or not
};

}  // namespace sprout
