package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/internal/audit/policy"
)

// Segment files are named segmentPrefix + a 10-digit number + segmentExt,
// numbered from 1 without gaps; the highest is written to.
const (
	segmentPrefix = "audit-"
	segmentExt    = ".jsonl"
)

// SyncEvery bounds how long a written record may wait for its fsync: each
// record is written (one write call) before Record returns, so a crash of
// the daemon loses nothing; the file is fsynced at most this long after a
// write, at every rotation and at Close, so a power loss loses at most
// this much.
const SyncEvery = time.Second

// ErrUnavailable wraps the error of a record that could not be written
// under policy.Refuse: the action it records must not happen. It is
// classed errdefs unavailable (HTTP 503).
var ErrUnavailable = fmt.Errorf("audit log unavailable (audit.onFailure refuse): %w", cerrdefs.ErrUnavailable)

// Options configure Open.
type Options struct {
	// MaxSegmentBytes is the size at which a segment is closed and the
	// next one started (default policy.DefaultMaxSegmentBytes).
	MaxSegmentBytes int64
	// MaxBytes bounds the size of every segment together (default
	// policy.DefaultMaxBytes): past it the oldest segments are removed.
	MaxBytes int64
	// OnFailure is policy.Refuse (the default) or policy.Alert.
	OnFailure policy.FailureMode
	// Host names the machine in every record (default os.Hostname).
	Host string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logf receives write failures and notices.
	Logf func(format string, args ...any)
	// SigningKey, when set, signs each closed segment's last hash
	// (<segment>.sig; see Sign).
	SigningKey []byte
	// openFile opens a segment for appending (tests inject faults).
	openFile func(path string) (segmentFile, error)
}

// segmentFile is what Log writes to (*os.File).
type segmentFile interface {
	io.Writer
	Truncate(size int64) error
	Sync() error
	Close() error
}

// Log is the audit log of one directory. It is safe for concurrent use.
type Log struct {
	dir  string
	opts Options

	mu      sync.Mutex
	f       segmentFile
	num     int   // number of the current segment
	size    int64 // bytes in the current segment
	sizes   map[int]int64
	seq     int64  // of the last record written
	prev    string // its hash
	dirty   bool
	syncT   *time.Timer
	closed  bool
	healthy atomic.Bool
	fails   atomic.Uint64
	// Notice is set when Open found something to report (a cut last
	// line it removed); the daemon records it in its start record.
	notice string
}

