package containerlog

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkWrite is the shim's cost per MB of a container's output: the
// Writer (records, rotation at the defaults) against the baseline of
// writing the same chunks unformatted to one file, in the same run, for
// lines of 2 bytes (`yes`), 100 bytes and none (16 KiB records). It
// reports ms of CPU (wall, one goroutine) per MB of output and the
// ratio to the baseline.
func BenchmarkWrite(b *testing.B) {
	for _, line := range []int{2, 100, 0} {
		chunk := make([]byte, readChunk)
		if line > 0 {
			for i := range chunk {
				chunk[i] = 'y'
				if i%line == line-1 {
					chunk[i] = '\n'
				}
			}
		} else {
			copy(chunk, bytes.Repeat([]byte("z"), len(chunk)))
		}
		name := "line=" + strconv.Itoa(line)
		if line == 0 {
			name = "line=none"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			raw, err := os.Create(filepath.Join(dir, "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			w, err := Create(filepath.Join(dir, "log"), Limits{MaxSize: DefaultMaxSize, MaxFiles: DefaultMaxFiles})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			const perOp = 16 // chunks: 1 MiB of output
			b.SetBytes(perOp * readChunk)
			var base, logged time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for j := 0; j < perOp; j++ {
					if _, err := raw.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				if i%16 == 15 {
					if err := raw.Truncate(0); err != nil {
						b.Fatal(err)
					}
					if _, err := raw.Seek(0, 0); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for j := 0; j < perOp; j++ {
					w.Write(Stdout, t1, chunk)
				}
				base += t1.Sub(t0)
				logged += time.Since(t1)
			}
			mb := float64(b.N) * perOp * readChunk / (1 << 20)
			b.ReportMetric(float64(logged.Milliseconds())/mb, "ms/MB")
			b.ReportMetric(float64(base.Milliseconds())/mb, "raw-ms/MB")
			b.ReportMetric(float64(logged)/float64(base), "log/raw")
			st := w.Stats()
			b.ReportMetric(float64(st.Out)/float64(st.In), "record-bytes/byte")
		})
	}
}
