// Package tarstream reads and writes the tar streams of the files API
// inside a sandbox (the supervisor's file tool, supervisor.RunFiles): the
// POSIX ustar format, with PAX extended headers for what ustar cannot hold
// (long or non-ASCII names and link targets, sizes of 8 GiB and more, ids
// beyond 2097151), and on reading also the GNU long-name entries and
// base-256 numbers that GNU tar and docker cp write.
//
// It exists so that the supervisor binary does not link archive/tar: the
// standard library's package imports os/user (for user and group names in
// FileInfoHeader), which with cgo enabled links the C library's resolver
// and makes a plain `go build` of the supervisor a dynamically linked
// binary, which cannot run in an image without that C library (and which
// the daemon refuses). Clients and the daemon keep using archive/tar; the
// tests check this package against it in both directions.
//
// Only what the files API needs: entry headers with name, link target,
// type, mode, ids, size and modification time. Sparse files and other
// entry types are returned to the caller as they are (their Typeflag), who
// refuses them.
package tarstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Typeflag values (POSIX ustar, PAX and the GNU extensions read here).
const (
	TypeReg           = '0'
	TypeRegA          = '\x00' // pre-POSIX regular file; read as TypeReg (or TypeDir with a trailing slash)
	TypeLink          = '1'
	TypeSymlink       = '2'
	TypeChar          = '3'
	TypeBlock         = '4'
	TypeDir           = '5'
	TypeFifo          = '6'
	TypeXHeader       = 'x' // PAX extended header of the next entry
	TypeXGlobalHeader = 'g' // PAX global header: returned to the caller as an entry
	TypeGNULongName   = 'L'
	TypeGNULongLink   = 'K'
)

// BlockSize is the size of a tar block: headers and padded data.
const BlockSize = 512

// ErrHeader is a header block that is not a tar header (bad checksum or
// fields).
var ErrHeader = errors.New("tarstream: invalid tar header")

// ErrWriteTooLong is a write past the size the entry's header declared.
var ErrWriteTooLong = errors.New("tarstream: write too long")

// Header is one entry of a tar stream.
type Header struct {
	Name     string // slash-separated; a directory's ends with "/" when written so
	Linkname string // the target of a symlink or hard link
	Typeflag byte
	Mode     int64 // permission and setuid/setgid/sticky bits (as in the header: 04000, 02000, 01000)
	UID, GID int
	Size     int64 // bytes of data (regular files)
	ModTime  time.Time
}

// Field offsets and sizes of a ustar header block.
const (
	offName     = 0
	lenName     = 100
	offMode     = 100
	offUID      = 108
	offGID      = 116
	offSize     = 124
	offMtime    = 136
	offChksum   = 148
	offTypeflag = 156
	offLinkname = 157
	offMagic    = 257 // "ustar\x00" "00" (POSIX) or "ustar  \x00" (GNU)
	offUname    = 265
	offGname    = 297
	offPrefix   = 345
	lenPrefix   = 155
)

// magicPOSIX is what the writer puts at offMagic. The reader does not
// look at it: a header is checked by its checksum, so POSIX, GNU ("ustar  \x00")
// and old headers read alike.
var magicPOSIX = []byte("ustar\x0000")

// octal field limits: an n-byte field holds n-1 octal digits and a NUL.
const (
	maxOctal8  = 1<<21 - 1 // mode, uid, gid
	maxOctal12 = 1<<33 - 1 // size, mtime
)

// Writer writes a tar stream. Call WriteHeader, then write the entry's
// Size bytes, for each entry, then Close (which writes the end marker but
// does not close the underlying writer).
type Writer struct {
	w       io.Writer
	left    int64 // data bytes the current entry still needs
	pad     int64 // zero bytes after the current entry's data
	err     error
	blk     [BlockSize]byte
	counter int // names the PAX header entries
}

