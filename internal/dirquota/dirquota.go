package dirquota

import "github.com/brimnode/brim/internal/errdefs"

// ErrNotSupported: no enforced project quotas on the file system, or
// not Linux (internal/errdefs's sentinel).
var ErrNotSupported = errdefs.ErrNotSupported

// FirstProject is the lowest project ID Projects hands out: far above
// the small IDs operators give their own projects in /etc/projid.
const FirstProject = 1 << 24
