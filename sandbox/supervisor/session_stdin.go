package supervisor

import (
	"encoding/binary"
	"errors"
)

func (sess *session) queueStdin(p []byte) error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.stdinC == nil {
		return errors.New("stdin: the command has no stdin")
	}
	if sess.stdinShut {
		return errors.New("stdin: closed")
	}
	if sess.queued.Load()+int64(len(p)) > maxStdinQueue {
		return errors.New("stdin: the command is not reading; queue full")
	}
	select {
	case sess.stdinC <- p:
		sess.queued.Add(int64(len(p)))
		sess.clearInputWaitLocked()
		return nil
	default:
		return errors.New("stdin: the command is not reading; queue full")
	}
}

func (sess *session) closeStdin() {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.stdinC == nil || sess.stdinShut {
		return
	}
	if sess.ptmx != nil {
		// ^D ends a read on a terminal in canonical mode.
		select {
		case sess.stdinC <- []byte{4}:
			sess.queued.Add(1)
		default:
		}
		sess.clearInputWaitLocked()
		return
	}
	sess.stdinShut = true
	close(sess.stdinC)
	sess.clearInputWaitLocked()
}

func (sess *session) stdinWriter() {
	for p := range sess.stdinC {
		sess.inFlight.Store(true)
		_, err := sess.stdin.Write(p)
		sess.queued.Add(-int64(len(p)))
		sess.inFlight.Store(false)
		sess.ackStdin(len(p))
		sess.srv.putStdinBuf(p)
		if err != nil {
			// The command closed its stdin: drop the rest (as a pipe
			// whose reader is gone), returning its credit.
			for p := range sess.stdinC {
				sess.queued.Add(-int64(len(p)))
				sess.ackStdin(len(p))
			}
			break
		}
	}
	if sess.ptmx == nil {
		_ = sess.stdin.Close()
	}
}

// ackStdin returns n bytes of stdin credit to the client attached to the
// session (HelloAck.StdinAcks): the command took them, or they were
// dropped because it closed its stdin.
func (sess *session) ackStdin(n int) {
	sess.mu.Lock()
	stream, conn := sess.stream, sess.conn
	sess.mu.Unlock()
	if stream == 0 || conn == nil || n <= 0 {
		return
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	sess.srv.send(conn, FrameStdinAck, stream, b[:])
}

// stdinWatch returns the identity of the command's stdin when input wait is
// worth checking (running, stdin open); "" otherwise. Called under srv.mu.
func (sess *session) stdinWatch() string {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.exited || sess.stdinC == nil || sess.stdinShut || sess.leaderWS != nil {
		return ""
	}
	return sess.stdinID
}

// observeInputWait folds one scan into the input-wait state: a command is
// waiting once it was seen blocked reading its stdin in two scans in a row
// with nothing queued or pending in the pipe.
func (sess *session) observeInputWait(blocked bool) {
	if blocked && (sess.queued.Load() > 0 || sess.inFlight.Load()) {
		blocked = false
	}
	if blocked && sess.ptmx == nil && pendingBytes(sess.stdin) > 0 {
		blocked = false
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if !blocked {
		sess.clearInputWaitLocked()
		return
	}
	sess.iwSeen++
	if sess.iwSeen >= 2 && !sess.inputWait && !sess.exited {
		sess.inputWait = true
		if sess.stream != 0 {
			sess.srv.sendJSON(sess.conn, FrameStatus, sess.stream, Status{InputWait: true})
		}
	}
}

func (sess *session) clearInputWaitLocked() {
	sess.iwSeen = 0
	if sess.inputWait {
		sess.inputWait = false
		if sess.stream != 0 {
			sess.srv.sendJSON(sess.conn, FrameStatus, sess.stream, Status{InputWait: false})
		}
	}
}
