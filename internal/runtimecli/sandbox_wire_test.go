package runtimecli

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// fill sets every exported field of the struct v points to a value that
// is not its zero (so no omitempty member is left out), recursively.
func fill(t *testing.T, v reflect.Value, seed int) {
	t.Helper()
	v = v.Elem()
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		seed++
		switch f.Kind() {
		case reflect.String:
			f.SetString(sf.Name + "-value")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(seed))
		case reflect.Uint64:
			f.SetUint(uint64(seed))
		case reflect.Float64:
			f.SetFloat(float64(seed) + 0.5)
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v").Convert(f.Type().Elem()))
			f.Set(m)
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf([]string{"a", "b"}))
			} else if f.Type() == reflect.TypeFor[json.RawMessage]() {
				f.Set(reflect.ValueOf(json.RawMessage(`{"x":1}`)))
			} else {
				t.Fatalf("fill: field %s of type %v", sf.Name, f.Type())
			}
		case reflect.Struct:
			if f.Type() == reflect.TypeFor[time.Time]() {
				f.Set(reflect.ValueOf(time.Date(2026, 11, 27, 10, 0, seed, 0, time.UTC)))
				continue
			}
			fill(t, f.Addr(), seed*10)
		default:
			t.Fatalf("fill: field %s of kind %v", sf.Name, f.Kind())
		}
	}
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSandboxBodiesAsBefore: the sandbox routes moved into the daemon
// answer api types; their JSON is byte for byte what the routes encoded
// before, from the sandbox package's own types, with every member set and
// with every optional one left out.
func TestSandboxBodiesAsBefore(t *testing.T) {
	for _, full := range []bool{true, false} {
		var in sandbox.Info
		var snap sandbox.SnapshotInfo
		if full {
			fill(t, reflect.ValueOf(&in), 0)
			fill(t, reflect.ValueOf(&snap), 100)
		} else {
			in = sandbox.Info{Sandbox: api.Sandbox{ID: "id", Name: "n", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}}
			snap = sandbox.SnapshotInfo{Snapshot: api.Snapshot{Name: "s"}}
		}
		if got, want := jsonOf(t, in.Sandbox), jsonOf(t, in); !bytes.Equal(got, want) {
			t.Errorf("sandbox (full %v):\n got %s\nwant %s", full, got, want)
		}
		if got, want := jsonOf(t, snap.Snapshot), jsonOf(t, snap); !bytes.Equal(got, want) {
			t.Errorf("snapshot (full %v):\n got %s\nwant %s", full, got, want)
		}

		// GET /v1/sandboxes/{name} encoded this struct before.
		type before struct {
			sandbox.Info
			Explain    sandbox.Explanation `json:"explain"`
			Usage      *api.SandboxUsage   `json:"usage,omitempty"`
			UsageError string              `json:"usageError,omitempty"`
		}
		ex := sandbox.Explanation{ScopeKey: "agent:a", Name: "n", Config: json.RawMessage(`{"image":"x<y>"}`),
			Hardening: map[string]any{"readOnly": true, "caps": []string{"NET_RAW"}}, Limits: sandbox.Limits{Memory: "1g", Tmpfs: map[string]string{"/tmp": "64m"}}}
		raw, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		old := before{Info: in, Explain: ex, UsageError: "the sandbox is exited"}
		now := api.SandboxDetail{Sandbox: in.Sandbox, Explain: raw, UsageError: old.UsageError}
		if full {
			old.Usage = &api.SandboxUsage{CPUPercent: 1.5, MemoryBytes: 2, MemoryLimitBytes: 3, Pids: 4, PidsLimit: 5}
			old.UsageError, now.Usage, now.UsageError = "", old.Usage, ""
		}
		if got, want := jsonOf(t, now), jsonOf(t, old); !bytes.Equal(got, want) {
			t.Errorf("detail (full %v):\n got %s\nwant %s", full, got, want)
		}
	}
	// DELETE /v1/sandboxes/{name} answered a map before.
	if got, want := jsonOf(t, api.SandboxRemoved{Removed: "id", Name: "n", WorkspaceRemoved: true}),
		jsonOf(t, map[string]any{"removed": "id", "name": "n", "workspaceRemoved": true}); !bytes.Equal(got, want) {
		t.Errorf("removed:\n got %s\nwant %s", got, want)
	}
	if got, want := jsonOf(t, api.ApprovalDecided{ID: "a", Decision: "deny"}), jsonOf(t, map[string]string{"id": "a", "decision": "deny"}); !bytes.Equal(got, want) {
		t.Errorf("decided:\n got %s\nwant %s", got, want)
	}
}
