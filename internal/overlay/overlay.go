package overlay

import (
	"strings"

	"github.com/brimnode/brim/internal/errdefs"
)

// ErrNotSupported: overlayfs is Linux's (internal/errdefs's sentinel).
var ErrNotSupported = errdefs.ErrNotSupported

// Options is the overlay mount data for lower (top first), upper and
// work (`lowerdir=…,upperdir=…,workdir=…`), with the characters overlay
// treats specially escaped. With no upper dir the mount is read-only
// and has no upperdir or workdir.
func Options(lower []string, upper, work string) string {
	esc := make([]string, len(lower))
	for i, l := range lower {
		esc[i] = escape(l)
	}
	s := "lowerdir=" + strings.Join(esc, ":")
	if upper != "" {
		s += ",upperdir=" + escape(upper) + ",workdir=" + escape(work)
	}
	return s
}

func escape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)
	return r.Replace(p)
}
