// Package subid is the host ID range a user namespace maps a container's
// IDs onto: container uid (gid) n runs as host uid HostUID+n (gid
// HostGID+n), for n below Size. Parse reads the agent's --userns-range:
// "START:COUNT" (the same block of uids and gids) or the NAME of an entry
// in /etc/subuid- and /etc/subgid-style files ("NAME:START:COUNT" lines,
// as shadow-utils' newuidmap reads them).
//
// It never changes anything on the host and never logs.
//
// Sentinel: ErrInvalid (a malformed or unusable range, or a NAME with no
// entry).
package subid
