#include "image/compile_log.h"

#include <catch2/catch.hpp>
#include <string>

using namespace sprout;

namespace {

// Lines as images/kubernetes/compile.sh and the tools it runs write them on a cold cache.
const std::string kCold =
    "kubernetes: fetching the source package kubernetes 1.20.5+really1.20.2-1.1+deb12u1 (apt, deb-src of "
    "/etc/apt/sources.list.d/debian.sources)\n"
    "Get:1 http://mirror bookworm InRelease\n"
    "kubernetes: unpacking kubernetes_1.20.5+really1.20.2-1.1+deb12u1.dsc\n"
    "dpkg-source: info: extracting kubernetes in tree\n"
    "dpkg-source: info: applying CVE-2021-25743.patch\n"
    "kubernetes: generating pkg/generated/openapi (openapi-gen)\n"
    "kubernetes: compiling kube-apiserver (go1.19.8)\n";

}  // namespace

TEST_CASE("ParseCompileLog follows the recipe's own lines and skips the tools'", "[compile]") {
  CompileLog empty = ParseCompileLog("", "kubernetes");
  CHECK(empty.phase.empty());
  CHECK(CompilePhase(empty).empty());

  CompileLog fetching = ParseCompileLog(kCold.substr(0, kCold.find("Get:")), "kubernetes");
  CHECK(fetching.phase.starts_with("fetching the source package kubernetes"));
  CHECK(CompilePhase(fetching) ==
        "fetching the source package kubernetes 1.20.5+really1.20.2-1.1+deb12u1 (apt, deb-src of "
        "/etc/apt/sources.list.d/debian.sources): cache miss");

  CompileLog unpacking = ParseCompileLog(kCold.substr(0, kCold.find("kubernetes: generating")), "kubernetes");
  CHECK(unpacking.phase == "unpacking kubernetes_1.20.5+really1.20.2-1.1+deb12u1.dsc");  // not dpkg-source's

  CompileLog log = ParseCompileLog(kCold, "kubernetes");
  CHECK(!log.cached);
  CHECK(log.building == "kube-apiserver");
  CHECK(log.compiled.empty());
  CHECK(CompilePhase(log) == "compiling kube-apiserver: cache miss");
}

TEST_CASE("a cold compile counts its components and ends with its folder", "[compile]") {
  std::string text = kCold +
                     "kubernetes: compiled kube-apiserver in 191 s\n"
                     "kubernetes: compiling kube-controller-manager (go1.19.8)\n";
  CompileLog log = ParseCompileLog(text, "kubernetes");
  CHECK(log.compiled == std::vector<std::pair<std::string, int>>{{"kube-apiserver", 191}});
  CHECK(CompilePhase(log) == "compiling kube-controller-manager: cache miss, 1 compiled");

  text +=
      "kubernetes: compiled kube-controller-manager in 150 s\n"
      "kubernetes: compiled into /var/cache/sprout/kubernetes/bin/0123abcd\n";
  log = ParseCompileLog(text, "kubernetes");
  CHECK(log.building.empty());
  CHECK(log.folder == "/var/cache/sprout/kubernetes/bin/0123abcd");
  CHECK(CompileSummary(log) == "cache miss: 2 components compiled into /var/cache/sprout/kubernetes/bin/0123abcd");
  CHECK(CompileTimes(log) == "kube-apiserver 191 s, kube-controller-manager 150 s");
}

TEST_CASE("a warm cache is a cache hit with nothing compiled", "[compile]") {
  CompileLog log = ParseCompileLog("kubernetes: cached: /var/cache/sprout/kubernetes/bin/0123abcd\n", "kubernetes");
  CHECK(log.cached);
  CHECK(CompilePhase(log) == "cache hit");
  CHECK(CompileSummary(log) == "cache hit: /var/cache/sprout/kubernetes/bin/0123abcd");
  CHECK(CompileTimes(log).empty());
  // Another recipe's name is not this one's.
  CHECK(ParseCompileLog("kubernetes: cached: /x\n", "etcd").phase.empty());
}

TEST_CASE("the stack recipe's lines name the set after the recipe", "[compile]") {
  const std::string warm =
      "stack: kubernetes: cached: /c/stack/bin/kubernetes/aa\n"
      "stack: etcd: cached: /c/stack/bin/etcd/bb\n"
      "stack: host: cached: /c/stack/host/cc\n";
  CompileLog hit = ParseCompileLog(warm, "stack");
  CHECK(hit.cached);
  CHECK(hit.folder == "/c/stack/host/cc");
  CHECK(CompileSummary(hit) == "cache hit: /c/stack/host/cc");

  const std::string cold =
      "stack: kubernetes: compiling kubelet (go1.26.8, amd64)\n"
      "stack: kubernetes: compiled kubelet in 27 s\n"
      "stack: kubernetes: compiled into /c/stack/bin/kubernetes/aa\n"
      "stack: etcd: cached: /c/stack/bin/etcd/bb\n"
      "stack: host: assembled /c/stack/host/dd\n";
  CompileLog miss = ParseCompileLog(cold, "stack");
  CHECK(!miss.cached);
  CHECK(CompileSummary(miss) == "cache miss: 1 component compiled into /c/stack/host/dd");
  CHECK(CompileTimes(miss) == "kubelet 27 s");
  CHECK(CompilePhase(ParseCompileLog(cold.substr(0, cold.find('\n') + 1), "stack")) == "compiling kubelet: cache miss");
}
