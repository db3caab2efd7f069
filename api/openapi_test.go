package api_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sandboxctl/sandboxctl/api"
)

// goField is one JSON member of a Go type: its name, Go type and whether
// it may be left out.
type goField struct {
	typ      reflect.Type
	optional bool
}

// jsonFields lists the JSON members of struct type t as encoding/json
// encodes them (embedded structs flattened, "-" skipped).
func jsonFields(t reflect.Type) map[string]goField {
	out := map[string]goField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = goField{typ: f.Type, optional: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")}
	}
	return out
}

// schemaTypes is a schema's "type" as a list ("integer", or [integer, "null"]).
func schemaTypes(s map[string]any) []string {
	switch v := s["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, x.(string))
		}
		return out
	}
	if _, ok := s["$ref"]; ok {
		return []string{"object"}
	}
	if _, ok := s["const"]; ok {
		return []string{"string"}
	}
	return nil
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	exitCodeType = reflect.TypeFor[api.ExitCode]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

// jsonTypeOK reports whether a Go value of type t encodes as the schema's
// types.
func jsonTypeOK(t reflect.Type, types []string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	has := func(s string) bool { return slices.Contains(types, s) }
	switch {
	case t == timeType:
		return has("string")
	case t == exitCodeType:
		return has("integer")
	case t == rawType:
		return true // any JSON value, passed on as it is
	}
	switch t.Kind() {
	case reflect.String:
		return has("string")
	case reflect.Bool:
		return has("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return has("integer")
	case reflect.Float32, reflect.Float64:
		// A number the API refuses unless whole is documented as an integer.
		return has("number") || has("integer")
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return has("string") // base64
		}
		return has("array")
	case reflect.Map, reflect.Struct:
		return has("object")
	}
	return false
}

// TestOpenAPIMatchesTypes: every body api/openapi.yaml describes is the Go
// type the daemon and its clients encode: the same property names, JSON
// types that agree, and a required property is never left out by the Go
// encoding. Exact bodies list every Go member; the details object (one
// type for every kind of result) lists a part of api.Details.
func TestOpenAPIMatchesTypes(t *testing.T) {
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	toolResultDetails := schemas["ToolResult"]["properties"].(map[string]any)["details"].(map[string]any)
	for _, tc := range []struct {
		name   string
		schema map[string]any
		goType reflect.Type
		exact  bool
	}{
		{"Error", schemas["Error"], reflect.TypeFor[api.ErrorBody](), true},
		{"Health", schemas["Health"], reflect.TypeFor[api.Health](), true},
		{"ExecParams", schemas["ExecParams"], reflect.TypeFor[api.ExecRequest](), true},
		{"ProcessParams", schemas["ProcessParams"], reflect.TypeFor[api.ProcessParams](), true},
		{"ToolResult", schemas["ToolResult"], reflect.TypeFor[api.Result](), true},
		{"ToolResult.details", toolResultDetails, reflect.TypeFor[api.Details](), false},
		{"StreamFrame", schemas["StreamFrame"], reflect.TypeFor[api.StreamFrame](), true},
		{"Event", schemas["Event"], reflect.TypeFor[api.Event](), true},
		{"SessionSummary", schemas["SessionSummary"], reflect.TypeFor[api.Details](), false},
		{"Approval", schemas["Approval"], reflect.TypeFor[api.Approval](), true},
		{"ResolveRequest", schemas["ResolveRequest"], reflect.TypeFor[api.ResolveRequest](), true},
		{"FileInfo", schemas["FileInfo"], reflect.TypeFor[api.FileInfo](), true},
		{"FileList", schemas["FileList"], reflect.TypeFor[api.FileList](), true},
		{"Sandbox", schemas["Sandbox"], reflect.TypeFor[api.Sandbox](), true},
		{"CreateSandboxRequest", schemas["CreateSandboxRequest"], reflect.TypeFor[api.CreateSandboxRequest](), true},
		{"Snapshot", schemas["Snapshot"], reflect.TypeFor[api.Snapshot](), true},
		{"Preview", schemas["Preview"], reflect.TypeFor[api.Preview](), true},
		{"OpenPreviewRequest", schemas["OpenPreviewRequest"], reflect.TypeFor[api.OpenPreviewRequest](), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.schema == nil {
				t.Fatalf("openapi.yaml has no schema %s", tc.name)
			}
			props, _ := tc.schema["properties"].(map[string]any)
			fields := jsonFields(tc.goType)
			for name, p := range props {
				f, ok := fields[name]
				if !ok {
					t.Errorf("property %q is not a JSON member of %v", name, tc.goType)
					continue
				}
				if types := schemaTypes(p.(map[string]any)); !jsonTypeOK(f.typ, types) {
					t.Errorf("property %q: schema type %v, Go type %v", name, types, f.typ)
				}
			}
			if tc.exact {
				var missing []string
				for name := range fields {
					if _, ok := props[name]; !ok {
						missing = append(missing, name)
					}
				}
				sort.Strings(missing)
				if len(missing) > 0 {
					t.Errorf("members of %v that openapi.yaml does not document: %v", tc.goType, missing)
				}
				req, _ := tc.schema["required"].([]any)
				for _, r := range req {
					if f, ok := fields[r.(string)]; ok && f.optional {
						t.Errorf("required property %q may be left out by %v (omitempty)", r, tc.goType)
					}
				}
			}
		})
	}
}
