package hostuser

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Sentinels; match them with errors.Is.
var (
	// ErrUnknown is returned for a user or group with no entry in the user
	// database.
	ErrUnknown = errors.New("unknown user or group")
	// ErrInvalid is returned for a malformed user string.
	ErrInvalid = errors.New("invalid user")
)

// ID is a resolved user: the process runs with UID and GID and no
// supplementary groups.
type ID struct {
	UID, GID uint32
}

// String returns "uid:gid", which Lookup resolves back to the same ID.
func (id ID) String() string { return fmt.Sprintf("%d:%d", id.UID, id.GID) }

// Root reports whether id runs as root (uid 0).
func (id ID) Root() bool { return id.UID == 0 }

// Lookup resolves user in root's /etc/passwd and /etc/group (root "/" is
// the host). A user without ":group" takes its passwd entry's primary
// group; a numeric uid that has no entry needs an explicit gid ("uid:gid"),
// so that no group is picked silently. Errors wrap ErrInvalid or
// ErrUnknown.
func Lookup(root, user string) (ID, error) {
	return lookup(dirDB(root), user)
}

// Opener opens a file of a user database by its path below the root
// ("etc/passwd", "etc/group"); a missing file is an error wrapping
// fs.ErrNotExist, read as an empty database.
type Opener func(name string) (io.ReadCloser, error)

// LookupIn is Lookup in the user database open reads: an image's files,
// as its containers see them. where names the database in errors (e.g.
// "image app:1"). Errors wrap ErrInvalid or ErrUnknown.
func LookupIn(open Opener, where, user string) (ID, error) {
	return lookup(db{open: open, where: where}, user)
}

// db is a user database: how to open its files and how errors name them
// (root's path, or where's "WHERE:/etc/passwd").
type db struct {
	open  Opener
	where string
	root  string
}

func (d db) name(file string) string {
	if d.open == nil {
		return filepath.Join(d.root, file)
	}
	return d.where + ":/" + file
}

func dirDB(root string) db { return db{root: root} }

func (d db) openFile(file string) (io.ReadCloser, error) {
	if d.open == nil {
		return os.Open(filepath.Join(d.root, file))
	}
	return d.open(file)
}

func lookup(d db, user string) (ID, error) {
	name, group, hasGroup := strings.Cut(user, ":")
	if name == "" || (hasGroup && group == "") || strings.ContainsAny(user, " \t\n") {
		return ID{}, fmt.Errorf("user %q: want NAME, UID, NAME:GROUP or UID:GID: %w", user, ErrInvalid)
	}
	var id ID
	uid, numeric := parseID(name)
	primary, found := uint32(0), false
	if err := scanFile(d, "etc/passwd", func(f []string) bool {
		// name:password:uid:gid:gecos:home:shell
		if len(f) < 4 {
			return false
		}
		u, okU := parseID(f[2])
		g, okG := parseID(f[3])
		if !okU || !okG || (f[0] != name && (!numeric || u != uid)) {
			return false
		}
		id.UID, primary, found = u, g, true
		return true
	}); err != nil {
		return ID{}, err
	}
	switch {
	case found:
	case numeric:
		id.UID = uid
	default:
		return ID{}, fmt.Errorf("user %q: no such user in %s: %w", name, d.name("etc/passwd"), ErrUnknown)
	}
	if !hasGroup {
		if !found {
			return ID{}, fmt.Errorf("user %q: uid %d has no entry in %s: give UID:GID: %w", user, uid, d.name("etc/passwd"), ErrUnknown)
		}
		id.GID = primary
		return id, nil
	}
	gid, err := lookupGroup(d, group)
	if err != nil {
		return ID{}, fmt.Errorf("user %q: %w", user, err)
	}
	id.GID = gid
	return id, nil
}

// lookupGroup resolves a group name or numeric gid (a gid needs no entry).
func lookupGroup(d db, group string) (uint32, error) {
	if gid, ok := parseID(group); ok {
		return gid, nil
	}
	var gid uint32
	found := false
	if err := scanFile(d, "etc/group", func(f []string) bool {
		// name:password:gid:members
		if len(f) < 3 || f[0] != group {
			return false
		}
		g, ok := parseID(f[2])
		gid, found = g, ok
		return ok
	}); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no such group %q in %s: %w", group, d.name("etc/group"), ErrUnknown)
	}
	return gid, nil
}

// parseID parses a decimal uid or gid below 2^32-1 ((uid_t)-1 is "no
// change" to the kernel).
func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil && n != 1<<32-1
}

// scanFile calls match with the colon-separated fields of each line of
// d's file until it returns true. A missing file is an empty database.
func scanFile(d db, file string, match func([]string) bool) error {
	f, err := d.openFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read user database %s: %w", d.name(file), err)
	}
	defer f.Close()
	return scan(f, d.name(file), match)
}

func scan(r io.Reader, path string, match func([]string) bool) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue // comments and NIS compat entries
		}
		if match(strings.Split(line, ":")) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// Name returns the name of uid in root's /etc/passwd; ok is false when
// it has no entry (or the database cannot be read).
func Name(root string, uid uint32) (name string, ok bool) {
	_ = scanFile(dirDB(root), "etc/passwd", func(f []string) bool {
		if len(f) < 3 {
			return false
		}
		if u, okU := parseID(f[2]); okU && u == uid {
			name, ok = f[0], true
		}
		return ok
	})
	return name, ok
}
