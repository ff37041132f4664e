// Certificate renewal on a running control-plane node (docs/control-plane.md,
// "Certificate renewal"): which components must start again to read renewed files, and
// when to look next. Pure; firstboot/certs.cc does the files, the clock and the restarts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sprout::kube {

// RestartsFor names what must start again after the files issued (paths as
// ControlPlaneFiles gives them, "pki/..." and "NAME.conf") were renewed: a kubeconfig's
// client certificate is read once at start by kube-controller-manager, kube-scheduler
// and the kubelet. kube-apiserver reloads its serving, kubelet-client and front-proxy
// certificates from their files, and etcd reads its certificates at every TLS
// handshake, so neither is restarted. admin.conf is the operator's. Sorted, no repeats.
std::vector<std::string> RestartsFor(const std::vector<std::string>& issued);

// NextCheckIn is how many seconds to wait before the next renewal pass: until the
// earliest of renew_at (each certificate's pki::RenewalTime), at least 5 s and at most
// an hour (a day's clock jump or a replaced file is seen within the hour).
std::int64_t NextCheckIn(const std::vector<std::int64_t>& renew_at, std::int64_t now);

}  // namespace sprout::kube
