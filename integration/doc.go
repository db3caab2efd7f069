// Package integration holds the end-to-end tests of sandboxctl: they run
// against a real Docker Engine (started by the project's own scripts) with the
// project's locally built images, and remove every container they create.
package integration
