package supervisor

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// In carries the client's frames (the container's stdin); Out takes the
	// server's frames (the container's stdout).
	In  io.Reader
	Out io.Writer
	// Dirs are candidate directories for session state, first writable
	// wins ("" entries are skipped); none writable keeps state in memory.
	Dirs []string
	// LogCap is the output kept per session (default DefaultLogCap).
	LogCap int64
	// MaxFinished is how many finished sessions are kept before the oldest
	// is forgotten (default 256).
	MaxFinished int
	// InputWaitInterval is the period of the input-wait scan (default 100 ms).
	InputWaitInterval time.Duration
	// BaseEnv is the environment every command starts from (the
	// container's, for the in-container binary); OpenSpec.Env goes on top.
	BaseEnv []string
	// Socket, when set, is the file name of a unix socket the server also
	// accepts clients on, created in the state directory (e.g.
	// /run/sandboxctl/supervisor.sock): the fast path of a client on the
	// Engine's host, which reaches it through /proc/PID/root without the
	// Engine's attach copy. No state directory means no socket.
	Socket string
	// AcceptPeer decides each socket connection from its peer's
	// credentials as the kernel reports them (SO_PEERCRED); an error
	// refuses it. Nil accepts every peer that can open the socket.
	AcceptPeer func(cred *unix.Ucred) error
	// Launcher is an executable that understands LaunchArg (the
	// supervisor binary: "/proc/self/exe"); commands are started through
	// it so their OOM score is raised before they run. Empty starts them
	// directly and raises the score just after the fork, which a command
	// that forks at once can outrun.
	Launcher string
	// Credential, when set, is the uid and gid every command is forked
	// with (the sandbox identity's command uid, Identity.Credential); the
	// supervisor keeps its own. The launcher then resolves commands the
	// supervisor cannot see (a PATH directory only the command uid may
	// read) and changes into the working directory as the command uid.
	Credential *syscall.Credential
	// Relay says that the binary at the sandbox's supervisor path has the
	// relay tool (RelayArg): HelloAck.Relay.
	Relay bool
	Logf  func(format string, args ...any)
}

// Server is the in-container end: it forks commands, pumps their output to
// the client with flow control, keeps each session's output and exit
// status, and ends whole process trees.
type Server struct {
	stdio      *serverConn // the attach stream: In and Out
	listener   *unixListener
	acceptPeer func(*unix.Ucred) error
	dir        string
	// dirInMemory: dir is on a filesystem that does not survive a crash
	// of the machine (tmpfs), so its records are written without fsync.
	dirInMemory bool
	logCap      int64
	maxFinished int
	iwInterval  time.Duration
	baseEnv     []string
	launcher    string
	relay       bool
	cred        *syscall.Credential
	logf        func(format string, args ...any)
	// limits: what this server cannot do here (HelloAck.Limits); with an
	// input-wait limit the scan does not run.
	limits      []string
	noInputWait bool

	outq chan outFrame
	stop chan struct{}
	// cur is the connection of the newest Hello: only it may open or
	// attach sessions, and frames from other connections are ignored.
	cur atomic.Pointer[serverConn]
	// socks are the accepted socket connections, closed when Serve ends.
	sockMu sync.Mutex
	socks  map[*serverConn]bool
	pool   sync.Pool // *[]byte output frame buffers of poolFrameSize
	// stdinBufs are *[]byte Stdin payload buffers of stdinBufSize: an
	// upload's frames are not garbage for the small heap to collect.
	stdinBufs sync.Pool

	mu       sync.Mutex
	sessions map[string]*session
	// removing are the ids of forgotten sessions whose files are still
	// being removed or recycled: no session may take such an id (its
	// directory) until they are gone.
	removing map[string]bool
	byPID    map[int]*session
	streams  map[uint32]*session
	client   string
	order    []string // finished session ids, oldest first
	deflate  atomic.Bool
	zpool    sync.Pool // *flate.Writer

	// spare is the ready spare launcher (SpareLaunchArg), spareStarting
	// says one is being started, sparePID is the pid of the one started
	// and not yet a session's leader (endOrphans spares it), spareClosed
	// that Shutdown ended them, spareForks how many commands spares
	// forked. Under mu.
	spare         *spareLauncher
	spareStarting bool
	sparePID      int
	spareClosed   bool
	spareForks    int
	// spareLog is the ready spare output log (SpareLogName), and
	// spareLogMaking says one is being made. Under mu; spareClosed ends
	// them too, and Shutdown waits for the making (spareLogMade) so that
	// nothing of it is left in the directory. spareLogNoRoom: the last
	// one made found the filesystem full; none is made again until a
	// forgotten session frees space (a failing reservation fills the
	// filesystem for a moment, which other sessions' writes would meet).
	spareLog       *outlog
	spareLogMaking bool
	spareLogNoRoom bool
	spareLogMade   sync.WaitGroup
}

