package resources

import (
	"fmt"
	"math"
	"strconv"
)

// Value is an exact fixed-point quantity in thousandths: 1.5 is Value(1500).
// Mesos rounds scalars to three decimals; brim stores them that way so sums
// and differences never drift. A Value is a plain integer and safe for
// concurrent use.
type Value int64

const (
	// valueScale is the number of thousandths in one unit.
	valueScale = 1000
	// MaxValue is the largest representable Value (about 9.2e15 units).
	MaxValue Value = math.MaxInt64
	// MinValue is the smallest representable Value.
	MinValue Value = math.MinInt64
)

// ParseValue parses a decimal number with at most three fractional digits:
// "2", "1.5", "0.001", ".5", "-0.25". Exponents, NaN, Inf, hexadecimal and
// more than three decimals are rejected (an operator who writes 0.0005 cpus
// should see an error rather than silently get nothing). Errors wrap
// ErrInvalid.
func ParseValue(s string) (Value, error) {
	if s == "" {
		return 0, fmt.Errorf("parse value %q: empty: %w", s, ErrInvalid)
	}
	neg := false
	i := 0
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		i++
	}
	var whole, frac uint64
	digits, fracDigits := 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if whole > (math.MaxInt64/valueScale)/10+1 {
			return 0, fmt.Errorf("parse value %q: out of range: %w", s, ErrInvalid)
		}
		whole = whole*10 + uint64(s[i]-'0')
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			fracDigits++
			if fracDigits > 3 {
				return 0, fmt.Errorf("parse value %q: more than 3 decimal places: %w", s, ErrInvalid)
			}
			frac = frac*10 + uint64(s[i]-'0')
		}
	}
	if i != len(s) || digits+fracDigits == 0 {
		return 0, fmt.Errorf("parse value %q: not a decimal number: %w", s, ErrInvalid)
	}
	for n := fracDigits; n < 3; n++ {
		frac *= 10
	}
	if whole > (math.MaxInt64-frac)/valueScale {
		return 0, fmt.Errorf("parse value %q: out of range: %w", s, ErrInvalid)
	}
	v := Value(whole*valueScale + frac)
	if neg {
		v = -v
	}
	return v, nil
}

// String formats v with the fewest decimals that represent it exactly:
// "1.5", "2", "0.001", "-0.25". The result parses back with ParseValue.
func (v Value) String() string {
	var buf [24]byte
	return string(v.appendText(buf[:0]))
}

// appendText appends v's decimal text to b.
func (v Value) appendText(b []byte) []byte {
	u := uint64(v)
	if v < 0 {
		b = append(b, '-')
		u = -u // two's complement magnitude, correct for MinValue too
	}
	b = strconv.AppendUint(b, u/valueScale, 10)
	frac := u % valueScale
	if frac == 0 {
		return b
	}
	d := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

// Float64 returns v as a float64, for display and for ratios (DRF shares).
// Never feed it back into arithmetic: use Value.
func (v Value) Float64() float64 {
	return float64(v) / valueScale
}

// FromFloat rounds f to three decimals (half away from zero). NaN maps to
// 0; values beyond the representable range saturate at MaxValue/MinValue.
func FromFloat(f float64) Value {
	if math.IsNaN(f) {
		return 0
	}
	r := math.Round(f * valueScale)
	switch {
	case r >= math.MaxInt64:
		return MaxValue
	case r <= math.MinInt64:
		return MinValue
	}
	return Value(r)
}

// FromInt returns n whole units as a Value, saturating on overflow.
func FromInt(n int64) Value {
	switch {
	case n > math.MaxInt64/valueScale:
		return MaxValue
	case n < math.MinInt64/valueScale:
		return MinValue
	}
	return Value(n * valueScale)
}

// addValue adds with saturation so huge operator input cannot wrap around.
func addValue(a, b Value) Value {
	s := a + b
	if (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return MaxValue
	}
	return MinValue
}
