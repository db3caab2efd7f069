package supervisor

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Demux reads the Engine's multiplexed attach stream of a container without
// a TTY (8-byte header: stream type, 3 zero bytes, big-endian length) and
// yields the stdout bytes; stderr chunks go to onStderr (the supervisor's
// own diagnostics). It is a small reader of that documented format, so the
// in-container binary never needs the Engine client.
type Demux struct {
	r        *bufio.Reader
	remain   int
	onStderr func([]byte)
}

// NewDemux wraps r.
func NewDemux(r io.Reader, onStderr func([]byte)) *Demux {
	return &Demux{r: bufio.NewReaderSize(r, 128<<10), onStderr: onStderr}
}

// Buffered is how many bytes are buffered; it marks Demux as a buffered
// reader (frames are read from it directly).
func (d *Demux) Buffered() int { return d.r.Buffered() }

func (d *Demux) Read(p []byte) (int, error) {
	for d.remain == 0 {
		var h [8]byte
		if _, err := io.ReadFull(d.r, h[:]); err != nil {
			return 0, err
		}
		n := int(binary.BigEndian.Uint32(h[4:8]))
		switch h[0] {
		case 0, 1: // stdin (never sent) / stdout
			d.remain = n
		case 2, 3: // stderr / system error
			b := make([]byte, n)
			if _, err := io.ReadFull(d.r, b); err != nil {
				return 0, err
			}
			if d.onStderr != nil {
				d.onStderr(b)
			}
		default:
			return 0, fmt.Errorf("attach stream: bad header %x", h)
		}
	}
	if len(p) > d.remain {
		p = p[:d.remain]
	}
	n, err := d.r.Read(p)
	d.remain -= n
	return n, err
}