// NewWriter writes a tar stream to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteHeader ends the previous entry (its data must be complete) and
// writes the header of h.
func (tw *Writer) WriteHeader(h *Header) error {
	if err := tw.endEntry(); err != nil {
		return err
	}
	if h.Size < 0 {
		return tw.fail(fmt.Errorf("tarstream: %s: negative size", h.Name))
	}
	if h.Mode < 0 || h.Mode > maxOctal8 || h.UID < 0 || h.GID < 0 {
		return tw.fail(fmt.Errorf("tarstream: %s: mode or ids out of range", h.Name))
	}
	pax := map[string]string{}
	name := h.Name
	if !fitsUSTAR(name, lenName) {
		pax["path"] = name
		name = asciiPrefix(name, lenName)
	}
	link := h.Linkname
	if !fitsUSTAR(link, lenName) {
		pax["linkpath"] = link
		link = asciiPrefix(link, lenName)
	}
	size := h.Size
	if size > maxOctal12 {
		pax["size"] = strconv.FormatInt(size, 10)
		size = 0
	}
	// Whole seconds, rounded (as archive/tar writes ustar).
	mtime := h.ModTime.Round(time.Second).Unix()
	if h.ModTime.IsZero() {
		mtime = 0
	}
	if mtime < 0 || mtime > maxOctal12 {
		pax["mtime"] = strconv.FormatInt(mtime, 10)
		mtime = 0
	}
	uid, gid := int64(h.UID), int64(h.GID)
	if uid > maxOctal8 {
		pax["uid"] = strconv.FormatInt(uid, 10)
		uid = 0
	}
	if gid > maxOctal8 {
		pax["gid"] = strconv.FormatInt(gid, 10)
		gid = 0
	}
	if len(pax) > 0 {
		if err := tw.writePAX(pax); err != nil {
			return err
		}
	}
	blk := &tw.blk
	clear(blk[:])
	copy(blk[offName:offName+lenName], name)
	putOctal(blk[offMode:offMode+8], h.Mode)
	putOctal(blk[offUID:offUID+8], uid)
	putOctal(blk[offGID:offGID+8], gid)
	putOctal(blk[offSize:offSize+12], size)
	putOctal(blk[offMtime:offMtime+12], mtime)
	blk[offTypeflag] = h.Typeflag
	copy(blk[offLinkname:offLinkname+lenName], link)
	copy(blk[offMagic:], magicPOSIX)
	if err := tw.writeBlock(); err != nil {
		return err
	}
	tw.left, tw.pad = h.Size, padding(h.Size)
	return nil
}

// writePAX writes a PAX extended header entry ('x') holding records.
func (tw *Writer) writePAX(records map[string]string) error {
	var data []byte
	// Fixed order: path, linkpath, size, mtime, uid, gid.
	for _, k := range []string{"path", "linkpath", "size", "mtime", "uid", "gid"} {
		if v, ok := records[k]; ok {
			data = append(data, paxRecord(k, v)...)
		}
	}
	tw.counter++
	blk := &tw.blk
	clear(blk[:])
	copy(blk[offName:offName+lenName], "PaxHeaders/"+strconv.Itoa(tw.counter))
	putOctal(blk[offMode:offMode+8], 0o644)
	putOctal(blk[offUID:offUID+8], 0)
	putOctal(blk[offGID:offGID+8], 0)
	putOctal(blk[offSize:offSize+12], int64(len(data)))
	putOctal(blk[offMtime:offMtime+12], 0)
	blk[offTypeflag] = TypeXHeader
	copy(blk[offMagic:], magicPOSIX)
	if err := tw.writeBlock(); err != nil {
		return err
	}
	data = append(data, make([]byte, padding(int64(len(data))))...)
	if _, err := tw.w.Write(data); err != nil {
		return tw.fail(err)
	}
	return nil
}

// paxRecord is "LEN KEY=VALUE\n", LEN counting the whole record with its
// own digits.
func paxRecord(k, v string) string {
	body := " " + k + "=" + v + "\n"
	n := len(body) + 1
	for n < len(strconv.Itoa(n))+len(body) {
		n++
	}
	return strconv.Itoa(n) + body
}

