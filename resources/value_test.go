package resources

import (
	"errors"
	"math"
	"testing"
)

func TestParseValue(t *testing.T) {
	tests := []struct {
		in   string
		want Value
	}{
		{"0", 0},
		{"2", 2000},
		{"1.5", 1500},
		{"0.001", 1},
		{".5", 500},
		{"3.", 3000},
		{"+1", 1000},
		{"-0.25", -250},
		{"007.100", 7100},
		{"9223372036854775.807", MaxValue},
	}
	for _, tt := range tests {
		got, err := ParseValue(tt.in)
		if err != nil {
			t.Errorf("ParseValue(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseValue(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParseValueErrors(t *testing.T) {
	for _, in := range []string{
		"", "-", ".", "abc", "1.0001", "0.0005", "1e3", "NaN", "Inf", "-Inf",
		"0x10", "1,5", " 1", "1 ", "1..2", "1.2.3", "9223372036854775.808",
		"99999999999999999999", "--1",
	} {
		v, err := ParseValue(in)
		if err == nil {
			t.Errorf("ParseValue(%q) = %v, want error", in, v)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseValue(%q) error %v does not wrap ErrInvalid", in, err)
		}
	}
}

func TestValueString(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{0, "0"},
		{1, "0.001"},
		{10, "0.01"},
		{100, "0.1"},
		{1500, "1.5"},
		{2000, "2"},
		{1234567, "1234.567"},
		{-250, "-0.25"},
		{-1, "-0.001"},
		{MaxValue, "9223372036854775.807"},
		{MinValue, "-9223372036854775.808"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("Value(%d).String() = %q, want %q", int64(tt.v), got, tt.want)
		}
		if tt.v == MinValue {
			continue // its magnitude is not representable as a positive Value
		}
		back, err := ParseValue(tt.want)
		if err != nil || back != tt.v {
			t.Errorf("ParseValue(%q) = %v, %v; want %d", tt.want, back, err, int64(tt.v))
		}
	}
}

func TestFromFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want Value
	}{
		{0, 0},
		{1.5, 1500},
		{0.1 + 0.2, 300}, // float drift is rounded away
		{0.0004, 0},
		{0.0005, 1}, // half away from zero
		{-0.0005, -1},
		{2.9999, 3000},
		{math.NaN(), 0},
		{math.Inf(1), MaxValue},
		{math.Inf(-1), MinValue},
		{1e300, MaxValue},
	}
	for _, tt := range tests {
		if got := FromFloat(tt.f); got != tt.want {
			t.Errorf("FromFloat(%v) = %d, want %d", tt.f, got, tt.want)
		}
	}
}

func TestValueFloat64(t *testing.T) {
	if got := Value(1500).Float64(); got != 1.5 {
		t.Errorf("Value(1500).Float64() = %v, want 1.5", got)
	}
	if got := FromFloat(Value(123456).Float64()); got != 123456 {
		t.Errorf("FromFloat(Float64()) = %d, want 123456", got)
	}
}

func TestFromInt(t *testing.T) {
	tests := []struct {
		n    int64
		want Value
	}{
		{0, 0}, {3, 3000}, {-2, -2000},
		{math.MaxInt64, MaxValue}, {math.MinInt64, MinValue},
	}
	for _, tt := range tests {
		if got := FromInt(tt.n); got != tt.want {
			t.Errorf("FromInt(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestAddValueSaturates(t *testing.T) {
	tests := []struct{ a, b, want Value }{
		{1, 2, 3},
		{5, -7, -2},
		{MaxValue, 1, MaxValue},
		{MaxValue - 1, 1, MaxValue},
		{MinValue, -1, MinValue},
		{MaxValue, MinValue, -1},
		{0, 0, 0},
	}
	for _, tt := range tests {
		if got := addValue(tt.a, tt.b); got != tt.want {
			t.Errorf("addValue(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
