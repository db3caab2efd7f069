package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// DefaultLogCap is how many bytes of output each session keeps at least:
// all of its output up to that many bytes, then always the last that many
// (and up to twice as many).
const DefaultLogCap = 512 << 10

const recHeader = 5 // stream u8 + length u32

// outlog is a session's capped output log: records [stream u8][len u32][data]
// in order, so the interleaving of stdout and stderr survives and either
// stream can be replayed from a byte offset. It keeps two segments of cap
// bytes of output each, files "output.0" and "output.1" used in turn (a
// write that does not fit is split between them): when the current one is
// full, the other (older) one is emptied and becomes current. So all
// output up to cap bytes is kept, then always the last cap to 2*cap bytes,
// and rotation never copies or renames. What the log stops keeping is
// counted (dropped, and per stream base), so every reader is told how much
// is gone: SessionInfo.Dropped, Attach's Skipped counts, the offsets of
// Read. Without a directory it lives in memory.
//
// The files reserve their space when the log is made (fallocate of both
// segments, which rotation reuses without truncating), so a filesystem
// that fills up later (the sandbox's /run) cannot cut the log short. The
// reservation runs while the command is being forked (newOutlog starts
// it, awaitReserved ends it before the start is reported and the first
// byte is appended), or ahead of the session, when it takes the server's
// spare log (SpareLogName). A log made when the filesystem is already full has no
// reservation (its command still starts: refusing it would let kept
// sessions lock a sandbox up), nor does one whose reservation failed
// otherwise (the error is logged). Should a write fail, everything before
// it counts as dropped (base), so offsets and the dropped count stay exact
// and the loss is reported.
type outlog struct {
	dir   string
	f     [2]*os.File
	mem   [2][]byte
	sizes [2]int64 // bytes used in each segment (records and their headers)
	cur   int      // index of the current segment
	size  int64    // bytes in the current segment
	seg   int64    // output bytes a segment holds
	// counts are the per-stream data bytes of each segment; base is, per
	// stream (0 stdout, 1 stderr), how many bytes were dropped from the
	// front.
	counts [2][2]int64
	base   [2]int64
	old    bool // the other segment holds older output
	// high is how far into each segment file anything was written (what
	// recycle zeroes).
	high [2]int64
	// reserving delivers the reservation's outcome (newOutlog):
	// errReserveNoRoom when the filesystem had no room for it; reserved
	// says it was made (awaitReserved).
	reserving chan error
	reserved  bool
	// gone: the session was forgotten and its files recycled or removed
	// (the session's mu orders it with the reads).
	gone bool
}

// errReserveNoRoom is a reservation the filesystem had no room for.
var errReserveNoRoom = errors.New("no room to reserve the output log")

func newOutlog(dir string, capBytes int64) (*outlog, error) {
	if capBytes <= 0 {
		capBytes = DefaultLogCap
	}
	l := &outlog{dir: dir, seg: max(capBytes, 64)}
	if dir == "" {
		return l, nil
	}
	for i := range l.f {
		f, err := openRegular(filepath.Join(dir, segmentFile(i)), unix.O_CREAT|unix.O_TRUNC|unix.O_RDWR, 0o600)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("output log: %w", err)
		}
		l.f[i] = f
	}
	l.reserving = make(chan error, 1)
	go func() { l.reserving <- l.reserveAll() }()
	return l, nil
}

// reserveAll reserves both segments' space; on a full filesystem it
// leaves them empty (what a partial reservation took is given back).
func (l *outlog) reserveAll() error {
	for _, f := range l.f {
		if err := reserve(f, l.reservation()); err != nil {
			for _, f := range l.f {
				_ = f.Truncate(0)
			}
			if errors.Is(err, unix.ENOSPC) {
				return errReserveNoRoom
			}
			return fmt.Errorf("output log: reserve %d bytes in %s: %w", 2*l.reservation(), l.dir, err)
		}
	}
	return nil
}

// awaitReserved waits for the reservation newOutlog started and returns
// its error (nil, errReserveNoRoom, or another failure, after which the
// log works unreserved). Only the first call waits; later ones return nil.
func (l *outlog) awaitReserved() error {
	if l.reserving == nil {
		return nil
	}
	err := <-l.reserving
	l.reserving = nil
	l.reserved = err == nil
	return err
}

// reservation is the space reserved for each segment file: its output and
// the record headers of writes of 80 bytes on average (smaller ones may
// need more, which a full filesystem refuses; that loss is reported).
func (l *outlog) reservation() int64 { return l.seg + l.seg/16 }

// reserve allocates n bytes of f's storage: fallocate, or zeros written
// where the filesystem has no fallocate.
func reserve(f *os.File, n int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, n)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	return writeZeros(f, n)
}

