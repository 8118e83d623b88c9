// Package flagfile lets a daemon's configuration file say what its flags
// say: every flag is also a key of a TOML file, named exactly as the flag
// (`kill-grace = "10s"`, `estimator-opt = ["a=1", "b=2"]`), and a flag given
// on the command line overrides the file.
//
// Values go through each flag's own parser, so a file value means exactly
// what the same flag would mean. Unknown keys, values of the wrong shape and
// values the flag refuses are errors that name the file and the key; nothing
// is applied from a file that does not load. The package never logs.
package flagfile