// Write writes data of the current entry.
func (tw *Writer) Write(p []byte) (int, error) {
	if tw.err != nil {
		return 0, tw.err
	}
	short := false
	if int64(len(p)) > tw.left {
		p, short = p[:tw.left], true
	}
	n, err := tw.w.Write(p)
	tw.left -= int64(n)
	if err != nil {
		return n, tw.fail(err)
	}
	if short {
		return n, ErrWriteTooLong
	}
	return n, nil
}

// Close ends the last entry and writes the end marker (two zero blocks).
func (tw *Writer) Close() error {
	if err := tw.endEntry(); err != nil {
		return err
	}
	if _, err := tw.w.Write(make([]byte, 2*BlockSize)); err != nil {
		return tw.fail(err)
	}
	tw.err = errors.New("tarstream: writer closed")
	return nil
}

func (tw *Writer) endEntry() error {
	if tw.err != nil {
		return tw.err
	}
	if tw.left > 0 {
		return tw.fail(fmt.Errorf("tarstream: entry ended %d bytes short of its size", tw.left))
	}
	if tw.pad > 0 {
		var zeros [BlockSize]byte
		if _, err := tw.w.Write(zeros[:tw.pad]); err != nil {
			return tw.fail(err)
		}
		tw.pad = 0
	}
	return nil
}

func (tw *Writer) writeBlock() error {
	blk := &tw.blk
	copy(blk[offChksum:offChksum+8], "        ")
	var sum int64
	for _, b := range blk {
		sum += int64(b)
	}
	// Six octal digits, NUL, space (as tar writes it).
	copy(blk[offChksum:], fmt.Sprintf("%06o\x00 ", sum))
	if _, err := tw.w.Write(blk[:]); err != nil {
		return tw.fail(err)
	}
	return nil
}

func (tw *Writer) fail(err error) error {
	tw.err = err
	return err
}

