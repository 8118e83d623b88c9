package buildinfo

import (
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	noVCS := func() (string, string, bool) { return "", "", false }
	vcs := func() (string, string, bool) { return "abc123", "2026-11-25T00:00:00Z", true }
	for name, tc := range map[string]struct {
		v, c, d string
		vcs     func() (string, string, bool)
		want    Info
	}{
		"ldflags win":  {"v1.2.3", "deadbeef", "2026-01-01T00:00:00Z", vcs, Info{Version: "v1.2.3", Commit: "deadbeef", BuildDate: "2026-01-01T00:00:00Z"}},
		"vcs fallback": {"v1.2.3", "", "", vcs, Info{Version: "v1.2.3", Commit: "abc123-dirty", BuildDate: "2026-11-25T00:00:00Z"}},
		"nothing":      {"", "", "", noVCS, Info{Version: "unknown", Commit: "unknown", BuildDate: "unknown"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := get(tc.v, tc.c, tc.d, tc.vcs)
			if got.Version != tc.want.Version || got.Commit != tc.want.Commit || got.BuildDate != tc.want.BuildDate {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.GoVersion == "" || !strings.Contains(got.Platform, "/") {
				t.Errorf("go version/platform missing: %+v", got)
			}
			if !strings.Contains(got.String(), got.Commit) {
				t.Errorf("String() %q lacks the commit", got.String())
			}
		})
	}
}
