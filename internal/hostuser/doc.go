// Package hostuser resolves a task's user ("name", "uid", "name:group",
// "uid:gid") to numeric IDs from a root filesystem's /etc/passwd and
// /etc/group, without cgo or NSS: the files are the user database the
// containers see.
//
// It never changes anything on the host and never logs.
//
// Sentinels: ErrUnknown (a name with no entry, or a numeric uid with no
// entry and no gid given), ErrInvalid (a malformed user string).
package hostuser
