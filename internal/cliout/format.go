package cliout

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"text/template"
	"unicode/utf8"
)

// Format is a compiled --format value, as Docker reads one: "table" (the
// command's default table), "table TEMPLATE" (a table whose header names
// the fields used), "json" (each row as one JSON object per line) or a Go
// template executed once per row, each output followed by a newline.
// Templates see a row's fields and methods (Label "key"), and the
// functions json, join, lower, upper, split and truncate.
type Format struct {
	table, json bool
	tmpl        *template.Template // nil: the default table
}

// ParseFormat compiles s; the error names what is wrong with the
// template. An empty s is the default table.
func ParseFormat(s string) (*Format, error) {
	switch t := strings.TrimSpace(s); {
	case t == "" || t == "table":
		return &Format{table: true}, nil
	case t == "json":
		return &Format{json: true}, nil
	case strings.HasPrefix(t, "table "):
		tmpl, err := parseTemplate(strings.TrimPrefix(t, "table "))
		return &Format{table: true, tmpl: tmpl}, err
	}
	tmpl, err := parseTemplate(s)
	return &Format{tmpl: tmpl}, err
}

func parseTemplate(s string) (*template.Template, error) {
	// Docker's spelling: "\t" written out in a shell argument is a tab.
	s = strings.ReplaceAll(s, `\t`, "\t")
	t, err := template.New("format").Option("missingkey=error").Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"join":     strings.Join,
		"lower":    strings.ToLower,
		"upper":    strings.ToUpper,
		"split":    strings.Split,
		"truncate": Truncate,
	}).Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--format: %w", err)
	}
	return t, nil
}

// Default reports whether f is the command's default table.
func (f *Format) Default() bool { return f.table && f.tmpl == nil }

// Write writes rows (values of one struct type) as f says; header is a
// value of the same type whose fields hold the column titles, for
// "table TEMPLATE". Errors of a template (a field the rows lack) name
// the field.
func Write[R any](w io.Writer, f *Format, header R, rows []R) error {
	if f.json {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if f.tmpl == nil {
		return fmt.Errorf("cliout: Write of the default table")
	}
	if !f.table {
		for _, r := range rows {
			if err := execLine(w, f.tmpl, r); err != nil {
				return err
			}
		}
		return nil
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, r := range append([]R{header}, rows...) {
		if err := execLine(tw, f.tmpl, r); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A last column empty in a row leaves the padding of the one before.
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		if t := strings.TrimRight(l, " \n"); strings.HasSuffix(l, "\n") {
			lines[i] = t + "\n"
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, ""))
	return err
}

func execLine(w io.Writer, t *template.Template, v any) error {
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// Truncate cuts s to n runes, the last one an ellipsis when it cut.
func Truncate(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
