package cliout

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
)

// Images writes the table of brim image ls and the cache's size; now
// dates LAST USED.
func Images(w io.Writer, r *agentpb.ListImagesResponse, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREFERENCE\tLAYERS\tSIZE\tLAST USED\tCONTAINERS")
	for _, img := range r.Images {
		refs := "-"
		if len(img.Refs) > 0 {
			refs = strings.Join(img.Refs, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s ago\t%d\n", shortID(img.Id), refs, img.Layers, MiB(img.Size),
			humanDuration(now.Sub(agentclient.TimeOf(img.LastUsedUnixNano))), len(img.Containers))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "cache: %s (%s)\n", MiB(r.CacheBytes), capText(r.CacheMaxBytes))
	return err
}

// capText says the image cache's cap.
func capText(max int64) string {
	if max > 0 {
		return "cap " + MiB(max)
	}
	return "no cap"
}

// PullProgress writes one layer's line of brim image pull.
func PullProgress(w io.Writer, p *agentpb.PullImageProgress) {
	what := fmt.Sprintf("pulled %s", MiB(p.Fetched))
	if p.Cached {
		what = "cached"
	}
	fmt.Fprintf(w, "layer %d/%d %s: %s\n", p.Layer, p.Layers, shortID(p.Digest), what)
}

// Pruned writes what brim image rm (of ref) or prune removed.
func Pruned(w io.Writer, ref string, r *agentpb.PruneImagesResponse) {
	switch {
	case len(r.Images) == 0 && ref != "":
		fmt.Fprintf(w, "untagged %s\n", ref)
	case len(r.Images) == 0:
		fmt.Fprintln(w, "nothing to remove")
	}
	for _, id := range r.Images {
		fmt.Fprintf(w, "removed %s\n", shortID(id))
	}
	if len(r.Images) > 0 {
		fmt.Fprintf(w, "freed %d layers, %s\n", r.Layers, MiB(r.Bytes))
	}
}

// MiB formats bytes in MiB with one decimal ("12.5MiB").
func MiB(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

// shortID is a digest's algorithm and first 12 hex digits.
func shortID(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return d
}
