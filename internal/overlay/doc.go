// Package overlay mounts an overlayfs from lower dirs, an upper and a
// work dir: with the new mount API's lowerdir+ (one layer at a time, no
// length limit; Linux 6.8 and later) or, on older kernels, mount(2) with
// the options string (at most a page). The image store's snapshots and
// the shim both mount with it; neither the image store nor the shim's
// binary need link the other.
//
// It never creates or removes directories and never logs. Errors wrap
// ErrNotSupported on systems other than Linux.
package overlay