// NewServer prepares a Server; Serve runs it.
func NewServer(opts ServerOptions) *Server {
	s := &Server{
		stdio:       newServerConn("attach stream", opts.In, opts.Out, nil),
		acceptPeer:  opts.AcceptPeer,
		logCap:      opts.LogCap,
		maxFinished: opts.MaxFinished,
		iwInterval:  opts.InputWaitInterval,
		baseEnv:     opts.BaseEnv,
		launcher:    opts.Launcher,
		relay:       opts.Relay,
		cred:        opts.Credential,
		logf:        opts.Logf,
		outq:        make(chan outFrame, 16),
		stop:        make(chan struct{}),
		sessions:    map[string]*session{},
		removing:    map[string]bool{},
		byPID:       map[int]*session{},
		streams:     map[uint32]*session{},
	}
	if s.logCap <= 0 {
		s.logCap = DefaultLogCap
	}
	if s.maxFinished <= 0 {
		s.maxFinished = 256
	}
	if s.iwInterval <= 0 {
		s.iwInterval = 100 * time.Millisecond
	}
	if note := inputWaitUnavailable(); note != "" {
		s.limits, s.noInputWait = append(s.limits, note), true
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	for _, d := range opts.Dirs {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			continue
		}
		probe := filepath.Join(d, ".probe")
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			continue
		}
		_ = os.Remove(probe)
		_ = os.RemoveAll(filepath.Join(d, SpareLogName)) // an earlier server's, which died
		s.dir, s.dirInMemory = d, inMemory(d)
		break
	}
	s.cur.Store(s.stdio)
	if opts.Socket != "" && s.dir != "" {
		l, err := listenUnix(filepath.Join(s.dir, opts.Socket))
		if err != nil {
			s.logf("supervisor: no local socket: %v", err)
		} else {
			s.listener = l
		}
	}
	return s
}

