package bytesize

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true}, {"0", 0, true}, {"512k", 512 << 10, true}, {"10MiB", 10 << 20, true},
		{"10m", 10 << 20, true}, {"10M", 10 << 20, true}, {"1g", 1 << 30, true}, {"2GB", 2 << 30, true},
		{" 7 KiB ", 7 << 10, true}, {"100B", 100, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5m", 0, false}, {"lots", 0, false}, {"10x", 0, false},
		{"9999999999t", 0, false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("Parse(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{10 << 20: "10MiB", 1536 << 10: "1536KiB", 100: "100B", 0: "0B", 1 << 30: "1GiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
		if back, err := Parse(Format(n)); err != nil || back != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, back, err)
		}
	}
}
