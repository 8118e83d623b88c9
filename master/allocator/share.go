package allocator

import (
	"cmp"
	"math"
	"math/bits"
)

// shareKey is a sorter key. Under drf it is a dominant share divided by a
// weight, kept exactly: num / (den · w), where num is the allocation of
// the dominant kind and den its cluster total, in thousandths, and wb the
// bits of the weight w (1 for clients), exact as every float is. Floats
// would break the documented tie rule (older first) on noise: disk 60/400
// is 0.15000000000000002 after one rounding and cpus 12/80 is 0.15.
//
// Under the random sorter (a lottery time) and meDRF (η-weighted sums of
// real factors) the key is a non-negative float f, kept as its bits in
// num (which order as f does) with den, wb and the field f 0.
type shareKey struct {
	num uint64
	den uint64
	wb  uint64
	// f is the exact key's value in floating point, within a few ulps,
	// to order keys of different scales that are not near-ties without
	// the integers; NaN where a float could not stand for it.
	f float64
}

// fastMargin bounds the float fast path: f is within a few ulps (2^-51)
// of num/(den·w), so keys whose floats differ by more than 2^-40
// relatively are ordered by the floats alone.
const fastMargin = 1 - 0x1p-40

// exactKey returns the key num/(den·w) (den > 0, w > 0 finite).
func exactKey(num, den uint64, w float64) shareKey {
	return makeKey(num, den, w, float64(num)/float64(den)/w)
}

// makeKey returns the key num/(den·w) with f its float value to within a
// few ulps.
func makeKey(num, den uint64, w, f float64) shareKey {
	if f != 0 && !(f >= 0x1p-900 && f <= 0x1p900) {
		f = math.NaN()
	}
	return shareKey{num: num, den: den, wb: math.Float64bits(w), f: f}
}

// realKey is a key with no exact form (f >= 0).
func realKey(f float64) shareKey { return shareKey{num: math.Float64bits(max(f, 0))} }

// value is the key as a float, for reports and the lottery.
func (k *shareKey) value() float64 {
	if k.den == 0 {
		return math.Float64frombits(k.num)
	}
	return float64(k.num) / float64(k.den) / math.Float64frombits(k.wb)
}

// sameScale reports whether k and o share their denominator and weight,
// so that their numerators order them.
func (k *shareKey) sameScale(o *shareKey) bool { return k.den == o.den && k.wb == o.wb }

// cmpKeys orders two keys (-1, 0, +1); equal values compare 0 however
// they are written.
func cmpKeys(x, y *shareKey) int {
	if x.sameScale(y) {
		return cmp.Compare(x.num, y.num)
	}
	if x.den == 0 || y.den == 0 { // a float key and an exact one: not met in practice
		return cmp.Compare(x.value(), y.value())
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
// num_x·den_y·w_y against num_y·den_x·w_x in 192-bit integers, each
// weight written exactly as m·2^e.
func cmpExact(x, y *shareKey) int {
	if x.num == 0 || y.num == 0 {
		return cmp.Compare(x.num, y.num)
	}
	mx, ex := dyadic(x.wb)
	my, ey := dyadic(y.wb)
	l := mul3(x.num, y.den, my)
	r := mul3(y.num, x.den, mx)
	if ex == ey { // integer weights, and every client
		switch {
		case l[2] != r[2]:
			return cmp.Compare(l[2], r[2])
		case l[1] != r[1]:
			return cmp.Compare(l[1], r[1])
		}
		return cmp.Compare(l[0], r[0])
	}
	// compare l·2^ey with r·2^ex
	if ey > ex {
		return cmpShifted(&l, &r, ey-ex)
	}
	return -cmpShifted(&r, &l, ex-ey)
}

// dyadic writes the positive finite float with bits b as m·2^e exactly
// (m < 2^53); integers as themselves (e = 0).
func dyadic(b uint64) (m uint64, e int) {
	w := math.Float64frombits(b)
	if w < 1<<53 && float64(uint64(w)) == w {
		return uint64(w), 0 // the usual weights
	}
	exp := int(b >> 52 & 0x7ff)
	m = b & (1<<52 - 1)
	if exp == 0 { // subnormal
		return m, -1074
	}
	return m | 1<<52, exp - 1075
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
// kinds as num/den, exactly, and its kind: the largest alloc/total, by
// 128-bit cross products. An empty allocation is 0/1.
func dominant(alloc, total *vec, n int) (num, den uint64, d int) {
	num, den = 0, 1
	tot := total[:n]
	for k, x := range alloc[:n] {
		if x <= 0 || tot[k] <= 0 {
			continue
		}
		a, t := uint64(x), uint64(tot[k])
		if num == 0 {
			num, den, d = a, t, k
			continue
		}
		h1, l1 := bits.Mul64(a, den)
		h2, l2 := bits.Mul64(num, t)
		if h1 > h2 || (h1 == h2 && l1 > l2) {
			num, den, d = a, t, k
		}
	}
	return num, den, d
}
