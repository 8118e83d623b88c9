package image

import "strings"

// Options is the overlay mount data for the snapshot
// (`lowerdir=…,upperdir=…,workdir=…`), with the characters overlay
// treats specially escaped. The kernel takes at most a page of it: an
// image with many layers under a long root may not fit, and Mount then
// passes the layers one by one instead.
func (s *Snapshot) Options() string {
	esc := make([]string, len(s.Lower))
	for i, l := range s.Lower {
		esc[i] = escapeOverlay(l)
	}
	return "lowerdir=" + strings.Join(esc, ":") + ",upperdir=" + escapeOverlay(s.Upper) + ",workdir=" + escapeOverlay(s.Work)
}

func escapeOverlay(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)
	return r.Replace(p)
}
