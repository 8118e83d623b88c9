// Package bytesize parses and prints sizes in bytes the way brim's flags
// take them: a whole number with an optional binary unit ("10MiB",
// "512k", "1g", "4096"). It imports only the standard library.
package bytesize
