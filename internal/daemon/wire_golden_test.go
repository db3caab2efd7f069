package daemon

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/internal/eventjournal"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire from the current code")

// TestWireGoldenGapEvents: the JSON of the gap events stays byte for byte
// what clients saw before the typed details.
func TestWireGoldenGapEvents(t *testing.T) {
	for name, ev := range map[string]any{
		"event-gap":        gapEvent(&eventjournal.Gap{Since: 3, Oldest: 10, Missed: 6}, false),
		"event-gap-pinned": gapEvent(&eventjournal.Gap{Since: 3, Oldest: 10, Missed: 6}, true),
		"event-gap-reset":  gapEvent(&eventjournal.Gap{Since: 3, Oldest: 1, Reset: true}, false),
	} {
		got, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "wire", name+".json")
		if *updateWire {
			if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(want, []byte("\n"))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the JSON on the wire changed:\n got %s\nwant %s", name, got, want)
		}
		var back api.Event
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); !bytes.Equal(again, want) {
			t.Errorf("%s: decoded and encoded again:\n got %s\nwant %s", name, again, want)
		}
	}
}
