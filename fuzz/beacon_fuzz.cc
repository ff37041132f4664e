// libFuzzer target for the formation frame decoder (beacons and every other message):
// DecodeMessage must never crash or read out of bounds, and Authenticate, the liveness
// check and a Gate (with and without the worker key) must refuse or admit any bytes
// without crashing. Seeds: fuzz/corpus/beacon_fuzz/ (sealed frames
// under the key DeriveKey("fuzz-secret-0123456789", "fuzz")).
#include <cstddef>
#include <cstdint>
#include <span>

#include "formation/auth.h"
#include "formation/liveness.h"
#include "formation/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  auto frame = sprout::formation::DecodeMessage(bytes);
  if (frame) {
    // A decoded frame must encode again without trouble.
    auto again = sprout::formation::EncodeUnsigned(frame->header, frame->message);
    (void)again;
  }
  static auto key = sprout::formation::DeriveKey("fuzz-secret-0123456789", "fuzz");
  if (key) {
    sprout::formation::Gate gate(*key, "fuzz", "n2");
    (void)gate.Open(bytes);
    if (auto f = sprout::formation::Authenticate(*key, sprout::formation::TagFor("fuzz"), "n2", bytes)) {
      sprout::formation::Liveness liveness([] { return sprout::formation::Nonce{}; });
      liveness.OnFrame(f->header.sender, f->header.incarnation, sprout::formation::MessageName(f->message),
                       sprout::formation::Datagram{{bytes.begin(), bytes.end()}, {}}, 0);
      (void)liveness.OnEcho(f->header.sender, f->header.incarnation, sprout::formation::Nonce{});
    }
    // A control-plane node's gate, which also admits worker beacons under a second key.
    static auto worker =
        sprout::formation::DeriveKey(sprout::formation::WorkerSecret("fuzz-secret-0123456789"), "fuzz");
    if (worker) {
      sprout::formation::Gate both(*key, "fuzz", "n2");
      both.AdmitWorkers(*worker);
      (void)both.Open(bytes);
      // Worker-key frames pass a liveness check of their own before that gate.
      if (auto f = sprout::formation::Authenticate(*worker, sprout::formation::TagFor("fuzz"), "n2", bytes)) {
        sprout::formation::Liveness liveness([] { return sprout::formation::Nonce{}; });
        if (sprout::formation::WorkerMaySend(f->message)) {
          liveness.OnFrame(f->header.sender, f->header.incarnation, sprout::formation::MessageName(f->message),
                           sprout::formation::Datagram{{bytes.begin(), bytes.end()}, {}}, 0);
        }
        (void)liveness.OnEcho(f->header.sender, f->header.incarnation, sprout::formation::Nonce{});
      }
    }
  }
  return 0;
}
