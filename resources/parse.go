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

// parseResource parses one token, "name(role,principal){REV}:value".
func parseResource(tok string) (Resource, *ParseError) {
	colon := strings.IndexByte(tok, ':')
	if colon < 0 {
		return Resource{}, badToken(tok, nil, "missing ':' between name and value")
	}
	head, val := strings.TrimSpace(tok[:colon]), strings.TrimSpace(tok[colon+1:])
	r := Resource{Role: Unreserved}
	if perr := parseHead(&r, tok, head); perr != nil {
		return Resource{}, perr
	}
	var perr *ParseError
	switch {
	case strings.HasPrefix(val, "["):
		perr = parseRanges(&r, tok, val)
	case strings.HasPrefix(val, "{"):
		perr = parseSet(&r, tok, val)
	default:
		perr = parseScalar(&r, tok, val)
	}
	if perr != nil {
		return Resource{}, perr
	}
	return r, nil
}

// badToken is the error of token tok.
func badToken(tok string, err error, format string, args ...any) *ParseError {
	return &ParseError{Token: tok, Reason: fmt.Sprintf(format, args...), Err: err}
}

// parseHead parses the part of token tok before the colon into r: the
// name, a role with an optional principal (a dynamic reservation), and
// {REV}.
func parseHead(r *Resource, tok, head string) *ParseError {
	end := strings.IndexAny(head, "({")
	if end < 0 {
		end = len(head)
	}
	r.Name = strings.TrimSpace(head[:end])
	if !validName(r.Name) {
		if r.Name == "" {
			return badToken(tok, nil, "empty name")
		}
		return badToken(tok, nil, "invalid name %q", r.Name)
	}
	rest := strings.TrimSpace(head[end:])
	if strings.HasPrefix(rest, "(") {
		rparen := strings.IndexByte(rest, ')')
		if rparen < 0 {
			return badToken(tok, nil, "missing ')' after role")
		}
		if perr := parseRole(r, tok, rest[1:rparen]); perr != nil {
			return perr
		}
		rest = strings.TrimSpace(rest[rparen+1:])
	}
	if strings.HasPrefix(rest, "{REV}") {
		r.Revocable = true
		rest = strings.TrimSpace(rest[len("{REV}"):])
	}
	if rest != "" {
		return badToken(tok, nil, "unexpected %q after name", rest)
	}
	if r.Revocable && r.Role != Unreserved {
		return badToken(tok, ErrRevocableReservation, "revocable resources cannot be reserved")
	}
	return nil
}

// parseRole parses "role" or "role,principal" (a dynamic reservation)
// into r.
func parseRole(r *Resource, tok, inner string) *ParseError {
	role, principal, dynamic := strings.Cut(inner, ",")
	r.Role = strings.TrimSpace(role)
	if why := checkRole(r.Role); why != "" {
		return badToken(tok, nil, "%s", why)
	}
	if !dynamic {
		return nil
	}
	principal = strings.TrimSpace(principal)
	if r.Role == Unreserved {
		return badToken(tok, nil, "dynamic reservation without a role")
	}
	if why := checkPrincipal(principal); why != "" {
		return badToken(tok, nil, "%s", why)
	}
	r.Reservation = &Reservation{Principal: principal}
	return nil
}

// parseRanges parses "[b-e,n,…]" into r: sorted, not overlapping.
func parseRanges(r *Resource, tok, val string) *ParseError {
	r.Type = Ranges
	if !strings.HasSuffix(val, "]") {
		return badToken(tok, nil, "invalid ranges %q: missing ']'", val)
	}
	inner := strings.TrimSpace(val[1 : len(val)-1])
	if inner == "" {
		return nil
	}
	r.Ranges = make([]Range, 0, strings.Count(inner, ",")+1)
	for part := range strings.SplitSeq(inner, ",") {
		rg, ok := parseRange(part)
		if !ok {
			return badToken(tok, nil, "invalid range %q", strings.TrimSpace(part))
		}
		r.Ranges = append(r.Ranges, rg)
	}
	slices.SortFunc(r.Ranges, compareRange)
	for i := 1; i < len(r.Ranges); i++ {
		if r.Ranges[i].Begin <= r.Ranges[i-1].End {
			return badToken(tok, nil, "overlapping ranges %s and %s", r.Ranges[i-1], r.Ranges[i])
		}
	}
	return nil
}

// parseSet parses "{a,b,…}" into r: sorted, no duplicates.
func parseSet(r *Resource, tok, val string) *ParseError {
	r.Type = Set
	if !strings.HasSuffix(val, "}") {
		return badToken(tok, nil, "invalid set %q: missing '}'", val)
	}
	inner := strings.TrimSpace(val[1 : len(val)-1])
	if inner == "" {
		return nil
	}
	r.Set = make([]string, 0, strings.Count(inner, ",")+1)
	for item := range strings.SplitSeq(inner, ",") {
		item = strings.TrimSpace(item)
		if why := checkSetItem(item); why != "" {
			return badToken(tok, nil, "%s", why)
		}
		r.Set = append(r.Set, item)
	}
	slices.Sort(r.Set)
	for i := 1; i < len(r.Set); i++ {
		if r.Set[i] == r.Set[i-1] {
			return badToken(tok, nil, "duplicate set item %q", r.Set[i])
		}
	}
	return nil
}

// parseScalar parses a non-negative scalar with at most 3 decimal places
// into r.
func parseScalar(r *Resource, tok, val string) *ParseError {
	r.Type = Scalar
	v, err := ParseValue(val)
	if err != nil {
		why := ""
		if i := strings.IndexByte(val, '.'); i >= 0 && len(val)-i-1 > 3 && strings.Trim(val[i+1:], "0123456789") == "" {
			why = ": more than 3 decimal places"
		}
		return badToken(tok, nil, "invalid scalar %q%s", val, why)
	}
	if v < 0 {
		return badToken(tok, nil, "negative scalar %q", val)
	}
	r.Scalar = v
	return nil
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
