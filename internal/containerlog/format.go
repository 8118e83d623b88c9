package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Stream is the output a record came from.
type Stream uint8

// The streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", uint8(s))
}

// MaxLine is the longest content of one record: a longer line is cut into
// P records of MaxLine bytes (the kubelet's default).
const MaxLine = 16 << 10

// timeLayout is RFC 3339 with nanoseconds, always 9 digits (sortable,
// fixed width), in UTC.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Record is one line of a log file.
type Record struct {
	Time   time.Time
	Stream Stream
	// Partial: the line continues in the stream's next record (P).
	Partial bool
	// Content is the record's bytes, without the newline of an F record.
	// Parse returns a slice of its input.
	Content []byte
}

// Output is the record's bytes as the container wrote them: the content,
// and the newline an F record stands for.
func (r Record) Output() []byte {
	if r.Partial {
		return r.Content
	}
	return append(r.Content[:len(r.Content):len(r.Content)], '\n')
}

// appendHeader appends the "TIME STREAM " prefix every record of one read
// shares.
func appendHeader(b []byte, t time.Time, s Stream) []byte {
	b = t.UTC().AppendFormat(b, timeLayout)
	b = append(b, ' ')
	b = append(b, s.String()...)
	return append(b, ' ')
}

// errBadRecord is Parse's error for a line that is no record.
var errBadRecord = errors.New("not a log record")

// Parse reads one record from line (without its newline). Content is a
// slice of line.
func Parse(line []byte) (Record, error) {
	var r Record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, errBadRecord
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, errBadRecord
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, errBadRecord
	}
	switch string(stream) {
	case "stdout":
		r.Stream = Stdout
	case "stderr":
		r.Stream = Stderr
	default:
		return r, errBadRecord
	}
	if len(rest) < 2 || rest[1] != ' ' || (rest[0] != 'P' && rest[0] != 'F') {
		return r, errBadRecord
	}
	r.Time, r.Partial, r.Content = t, rest[0] == 'P', rest[2:]
	return r, nil
}
