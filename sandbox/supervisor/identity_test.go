package supervisor

import "testing"

func TestParseIdentity(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"2000000000:2000000001", true},
		{"5:6", true},
		{"5:5", false},
		{"0:6", false},
		{"5:0", false},
		{"5", false},
		{"5:x", false},
		{"4294967296:1", false},
	} {
		id, err := ParseIdentity(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if tc.ok && id.String() != tc.in {
			t.Errorf("%q round-trips as %q", tc.in, id.String())
		}
	}
}