// writeZeros writes zeros over the first n bytes of f.
func writeZeros(f *os.File, n int64) error {
	zeros := make([]byte, min(n, 64<<10))
	for off := int64(0); off < n; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// segmentFile is the name of segment i's file in a log's directory.
func segmentFile(i int) string { return "output." + strconv.Itoa(i) }

// append adds p of stream, split between the current segment and the
// next when it does not fit.
func (l *outlog) append(stream byte, p []byte) error {
	for len(p) > 0 {
		room := l.seg - l.counts[l.cur][0] - l.counts[l.cur][1]
		if room <= 0 {
			l.rotate()
			continue
		}
		n := min(int64(len(p)), room)
		if err := l.appendRecord(stream, p[:n], int64(len(p))); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// appendRecord writes one record of p into the current segment; rest is
// how much of the write p begins, all of it lost should the write fail.
func (l *outlog) appendRecord(stream byte, p []byte, rest int64) error {
	var h [recHeader]byte
	h[0] = stream
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if l.dir == "" {
		l.mem[l.cur] = append(append(l.mem[l.cur], h[:]...), p...)
	} else {
		if l.f[l.cur] == nil {
			return errors.New("output log: closed")
		}
		rec := make([]byte, 0, recHeader+len(p))
		rec = append(append(rec, h[:]...), p...)
		l.high[l.cur] = max(l.high[l.cur], l.size+int64(len(rec)))
		if _, err := l.f[l.cur].WriteAt(rec, l.size); err != nil {
			l.lose(stream, rest)
			return fmt.Errorf("output log: %d bytes dropped with all older output: %w", rest, err)
		}
	}
	l.size += int64(recHeader + len(p))
	l.sizes[l.cur] = l.size
	l.counts[l.cur][stream-1] += int64(len(p))
	return nil
}

// lose forgets everything kept and n bytes of stream that could not be
// written: they count as dropped, so the offsets of what follows stay true.
func (l *outlog) lose(stream byte, n int64) {
	for i := range l.counts {
		l.base[0] += l.counts[i][0]
		l.base[1] += l.counts[i][1]
		l.counts[i] = [2]int64{}
		l.sizes[i] = 0
	}
	l.base[stream-1] += n
	l.size, l.old = 0, false
}

// rotate drops the older segment and makes it the current one.
func (l *outlog) rotate() {
	next := 1 - l.cur
	if l.old {
		l.base[0] += l.counts[next][0]
		l.base[1] += l.counts[next][1]
	}
	l.counts[next] = [2]int64{}
	l.sizes[next] = 0
	if l.dir == "" {
		l.mem[next] = l.mem[next][:0]
	}
	// A file segment is overwritten in place: its reserved space stays.
	l.cur, l.old, l.size = next, true, 0
}

// contents is the older segment followed by the current one.
func (l *outlog) contents() ([]byte, error) {
	if l.gone {
		return nil, errors.New("output log: the session was forgotten")
	}
	order := []int{l.cur}
	if l.old {
		order = []int{1 - l.cur, l.cur}
	}
	var out []byte
	for _, i := range order {
		if l.dir == "" {
			out = append(out, l.mem[i]...)
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.dir, segmentFile(i)))
		if err != nil {
			return nil, fmt.Errorf("output log: %w", err)
		}
		out = append(out, b[:min(int64(len(b)), l.sizes[i])]...)
	}
	return out, nil
}

// replay calls fn with the output of each stream from the given offsets on,
// in the order it was produced. Bytes no longer in the log are skipped:
// skipped counts them per stream (how far the replay starts past from).
func (l *outlog) replay(from [2]int64, fn func(stream byte, data []byte)) (skipped [2]int64, err error) {
	for i := range skipped {
		skipped[i] = max(l.base[i]-from[i], 0)
	}
	b, err := l.contents()
	if err != nil {
		return skipped, err
	}
	pos := l.base
	for len(b) >= recHeader {
		n := int64(binary.BigEndian.Uint32(b[1:recHeader]))
		if int64(len(b)) < recHeader+n {
			break
		}
		stream, data := b[0], b[recHeader:recHeader+n]
		b = b[recHeader+n:]
		i := stream - 1
		if i > 1 {
			continue
		}
		start, end := pos[i], pos[i]+n
		pos[i] = end
		if end <= from[i] {
			continue
		}
		if skip := from[i] - start; skip > 0 {
			data = data[skip:]
		}
		fn(stream, data)
	}
	return skipped, nil
}

// aggregated returns the kept output of both streams, interleaved as produced.
func (l *outlog) aggregated() ([]byte, error) {
	var out []byte
	_, err := l.replay([2]int64{}, func(_ byte, d []byte) { out = append(out, d...) })
	return out, err
}

func (l *outlog) dropped() int64 { return l.base[0] + l.base[1] }

func (l *outlog) close() {
	_ = l.awaitReserved() // its goroutine uses the descriptors
	for i, f := range l.f {
		if f != nil {
			_ = f.Close()
			l.f[i] = nil
		}
	}
}
