// Package nodeexec owns remote node hosts: the node agent that dials out to a
// gateway (`sandboxctl node run`) and the gateway-side registry and client
// that route exec requests to it. A node re-evaluates every request with its
// own guard and approvals; nothing the gateway claims about approval counts.
package nodeexec