// fitsUSTAR reports whether s fits a ustar field of n bytes as it is:
// ASCII, no NUL, at most n bytes.
func fitsUSTAR(s string, n int) bool {
	if len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiPrefix is the ustar fallback of a name a PAX record carries: its
// ASCII bytes, cut to n.
func asciiPrefix(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c != 0 && c < 0x80 {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// putOctal writes v as zero-padded octal digits and a NUL filling f.
func putOctal(f []byte, v int64) {
	s := strconv.FormatInt(v, 8)
	for len(s) < len(f)-1 {
		s = "0" + s
	}
	copy(f, s)
	f[len(f)-1] = 0
}

func padding(size int64) int64 { return -size & (BlockSize - 1) }

// Reader reads a tar stream entry by entry.
type Reader struct {
	r    io.Reader
	left int64 // data bytes of the current entry not yet read
	pad  int64
	err  error
	blk  [BlockSize]byte
}

// NewReader reads a tar stream from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next skips what is left of the current entry and returns the next
// entry's header. It returns io.EOF at the end marker (two zero blocks)
// and, as archive/tar does, at a clean end of the input between entries;
// io.ErrUnexpectedEOF when the input ends inside a header or an entry.
func (tr *Reader) Next() (*Header, error) {
	if tr.err != nil {
		return nil, tr.err
	}
	h, err := tr.next()
	if err != nil {
		tr.err = err
	}
	return h, err
}

func (tr *Reader) next() (*Header, error) {
	if err := tr.skip(tr.left + tr.pad); err != nil {
		return nil, err
	}
	tr.left, tr.pad = 0, 0
	var pax map[string]string
	var longName, longLink *string
	for {
		zero, err := tr.readBlock()
		if err != nil {
			return nil, err
		}
		if zero {
			// One zero block starts the end marker; a second must follow
			// (a stream that ends cleanly after one is taken as ended, as
			// archive/tar does).
			if zero, err = tr.readBlock(); err != nil {
				return nil, err
			}
			if zero {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("%w: a zero block inside the stream", ErrHeader)
		}
		h, err := tr.parseHeader()
		if err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case TypeXHeader, TypeGNULongName, TypeGNULongLink:
			if h.Size > 1<<20 {
				return nil, fmt.Errorf("%w: %c header of %d bytes", ErrHeader, h.Typeflag, h.Size)
			}
			data := make([]byte, h.Size)
			if _, err := io.ReadFull(tr.r, data); err != nil {
				return nil, unexpected(err)
			}
			if err := tr.skip(padding(h.Size)); err != nil {
				return nil, err
			}
			switch h.Typeflag {
			case TypeXHeader:
				if pax, err = parsePAX(data); err != nil {
					return nil, err
				}
			case TypeGNULongName:
				s := cString(data)
				longName = &s
			case TypeGNULongLink:
				s := cString(data)
				longLink = &s
			}
			continue
		}
		if longName != nil {
			h.Name = *longName
		}
		if longLink != nil {
			h.Linkname = *longLink
		}
		if err := applyPAX(h, pax); err != nil {
			return nil, err
		}
		if h.Typeflag == TypeRegA {
			if strings.HasSuffix(h.Name, "/") {
				h.Typeflag = TypeDir
			} else {
				h.Typeflag = TypeReg
			}
		}
		switch h.Typeflag {
		case TypeLink, TypeSymlink, TypeChar, TypeBlock, TypeDir, TypeFifo:
			// Header only: no data follows, whatever the size field says
			// (as archive/tar reads them).
			h.Size = 0
		}
		tr.left, tr.pad = h.Size, padding(h.Size)
		return h, nil
	}
}

// readBlock reads one block into tr.blk; zero reports an all-zero block.
// A clean end of input before the block is io.EOF, inside it
// io.ErrUnexpectedEOF.
func (tr *Reader) readBlock() (zero bool, err error) {
	if _, err := io.ReadFull(tr.r, tr.blk[:]); err != nil {
		return false, err
	}
	for _, b := range tr.blk {
		if b != 0 {
			return false, nil
		}
	}
	return true, nil
}

func (tr *Reader) parseHeader() (*Header, error) {
	blk := tr.blk[:]
	want, err := parseNumeric(blk[offChksum : offChksum+8])
	if err != nil {
		return nil, err
	}
	var unsigned, signed int64
	for i, b := range blk {
		if i >= offChksum && i < offChksum+8 {
			b = ' '
		}
		unsigned += int64(b)
		signed += int64(int8(b))
	}
	if want != unsigned && want != signed {
		return nil, fmt.Errorf("%w: bad checksum", ErrHeader)
	}
	h := &Header{Typeflag: blk[offTypeflag], Name: cString(blk[offName : offName+lenName]), Linkname: cString(blk[offLinkname : offLinkname+lenName])}
	var mtime int64
	for _, f := range []struct {
		dst  *int64
		b    []byte
		name string
	}{
		{&h.Mode, blk[offMode : offMode+8], "mode"},
		{&h.Size, blk[offSize : offSize+12], "size"},
		{&mtime, blk[offMtime : offMtime+12], "mtime"},
	} {
		if *f.dst, err = parseNumeric(f.b); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrHeader, f.name, err)
		}
	}
	uid, err1 := parseNumeric(blk[offUID : offUID+8])
	gid, err2 := parseNumeric(blk[offGID : offGID+8])
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%w: ids: %v", ErrHeader, err)
	}
	if h.Size < 0 || h.Mode < 0 || uid < 0 || gid < 0 || uid > math.MaxInt32 || gid > math.MaxInt32 {
		return nil, fmt.Errorf("%w: negative or oversized fields", ErrHeader)
	}
	h.UID, h.GID = int(uid), int(gid)
	h.ModTime = time.Unix(mtime, 0)
	if bytes.Equal(blk[offMagic:offMagic+8], magicPOSIX) {
		// POSIX ustar: a name may continue in the prefix field (GNU
		// archives keep times there instead).
		if p := cString(blk[offPrefix : offPrefix+lenPrefix]); p != "" {
			h.Name = p + "/" + h.Name
		}
	}
	return h, nil
}

