// Package image owns OCI images on an agent: parsing references, pulling
// (from a registry, an OCI layout or archive, a docker-save tar),
// verifying every blob by digest, unpacking layers once into a
// content-addressed cache, per-container overlay snapshots with leases,
// and garbage collection of the cache.
//
// It never runs containers, mounts nothing on its own (Snapshot.Mount is
// called by whoever builds the container's root), never changes a
// file's owner per container (user namespaces use id-mapped mounts of
// the shared layers), never logs (errors carry everything) and never
// talks to the master.
//
// # API for the containerizer
//
//	s, err := image.Open(image.Options{Root: STATE + "/images", AuthFile: …,
//	        Registries: map[string]image.RegistryConfig{…}, MaxBytes: …, Metrics: m})
//	defer s.Close()
//
//	img, err := s.Get(ref)                       // cached? no network
//	if errors.Is(err, image.ErrNotFound) {
//	        img, err = s.Pull(ctx, ref, image.PullOptions{}) // resolve, verify, unpack
//	}
//	// img.Config: Entrypoint, Cmd, Env, WorkingDir, User, ExposedPorts
//	// img.Digest (inspect), img.ID, img.Layers
//
//	snap, err := s.Prepare(ctx, containerID, img) // leases img to the container
//	err = snap.Mount(bundleRootfs)                // overlay: snap.Lower (top first), Upper, Work
//	// or snap.Options() as the data of a runtime-spec mount
//	…container runs and exits…
//	unix.Unmount(bundleRootfs, 0)
//	err = s.Release(containerID)                  // upper dir and lease gone
//
//	// after an agent restart: s.Snapshots() lists the leases; release
//	// those whose containers no longer exist, s.Snapshot(id) for the rest.
//	s.List(); s.Remove(ctx, ref); s.Prune(ctx); s.GC(ctx); s.Usage()
//
// A Store belongs to one process (Open takes a flock on Root). Every
// method is safe for concurrent use; concurrent Pulls of one source, and
// of one layer, do the work once.
//
// # On disk (under Root)
//
//	blobs/sha256/HEX          manifests, configs, indexes, by digest
//	layers/sha256/HEX/fs      an unpacked layer, named by its diff ID: an overlay lower dir
//	layers/sha256/HEX/layer.json
//	images/HEX.json           an image's record (HEX of its config digest)
//	snapshots/ID/{upper,work,lease.json}
//	tmp/                      work in progress; emptied by Open
//	lock
//
// A layer is unpacked into tmp/, both its digests checked, the file
// system synced (syncfs) and only then renamed into layers/: a layer
// directory exists whole or not at all, whatever kills the process. An
// image record is written (fsynced) after its layers; removals rename
// into tmp/ first. Compressed layer blobs are not kept: the unpacked
// directory, named by the uncompressed digest, is the cache.
//
// # What a layer may hold
//
// Every path is resolved by the kernel beneath the layer's directory
// without following any symlink (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), and
// the last component is created without following it. So: `..`
// components, an entry below a symlink (absolute or relative) and a hard
// link whose target is outside the layer or below a symlink are refused
// (ErrUnsafeLayer); a symlink itself may point anywhere, as it is
// resolved inside the container's root at run time. Device nodes are
// refused, not skipped (the runtime gives each container its own /dev;
// a layer that needs one is wrong and says so). overlayfs's own xattrs
// (trusted.overlay.*, user.overlay.*) are refused: they would redirect
// lookups. OCI whiteouts become overlay's: `.wh.NAME` a 0/0 character
// device, `.wh..wh..opq` trusted.overlay.opaque=y. Owners, modes with
// their setuid/setgid bits, times, file capabilities
// (security.capability) and user.* xattrs are kept, as images depend
// on them (su, ping); the runtime decides what they may do
// (no_new_privileges, capabilities, user namespaces).
//
// # Sentinels
//
// ErrNotFound, ErrInvalidReference, ErrDigestMismatch (*DigestError),
// ErrNoPlatform (*PlatformError), ErrUnsafeLayer (*UnsafeLayerError),
// ErrUnauthorized, ErrInsecure, ErrInUse, ErrExist, ErrNotSupported
// (internal/errdefs's). A full disk is the syscall's ENOSPC, wrapped.
package image
