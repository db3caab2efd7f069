// Package envguard owns the environment-variable policy of sandboxctl: which
// keys are valid, which are refused in a request (everywhere, or only as an
// override of a host value), which inherited variables are dropped before a
// host process starts, and how PATH is built on the gateway and node hosts.
//
// Everything here is a pure function over strings: no I/O, std only. Every
// refusal is a *RefusedError naming the key and the rule that refused it.
package envguard
