// Package vocab is sandboxctl's vocabulary: the typed names of the things
// every layer speaks of (security and ask modes, elevated levels, exec
// hosts, guard verdicts, human approval decisions, event types), each with
// its one parser. Input is parsed into these types once, where it enters
// (configuration load, tool-API request, CLI flag, wire frame); everything
// inside takes the types. Standard library only: a leaf every package may
// import.
package vocab
