// Package imageref parses image references and recognises image IDs,
// and nothing else: what a process that only checks a task's image
// (the master, at ACCEPT) links, without package image's registry
// client, store and unpacking (net/http, TLS, compression).
//
// Package image parses with it (image.ParseReference, image.IsID) and
// its ErrInvalidReference is ErrInvalid.
package imageref
