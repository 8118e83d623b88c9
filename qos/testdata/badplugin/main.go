// Command badplugin is a misbehaving QoS plugin for the tests: with
// argument "crash" it exits during its first call, with "hang" it never
// answers its first call. A marker file (second argument) records that
// the misbehaviour happened, so the restarted process answers normally.
package main

import (
	"context"
	"os"

	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/qos"
)

type bad struct{ mode, marker string }

func (b *bad) Corrections(ctx context.Context, u monitor.Usage) ([]qos.Correction, error) {
	if _, err := os.Stat(b.marker); os.IsNotExist(err) {
		_ = os.WriteFile(b.marker, []byte(b.mode), 0o600)
		if b.mode == "crash" {
			os.Exit(3)
		}
		select {} // hang
	}
	return qos.Noop{}.Corrections(ctx, u)
}

func main() {
	qos.Serve(&bad{mode: os.Args[1], marker: os.Args[2]})
}
