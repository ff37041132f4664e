// The node's state and its TPM, as `sprout-firstboot` sees them at run time: whether /var
// is the encrypted state the image asks for, and the TPM's dictionary-attack counter,
// which a node that unlocked its state resets at every boot (docs/secure-boot.md).
#pragma once

#include <functional>
#include <string>

namespace sprout::firstboot {

// StateLine is the state partition's line of `status`: whether /var is encrypted as the
// image asks, from /proc/cmdline and where /var is mounted from; "" when the image does
// not ask for encryption.
std::string StateLine();

// TpmLine is the TPM's line of `status` on a node whose state the TPM unlocked: its
// lockout counter and limit, or why they could not be read; "" on any other node.
std::string TpmLine();

// ResetTpmLockout runs at every boot of a node whose state the TPM unlocked: it reads the
// TPM's dictionary-attack counter and, when it is above 0 and the lockout authorization
// is empty, resets it, so power cuts in a row never lock the node out of its state. It
// says what it found and did through log (priority, message); other nodes are left alone.
void ResetTpmLockout(const std::function<void(int, const std::string&)>& log);

}  // namespace sprout::firstboot
