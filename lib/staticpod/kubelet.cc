#include "staticpod/kubelet.h"

#include <yaml-cpp/yaml.h>

namespace sprout {

Result<std::string> KubeletConfigYaml(const std::string& overrides_yaml) {
  YAML::Node config = YAML::Load(R"(apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: systemd
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
rotateCertificates: true
imageGCHighThresholdPercent: 100
)");
  if (!overrides_yaml.empty()) {
    YAML::Node extra;
    try {
      extra = YAML::Load(overrides_yaml);
    } catch (const YAML::Exception& e) {
      return Fail("kubelet.config is not valid YAML: " + e.msg);
    }
    if (!extra.IsMap()) return Fail("kubelet.config must be a mapping of KubeletConfiguration fields");
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == "apiVersion" || key == "kind") {
        return Fail("kubelet.config must not set '" + key + "'; sprout writes it");
      }
      config[key] = it->second;
    }
  }
  YAML::Emitter out;
  out << config;
  return std::string(out.c_str()) + "\n";
}

std::string KubeletUnit() {
  return R"([Unit]
Description=kubelet: runs the static pods of this node (configured by sprout)
After=sprout-firstboot.service containerd.service
Wants=containerd.service
ConditionPathExists=/usr/lib/sprout/kubelet/config.yaml

[Service]
ExecStart=/usr/bin/kubelet --config=/usr/lib/sprout/kubelet/config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
)";
}

}  // namespace sprout
