package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile:
//
//	-X github.com/brimnode/brim/internal/buildinfo.version=v0.4.0-12-gabc1234
//	-X github.com/brimnode/brim/internal/buildinfo.commit=abc1234…
//	-X github.com/brimnode/brim/internal/buildinfo.date=2026-11-25T02:00:00Z
var (
	version string
	commit  string
	date    string
)

// Info describes one build. Fields unknown to the build are "unknown",
// never empty.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Get returns the running binary's build information.
func Get() Info {
	return get(version, commit, date, readVCS)
}

func get(v, c, d string, vcs func() (rev, time string, modified bool)) Info {
	in := Info{Version: v, Commit: c, BuildDate: d, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if in.Commit == "" || in.BuildDate == "" {
		rev, t, modified := vcs()
		if in.Commit == "" && rev != "" {
			in.Commit = rev
			if modified {
				in.Commit += "-dirty"
			}
		}
		if in.BuildDate == "" {
			in.BuildDate = t
		}
	}
	for _, f := range []*string{&in.Version, &in.Commit, &in.BuildDate} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return in
}

func readVCS() (rev, time string, modified bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", false
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, time, modified
}

// String is the one-line form `brim --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}
