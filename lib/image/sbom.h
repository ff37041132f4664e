// The software bill of materials of a root: Debian packages from dpkg's status file,
// rendered as SPDX 2.3 JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout {

// DebPackage is one installed Debian package.
struct DebPackage {
  std::string name, version, architecture, source;
};

// ParseDpkgStatus lists the installed packages of a dpkg status file, sorted by name.
std::vector<DebPackage> ParseDpkgStatus(std::string_view status);

// GoModule is one Go module linked into the root's Go programs, with the programs that
// hold it: what each binary records of itself (`go version -m`), as a kubelet recipe's
// modules.json gives it (docs/stack.md). A replaced module is listed at its replacement's
// version and hash (the Kubernetes staging modules: v0.0.0 replaced by v0.36.x).
struct GoModule {
  std::string path, version, sum;     // sum: go.sum's "h1:" hash
  std::vector<std::string> binaries;  // sorted, unique
};

// ParseGoModules reads a modules.json: {"sets": [{"set", "binaries": [{"binary", "go",
// "modules": [{"path", "version", "sum", "replace"}]}]}]}. The result is sorted by path
// and version; an entry without a path or version is an error naming it.
Result<std::vector<GoModule>> ParseGoModules(std::string_view json);

// SpdxJson renders an SPDX 2.3 document for the packages, and for each Go module a
// package with its pkg:golang purl and its h1 hash. `created` is fixed by the caller
// (the build's SOURCE_DATE_EPOCH) so equal inputs give equal bytes.
std::string SpdxJson(const std::vector<DebPackage>& packages, const std::string& name,
                     const std::string& document_namespace, std::int64_t created,
                     const std::vector<GoModule>& go_modules = {});

}  // namespace sprout
