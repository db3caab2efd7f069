package output

import (
	"strings"
	"testing"
)

// TestDecoderMasksSecretsAcrossChunks: a secret value is masked whatever
// the chunking, and output that cannot start one is never held back.
func TestDecoderMasksSecretsAcrossChunks(t *testing.T) {
	const secret, ph = "s3cr3t-value-0123456789", "SANDBOXCTL_PLACEHOLDER_x"
	m := NewMasker(map[string]string{secret: ph})
	in := "token=" + secret + "\nagain:" + secret + secret + " end s3cr3"
	want := "token=" + ph + "\nagain:" + ph + ph + " end s3cr3"
	for size := 1; size <= len(in); size++ {
		d := NewDecoder(false).Masking(m)
		var b strings.Builder
		for i := 0; i < len(in); i += size {
			text, _ := d.Feed([]byte(in[i:min(i+size, len(in))]))
			b.WriteString(text)
		}
		b.WriteString(d.Flush())
		if b.String() != want {
			t.Fatalf("chunks of %d: %q, want %q", size, b.String(), want)
		}
	}
	d := NewDecoder(true).Masking(m)
	if text, _ := d.Feed([]byte("plain output\n")); text != "plain output\n" {
		t.Errorf("output that starts no secret was held back: %q", text)
	}
	if text, _ := d.Feed([]byte("x s3c")); text != "x " {
		t.Errorf("a possible secret start was not held back: %q", text)
	}
	if got := (*Masker)(nil).MaskString("a " + secret); got != "a "+secret {
		t.Errorf("nil Masker changed output: %q", got)
	}
}
