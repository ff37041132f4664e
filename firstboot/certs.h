// Certificate renewal on a running control-plane node (docs/control-plane.md,
// "Certificate renewal"). Each pass renews, from the cluster CAs on the node, every leaf
// certificate and kubeconfig that is two thirds into its lifetime (pki::CanKeep), the
// node's etcd certificates included, writes each file atomically, and starts again what
// reads its kubeconfig only once (kube::RestartsFor): kube-controller-manager and
// kube-scheduler (their containers are stopped through containerd's ctr; the kubelet
// starts them again) and the kubelet (systemctl). `sprout-firstboot certs` shows each
// certificate's lifetime and renews on demand.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kube/certs.h"
#include "kube/controlplane.h"
#include "pki/pki.h"

namespace sprout::firstboot {

struct CertsOptions {
  kube::ControlPlanePaths paths;  // pki_dir and kubernetes_dir are read and written
  kube::ControlPlaneNode node;    // the Kubernetes certificates' names and lifetime
  pki::NodeIdentity etcd;         // the etcd certificates' names and lifetime
  bool kubernetes = true;         // false on an etcd-only image: only the etcd certificates
  bool restart = true;            // start again what reads a renewed kubeconfig once
  std::string ctr = "ctr";
  std::string systemctl = "systemctl";
};

struct RenewalReport {
  std::vector<std::string> issued;     // files written, relative to the PKI's parent folder
  std::vector<std::string> restarted;  // components started again
  std::vector<std::string> problems;   // restarts that failed (the files are written)
  std::int64_t next_in = 0;            // seconds to the next pass (kube::NextCheckIn)
};

// RenewOnce is one pass, with the system clock.
Result<RenewalReport> RenewOnce(const CertsOptions& o);

using CertsLog = std::function<void(int priority, const std::string& message)>;

// RunCertRenewal runs a pass at once and then whenever NextCheckIn says, until *stop.
void RunCertRenewal(const CertsOptions& o, const volatile std::sig_atomic_t* stop, const CertsLog& log);

// CertsMain is `sprout-firstboot certs [--renew]` (argv[0] is "certs").
int CertsMain(int argc, char** argv);

}  // namespace sprout::firstboot
