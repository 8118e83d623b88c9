// Package testregistry starts a real OCI distribution registry (Debian's
// docker-registry, distribution v2) on a free loopback port for tests,
// with or without TLS (a CA it makes) and basic auth (an htpasswd file
// with bcrypt hashes), and builds and pushes test images to it with
// go-containerregistry.
//
// It owns the registry process it starts and stops it in t.Cleanup; it
// never touches a registry it did not start. It is for tests only.
package testregistry
