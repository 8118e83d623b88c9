package image

import (
	"archive/tar"
	"strings"
)

const paxXattr = "SCHILY.xattr."

// checkXattrs refuses an entry carrying overlayfs's own xattrs: in a
// lower dir they would redirect lookups or fake whiteouts and opaque
// directories that the layer did not declare the OCI way.
func checkXattrs(hdr *tar.Header) error {
	for k := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		if strings.HasPrefix(attr, "trusted.overlay.") || strings.HasPrefix(attr, "user.overlay.") {
			return &UnsafeLayerError{Entry: hdr.Name, Reason: "overlayfs xattr " + attr + " refused"}
		}
	}
	return nil
}

// keepXattr says which xattrs an unpacked file keeps: file capabilities
// (ping, …) and user.*. Others (security.selinux, ACLs, trusted.*) are
// the building host's, meaningless here.
func keepXattr(attr string) bool {
	return attr == "security.capability" || strings.HasPrefix(attr, "user.")
}
