// `sprout inspect`: partitions, root hash, profile and images of a raw, qcow2 or ISO
// image, read from the image alone (its GPT and the metadata on its ESP).
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "builder/commands.h"
#include "efi/authenticode.h"
#include "image/arch.h"
#include "image/boot_files.h"
#include "image/disk_file.h"
#include "image/gpt.h"
#include "image/media.h"
#include "image/plan.h"
#include "update/entries.h"
#include "update/plan.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::cli {

namespace fs = std::filesystem;

namespace {

enum class ImageKind { kRaw, kQcow2, kIso };

// AddSlots lists the root slots and the loader entries of the ESP image esp_file
// (docs/updates.md): which slot each entry boots, its boot-counting state, and the
// entry systemd-boot boots next, whose text it returns ("" when there is none).
std::string AddSlots(nlohmann::ordered_json& out, const std::vector<Partition>& partitions, const fs::path& esp_file) {
  GptLayout layout;
  layout.partitions = partitions;
  const auto types = update::DiskRootTypes(layout);  // x86-64 or 64-bit ARM
  const Guid root_type = types ? types->root : Guid();
  out["slots"] = nlohmann::json::array();
  char letter = 'a';
  int number = 0;
  for (const auto& p : partitions) {
    ++number;
    if (!(p.spec.type == root_type)) continue;
    out["slots"].push_back({{"slot", std::string(1, letter++)}, {"partition", number}, {"label", p.spec.label}});
  }
  out["entries"] = nlohmann::json::array();
  auto dir = Run({{"mdir", "-b", "-i", esp_file.string(), "::/loader/entries"}, {{"MTOOLS_SKIP_CHECK", "1"}}});
  if (!dir || dir->exit_code != 0) return "";
  std::vector<update::EntryName> names;
  std::map<std::string, std::string> texts;  // file -> its text
  for (const auto& line : Split(dir->output, '\n')) {
    std::string file(Trim(line));
    file = file.substr(file.rfind('/') + 1);
    auto name = update::ParseEntryName(file);
    if (!name) continue;
    auto text = Run({{"mtype", "-i", esp_file.string(), "::/loader/entries/" + file}, {{"MTOOLS_SKIP_CHECK", "1"}}});
    if (text && text->exit_code == 0) texts[file] = text->output;
    const std::string hash = texts.contains(file) ? update::EntryRootHash(texts[file]) : "";
    auto slot = update::SlotOfHash(layout, hash);
    out["entries"].push_back({{"file", file},
                              {"slot", slot ? std::string(1, *slot) : std::string("none")},
                              {"state", update::DescribeState(*name)},
                              {"rootHash", hash}});
    names.push_back(*name);
  }
  auto next = update::NextBoot(names);
  out["nextBoot"] = next ? next->file : "";
  return next ? texts[next->file] : "";
}

// AddState records what the command line of the entry booted next (entry_text) asks of
// the node's state: where it lives and whether it is encrypted (docs/secure-boot.md). A
// Secure Boot entry repeats its unified kernel image's signed command line.
void AddState(nlohmann::ordered_json& out, const std::string& entry_text) {
  const std::vector<std::string> words = update::EntryOptionsWords(entry_text);
  if (words.empty()) {
    out["state"] = nullptr;
    return;
  }
  const StateOnCmdline state = ReadStateWords(words);
  nlohmann::ordered_json j{{"storage", state.live ? "memory" : "partition"},
                           {"encryption", state.encryption.empty() ? "none" : state.encryption}};
  if (!state.encryption.empty() && state.encryption != "none") {
    j["withoutTpm"] = state.without_tpm.empty() ? "refuse" : state.without_tpm;  // the initrd's default
  }
  j["description"] = DescribeState(state);
  out["state"] = j;
}

// The protective MBR, the GPT header and its 128 entries: 34 sectors.
constexpr std::size_t kGptHeadBytes = 34 * kSectorSize;

// Text is a string field of a JSON object, or "" when it is not one (the metadata is
// read from a disk, so a wrong type must not end inspect).
std::string Text(const nlohmann::ordered_json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// PrintWorkloads lists the workloads the root carries (docs/workloads.md), their objects
// and the images those run, each marked whether the image preloads it.
void PrintWorkloads(const nlohmann::ordered_json& index, const nlohmann::ordered_json& images) {
  const auto* list = index.is_object() && index.contains("workloads") ? &index["workloads"] : nullptr;
  if (!list || !list->is_array() || list->empty()) {
    std::cout << "workloads:  none\n";
    return;
  }
  std::size_t objects = 0;
  for (const auto& w : *list) {
    if (w.is_object() && w.contains("objects") && w["objects"].is_array()) objects += w["objects"].size();
  }
  std::cout << "workloads:  " << list->size() << ", " << objects << (objects == 1 ? " object" : " objects") << " ("
            << Text(index, "digest") << ")\n";
  std::set<std::string> used;
  for (const auto& w : *list) {
    const std::string type = Text(w, "type");
    std::cout << "  " << Text(w, "name") << ": " << type << " " << Text(w, "source");
    if (type == "chart") {
      std::cout << (Text(w, "chartVersion").empty() ? "" : " " + Text(w, "chartVersion")) << ", release "
                << Text(w, "release");
    }
    std::cout << ", namespace " << Text(w, "namespace") << "\n";
    if (!w.is_object() || !w.contains("objects") || !w["objects"].is_array()) continue;
    for (const auto& o : w["objects"]) {
      const std::string ns = Text(o, "namespace");
      std::cout << "    " << Text(o, "file") << "  " << Text(o, "apiVersion") << " " << Text(o, "kind") << " "
                << (ns.empty() ? "" : ns + "/") << Text(o, "name");
      std::vector<std::string> runs;
      if (o.contains("images") && o["images"].is_array()) {
        for (const auto& i : o["images"]) {
          if (!i.is_string()) continue;
          runs.push_back(i.get<std::string>());
          used.insert(i.get<std::string>());
        }
      }
      if (!runs.empty()) std::cout << "  runs " << Join(runs, ", ");
      std::cout << "\n";
    }
  }
  std::set<std::string> preloaded;
  if (images.is_array()) {
    for (const auto& i : images) preloaded.insert(Text(i, "reference"));
  }
  std::cout << "workload images:" << (used.empty() ? " none" : "") << "\n";
  for (const auto& i : used) {
    std::cout << "  " << i << (preloaded.contains(i) ? " (preloaded)" : " (not under this name in the preload)")
              << "\n";
  }
}

// ReadAt reads at most size bytes at offset of the file (fewer at its end).
// EspPeSignature reads the signature of an EFI program on the ESP image esp_file:
// null when the file is not there.
nlohmann::ordered_json EspPeSignature(const fs::path& esp_file, const std::string& path, const fs::path& tmp) {
  const fs::path copy = tmp / fs::path(path).filename();
  auto r = Run({{"mcopy", "-n", "-i", esp_file.string(), "::/" + path, copy.string()}, {{"MTOOLS_SKIP_CHECK", "1"}}});
  if (!r || r->exit_code != 0) return nullptr;
  auto bytes = ReadFile(copy);
  if (!bytes) return nullptr;
  auto sig = efi::ReadPeSignature(*bytes, path);
  if (!sig) return {{"file", path}, {"signed", false}, {"error", sig.error()}};
  if (!sig->signed_) return {{"file", path}, {"signed", false}};
  return {{"file", path},
          {"signed", true},
          {"subject", sig->subject},
          {"certSha256", sig->cert_sha256},
          {"digestMatches", sig->digest_matches}};
}

// AddSecureBoot records whether the ESP boots through a signed unified kernel image
// (docs/secure-boot.md), and who signed it and systemd-boot.
void AddSecureBoot(nlohmann::ordered_json& out, const fs::path& esp_file, const fs::path& tmp, Arch arch) {
  auto uki = EspPeSignature(esp_file, kUkiPath, tmp);
  if (uki.is_null()) {
    out["secureBoot"] = {{"uki", nullptr}};
    return;
  }
  out["secureBoot"] = {{"uki", uki}, {"bootLoader", EspPeSignature(esp_file, TraitsOf(arch).efi_boot_path, tmp)}};
}

// SignatureLine renders one signed file for the text report.
std::string SignatureLine(const nlohmann::ordered_json& f) {
  if (f.is_null()) return "missing";
  std::string line = f["file"].get<std::string>() + ": ";
  if (!f.value("signed", false)) return line + "NOT signed";
  line += "signed by " + f["subject"].get<std::string>() + " (certificate sha256 " +
          f["certSha256"].get<std::string>().substr(0, 16) + "…)";
  if (!f.value("digestMatches", false)) line += ", and the signed digest DOES NOT MATCH the file";
  return line;
}

Result<std::string> ReadAt(const fs::path& path, std::uint64_t offset, std::size_t size) {
  auto file = DiskFile::Open(path, false);
  if (!file) return Fail(file.error());
  auto got = file->ReadUpTo(offset, size);
  if (!got) return Fail(got.error());
  return std::string(got->begin(), got->end());
}

// Extract copies size bytes at offset of a (qcow2 or raw) image into out.
Status Extract(const fs::path& image, ImageKind kind, std::uint64_t offset, std::uint64_t size, const fs::path& out) {
  if (kind == ImageKind::kQcow2) {
    if (offset % 512 != 0 || size % 512 != 0) return Fail("unaligned read of a qcow2 image");
    auto r =
        RunChecked({{"qemu-img", "dd", "-f", "qcow2", "-O", "raw", "bs=512", "skip=" + std::to_string(offset / 512),
                     "count=" + std::to_string(size / 512), "if=" + image.string(), "of=" + out.string()}});
    if (!r) return Fail("qemu-img cannot read " + image.string() + ": " + r.error());
    return Ok{};
  }
  auto in = DiskFile::Open(image, false);
  if (!in) return Fail(in.error());
  auto copy = DiskFile::Create(out);
  if (!copy) return Fail(copy.error());
  return CopyRange(*in, offset, *copy, 0, size);
}

}  // namespace

int Inspect(const fs::path& image, bool json) {
  auto fail = [&](const std::string& why) {
    std::cerr << "sprout: " << image.string() << ": " << why << "\n";
    return 1;
  };
  std::error_code ec;
  if (!fs::is_regular_file(image, ec)) return fail("not found, or not a file");
  auto head = ReadAt(image, 0, kGptHeadBytes);
  if (head && head->starts_with("MZ")) return InspectEfi(image, json);  // a boot loader or UKI, not a disk
  auto iso_magic = ReadAt(image, 32769, 5);
  if (!head || !iso_magic) return fail("cannot be read");
  ImageKind kind = ImageKind::kRaw;
  if (head->starts_with("QFI\xfb")) kind = ImageKind::kQcow2;
  if (*iso_magic == "CD001") kind = ImageKind::kIso;
  const char* kind_name = kind == ImageKind::kQcow2 ? "qcow2" : kind == ImageKind::kIso ? "iso" : "raw";

  std::uint64_t disk_size = fs::file_size(image, ec);
  TempDir tmp(fs::temp_directory_path(), "sprout-inspect");
  if (kind == ImageKind::kQcow2) {
    auto info = RunChecked({{"qemu-img", "info", "--output=json", image.string()}});
    if (!info) return fail("qemu-img cannot read it: " + info.error());
    try {
      disk_size = nlohmann::json::parse(*info)["virtual-size"].get<std::uint64_t>();
    } catch (const std::exception& e) {
      return fail(std::string("qemu-img info gave no virtual size: ") + e.what());
    }
    if (auto s = Extract(image, kind, 0, kGptHeadBytes, tmp.path() / "head"); !s) return fail(s.error());
    head = ReadFile(tmp.path() / "head");
    if (!head) return fail(head.error());
  }
  std::vector<Partition> partitions;
  if (kind == ImageKind::kIso) {
    // xorriso places its GPT entries after the ISO 9660 system area, where sprout's own
    // parser does not look; sfdisk reads any valid GPT.
    auto table = RunChecked({{"sfdisk", "--json", image.string()}});
    if (!table) return fail("sfdisk cannot read its partition table: " + table.error());
    try {
      const auto parsed = nlohmann::json::parse(*table);
      for (const auto& p : parsed["partitiontable"]["partitions"]) {
        Partition part;
        part.spec.label = p.value("name", "");
        part.spec.type = Guid::Parse(p["type"].get<std::string>()).value_or(Guid{});
        part.spec.uuid = Guid::Parse(p.value("uuid", "")).value_or(Guid{});
        part.first_lba = p["start"].get<std::uint64_t>();
        part.last_lba = part.first_lba + p["size"].get<std::uint64_t>() - 1;
        partitions.push_back(part);
      }
    } catch (const std::exception& e) {
      return fail(std::string("sfdisk gave an unexpected table: ") + e.what());
    }
  } else {
    std::vector<std::uint8_t> head_bytes(head->begin(), head->end());
    auto gpt = ParseGpt(head_bytes, disk_size);
    if (!gpt) return fail("no GPT partition table (" + gpt.error() + "); is it a sprout image?");
    partitions = gpt->partitions;
  }

  // The metadata comes from the ESP, which every medium has.
  const Partition* esp = FindPartitionByType(partitions, *Guid::Parse(dps::kEsp));
  if (!esp) return fail("has no EFI system partition; is it a sprout image?");
  fs::path esp_file = tmp.path() / "esp.vfat";
  if (auto s = Extract(image, kind, esp->offset(), esp->size(), esp_file); !s) return fail(s.error());
  auto mt =
      Run({{"mtype", "-i", esp_file.string(), std::string("::/") + kImageMetadataPath}, {{"MTOOLS_SKIP_CHECK", "1"}}});
  if (!mt || mt->exit_code != 0) {
    return fail(std::string("its ESP holds no ") + kImageMetadataPath + " (built by an older sprout?)");
  }
  nlohmann::ordered_json meta;
  try {
    meta = nlohmann::ordered_json::parse(mt->output);
  } catch (const std::exception& e) {
    return fail(std::string(kImageMetadataPath) + " is not JSON: " + e.what());
  }

  nlohmann::ordered_json out;
  out["image"] = image.string();
  out["format"] = kind_name;
  out["size"] = disk_size;
  if (kind == ImageKind::kIso) {
    auto vol = ReadAt(image, 32768 + 40, 32);
    if (vol) out["volumeId"] = std::string(Trim(*vol));
  }
  out["partitions"] = nlohmann::json::array();
  int number = 0;
  for (const auto& p : partitions) {
    out["partitions"].push_back({{"number", ++number},
                                 {"label", p.spec.label},
                                 {"type", p.spec.type.ToString()},
                                 {"typeName", PartitionTypeName(p.spec.type.ToString())},
                                 {"uuid", p.spec.uuid.ToString()},
                                 {"offset", p.offset()},
                                 {"size", p.size()}});
  }
  out["rootHash"] = meta.value("rootHash", "");
  out["kernel"] = meta.value("kernel", "");
  out["profile"] = meta.contains("profile") ? meta["profile"] : nlohmann::ordered_json::object();
  // What an updating node compares (docs/updates.md); null for a build before serials.
  out["update"] = meta.contains("update") ? meta["update"] : nlohmann::ordered_json();
  out["images"] = meta.contains("images") ? meta["images"] : nlohmann::ordered_json::array();
  // The workloads' index (docs/workloads.md); null for an image without workloads.
  out["workloads"] = meta.contains("workloads") ? meta["workloads"] : nlohmann::ordered_json();
  const std::string next_entry = AddSlots(out, partitions, esp_file);
  AddState(out, next_entry);
  AddSecureBoot(out, esp_file, tmp.path(),
                ParseArchName(out["profile"].value("arch", std::string("amd64"))).value_or(Arch::kAmd64));
  if (json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << image.string() << ": " << kind_name << ", " << HumanSize(disk_size) << "\n";
  if (out.contains("volumeId")) std::cout << "volume ID:  " << out["volumeId"].get<std::string>() << "\n";
  std::cout << "partitions:\n";
  for (const auto& p : out["partitions"]) {
    const std::string name = p["typeName"].get<std::string>();
    std::printf("  %d  %-22s %10s  type %s%s  uuid %s\n", p["number"].get<int>(), p["label"].get<std::string>().c_str(),
                HumanSize(p["size"].get<std::uint64_t>()).c_str(), p["type"].get<std::string>().c_str(),
                name.empty() ? "" : (" (" + name + ")").c_str(), p["uuid"].get<std::string>().c_str());
  }
  std::cout << std::flush;
  std::cout << "root hash:  " << out["rootHash"].get<std::string>() << "\n";
  std::cout << "kernel:     " << out["kernel"].get<std::string>() << "\n";
  const auto& prof = out["profile"];
  std::cout << "profile:    " << prof.value("name", "?") << " (role " << prof.value("role", "?") << ", arch "
            << prof.value("arch", "amd64") << ")\n";
  const auto& up = out["update"];
  if (up.is_object()) {
    std::cout << "update:     serial " << (up.contains("serial") ? up["serial"].dump() : std::string("?"))
              << ", for the nodes of profile " << up.value("profile", "?") << ", role " << up.value("role", "?")
              << ", cluster " << up.value("cluster", "?") << "\n";
  } else {
    std::cout << "update:     no record (built before serials: its epoch counts as its serial)\n";
  }
  std::cout << "slots:";
  for (const auto& sl : out["slots"]) {
    std::cout << "  " << sl["slot"].get<std::string>() << " = partition " << sl["partition"].get<int>() << " ("
              << sl["label"].get<std::string>() << ")";
  }
  std::cout << "\nsecure boot:";
  const auto& sb = out["secureBoot"];
  if (sb["uki"].is_null()) {
    std::cout << " no (the kernel and initrd are separate, unsigned files)\n";
  } else {
    std::cout << "\n  " << SignatureLine(sb["uki"]) << "\n  " << SignatureLine(sb["bootLoader"]) << "\n";
  }
  std::cout << "state:      "
            << (out["state"].is_null() ? "unknown (no loader entry to read the command line from)"
                                       : out["state"]["description"].get<std::string>())
            << "\n";
  std::cout << "loader entries:\n";
  for (const auto& e : out["entries"]) {
    std::cout << "  " << e["file"].get<std::string>() << ": slot " << e["slot"].get<std::string>() << ", "
              << e["state"].get<std::string>() << "\n";
  }
  std::cout << "next boot:  " << out.value("nextBoot", "") << "\n";
  std::cout << "preloaded images:";
  if (out["images"].empty()) std::cout << " none";
  std::cout << "\n";
  for (const auto& i : out["images"]) std::cout << "  " << i.dump() << "\n";
  PrintWorkloads(out["workloads"], out["images"]);
  return 0;
}

}  // namespace sprout::cli
