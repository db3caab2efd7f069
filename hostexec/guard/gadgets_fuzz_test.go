package guard

import (
	"slices"
	"strings"
	"testing"
)

// FuzzGadget: any argv of any table program is scanned without a panic,
// and a reported gadget names an argument.
func FuzzGadget(f *testing.F) {
	for _, s := range []string{"tar\x00cIf\x00x", "git\x00-c", "tar\x00", "sed\x00-i", "find\x00--\x00-exec", "sort\x00-o", "man\x00-P", "less\x00+", "tar\x00--file",
		"wget\x00-qe", "zip\x00-qTT", "unzip\x00-qd", "rg\x00--pre", "curl\x00-sK", "tar\x00xfC\x00a", "git\x00archive\x00-vo"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, pty bool) {
		argv := strings.Split(s, "\x00")
		arg, why := Gadget(argv, pty, argv[0])
		if why != "" && arg == "" {
			t.Fatalf("Gadget(%q) = %q without an argument", argv, why)
		}
	})
}

// FuzzPatternRoundTrip: a formatted argv pattern parses back to the same
// arguments.
func FuzzPatternRoundTrip(f *testing.F) {
	for _, s := range []string{"status", "log\x00--format=%h %s", "a'b\x00\"c\"\x00$x", "*\x00{a,b}\x00~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		p, ok := FormatArgvPattern("/usr/bin/git", args)
		if !ok {
			return
		}
		head, got, err := ParsePattern(p)
		if err != nil || head != "/usr/bin/git" || !slices.Equal(got, args) {
			t.Fatalf("%q → %q → %q %q %v", args, p, head, got, err)
		}
	})
}
