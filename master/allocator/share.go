package allocator

import (
	"cmp"
	"math"
	"math/bits"
)

// shareKey is a sorter key. Under drf it is a dominant share divided by a
// weight, kept exactly: num / (den · w), where num is the allocation of
// the dominant kind and den its cluster total, in thousandths. Floats
// would break the documented tie rule (older first) on noise: disk 60/400
// is 0.15000000000000002 after one rounding and cpus 12/80 is 0.15. f is
// the same value in floating point, exact enough to decide every
// comparison that is not a near-tie without touching the integers.
//
// Under the random sorter (a lottery time) and meDRF (η-weighted sums of
// real factors) the key is f alone and den is 0.
type shareKey struct {
	f   float64
	num uint64
	den uint64
	w   float64 // the role's weight; 1 for clients
}

// fastMargin bounds the float fast path: f is within a few ulps (2^-51)
// of num/(den·w), so keys whose floats differ by more than 2^-40
// relatively are ordered by the floats alone.
const fastMargin = 1 - 0x1p-40

// exactKey returns the key num/(den·w).
func exactKey(num, den uint64, w float64) shareKey {
	return makeKey(num, den, float64(num)/float64(den)/w, w)
}

// makeKey returns the key num/(den·w) with f its float value to within a
// few ulps. f becomes NaN where a float could not stand for the value
// within the margin (under- or overflow), which sends every comparison
// to the integers.
func makeKey(num, den uint64, f, w float64) shareKey {
	k := shareKey{num: num, den: den, w: w}
	if num == 0 {
		return k
	}
	k.f = f
	if !(f >= 0x1p-900 && f <= 0x1p900) {
		k.f = math.NaN()
	}
	return k
}

// realKey is a key with no exact form.
func realKey(f float64) shareKey { return shareKey{f: f} }

// value is the key as a float, for reports.
func (k *shareKey) value() float64 {
	if k.den == 0 {
		return k.f
	}
	return float64(k.num) / float64(k.den) / k.w
}

// cmpKeys orders two keys (-1, 0, +1); equal values compare 0 however
// they are written.
func cmpKeys(x, y *shareKey) int {
	if x.den == 0 || y.den == 0 {
		return cmp.Compare(x.f, y.f)
	}
	if x.den == y.den && x.w == y.w {
		return cmp.Compare(x.num, y.num)
	}
	if x.f < y.f*fastMargin {
		return -1
	}
	if y.f < x.f*fastMargin {
		return 1
	}
	return cmpExact(x, y)
}

// cmpExact compares num_x/(den_x·w_x) with num_y/(den_y·w_y) as
// num_x·den_y·w_y against num_y·den_x·w_x, every weight written exactly
// as an integer times a power of two, in 192-bit integers.
func cmpExact(x, y *shareKey) int {
	if x.num == 0 || y.num == 0 {
		return cmp.Compare(x.num, y.num)
	}
	mx, ex := dyadic(x.w)
	my, ey := dyadic(y.w)
	l := mul3(x.num, y.den, my)
	r := mul3(y.num, x.den, mx)
	// compare l·2^ey with r·2^ex
	if ey >= ex {
		return cmpShifted(&l, &r, ey-ex)
	}
	return -cmpShifted(&r, &l, ex-ey)
}

// dyadic writes a positive finite w as m·2^e exactly (m < 2^53).
func dyadic(w float64) (m uint64, e int) {
	if w >= 1 && w < 1<<53 && float64(uint64(w)) == w {
		return uint64(w), 0 // the usual weights, inlined
	}
	return dyadicFrac(w)
}

func dyadicFrac(w float64) (m uint64, e int) {
	frac, exp := math.Frexp(w)
	return uint64(frac * (1 << 53)), exp - 53
}

// u192 is an unsigned 192-bit integer, least significant word first.
type u192 [3]uint64

// mul3 returns a·b·c.
func mul3(a, b, c uint64) u192 {
	hi, lo := bits.Mul64(a, b)
	h0, l0 := bits.Mul64(lo, c)
	h1, l1 := bits.Mul64(hi, c)
	w1, carry := bits.Add64(h0, l1, 0)
	return u192{l0, w1, h1 + carry}
}

func (x *u192) bitLen() int {
	switch {
	case x[2] != 0:
		return 128 + bits.Len64(x[2])
	case x[1] != 0:
		return 64 + bits.Len64(x[1])
	}
	return bits.Len64(x[0])
}

// cmpShifted compares l·2^s with r (l, r > 0, s >= 0).
func cmpShifted(l, r *u192, s int) int {
	ll, lr := l.bitLen()+s, r.bitLen()
	if ll != lr {
		return cmp.Compare(ll, lr)
	}
	// Same length, so l·2^s fits in 192 bits (s < 192).
	x0, x1, x2 := l[0], l[1], l[2]
	for ; s >= 64; s -= 64 {
		x0, x1, x2 = 0, x0, x1
	}
	if s > 0 {
		x0, x1, x2 = x0<<s, x1<<s|x0>>(64-s), x2<<s|x1>>(64-s)
	}
	switch {
	case x2 != r[2]:
		return cmp.Compare(x2, r[2])
	case x1 != r[1]:
		return cmp.Compare(x1, r[1])
	}
	return cmp.Compare(x0, r[0])
}

// dominant returns alloc's dominant share of total over the first n
// kinds as num/den, exactly, and its kind d: the kind with the largest
// alloc/total, by 128-bit cross products (no float pass first: whole-agent
// offers tie across kinds, which would send it to the integers anyway).
// An empty allocation is 0/1.
func dominant(alloc, total *vec, n int) (num, den uint64, d int) {
	num, den = 0, 1
	for k := range n {
		if alloc[k] <= 0 || total[k] <= 0 {
			continue
		}
		a, t := uint64(alloc[k]), uint64(total[k])
		h1, l1 := bits.Mul64(a, den)
		h2, l2 := bits.Mul64(num, t)
		if h1 > h2 || (h1 == h2 && l1 > l2) {
			num, den, d = a, t, k
		}
	}
	return num, den, d
}
