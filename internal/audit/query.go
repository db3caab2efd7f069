package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Filter selects records; zero fields select everything.
type Filter struct {
	AgentID      string
	Since, Until time.Time // Since inclusive, Until exclusive
	Kinds        []Kind
}

// ParseFilter parses the query of GET /v1/audit (agent, since, until,
// kind; since/until RFC 3339 or a duration back from now such as 1h), the
// CLI's flags feed the same fields.
func ParseFilter(q url.Values, now time.Time) (Filter, error) {
	f := Filter{AgentID: q.Get("agent")}
	var err error
	if f.Since, err = ParseTime("since", q.Get("since"), now); err != nil {
		return f, err
	}
	if f.Until, err = ParseTime("until", q.Get("until"), now); err != nil {
		return f, err
	}
	for _, v := range q["kind"] {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			if !slices.Contains(Kinds, Kind(k)) {
				return f, fmt.Errorf("kind %q: want one of %v", k, Kinds)
			}
			f.Kinds = append(f.Kinds, Kind(k))
		}
	}
	return f, nil
}

// ParseTime parses a time filter: RFC 3339, or a duration (2h, 30m) back
// from now; "" is the zero time.
func ParseTime(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (2h)", name, v)
}

// Match reports whether r passes f.
func (f Filter) Match(r Record) bool {
	switch {
	case f.AgentID != "" && r.AgentID != f.AgentID:
		return false
	case !f.Since.IsZero() && r.Time.Before(f.Since):
		return false
	case !f.Until.IsZero() && !r.Time.Before(f.Until):
		return false
	case len(f.Kinds) > 0 && !slices.Contains(f.Kinds, r.Kind):
		return false
	}
	return true
}

// Scan calls fn with every record of dir that passes f, oldest first, until
// fn returns false. A line that does not parse is skipped (Verify names
// it).
func Scan(dir string, f Filter, fn func(Record) bool) error {
	segs, err := segments(dir)
	if err != nil {
		return err
	}
	for _, s := range segs {
		fh, err := os.Open(filepath.Join(dir, s.name))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed by rotation meanwhile
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		br := bufio.NewReaderSize(fh, 64<<10)
		for {
			data, rerr := br.ReadBytes('\n')
			if len(data) > 0 && data[len(data)-1] == '\n' {
				var r Record
				if json.Unmarshal(data, &r) == nil && f.Match(r) && !fn(r) {
					_ = fh.Close()
					return nil
				}
			}
			if rerr != nil {
				_ = fh.Close()
				if !errors.Is(rerr, io.EOF) {
					return fmt.Errorf("audit: %s: %w", s.name, rerr)
				}
				break
			}
		}
	}
	return nil
}
