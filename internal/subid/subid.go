package subid

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrInvalid is returned for a malformed or unusable range; match it with
// errors.Is.
var ErrInvalid = errors.New("invalid user namespace range")

// Default files Parse reads a NAME in.
const (
	DefaultSubUIDFile = "/etc/subuid"
	DefaultSubGIDFile = "/etc/subgid"
)

// Range maps container IDs 0..Size-1 onto host IDs HostUID.. and
// HostGID.. (one block of Size uids and one of Size gids).
type Range struct {
	HostUID uint32 `json:"host_uid"`
	HostGID uint32 `json:"host_gid"`
	Size    uint32 `json:"size"`
}

// String returns the range as the agent logs it.
func (r Range) String() string {
	return fmt.Sprintf("uids %d-%d gids %d-%d", r.HostUID, r.HostUID+r.Size-1, r.HostGID, r.HostGID+r.Size-1)
}

// Validate refuses an empty range, one that maps container IDs onto host
// root (a block starting at 0), and one that runs past the largest ID.
func (r Range) Validate() error {
	switch {
	case r.Size == 0:
		return fmt.Errorf("range of size 0: %w", ErrInvalid)
	case r.HostUID == 0 || r.HostGID == 0:
		return fmt.Errorf("%s includes host root (0): start above it: %w", r, ErrInvalid)
	case uint64(r.HostUID)+uint64(r.Size) > 1<<32-1 || uint64(r.HostGID)+uint64(r.Size) > 1<<32-1:
		return fmt.Errorf("range starting at uid %d gid %d with %d IDs runs past 4294967294: %w", r.HostUID, r.HostGID, r.Size, ErrInvalid)
	}
	return nil
}

// Contains reports whether container uid and gid both have a host ID.
func (r Range) Contains(uid, gid uint32) bool { return uid < r.Size && gid < r.Size }

// Host returns the host IDs of container uid and gid (Contains must hold).
func (r Range) Host(uid, gid uint32) (hostUID, hostGID uint32) {
	return r.HostUID + uid, r.HostGID + gid
}

// Parse reads spec: "START:COUNT" (uids and gids START..START+COUNT-1),
// or NAME, whose first entry in subuidFile and in subgidFile gives the
// uids and the gids (of the smaller of the two counts). Errors wrap
// ErrInvalid and name the problem.
func Parse(spec, subuidFile, subgidFile string) (Range, error) {
	if spec == "" {
		return Range{}, fmt.Errorf("empty range: want START:COUNT or a NAME in %s: %w", subuidFile, ErrInvalid)
	}
	if start, count, ok := strings.Cut(spec, ":"); ok {
		s, err1 := strconv.ParseUint(start, 10, 32)
		n, err2 := strconv.ParseUint(count, 10, 32)
		if err1 != nil || err2 != nil {
			return Range{}, fmt.Errorf("range %q: want START:COUNT (decimal) or a NAME: %w", spec, ErrInvalid)
		}
		r := Range{HostUID: uint32(s), HostGID: uint32(s), Size: uint32(n)}
		if err := r.Validate(); err != nil {
			return Range{}, fmt.Errorf("range %q: %w", spec, err)
		}
		return r, nil
	}
	uid, ucount, err := lookup(subuidFile, spec)
	if err != nil {
		return Range{}, err
	}
	gid, gcount, err := lookup(subgidFile, spec)
	if err != nil {
		return Range{}, err
	}
	r := Range{HostUID: uid, HostGID: gid, Size: min(ucount, gcount)}
	if err := r.Validate(); err != nil {
		return Range{}, fmt.Errorf("range of %q (%s, %s): %w", spec, subuidFile, subgidFile, err)
	}
	return r, nil
}

// lookup returns the first "name:start:count" entry of name in path.
func lookup(path, name string) (start, count uint32, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("range %q: %w: %w", name, ErrInvalid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Split(text, ":")
		if len(fields) != 3 {
			return 0, 0, fmt.Errorf("%s:%d: %q: want NAME:START:COUNT: %w", path, line, text, ErrInvalid)
		}
		if fields[0] != name {
			continue
		}
		s, err1 := strconv.ParseUint(fields[1], 10, 32)
		n, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("%s:%d: %q: START and COUNT must be decimal: %w", path, line, text, ErrInvalid)
		}
		return uint32(s), uint32(n), nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, 0, fmt.Errorf("range %q: no entry for %q in %s: %w", name, name, path, ErrInvalid)
}