// inMemory reports whether dir is on a filesystem kept in memory (tmpfs,
// ramfs), which a crash of the machine empties whatever was synced.
func inMemory(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

// SocketPath is the unix socket the server accepts clients on ("" = none).
func (s *Server) SocketPath() string {
	if s.listener == nil {
		return ""
	}
	return s.listener.path
}

// Dir is where session state is kept ("" = memory only).
func (s *Server) Dir() string { return s.dir }

// Serve reads frames until In ends or ctx is done; running commands are not
// touched when it returns (see Shutdown). It reaps every child, including
// orphans reparented to this process when it is a child subreaper.
func (s *Server) Serve(ctx context.Context) error {
	sigc := make(chan os.Signal, 16)
	signal.Notify(sigc, syscall.SIGCHLD)
	defer signal.Stop(sigc)
	go s.reaper(sigc)
	go s.writer()
	if !s.noInputWait {
		go s.inputWaitLoop()
	}
	defer close(s.stop)
	if s.listener != nil {
		defer s.closeSockets()
		go s.acceptLoop(s.listener)
	}

	errc := make(chan error, 1)
	go func() { errc <- s.readLoop() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-errc:
		if s.listener != nil {
			// The attach stream ended or broke; socket clients are still
			// served.
			if err != nil {
				s.logf("supervisor: attach stream: %v; serving the socket only", err)
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return err
	}
}

// readLoop serves the attach stream, whose readers all share one stdin: a
// bad frame skips to the next Hello instead of ending it.
func (s *Server) readLoop() error {
	in := s.stdio.r
	for {
		f, err := s.readFrame(in)
		if errors.Is(err, ErrBadFrame) {
			s.logf("supervisor: %v; resynchronising on the next hello", err)
			if err := resync(in); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.handle(f, s.stdio)
	}
}

// resync skips input up to the next frame header of a Hello.
func resync(in *bufio.Reader) error {
	for {
		b, err := in.ReadByte()
		if err != nil {
			return err
		}
		if b != Magic {
			continue
		}
		next, err := in.Peek(1)
		if err != nil {
			return err
		}
		if next[0] == FrameHello {
			return in.UnreadByte()
		}
	}
}

// maxOutputChunk is the largest output payload per frame; poolFrameSize the
// size of pooled frame buffers.
const (
	maxOutputChunk = 256 << 10
	poolFrameSize  = HeaderSize + 1 + maxOutputChunk
)

// minCompress is the smallest chunk worth compressing.
const minCompress = 16 << 10

var errFull = errors.New("full")

// hello makes c the current connection: every stream of the previous
// client is unbound (its commands run on, detached), and the ack goes to
// the new connection and to the one it supersedes, which is closed if it
// is a socket.
func (s *Server) hello(c *serverConn, h Hello) {
	s.mu.Lock()
	old := s.cur.Swap(c)
	s.client = h.Client
	s.deflate.Store(h.Deflate)
	s.detachAllLocked()
	s.mu.Unlock()
	ack, _ := json.Marshal(HelloAck{Version: ProtocolVersion, Client: h.Client, PID: os.Getpid(), Dir: s.dir, Socket: s.SocketPath(), Limits: s.limits, NoInputWait: s.noInputWait, StdinAcks: true, Relay: s.relay})
	frame := AppendFrame(nil, FrameHelloAck, 0, ack)
	s.enqueue(outFrame{b: frame, to: c})
	if old != nil && old != c {
		s.enqueue(outFrame{b: frame, to: old, closeAfter: old.sock != nil})
	}
}

// detachAllLocked unbinds every session from its stream (s.mu held): the
// client they were bound to is gone or superseded. Sessions are bound only
// to the current connection (open and attach check it under s.mu), so
// this is exactly the previous client's.
func (s *Server) detachAllLocked() {
	for _, sess := range s.sessions {
		sess.detach()
	}
	clear(s.streams)
}

// connLost is called when socket connection c ended: if it was the current
// one, its streams are unbound (their commands run on, and a new client
// re-attaches them).
func (s *Server) connLost(c *serverConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cur.CompareAndSwap(c, nil) {
		return
	}
	s.detachAllLocked()
}

// handle serves one frame that arrived on connection c. Only a Hello is
// taken from a connection that is not the current one.
func (s *Server) handle(f Frame, c *serverConn) {
	if f.Type != FrameHello && s.cur.Load() != c {
		return
	}
	switch f.Type {
	case FrameHello:
		var h Hello
		if err := json.Unmarshal(f.Payload, &h); err != nil {
			s.enqueue(outFrame{b: AppendFrame(nil, FrameError, 0, []byte("bad hello: "+err.Error())), to: c})
			return
		}
		s.hello(c, h)
	case FrameOpen:
		var spec OpenSpec
		if err := json.Unmarshal(f.Payload, &spec); err != nil {
			s.sendError(c, f.Stream, fmt.Errorf("bad open: %w", err))
			return
		}
		if err := s.open(c, f.Stream, spec); err != nil {
			s.sendError(c, f.Stream, err)
		}
	case FrameAttach:
		var a AttachSpec
		if err := json.Unmarshal(f.Payload, &a); err != nil {
			s.sendError(c, f.Stream, fmt.Errorf("bad attach: %w", err))
			return
		}
		if err := s.attach(c, f.Stream, a); err != nil {
			s.sendError(c, f.Stream, err)
		}
	case FrameStdin, FrameStdinClose, FrameResize, FrameWindow, FrameDetach:
		s.mu.Lock()
		sess := s.streams[f.Stream]
		if f.Type == FrameDetach && sess != nil {
			delete(s.streams, f.Stream)
		}
		s.mu.Unlock()
		if sess == nil {
			if f.Type == FrameStdin || f.Type == FrameResize {
				s.sendError(c, f.Stream, errors.New("no session on this stream"))
			}
			return
		}
		switch f.Type {
		case FrameStdin:
			if err := sess.queueStdin(f.Payload); err != nil {
				s.sendError(c, f.Stream, err)
			}
		case FrameStdinClose:
			sess.closeStdin()
		case FrameResize:
			var sz Size
			if err := json.Unmarshal(f.Payload, &sz); err != nil {
				s.sendError(c, f.Stream, fmt.Errorf("bad resize: %w", err))
				return
			}
			if err := sess.resize(sz); err != nil {
				s.sendError(c, f.Stream, err)
			}
		case FrameWindow:
			if len(f.Payload) == 4 {
				sess.grant(f.Stream, int64(binary.BigEndian.Uint32(f.Payload)))
			}
		case FrameDetach:
			sess.detachStream(f.Stream)
		}
	case FrameSignal:
		var sp SignalSpec
		if err := json.Unmarshal(f.Payload, &sp); err != nil {
			s.sendError(c, f.Stream, fmt.Errorf("bad signal: %w", err))
			return
		}
		sess := s.lookup(sp.ID)
		if sess == nil {
			s.sendError(c, f.Stream, fmt.Errorf("no session %q", sp.ID))
			return
		}
		if sp.Tree {
			go func() {
				sess.killTree(time.Duration(sp.GraceMs) * time.Millisecond)
				s.send(c, FrameResult, f.Stream, nil) // to the requester, even if superseded since
			}()
			return
		}
		if err := sess.signal(unix.Signal(sp.Signal)); err != nil {
			s.sendError(c, f.Stream, err)
			return
		}
		s.send(c, FrameResult, f.Stream, nil)
	case FrameList:
		s.sendJSON(c, FrameResult, f.Stream, s.list())
	case FrameRead:
		var r ReadSpec
		_ = json.Unmarshal(f.Payload, &r)
		sess := s.lookup(r.ID)
		if sess == nil {
			s.sendError(c, f.Stream, fmt.Errorf("no session %q", r.ID))
			return
		}
		out, err := sess.output()
		if err != nil {
			s.sendError(c, f.Stream, err)
			return
		}
		s.send(c, FrameResult, f.Stream, out)
	case FrameForget:
		var r ReadSpec
		_ = json.Unmarshal(f.Payload, &r)
		if err := s.forget(r.ID); err != nil {
			s.sendError(c, f.Stream, err)
			return
		}
		s.send(c, FrameResult, f.Stream, nil)
	case FramePing:
		s.send(c, FrameResult, f.Stream, nil)
	default:
		s.sendError(c, f.Stream, fmt.Errorf("unknown frame type %d", f.Type))
	}
}

func (s *Server) lookup(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// Running counts the sessions whose command has not exited.
func (s *Server) Running() int {
	n := 0
	for _, in := range s.list() {
		if in.Running {
			n++
		}
	}
	return n
}

func (s *Server) list() []SessionInfo {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	out := make([]SessionInfo, 0, len(all))
	for _, sess := range all {
		out = append(out, sess.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt < out[j].StartedAt })
	return out
}

func (s *Server) forget(id string) error {
	s.mu.Lock()
	sess := s.sessions[id]
	if sess == nil {
		s.mu.Unlock()
		return fmt.Errorf("no session %q", id)
	}
	if !sess.isExited() {
		s.mu.Unlock()
		return fmt.Errorf("session %q is still running", id)
	}
	delete(s.sessions, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	for k, v := range s.streams {
		if v == sess {
			delete(s.streams, k)
		}
	}
	s.removing[id] = true
	s.mu.Unlock()
	s.removeFiles(sess)
	return nil
}

// removeFiles removes (or recycles) the files of sess, which is no longer
// in s.sessions and whose id is in s.removing, then frees its id.
func (s *Server) removeFiles(sess *session) {
	sess.removeFiles()
	s.mu.Lock()
	delete(s.removing, sess.id)
	s.spareLogNoRoom = false
	s.mu.Unlock()
}

// finished records that sess ended and forgets the oldest finished sessions
// beyond MaxFinished.
func (s *Server) finished(sess *session) {
	s.mu.Lock()
	s.order = append(s.order, sess.id)
	var drop []*session
	for len(s.order) > s.maxFinished {
		old := s.sessions[s.order[0]]
		delete(s.sessions, s.order[0])
		s.order = s.order[1:]
		if old != nil {
			drop = append(drop, old)
			s.removing[old.id] = true
			for k, v := range s.streams {
				if v == old {
					delete(s.streams, k)
				}
			}
		}
	}
	s.mu.Unlock()
	for _, o := range drop {
		s.removeFiles(o)
	}
}

// reaper collects every exited child (wait4(-1)), dispatching session
// leaders to their session and discarding reparented orphans.
func (s *Server) reaper(sigc <-chan os.Signal) {
	tick := time.NewTicker(time.Second) // a lost SIGCHLD cannot leave zombies
	defer tick.Stop()
	for {
		select {
		case <-sigc:
		case <-tick.C:
		case <-s.stop:
			return
		}
		s.reapExited()
	}
}

// reapExited collects every child that has exited, dispatching session
// leaders to their session and discarding the rest. The reaper calls it
// on SIGCHLD; a session's reader too, when its stream ends.
func (s *Server) reapExited() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		s.mu.Lock()
		sess := s.byPID[pid]
		delete(s.byPID, pid)
		if pid == s.sparePID { // a spare that died waiting
			s.sparePID = 0
			if s.spare != nil && s.spare.pid == pid {
				_ = s.spare.conn.Close()
				s.spare = nil
			}
		}
		s.mu.Unlock()
		if sess != nil {
			sess.leaderExited(ws)
		}
	}
}

// Shutdown ends every running session's tree (SIGTERM, SIGKILL after grace).
func (s *Server) Shutdown(grace time.Duration) {
	s.closeSpare()
	s.spareLogMade.Wait()
	s.mu.Lock()
	var running, ending []*session
	for _, sess := range s.sessions {
		if sess.isExited() {
			ending = append(ending, sess)
		} else {
			running = append(running, sess)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, sess := range running {
		wg.Add(1)
		go func() { defer wg.Done(); sess.killTree(grace) }()
	}
	wg.Wait()
	// A command that had ended has its exit recorded and reported, and
	// its final record is being written (a matter of milliseconds): that
	// is waited for. Those it ended now are not: a stop must be quick
	// (docker stop -t1 kills the sandbox a second after its SIGTERM).
	deadline := time.After(shutdownRecordWait)
	for _, sess := range ending {
		select {
		case <-sess.recorded:
		case <-deadline:
			s.logf("supervisor: shutdown: final records not written within %v", shutdownRecordWait)
			return
		}
	}
}

// shutdownRecordWait bounds Shutdown's wait for the final records of
// commands that had ended.
const shutdownRecordWait = time.Second

func (s *Server) inputWaitLoop() {
	t := time.NewTicker(s.iwInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.stop:
			return
		}
		s.mu.Lock()
		byIdent := map[string]*session{}
		for _, sess := range s.sessions {
			if id := sess.stdinWatch(); id != "" {
				byIdent[id] = sess
			}
		}
		s.mu.Unlock()
		if len(byIdent) == 0 {
			continue
		}
		blocked := map[*session]bool{}
		for _, p := range listProcs() {
			if p.State != 'S' {
				continue
			}
			sess := byIdent[fd0Identity(p.PID)]
			if sess == nil || blocked[sess] {
				continue
			}
			if blockedReadingFd0(p.PID) {
				blocked[sess] = true
			}
		}
		for _, sess := range byIdent {
			sess.observeInputWait(blocked[sess])
		}
	}
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stdinBufSize is the size of a pooled Stdin payload buffer: the client's
// largest Stdin frame (Proc.Write).
const stdinBufSize = stdinFrame

// readFrame is ReadFrame with a Stdin payload in a pooled buffer (the
// session's stdin writer gives it back, putStdinBuf).
func (s *Server) readFrame(r io.Reader) (Frame, error) {
	return readFrame(r, func(typ byte, n uint32) []byte {
		if typ != FrameStdin || n > stdinBufSize {
			return make([]byte, n)
		}
		if v := s.stdinBufs.Get(); v != nil {
			return (*v.(*[]byte))[:n]
		}
		return make([]byte, n, stdinBufSize)
	})
}

// putStdinBuf returns a Stdin payload written to its command to the pool.
func (s *Server) putStdinBuf(p []byte) {
	if cap(p) == stdinBufSize {
		p = p[:0]
		s.stdinBufs.Put(&p)
	}
}
