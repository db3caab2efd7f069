package sessions

// InputWaiter is implemented by a Process whose host can tell, from the
// kernel's view of the process, that it sits blocked reading a stdin nobody
// has written (the supervised sandbox). A host whose processes never report
// it returns a nil channel from InputWaitChanged.
type InputWaiter interface {
	InputWait() bool
	InputWaitChanged() <-chan struct{}
}

// InputWaitHost is implemented by a Host that can start processes which
// report input waits. For such hosts a foreground run keeps stdin open: if
// the command then blocks reading it, exec returns at once with the session
// "waiting for input" instead of hanging until the timeout, and process
// write (with eof) completes it. Elsewhere a foreground run gets EOF at once.
type InputWaitHost interface {
	DetectsInputWait() bool
}

// inputWaitOf returns the process's input-wait reporter, or nil.
func inputWaitOf(p Process) InputWaiter {
	iw, ok := p.(InputWaiter)
	if !ok || iw.InputWaitChanged() == nil {
		return nil
	}
	return iw
}

// waitingForInputLocked reports whether a running session is blocked on
// its stdin.
func (s *session) waitingForInputLocked() bool {
	if s.finished {
		return false
	}
	iw := inputWaitOf(s.proc)
	return iw != nil && iw.InputWait()
}
