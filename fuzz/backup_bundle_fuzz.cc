// libFuzzer target for the backup bundle parser: the clear header read from a file's
// start (ReadHeaderPrefix, as a sink listing does), the whole-file check (ReadHeader)
// OpenBundle with a fixed secret, and the streaming BundleVerifier, fed in pieces whose
// sizes the input's first byte picks, which must agree with OpenBundle: it accepts
// exactly what OpenBundle opens, with the same header. Bundles come from sinks that
// other machines can write to (an NFS share, a peer's copy), so none of these may
// crash, throw, leak or read out of bounds, and the header read from a prefix must
// agree with the one read from the whole file; and the bundle name a temporary file's
// name carries (TempBundleName), by which retention judges whose it is. Seeds:
// fuzz/corpus/backup_bundle_fuzz/ (a real bundle sealed under the secret "fuzz" for
// cluster "edge", and its clear header alone).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backup/bundle.h"
#include "backup/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    auto whole = sprout::backup::ReadHeader(bytes);
    auto head = sprout::backup::ReadHeaderPrefix(bytes.substr(0, 512), size);
    // A header the prefix reads is the header the whole file reads (when it fits).
    if (size >= 512 && head && (!whole || !(*whole == *head))) __builtin_trap();
    // The listed size is a claim too: any value must be safe.
    (void)sprout::backup::ReadHeaderPrefix(bytes, size * 7 + 3);
    (void)sprout::backup::ReadHeaderPrefix(bytes, UINT64_MAX);
    auto opened = sprout::backup::OpenBundle(bytes, "edge", "fuzz");
    if (opened && !whole) __builtin_trap();  // nothing opens whose header does not read
    // The stream verifier, in pieces of 1 to 256 bytes (the first byte) or 64 KiB.
    const std::size_t piece = size == 0 ? 1 : (data[0] == 0 ? std::size_t{1} << 16 : data[0]);
    sprout::backup::BundleVerifier v("edge", "fuzz");
    for (std::size_t at = 0; at < size; at += piece) {
      if (!v.Feed(bytes.substr(at, piece))) break;
    }
    auto streamed = v.Finish();
    if (streamed.ok() != opened.ok()) __builtin_trap();
    if (streamed && !(*streamed == opened->header)) __builtin_trap();
    (void)sprout::backup::ParseName(bytes);
    // A temporary name's carried bundle name decides whose a stale temporary file is
    // (Prune looks only at its own cluster's): it is read from the name itself.
    if (auto carried = sprout::backup::TempBundleName(bytes)) {
      if (!sprout::backup::IsTempName(bytes) || !bytes.substr(1).starts_with(carried->cluster + "-")) __builtin_trap();
    }
  } catch (...) {
    __builtin_trap();  // the parsers report errors as values; a throw would end a thread
  }
  return 0;
}
