package flagfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// ErrInvalid is wrapped by every error about the file's content.
var ErrInvalid = errors.New("invalid configuration")

// sliceValue is implemented by pflag's repeatable flags (stringArray,
// stringSlice, …).
type sliceValue = pflag.SliceValue

// Apply reads the TOML file at path and sets every flag of fs that the
// command line did not set (fs.Changed) from the key of the same name.
// Flags named in skip (e.g. "config" itself) are not keys. Either every
// value is applied or, on error, none.
func Apply(fs *pflag.FlagSet, path string, skip ...string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config %s: %w", path, err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return fmt.Errorf("config %s: %w: %w", path, ErrInvalid, err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type set struct {
		f    *pflag.Flag
		vals []string
	}
	var sets []set
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || f.Hidden || slices.Contains(skip, k) {
			return fmt.Errorf("config %s: %w: unknown key %q", path, ErrInvalid, k)
		}
		vals, err := texts(raw[k], f)
		if err != nil {
			return fmt.Errorf("config %s: %w: key %q: %w", path, ErrInvalid, k, err)
		}
		if f.Changed {
			continue // the command line wins
		}
		sets = append(sets, set{f, vals})
	}
	// Apply all or nothing: on a value the flag refuses, put back the
	// ones already set.
	for i, s := range sets {
		if err := apply(s.f.Value, s.vals); err != nil {
			for _, done := range sets[:i+1] { // a failed Set may have zeroed its own flag
				restore(done.f)
			}
			return fmt.Errorf("config %s: %w: key %q: %w", path, ErrInvalid, s.f.Name, err)
		}
	}
	return nil
}

// restore puts a flag back to its default (it was not set on the command
// line, or Apply would not have touched it).
func restore(f *pflag.Flag) {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		var def []string
		if d := strings.Trim(f.DefValue, "[]"); d != "" {
			def = strings.Split(d, ",")
		}
		_ = sv.Replace(def)
		return
	}
	_ = f.Value.Set(f.DefValue)
}

// texts turns a TOML value into the flag's textual form(s).
func texts(v any, f *pflag.Flag) ([]string, error) {
	_, repeatable := f.Value.(sliceValue)
	if arr, ok := v.([]any); ok {
		if !repeatable {
			return nil, fmt.Errorf("got a list, want one %s", f.Value.Type())
		}
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, err := scalar(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := scalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	default:
		return "", fmt.Errorf("unsupported value %v (%T): use a string, number, boolean or list", v, v)
	}
}

func apply(v pflag.Value, vals []string) error {
	if sv, ok := v.(sliceValue); ok {
		return sv.Replace(vals)
	}
	return v.Set(vals[0])
}

// Write prints the effective configuration of fs as TOML, one key per
// flag, skipping the named ones and hidden flags, sorted by name.
func Write(w io.Writer, fs *pflag.FlagSet, skip ...string) error {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || slices.Contains(skip, f.Name) {
			return
		}
		if f.Usage != "" {
			fmt.Fprintf(&b, "# %s\n", strings.ReplaceAll(f.Usage, "\n", "\n# "))
		}
		fmt.Fprintf(&b, "%s = %s\n", f.Name, literal(f))
	})
	_, err := io.WriteString(w, b.String())
	return err
}

func literal(f *pflag.Flag) string {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		parts := make([]string, 0, len(sv.GetSlice()))
		for _, s := range sv.GetSlice() {
			parts = append(parts, strconv.Quote(s))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	s := f.Value.String()
	switch f.Value.Type() {
	case "bool", "int", "int64", "uint", "uint64", "int32", "uint32", "float64", "float32":
		return s
	}
	return strconv.Quote(s)
}

// CopyChanged sets on dst every flag that was set on src's command line,
// so that a configuration file applied to dst again (a reload) still loses
// to the command line. Flags unknown to dst are skipped.
func CopyChanged(dst, src *pflag.FlagSet) error {
	var err error
	src.Visit(func(f *pflag.Flag) {
		d := dst.Lookup(f.Name)
		if d == nil || err != nil {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			if dv, ok := d.Value.(pflag.SliceValue); ok {
				err = dv.Replace(sv.GetSlice())
				d.Changed = true
				return
			}
		}
		err = dst.Set(f.Name, f.Value.String())
	})
	return err
}
