package sessions

// waitingForInputLocked reports whether a running session is blocked on
// its stdin.
func (s *session) waitingForInputLocked() bool {
	if s.finished {
		return false
	}
	return s.inputWait != nil && s.inputWait.InputWait()
}