// Open opens (creating, mode 0700) the audit log in dir and goes on from
// its last record. A last line cut by a crash or a full disk is removed
// (Notice says so).
func Open(dir string, opts Options) (*Log, error) {
	if opts.MaxSegmentBytes <= 0 {
		opts.MaxSegmentBytes = policy.DefaultMaxSegmentBytes
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = policy.DefaultMaxBytes
	}
	if opts.OnFailure == "" {
		opts.OnFailure = policy.Refuse
	}
	if _, err := policy.ParseFailureMode(string(opts.OnFailure)); err != nil {
		return nil, fmt.Errorf("audit: onFailure %w", err)
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.openFile == nil {
		opts.openFile = func(path string) (segmentFile, error) {
			return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	segs, err := segments(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts, sizes: map[int]int64{}, num: 1}
	for _, s := range segs {
		l.sizes[s.num] = s.size
	}
	if n := len(segs); n > 0 {
		l.num = segs[n-1].num
		if err := l.resume(segs); err != nil {
			return nil, err
		}
	}
	if l.f, err = opts.openFile(l.segPath(l.num)); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l.healthy.Store(true)
	return l, nil
}

// resume reads the last complete record of the newest segments (the newest
// may be empty) and cuts a partial last line.
func (l *Log) resume(segs []segment) error {
	for i := len(segs) - 1; i >= 0; i-- {
		path := l.segPath(segs[i].num)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		end := bytes.LastIndexByte(data, '\n') + 1
		if end < len(data) {
			if err := os.Truncate(path, int64(end)); err != nil {
				return fmt.Errorf("audit: cutting the partial last line of %s: %w", path, err)
			}
			l.notice = fmt.Sprintf("the last line of %s was cut (%d bytes, a crash or a full disk while it was written) and removed", filepath.Base(path), len(data)-end)
			l.opts.Logf("audit: %s", l.notice)
			data = data[:end]
			l.sizes[segs[i].num] = int64(end)
		}
		if i == len(segs)-1 {
			l.size = int64(end)
		}
		if end == 0 {
			continue
		}
		start := bytes.LastIndexByte(data[:end-1], '\n') + 1
		var r Record
		if err := json.Unmarshal(data[start:end-1], &r); err != nil || r.Hash == "" {
			return fmt.Errorf("audit: the last record of %s does not parse (run sandboxctl audit verify): %v", path, err)
		}
		l.seq, l.prev = r.Seq, r.Hash
		return nil
	}
	return nil
}

// Notice reports what Open repaired, "" when nothing.
func (l *Log) Notice() string { return l.notice }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Healthy reports whether the last write succeeded.
func (l *Log) Healthy() bool { return l.healthy.Load() }

// Failures counts the records that could not be written.
func (l *Log) Failures() uint64 { return l.fails.Load() }

// Mode is the failure mode.
func (l *Log) Mode() policy.FailureMode { return l.opts.OnFailure }

// Check returns an error wrapping ErrUnavailable when the mode is Refuse
// and the last write failed: an action recorded only after it happened (a
// download) is refused while the log is failing.
func (l *Log) Check() error {
	if l.opts.OnFailure == policy.Refuse && !l.healthy.Load() {
		return fmt.Errorf("%w: the last record could not be written; actions are refused until one can", ErrUnavailable)
	}
	return nil
}

// Record appends r. Under policy.Alert a write failure is logged and
// counted and Record returns nil; under Refuse it returns an error wrapping
// ErrUnavailable.
func (l *Log) Record(ctx context.Context, r Record) error {
	if r.Actor.Via == "" {
		r.Actor = ActorFrom(ctx)
	}
	err := l.append(r)
	if err == nil {
		l.healthy.Store(true)
		return nil
	}
	l.healthy.Store(false)
	l.fails.Add(1)
	l.opts.Logf("audit: ERROR: a %s record was not written: %v", r.Kind, err)
	if l.opts.OnFailure == policy.Alert {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (l *Log) append(r Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("the audit log is closed")
	}
	r.Seq = l.seq + 1
	r.Time = l.opts.Now().UTC()
	r.DaemonHost = l.opts.Host
	r.Prev = l.prev
	line, hash, err := seal(r)
	if err != nil {
		return err
	}
	if l.size > 0 && l.size+int64(len(line)) > l.opts.MaxSegmentBytes {
		if err := l.rotateLocked(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(line)
	if err != nil || n != len(line) {
		if err == nil {
			err = io.ErrShortWrite
		}
		// No partial line may stay: the next record starts a line.
		if n > 0 {
			if terr := l.f.Truncate(l.size); terr != nil {
				err = fmt.Errorf("%w (and removing the partial line: %v)", err, terr)
			}
		}
		return fmt.Errorf("write %s: %w", l.segPath(l.num), err)
	}
	l.size += int64(n)
	l.sizes[l.num] = l.size
	l.seq, l.prev = r.Seq, hash
	l.markDirtyLocked()
	return nil
}

// seal encodes r as its line: its JSON with the hash of that JSON added
// as the last field.
func seal(r Record) (line []byte, hash string, err error) {
	r.Hash = ""
	body, err := json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("encode: %w", err)
	}
	sum := sha256.Sum256(body)
	hash = hex.EncodeToString(sum[:])
	line = make([]byte, 0, len(body)+len(hash)+12)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, hash...)
	line = append(line, "\"}\n"...)
	return line, hash, nil
}

// hashSuffixLen is the length of `,"hash":"<64 hex>"}`.
const hashSuffixLen = len(`,"hash":""}`) + 64

// unseal checks a line (without its newline) against its own hash and
// returns the hash.
func unseal(line []byte) (string, error) {
	if len(line) < hashSuffixLen+2 || !bytes.HasPrefix(line[len(line)-hashSuffixLen:], []byte(`,"hash":"`)) || !bytes.HasSuffix(line, []byte(`"}`)) {
		return "", errors.New("no hash at the end of the line (cut or edited)")
	}
	got := string(line[len(line)-hashSuffixLen+len(`,"hash":"`) : len(line)-2])
	body := make([]byte, 0, len(line)-hashSuffixLen+1)
	body = append(append(body, line[:len(line)-hashSuffixLen]...), '}')
	sum := sha256.Sum256(body)
	if want := hex.EncodeToString(sum[:]); want != got {
		return "", fmt.Errorf("the line's content does not match its hash (edited)")
	}
	return got, nil
}

func (l *Log) markDirtyLocked() {
	l.dirty = true
	if l.syncT == nil {
		l.syncT = time.AfterFunc(SyncEvery, l.syncNow)
	}
}

// syncNow fsyncs the current segment without holding the lock, so records
// go on being written meanwhile (a rotation fsyncs and closes the segment
// itself, which may fail this call harmlessly).
func (l *Log) syncNow() {
	l.mu.Lock()
	l.syncT = nil
	f, dirty := l.f, l.dirty && !l.closed
	l.dirty = false
	l.mu.Unlock()
	if !dirty {
		return
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		l.opts.Logf("audit: fsync: %v", err)
	}
}

// rotateLocked closes the current segment (fsynced, signed when a key is
// set) and starts the next; then the oldest segments go while all of them
// are over MaxBytes.
func (l *Log) rotateLocked() error {
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("rotate: fsync: %w", err)
	}
	if len(l.opts.SigningKey) > 0 {
		if err := writeSignature(l.segPath(l.num), l.opts.SigningKey, l.prev); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
	}
	next, err := l.opts.openFile(l.segPath(l.num + 1))
	if err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	_ = l.f.Close()
	l.f, l.num, l.size, l.dirty = next, l.num+1, 0, false
	l.sizes[l.num] = 0
	l.pruneLocked()
	return nil
}

func (l *Log) pruneLocked() {
	var total int64
	nums := make([]int, 0, len(l.sizes))
	for n, s := range l.sizes {
		total += s
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		if total <= l.opts.MaxBytes || n == l.num {
			return
		}
		path := l.segPath(n)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.opts.Logf("audit: removing %s over audit.maxBytes: %v", path, err)
			return
		}
		_ = os.Remove(path + sigExt)
		total -= l.sizes[n]
		delete(l.sizes, n)
	}
}

// Close fsyncs and closes the log (signing the current segment's last
// hash when a key is set); later records fail.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.syncT != nil {
		l.syncT.Stop()
	}
	err := l.f.Sync()
	if len(l.opts.SigningKey) > 0 && l.prev != "" && l.size > 0 {
		if serr := writeSignature(l.segPath(l.num), l.opts.SigningKey, l.prev); serr != nil && err == nil {
			err = serr
		}
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) segPath(n int) string { return filepath.Join(l.dir, SegmentName(n)) }

// SegmentName is the file name of segment n.
func SegmentName(n int) string { return fmt.Sprintf("%s%010d%s", segmentPrefix, n, segmentExt) }

type segment struct {
	num  int
	size int64
	name string
}

// segments lists dir's segments, oldest first.
func segments(dir string) ([]segment, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var out []segment
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, segmentPrefix) || !strings.HasSuffix(name, segmentExt) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, segmentPrefix), segmentExt))
		if err != nil || n <= 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		out = append(out, segment{num: n, size: info.Size(), name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].num < out[j].num })
	return out, nil
}
