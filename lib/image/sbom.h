// The software bill of materials of a root: Debian packages from dpkg's status file,
// rendered as SPDX 2.3 JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sprout {

// DebPackage is one installed Debian package.
struct DebPackage {
  std::string name, version, architecture, source;
};

// ParseDpkgStatus lists the installed packages of a dpkg status file, sorted by name.
std::vector<DebPackage> ParseDpkgStatus(std::string_view status);

// SpdxJson renders an SPDX 2.3 document for the packages. `created` is fixed by the
// caller (the build's SOURCE_DATE_EPOCH) so equal inputs give equal bytes.
std::string SpdxJson(const std::vector<DebPackage>& packages, const std::string& name,
                     const std::string& document_namespace, std::int64_t created);

}  // namespace sprout
