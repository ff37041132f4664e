#include "update/checks.h"

#include <nlohmann/json.hpp>

#include "util/sign.h"
#include "util/text.h"

namespace sprout::update {

Result<TrustVerdict> CheckTrust(const TrustInputs& in) {
  if (in.trusted_key) {
    if (!in.signature) {
      return Fail(in.source + " is not signed (no manifest.json.sig) and this node trusts only builds signed by " +
                  in.trusted_key_name +
                  "; build it with sprout build --sign KEY, with the key this node's image was "
                  "built with");
    }
    if (auto s = VerifyEd25519(*in.trusted_key, in.manifest, *in.signature); !s) {
      return Fail(in.source + "/manifest.json: " + s.error() + "; this node trusts only builds signed by " +
                  in.trusted_key_name + " (the key its image was built with)");
    }
    return TrustVerdict{true, "signature of manifest.json checked with " + in.trusted_key_name};
  }
  if (!in.insecure_unsigned) {
    return Fail("this node has no update trust root (" + in.trusted_key_name + "), so it cannot tell who made " +
                in.source +
                "; build the node's image with sprout build --sign KEY (the image then trusts that key), or give "
                "--key PUB, or accept an unchecked build with --insecure-unsigned");
  }
  return TrustVerdict{false, "WARNING: --insecure-unsigned: " + in.source +
                                 " is installed without checking who made it (this node has no update trust root " +
                                 in.trusted_key_name + "); anyone who can answer for the build's source can run " +
                                 "their own kernel and root on this node"};
}

std::optional<std::int64_t> BuildTimeOf(const std::string& json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (!j.is_object() || !j.contains("profile") || !j["profile"].is_object()) return std::nullopt;
  const auto& p = j["profile"];
  if (!p.contains("reproducible") || !p["reproducible"].is_object()) return std::nullopt;
  const auto& r = p["reproducible"];
  if (!r.contains("sourceDateEpoch") || !r["sourceDateEpoch"].is_number_integer()) return std::nullopt;
  return r["sourceDateEpoch"].get<std::int64_t>();
}

Result<std::string> CheckDowngrade(std::optional<std::int64_t> running, std::optional<std::int64_t> next,
                                   bool allow_downgrade) {
  auto shown = [](std::optional<std::int64_t> t) { return t ? std::to_string(*t) : std::string("unknown"); };
  const std::string times = "the new build's time is " + shown(next) + ", the running build's " + shown(running) +
                            " (reproducible.sourceDateEpoch)";
  const bool older = !running || !next || *next < *running;
  if (!older) return times + ": not a downgrade";
  if (allow_downgrade) return "downgrade allowed by --allow-downgrade: " + times;
  return Fail("refusing a downgrade: " + times +
              (running && next ? ", so the new build is older" : ", so it cannot be shown not to be older") +
              "; pass --allow-downgrade to install it anyway");
}

Status CheckRoom(std::uint64_t free, std::uint64_t need, std::uint64_t floor, const std::string& where) {
  if (free >= need && free - need >= floor) return Ok{};
  return Fail("not enough room in " + where + ": the build needs " + HumanSize(need) + " and " + HumanSize(floor) +
              " must stay free for etcd, but only " + HumanSize(free) +
              " is free; free space there, or set another floor with --min-free BYTES (docs/updates.md)");
}

GateVerdict UnreadableBoot(const std::string& cmdline, std::optional<bool> efi_counted, const std::string& error) {
  for (const auto& w : Split(std::string(Trim(cmdline)), ' ')) {
    if (w.starts_with("sprout.live=")) {
      return {true, "a live boot (" + w + ") has no slots to gate (" + error + ")"};
    }
  }
  if (efi_counted && !*efi_counted) {
    return {true,
            error + "; systemd-boot booted an entry without a boot counter (committed), so there is nothing to gate"};
  }
  return {false, error +
                     "; this boot cannot be judged, so it is not committed (failing the gate: a slot on trial "
                     "falls back after its tries)"};
}

}  // namespace sprout::update
