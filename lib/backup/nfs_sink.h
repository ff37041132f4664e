// A sink on an NFS share, reached in user space with libnfs (NFSv4 over TCP, AUTH_SYS):
// no kernel NFS client and no mount on the node. The one file that links libnfs.
#pragma once

#include <memory>

#include "backup/sink.h"
#include "util/result.h"

namespace sprout::backup {

// OpenNfsSink connects to loc.host, opens the folder loc.path (NFSv4 looks every
// part of the path up from the server's root) and returns it as a sink. Every NFS call,
// the connection and the mount included, fails after timeout_ms without an answer.
Result<std::unique_ptr<Sink>> OpenNfsSink(const SinkLocation& loc, int timeout_ms);

}  // namespace sprout::backup
