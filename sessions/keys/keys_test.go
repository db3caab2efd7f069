package keys

import (
	"errors"
	"strings"
	"testing"
)

func TestEncode(t *testing.T) {
	tests := []struct {
		key  string
		want string
	}{
		{"enter", "\r"}, {"Enter", "\r"}, {"return", "\r"}, {"tab", "\t"}, {"esc", "\x1b"}, {"escape", "\x1b"},
		{"space", " "}, {"bspace", "\x7f"}, {"backspace", "\x7f"},
		{"up", "\x1b[A"}, {"down", "\x1b[B"}, {"right", "\x1b[C"}, {"left", "\x1b[D"},
		{"home", "\x1b[1~"}, {"end", "\x1b[4~"}, {"pgup", "\x1b[5~"}, {"pgdn", "\x1b[6~"},
		{"ic", "\x1b[2~"}, {"dc", "\x1b[3~"}, {"btab", "\x1b[Z"},
		{"f1", "\x1bOP"}, {"f2", "\x1bOQ"}, {"f3", "\x1bOR"}, {"f4", "\x1bOS"},
		{"f5", "\x1b[15~"}, {"f6", "\x1b[17~"}, {"f7", "\x1b[18~"}, {"f8", "\x1b[19~"},
		{"f9", "\x1b[20~"}, {"f10", "\x1b[21~"}, {"f11", "\x1b[23~"}, {"f12", "\x1b[24~"},
		{"a", "a"}, {"Q", "Q"}, {"-", "-"}, {"é", "é"},
		{"C-c", "\x03"}, {"C-C", "\x03"}, {"^C", "\x03"}, {"^c", "\x03"}, {"C-[", "\x1b"}, {"C-space", "\x00"}, {"C-?", "\x7f"},
		{"M-x", "\x1bx"}, {"M-enter", "\x1b\r"}, {"C-M-a", "\x1b\x01"}, {"S-a", "A"}, {"S-tab", "\x1b[Z"},
		{"C-up", "\x1b[1;5A"}, {"S-left", "\x1b[1;2D"}, {"M-right", "\x1b[1;3C"}, {"C-S-down", "\x1b[1;6B"},
		{"C-dc", "\x1b[3;5~"}, {"S-f5", "\x1b[15;2~"}, {"C-f1", "\x1b[1;5P"},
	}
	for _, tt := range tests {
		got, err := Encode([]string{tt.key})
		if err != nil || string(got) != tt.want {
			t.Errorf("Encode(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
	got, err := Encode([]string{"l", "s", "enter"})
	if err != nil || string(got) != "ls\r" {
		t.Fatalf("sequence: %q %v", got, err)
	}
}

func TestEncodeErrors(t *testing.T) {
	for _, k := range []string{"", "hyperjump", "F13", "X-a", "C-1", "C-enter", "S-bspace"} {
		_, err := Encode([]string{"enter", k})
		if !errors.Is(err, ErrUnknownKey) {
			t.Errorf("Encode(%q): want ErrUnknownKey, got %v", k, err)
			continue
		}
		if k != "" && !strings.Contains(err.Error(), `"`+k+`"`) {
			t.Errorf("Encode(%q): error %q does not name the key", k, err)
		}
	}
}

func TestHex(t *testing.T) {
	got, err := Hex([]string{"1b", "0x5b", `\x41`, "0", "FF"})
	if err != nil || string(got) != "\x1b[A\x00\xff" {
		t.Fatalf("Hex = %q %v", got, err)
	}
	for _, bad := range []string{"", "0x", "123", "zz", "0xg1"} {
		if _, err := Hex([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("Hex(%q): %v", bad, err)
		}
	}
}

func TestPaste(t *testing.T) {
	if got := string(Paste("x\ny", true)); got != "\x1b[200~x\ny\x1b[201~" {
		t.Fatalf("bracketed %q", got)
	}
	if got := string(Paste("x", false)); got != "x" {
		t.Fatalf("plain %q", got)
	}
}
