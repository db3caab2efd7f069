package api

import "time"

// FileRef names a path in an agent's sandbox (the files API's query:
// path, agent, session).
type FileRef struct {
	AgentID    string
	SessionKey string
	Path       string
}

// FileInfo describes one path in a sandbox (GET /v1/files/stat, and the
// supervisor's file tool, whose answer the daemon passes on).
type FileInfo struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode holds the permission bits (e.g. 0o644 = 420).
	Mode       uint32    `json:"mode"`
	ModTime    time.Time `json:"mtime"`
	LinkTarget string    `json:"linkTarget,omitempty"`
}

// FileList is a directory's entries, by name (GET /v1/files/list);
// Truncated is set when the directory has more than the requested maximum.
type FileList struct {
	Path      string     `json:"path"`
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated,omitempty"`
}

// Content types of the files API.
const (
	ContentTypeTar    = "application/x-tar"
	ContentTypeBinary = "application/octet-stream"
)

// FileRemoved is the body of DELETE /v1/files: the path removed.
type FileRemoved struct {
	Removed string `json:"removed"`
}

// FileWritten is the body of an upload's answer (PUT /v1/files): the path
// written.
type FileWritten struct {
	Written string `json:"written"`
}
