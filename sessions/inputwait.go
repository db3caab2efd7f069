package sessions

// InputWaitHost is implemented by a Host that can start processes which
// report input waits (Started.InputWait). For such hosts a foreground run keeps stdin open: if
// the command then blocks reading it, exec returns at once with the session
// "waiting for input" instead of hanging until the timeout, and process
// write (with eof) completes it. Elsewhere a foreground run gets EOF at once.
type InputWaitHost interface {
	DetectsInputWait() bool
}

// waitingForInputLocked reports whether a running session is blocked on
// its stdin.
func (s *session) waitingForInputLocked() bool {
	if s.finished {
		return false
	}
	return s.inputWait != nil && s.inputWait.InputWait()
}
