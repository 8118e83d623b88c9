//go:build !unix

package boltstore

// ownLikeDir does nothing where files have no unix owner.
func ownLikeDir(string, ...string) error { return nil }
