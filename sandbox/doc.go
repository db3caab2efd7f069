// Package sandbox owns the per-agent Docker containers of sandboxctl, created
// through the Engine API (github.com/moby/moby/client, negotiating down to API
// 1.41): scope keys and names, labels, the config hash, ensure (create, start,
// reuse, recreate with the five-minute rule, one container per scope under
// concurrency), the hardening defaults, bind and env validation, prune,
// explain, and the plain exec path (Engine exec with attach, demultiplexed
// output, stdin with EOF, TTY resize, and a kill of the whole in-container
// process tree).
//
// The Engine's container list, filtered by the sandboxctl.managed label, is
// the source of truth for which sandboxes exist; last-used times live in the
// state directory.
package sandbox
