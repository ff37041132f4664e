// Image manifests and indexes: Docker v2 schema 2, OCI image manifest, OCI image index
// and Docker manifest list, read into one shape; and platform selection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout::oci {

inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kOciLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view kOciLayerTar = "application/vnd.oci.image.layer.v1.tar";

// kAcceptHeader lists every manifest type sprout reads, for the registry's Accept header.
std::string AcceptHeader();

// Platform is where an image runs.
struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;  // e.g. "v8" for arm64; empty if not given
};

// Descriptor points at a blob by digest.
struct Descriptor {
  std::string media_type;
  std::string digest;  // "sha256:HEX"
  std::int64_t size = 0;
  Platform platform;  // only in index entries
  bool has_platform = false;
};

// Parsed is a manifest or an index.
struct Parsed {
  bool is_index = false;
  std::string media_type;
  Descriptor config;               // manifests only
  std::vector<Descriptor> layers;  // manifests: the layers; indexes: the manifests
};

// ParseManifest reads a manifest or index. header_type is the Content-Type the server
// sent (may be empty); the document's own mediaType wins when both are present, and a
// document with neither is told apart by its fields. Every descriptor's digest and size
// are checked, so the caller can use them to build file names safely.
Result<Parsed> ParseManifest(std::string_view bytes, std::string_view header_type = {});

// HostPlatform is linux and the build host's architecture in OCI spelling.
Platform HostPlatform();

// ParsePlatform reads "linux/amd64" or "linux/arm64/v8".
Result<Platform> ParsePlatform(std::string_view text);

// SelectPlatform picks the index entry for want: os and architecture must match, and
// the variant too when both name one. The error lists the platforms on offer.
Result<Descriptor> SelectPlatform(const Parsed& index, const Platform& want);

// PlatformString renders "os/arch[/variant]".
std::string PlatformString(const Platform& p);

}  // namespace sprout::oci