// parseNumeric reads an octal field (spaces and NULs around the digits),
// or a base-256 one (GNU: the first byte's high bit set).
func parseNumeric(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		// Two's complement, big-endian, the marker bit cleared (0x80) or
		// kept as the sign (0xff).
		neg := b[0]&0x40 != 0
		var v uint64
		for i, c := range b {
			if i == 0 {
				c &= 0x7f
				if neg {
					c |= 0x80
				}
			}
			if v > math.MaxUint64>>8 {
				return 0, errors.New("base-256 number overflows")
			}
			v = v<<8 | uint64(c)
		}
		if !neg && v > math.MaxInt64 {
			return 0, errors.New("base-256 number overflows")
		}
		return int64(v), nil
	}
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 8, 64)
	if err != nil {
		return 0, fmt.Errorf("bad octal number %q", s)
	}
	return v, nil
}

// parsePAX reads the records of a PAX extended header.
func parsePAX(data []byte) (map[string]string, error) {
	out := map[string]string{}
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("%w: bad PAX record", ErrHeader)
		}
		n, err := strconv.Atoi(string(data[:sp]))
		if err != nil || n <= sp+1 || n > len(data) || data[n-1] != '\n' {
			return nil, fmt.Errorf("%w: bad PAX record length", ErrHeader)
		}
		k, v, ok := strings.Cut(string(data[sp+1:n-1]), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: bad PAX record", ErrHeader)
		}
		out[k] = v
		data = data[n:]
	}
	return out, nil
}

// applyPAX overrides h's fields with the PAX records that set them.
func applyPAX(h *Header, pax map[string]string) error {
	for k, v := range pax {
		var err error
		switch k {
		case "path":
			h.Name = v
		case "linkpath":
			h.Linkname = v
		case "size":
			h.Size, err = strconv.ParseInt(v, 10, 64)
			if err == nil && h.Size < 0 {
				err = errors.New("negative")
			}
		case "uid", "gid":
			var id int64
			if id, err = strconv.ParseInt(v, 10, 32); err == nil && id < 0 {
				err = errors.New("negative")
			}
			if k == "uid" {
				h.UID = int(id)
			} else {
				h.GID = int(id)
			}
		case "mtime":
			var sec, nsec int64
			if sec, nsec, err = parsePAXTime(v); err == nil {
				h.ModTime = time.Unix(sec, nsec)
			}
		}
		if err != nil {
			return fmt.Errorf("%w: PAX %s %q: %v", ErrHeader, k, v, err)
		}
	}
	return nil
}

// parsePAXTime reads "SECONDS[.FRACTION]".
func parsePAXTime(s string) (sec, nsec int64, err error) {
	whole, frac, _ := strings.Cut(s, ".")
	if sec, err = strconv.ParseInt(whole, 10, 64); err != nil {
		return 0, 0, err
	}
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		frac += strings.Repeat("0", 9-len(frac))
		if nsec, err = strconv.ParseInt(frac, 10, 64); err != nil || nsec < 0 {
			return 0, 0, errors.New("bad fraction")
		}
		if strings.HasPrefix(whole, "-") && nsec > 0 {
			sec, nsec = sec-1, 1e9-nsec
		}
	}
	return sec, nsec, nil
}

// Read reads data of the current entry: io.EOF at its end,
// io.ErrUnexpectedEOF when the input ends before it.
func (tr *Reader) Read(p []byte) (int, error) {
	if tr.err != nil {
		return 0, tr.err
	}
	if tr.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > tr.left {
		p = p[:tr.left]
	}
	n, err := tr.r.Read(p)
	tr.left -= int64(n)
	if errors.Is(err, io.EOF) && tr.left > 0 {
		err = io.ErrUnexpectedEOF
	} else if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		tr.err = err
	}
	return n, err
}

// skip discards n bytes of the input.
func (tr *Reader) skip(n int64) error {
	if n == 0 {
		return nil
	}
	if _, err := io.CopyN(io.Discard, tr.r, n); err != nil {
		return unexpected(err)
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
