package resources

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Parse parses resources in the text syntax (see the package doc), e.g.
// "cpus:2;mem:1024;ports:[31000-32000];cpus(hdfs):1;cpus{REV}:0.5".
// Repeated entries of one key add up (their ranges and set items must not
// overlap, and a scalar sum must stay within MaxValue). The result is
// normalized; the empty text gives empty (nil) Resources.
//
// Errors are *ParseError naming the offending token and wrap ErrInvalid
// (and ErrRevocableReservation for a reserved revocable resource).
func Parse(text string) (Resources, error) {
	m := merger{out: make(Resources, 0, strings.Count(text, ";")+1)}
	for len(text) > 0 {
		tok := text
		if i := strings.IndexByte(text, ';'); i >= 0 {
			tok, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue // tolerate "cpus:1;" and ";;"
		}
		r, perr := parseResource(tok)
		if perr != nil {
			return nil, perr
		}
		if perr := m.add(r, tok); perr != nil {
			return nil, perr
		}
	}
	if len(m.out) == 0 {
		return nil, nil
	}
	return normalizeOwned(m.out), nil
}

// MustParse is Parse for tests and constants: it panics on error.
func MustParse(text string) Resources {
	r, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return r
}

func parseResource(tok string) (Resource, *ParseError) {
	bad := func(err error, format string, args ...any) (Resource, *ParseError) {
		return Resource{}, &ParseError{Token: tok, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	colon := strings.IndexByte(tok, ':')
	if colon < 0 {
		return bad(nil, "missing ':' between name and value")
	}
	head, val := strings.TrimSpace(tok[:colon]), strings.TrimSpace(tok[colon+1:])

	r := Resource{Role: Unreserved}
	end := strings.IndexAny(head, "({")
	if end < 0 {
		end = len(head)
	}
	r.Name = strings.TrimSpace(head[:end])
	if !validName(r.Name) {
		if r.Name == "" {
			return bad(nil, "empty name")
		}
		return bad(nil, "invalid name %q", r.Name)
	}
	rest := strings.TrimSpace(head[end:])
	if strings.HasPrefix(rest, "(") {
		rparen := strings.IndexByte(rest, ')')
		if rparen < 0 {
			return bad(nil, "missing ')' after role")
		}
		inner := rest[1:rparen]
		rest = strings.TrimSpace(rest[rparen+1:])
		role, principal, dynamic := strings.Cut(inner, ",")
		r.Role = strings.TrimSpace(role)
		if why := checkRole(r.Role); why != "" {
			return bad(nil, "%s", why)
		}
		if dynamic {
			principal = strings.TrimSpace(principal)
			if r.Role == Unreserved {
				return bad(nil, "dynamic reservation without a role")
			}
			if why := checkPrincipal(principal); why != "" {
				return bad(nil, "%s", why)
			}
			r.Reservation = &Reservation{Principal: principal}
		}
	}
	if strings.HasPrefix(rest, "{REV}") {
		r.Revocable = true
		rest = strings.TrimSpace(rest[len("{REV}"):])
	}
	if rest != "" {
		return bad(nil, "unexpected %q after name", rest)
	}
	if r.Revocable && r.Role != Unreserved {
		return bad(ErrRevocableReservation, "revocable resources cannot be reserved")
	}

	switch {
	case strings.HasPrefix(val, "["):
		r.Type = Ranges
		if !strings.HasSuffix(val, "]") {
			return bad(nil, "invalid ranges %q: missing ']'", val)
		}
		inner := strings.TrimSpace(val[1 : len(val)-1])
		if inner == "" {
			return r, nil
		}
		r.Ranges = make([]Range, 0, strings.Count(inner, ",")+1)
		for part := range strings.SplitSeq(inner, ",") {
			rg, ok := parseRange(part)
			if !ok {
				return bad(nil, "invalid range %q", strings.TrimSpace(part))
			}
			r.Ranges = append(r.Ranges, rg)
		}
		slices.SortFunc(r.Ranges, compareRange)
		for i := 1; i < len(r.Ranges); i++ {
			if r.Ranges[i].Begin <= r.Ranges[i-1].End {
				return bad(nil, "overlapping ranges %s and %s", r.Ranges[i-1], r.Ranges[i])
			}
		}
	case strings.HasPrefix(val, "{"):
		r.Type = Set
		if !strings.HasSuffix(val, "}") {
			return bad(nil, "invalid set %q: missing '}'", val)
		}
		inner := strings.TrimSpace(val[1 : len(val)-1])
		if inner == "" {
			return r, nil
		}
		r.Set = make([]string, 0, strings.Count(inner, ",")+1)
		for item := range strings.SplitSeq(inner, ",") {
			item = strings.TrimSpace(item)
			if why := checkSetItem(item); why != "" {
				return bad(nil, "%s", why)
			}
			r.Set = append(r.Set, item)
		}
		slices.Sort(r.Set)
		for i := 1; i < len(r.Set); i++ {
			if r.Set[i] == r.Set[i-1] {
				return bad(nil, "duplicate set item %q", r.Set[i])
			}
		}
	default:
		r.Type = Scalar
		v, err := ParseValue(val)
		if err != nil {
			why := ""
			if i := strings.IndexByte(val, '.'); i >= 0 && len(val)-i-1 > 3 && strings.Trim(val[i+1:], "0123456789") == "" {
				why = ": more than 3 decimal places"
			}
			return bad(nil, "invalid scalar %q%s", val, why)
		}
		if v < 0 {
			return bad(nil, "negative scalar %q", val)
		}
		r.Scalar = v
	}
	return r, nil
}

// parseRange parses "b-e" or "n" (with optional spaces).
func parseRange(s string) (Range, bool) {
	b, e, isRange := strings.Cut(s, "-")
	begin, err := strconv.ParseUint(strings.TrimSpace(b), 10, 64)
	if err != nil {
		return Range{}, false
	}
	end := begin
	if isRange {
		end, err = strconv.ParseUint(strings.TrimSpace(e), 10, 64)
		if err != nil || end < begin {
			return Range{}, false
		}
	}
	return Range{begin, end}, true
}

// resKey identifies the entry a resource merges into.
type resKey struct {
	name, role, principal string
	typ                   Type
	dynamic, revocable    bool
}

func keyOf(r *Resource) resKey {
	k := resKey{name: r.Name, role: r.role(), typ: r.Type, revocable: r.Revocable}
	if r.Reservation != nil {
		k.dynamic, k.principal = true, r.Reservation.Principal
	}
	return k
}

// smallList is the length up to which linear scans beat maps.
const smallList = 16

// merger accumulates parsed resources, one entry per key, so that type
// conflicts and overlaps are reported at the token that causes them. It
// switches from linear scans to maps for long texts, keeping Parse linear
// in the number of keys.
type merger struct {
	out   Resources
	keys  map[resKey]int // index in out, once out is long
	names map[string]int // index in out of the first entry of a name
}

// find returns the index of r's entry and of the first entry with r's
// name, or -1.
func (m *merger) find(r *Resource) (entry, name int) {
	if m.keys == nil && len(m.out) > smallList {
		m.keys = make(map[resKey]int, 2*len(m.out))
		m.names = make(map[string]int, 2*len(m.out))
		for i := range m.out {
			m.keys[keyOf(&m.out[i])] = i
			if _, ok := m.names[m.out[i].Name]; !ok {
				m.names[m.out[i].Name] = i
			}
		}
	}
	if m.keys != nil {
		entry, name = -1, -1
		if i, ok := m.keys[keyOf(r)]; ok {
			entry = i
		}
		if i, ok := m.names[r.Name]; ok {
			name = i
		}
		return entry, name
	}
	entry, name = -1, -1
	for i := range m.out {
		o := &m.out[i]
		if o.Name != r.Name {
			continue
		}
		if name < 0 {
			name = i
		}
		if compareKey(o, r) == 0 {
			return i, name
		}
	}
	return entry, name
}

// add merges r (parsed from tok) into m.out.
func (m *merger) add(r Resource, tok string) *ParseError {
	entry, first := m.find(&r)
	if first >= 0 && m.out[first].Type != r.Type {
		return &ParseError{Token: tok, Reason: fmt.Sprintf("%s %q was already given as %s", r.Type, r.Name, m.out[first].Type)}
	}
	if entry < 0 {
		m.out = append(m.out, r)
		if m.keys != nil {
			m.keys[keyOf(&r)] = len(m.out) - 1
			if first < 0 {
				m.names[r.Name] = len(m.out) - 1
			}
		}
		return nil
	}
	// The entry's slices were made by parseResource for this text, so they
	// may be grown in place.
	o := &m.out[entry]
	switch r.Type {
	case Scalar:
		if o.Scalar > MaxValue-r.Scalar {
			return &ParseError{Token: tok, Reason: fmt.Sprintf("sum of %q out of range", r.Name)}
		}
		o.Scalar += r.Scalar
	case Ranges:
		for _, rg := range r.Ranges {
			i, ok := overlapping(o.Ranges, rg)
			if ok {
				return &ParseError{Token: tok, Reason: fmt.Sprintf("range %s overlaps %s given earlier", rg, o.Ranges[i])}
			}
			o.Ranges = slices.Insert(o.Ranges, i, rg)
		}
	case Set:
		for _, s := range r.Set {
			i, found := slices.BinarySearch(o.Set, s)
			if found {
				return &ParseError{Token: tok, Reason: fmt.Sprintf("set item %q given earlier", s)}
			}
			o.Set = slices.Insert(o.Set, i, s)
		}
	}
	return nil
}

// overlapping reports whether rg overlaps a range of rs (sorted and
// non-overlapping) and returns that range's index, or else the index at
// which rg would be inserted.
func overlapping(rs []Range, rg Range) (int, bool) {
	// rs is sorted by End too, so find the first range ending at or after
	// rg.Begin.
	i, _ := slices.BinarySearchFunc(rs, rg.Begin, func(a Range, b uint64) int {
		if a.End < b {
			return -1
		}
		return 1
	})
	return i, i < len(rs) && rs[i].Begin <= rg.End
}
