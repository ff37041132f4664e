// The CIS Kubernetes Benchmark (1.20) report of a profile's control plane and kubelet:
// pure judging of the files sprout renders (static pods, the apiserver's encryption
// configuration and audit policy, the kubelet's configuration, unit and arguments, the
// modes of what the control-plane step writes). `sprout cis PROFILE` renders them and
// prints Markdown(Judge(...)); docs/cis.md is that report for profiles/default.yaml.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::cis {

// Verdict is a check's result.
enum class Verdict { kPass, kFail, kNotApplicable };

// Check is one row of the report. A nominal pass meets the letter of the
// recommendation but not its purpose; its reason says why, and the table marks it.
struct Check {
  std::string id;              // "4.2.4"
  std::string recommendation;  // "the read-only port is 0"
  Verdict verdict = Verdict::kFail;
  std::string reason;
  bool nominal = false;
};

// Section is one part of the benchmark, with the files it was judged from.
struct Section {
  std::string title;
  std::string source;
  std::vector<Check> checks;
};

// Report is every section, in the benchmark's order.
struct Report {
  std::string subject;  // what was judged: "profiles/default.yaml (Kubernetes 1.20, ...)"
  std::vector<Section> sections;
};

// Rendered is one file as a node has it: its path there, its text, and where it came
// from when that is worth saying (a template, the profile).
struct Rendered {
  std::string path;  // "/etc/kubernetes/manifests/kube-apiserver.yaml"
  std::string text;
  std::string origin;  // "rendered from staticpods/kube-apiserver.yaml"; "" none
};

// Inputs is everything the report judges, as plain text and modes.
struct Inputs {
  std::string subject;
  int kubernetes_minor = 20;                                // 1.MINOR: flags removed since 1.20 are not applicable
  Rendered apiserver, controller_manager, scheduler, etcd;  // the static pods
  Rendered encryption_config, audit_policy;
  // Modes of the files the control-plane step writes, relative to /etc/kubernetes
  // ("manifests/etcd.yaml", "pki/ca.key"), and what they were read from.
  std::map<std::string, unsigned> modes;
  std::string modes_source;
  std::string firstboot_unit;  // sprout-firstboot.service: root's files unless it sets User=
  unsigned cni_mode = 0644;    // the CNI configuration file's mode, and who sets it
  std::string cni_mode_source;
  // The kubelet pod host; an empty kubelet_config means the profile has no kubelet.
  Rendered kubelet_config, kubelet_unit, kubelet_env;
  unsigned kubelet_config_mode = 0, kubelet_unit_mode = 0;
  std::string kubelet_overrides;   // the profile's kubelet.config mapping (YAML), "" none
  std::string image_modes_source;  // who sets the image's file modes ("builder/cluster.cc")
};

// ParseFlags maps "--name=value" to {name: value} and a bare "--name" to "true";
// other words are passed over.
std::map<std::string, std::string> ParseFlags(const std::vector<std::string>& args);

// ShellWords splits a command line as a shell does for quotes and blanks (no
// expansion): `a "b c" 'd'` -> a, b c, d.
std::vector<std::string> ShellWords(const std::string& line);

// KubeletFlags are the kubelet's flags: the unit's ExecStart plus the env file's
// KUBELET_ARGS (words starting with $ are passed over).
std::map<std::string, std::string> KubeletFlags(const std::string& unit, const std::string& env);

// Judge checks every recommendation against inputs. A file that is not YAML, or a pod
// without a container, is an error naming the file.
Result<Report> Judge(const Inputs& in);

// Markdown renders a report as docs/cis.md has it: the counts, then a table a section.
std::string Markdown(const Report& report);

}  // namespace sprout::cis
