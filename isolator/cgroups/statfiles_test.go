package cgroups

import (
	"strconv"
	"testing"
)

func TestParseDecimal(t *testing.T) {
	for _, in := range []string{"0.00", "1.50", "0.75", "0.10", "99.99", "100.00", "3.14159", "12", "1e3", "0.1234567890123456789"} {
		want, _ := strconv.ParseFloat(in, 64)
		if got, err := parseDecimal([]byte(in)); err != nil || got != want {
			t.Errorf("parseDecimal(%q) = %v, %v; want %v (strconv)", in, got, err, want)
		}
	}
	if _, err := parseDecimal([]byte("x.5")); err == nil {
		t.Error("parseDecimal(x.5) succeeded")
	}
}

func TestParseDigits(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "42": 42, "18446744073709551615": 1<<64 - 1} {
		if got, err := parseDigits([]byte(in)); err != nil || got != want {
			t.Errorf("parseDigits(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "18446744073709551616", "1 2", "99999999999999999999999"} {
		if _, err := parseDigits([]byte(bad)); err == nil {
			t.Errorf("parseDigits(%q) succeeded", bad)
		}
	}
}

func TestKeyValues(t *testing.T) {
	got := map[string]uint64{}
	for k, v := range keyValues([]byte("user 250\nsystem 75\nbad line\nneg -1\n\nlast 7")) {
		got[string(k)] = v
	}
	if len(got) != 3 || got["user"] != 250 || got["system"] != 75 || got["last"] != 7 {
		t.Errorf("keyValues = %v", got)
	}
	n := 0
	for range keyValues([]byte("a 1\nb 2\n")) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("break ignored: %d", n)
	}
}

func TestLimitsOf(t *testing.T) {
	s := Spec{}
	s.Limits.MemoryBytes, s.Limits.Pids = 100<<20+1000, 7
	if l := limitsOf(&s); l.memBytes != 100<<20 || l.pids != 7 {
		t.Errorf("limitsOf = %+v", l)
	}
	if l := limitsOf(&Spec{}); l.memBytes != 0 || l.pids != 0 {
		t.Errorf("limitsOf(no limits) = %+v", l)
	}
}
