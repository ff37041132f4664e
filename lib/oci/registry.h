// The OCI distribution client on libcurl: manifests, blobs, auth, retry and resume.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oci/auth.h"
#include "oci/cache.h"
#include "oci/manifest.h"
#include "util/result.h"

namespace sprout::oci {

// ClientOptions tune one registry client.
struct ClientOptions {
  std::filesystem::path ca_bundle;         // extra CA bundle (PEM); empty = system store
  std::optional<Credentials> credentials;  // for basic auth and token requests
  int parallel = 6;                        // concurrent blob downloads
  int attempts = 6;                        // tries per request on transient errors
  int backoff_ms = 200;                    // first retry delay; doubles each time
  // progress(digest, bytes of this blob done) is called from the download threads.
  std::function<void(const std::string&, std::uint64_t)> progress;
};

// FetchedManifest is a manifest as the registry served it.
struct FetchedManifest {
  std::string bytes;
  std::string content_type;
  std::string digest;  // sha256 of bytes (checked against the one asked for, if any)
};

// RegistryClient talks to one repository of one registry over HTTPS.
class RegistryClient {
 public:
  RegistryClient(std::string registry, std::string repository, ClientOptions options);
  ~RegistryClient();
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  // GetManifest fetches a manifest or index by tag or digest. A digest reference is
  // verified against the bytes.
  Result<FetchedManifest> GetManifest(const std::string& tag_or_digest);

  // FetchBlobs downloads every blob not yet in cache, in parallel, verifying each.
  Status FetchBlobs(const std::vector<Descriptor>& blobs, Cache& cache);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace sprout::oci
