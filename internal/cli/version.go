package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
)

// VersionInfo is what `sandboxctl version --json` prints.
type VersionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func newVersionCommand(c *CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the sandboxctl version",
		Args:  ExactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return RunVersion(c)
		},
	}
}

// RunVersion prints the version.
func RunVersion(c *CLI) error {
	v := VersionInfo{Version: c.Version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if c.JSON {
		return WriteJSON(c.Out, v)
	}
	_, err := fmt.Fprintf(c.Out, "sandboxctl %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
	return err
}

func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
