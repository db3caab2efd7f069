package toolapi

import (
	"errors"
	"testing"
)

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"command":"echo héllo 😀"}`, true},
		{`{"command":"echo \u00e9 \ud83d\ude00"}`, true},
		{`{"command":"echo \\ud800"}`, true}, // an escaped backslash, then text
		{`{"command":"echo \ufffd"}`, true},  // U+FFFD sent on purpose
		{"{\"command\":\"echo \xff\"}", false},
		{"{\"command\":\"echo \xc3\"}", false},
		{`{"command":"echo \ud800"}`, false},
		{`{"command":"echo \udc00"}`, false},
		{`{"command":"echo \ud800\u0041"}`, false},
	} {
		err := CheckText([]byte(tc.body))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidText)) {
			t.Errorf("CheckText(%q) = %v, want ok=%v", tc.body, err, tc.ok)
		}
	}
}
