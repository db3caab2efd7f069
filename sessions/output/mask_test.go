package output

import (
	"io"
	"strings"
	"testing"
	"time"
)

// chunked yields its chunks one per Read.
type chunked struct{ chunks []string }

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// TestMaskerReaderAcrossChunks: a value is masked whatever the chunking,
// a self-overlapping one included.
func TestMaskerReaderAcrossChunks(t *testing.T) {
	const secret, ph = "s3cr3t-value-0123456789", "SANDBOXCTL_PLACEHOLDER_x"
	const overlap, ph2 = "abcab-abcab", "PH2"
	m := NewMasker(map[string]string{secret: ph, overlap: ph2})
	in := "token=" + secret + "\nagain:" + secret + secret + " x abcab-abcab-abcab end s3cr3"
	want := "token=" + ph + "\nagain:" + ph + ph + " x " + ph2 + "-abcab end s3cr3"
	if got := string(m.Mask([]byte(in))); got != want {
		t.Fatalf("Mask: %q, want %q", got, want)
	}
	for size := 1; size <= len(in); size++ {
		var c chunked
		for i := 0; i < len(in); i += size {
			c.chunks = append(c.chunks, in[i:min(i+size, len(in))])
		}
		got, err := io.ReadAll(m.Reader(&c, time.Minute))
		if err != nil || string(got) != want {
			t.Fatalf("chunks of %d: %q %v, want %q", size, got, err, want)
		}
	}
	if got := (*Masker)(nil).Mask([]byte("a " + secret)); string(got) != "a "+secret {
		t.Errorf("nil Masker changed output: %q", got)
	}
}

// TestMaskerReaderHoldsBriefly: output that may start a value waits for
// the next bytes at most the hold, so a prompt is not kept from its reader;
// output that cannot start one is not held at all.
func TestMaskerReaderHoldsBriefly(t *testing.T) {
	m := NewMasker(map[string]string{"s3cr3t-value-0123456789": "PH"})
	pr, pw := io.Pipe()
	defer pw.Close()
	r := m.Reader(pr, 50*time.Millisecond)
	got := make(chan string, 4)
	go func() {
		buf := make([]byte, 100)
		for {
			n, err := r.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	if _, err := pw.Write([]byte("plain prompt> ")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "plain prompt> " {
			t.Errorf("got %q", s)
		}
	case <-time.After(time.Minute):
		t.Fatal("output that starts no value was held")
	}
	if _, err := pw.Write([]byte("name? s3c")); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	deadline := time.After(time.Minute)
	for b.String() != "name? s3c" {
		select {
		case s := <-got:
			b.WriteString(s)
		case <-deadline:
			t.Fatalf("a possible value start was held past its hold: have %q", b.String())
		}
	}
}
