package supervisor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/internal/termsize"
)

// maxStdinQueue bounds stdin bytes queued for a command that does not read.
const maxStdinQueue = 8 << 20

// session is one command on the server side.
type session struct {
	srv  *Server
	id   string
	spec OpenSpec
	dir  string // session state dir ("" in memory)
	// recorded is closed once finish wrote the session's final record.
	recorded chan struct{}
	// filesMu orders the writes of the state files (writeFile) with their
	// removal (removeFiles), after which nothing is written: a client may
	// forget the session as soon as it learns of its exit.
	filesMu      sync.Mutex
	filesRemoved bool
	tag          string // the environment entry SANDBOXCTL_RUN=ID
	pid          int
	pgid         int
	startedAt    int64

	stdin    *os.File // pipe write end, or the pty master; nil without stdin
	ptmx     *os.File
	stdinID  string // what the command's fd 0 links to
	stdinC   chan []byte
	queued   atomic.Int64
	inFlight atomic.Bool
	readFds  []*os.File

	mu         sync.Mutex
	cond       *sync.Cond
	stream     uint32      // bound stream of the current client; 0 = detached
	conn       *serverConn // the connection stream belongs to (nil when detached)
	window     int64
	total      [2]int64
	progress   int64
	log        *outlog
	closing    bool
	stdinShut  bool
	exited     bool
	exit       ExitStatus
	leaderWS   *unix.WaitStatus
	inputWait  bool
	iwSeen     int
	readersWG  sync.WaitGroup
	leaderDone chan struct{}
}

func (s *Server) open(c *serverConn, stream uint32, spec OpenSpec) error {
	if len(spec.Argv) == 0 {
		return errors.New("open: empty argv")
	}
	if stream == 0 {
		return errors.New("open: stream 0 is reserved")
	}
	if spec.StartBy > 0 && time.Now().UnixMilli() > spec.StartBy {
		return fmt.Errorf("open: read %v after the client stopped waiting for it (was the supervisor stopped?); not started",
			time.Since(time.UnixMilli(spec.StartBy)).Round(time.Millisecond))
	}
	if spec.ID == "" {
		spec.ID = newID()
	}
	if strings.ContainsAny(spec.ID, "/\x00") || spec.ID == "." || spec.ID == ".." {
		return fmt.Errorf("open: bad session id %q", spec.ID)
	}
	if spec.ID == SpareLogName {
		return fmt.Errorf("open: bad session id %q: the name of the server's spare output log", spec.ID)
	}
	s.mu.Lock()
	_, dup := s.sessions[spec.ID]
	removing := s.removing[spec.ID]
	bound := s.streams[stream] != nil
	s.mu.Unlock()
	if dup {
		return fmt.Errorf("open: session %q exists", spec.ID)
	}
	if removing {
		return fmt.Errorf("open: session %q was just forgotten and its files are being removed; open it again once Forget has answered", spec.ID)
	}
	if bound {
		return fmt.Errorf("open: stream %d is in use", stream)
	}
	if spec.Window <= 0 {
		spec.Window = DefaultWindow
	}
	if spec.PTY {
		if spec.Cols <= 0 {
			spec.Cols = termsize.DefaultCols
		}
		if spec.Rows <= 0 {
			spec.Rows = termsize.DefaultRows
		}
	}
	sess := &session{srv: s, id: spec.ID, spec: spec, tag: string(envknob.RunTag) + "=" + spec.ID, leaderDone: make(chan struct{}), recorded: make(chan struct{})}
	sess.cond = sync.NewCond(&sess.mu)
	var lg *outlog
	if s.dir != "" {
		sess.dir = filepath.Join(s.dir, spec.ID)
		if lg = s.takeSpareLog(sess.dir); lg == nil {
			if err := os.MkdirAll(sess.dir, 0o700); err != nil {
				return fmt.Errorf("open: session dir: %w", err)
			}
		}
	}
	if lg == nil {
		var err error
		if lg, err = newOutlog(sess.dir, s.logCap); err != nil {
			sess.removeFiles()
			return err
		}
	}
	sess.log = lg
	if err := sess.start(c, stream); err != nil {
		lg.close()
		sess.removeFiles()
		return err
	}
	return nil
}

// lookPath resolves argv0 on the command's PATH.
// errNotVisible is lookPath's answer when the command was not found but a
// PATH directory could not be searched (permission denied): the launcher,
// running as the command uid, looks again.
var errNotVisible = errors.New("not visible to the supervisor")

func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	denied := false
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, argv0)
		st, err := os.Stat(p)
		if err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
		denied = denied || errors.Is(err, fs.ErrPermission)
	}
	if denied {
		return "", fmt.Errorf("%s: %w", argv0, errNotVisible)
	}
	return "", fmt.Errorf("%s: %s", argv0, api.CommandNotFound)
}

func (sess *session) start(c *serverConn, stream uint32) error {
	spec := sess.spec
	env := mergeEnv(sess.srv.baseEnv, spec.Env)
	// A TTY gets xterm-256color unless the command asks for its own TERM,
	// as on the Engine exec path: the container's TERM (Podman sets
	// TERM=xterm in every container) describes no terminal of ours.
	hasTerm := false
	for _, e := range spec.Env {
		hasTerm = hasTerm || strings.HasPrefix(e, "TERM=")
	}
	if spec.PTY && !hasTerm {
		env = mergeEnv(env, []string{"TERM=xterm-256color"})
	}
	env = append(env, sess.tag)
	path, err := lookPath(spec.Argv[0], env)
	switch {
	case errors.Is(err, errNotVisible) && sess.srv.cred != nil && sess.srv.launcher != "":
		path = spec.Argv[0] // the launcher looks it up as the command uid
	case err != nil:
		return fmt.Errorf("open: %w", err)
	}

	var childFiles []*os.File // closed in the parent after the fork
	var childFds []int        // the same, as bare descriptors
	defer func() {
		for _, f := range childFiles {
			_ = f.Close()
		}
		for _, fd := range childFds {
			_ = unix.Close(fd)
		}
	}()
	var files []uintptr
	attr := &syscall.SysProcAttr{Credential: sess.srv.cred}
	if spec.PTY {
		master, slave, err := openPTY(spec.Cols, spec.Rows)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		childFiles = append(childFiles, slave)
		sess.ptmx, sess.stdin = master, master
		sess.stdinID = fileIdentity(slave)
		sess.readFds = []*os.File{master}
		fd := slave.Fd()
		files = []uintptr{fd, fd, fd}
		attr.Setsid, attr.Setctty, attr.Ctty = true, true, 0
	} else {
		if childFds, err = sess.openPipes(); err != nil {
			return fmt.Errorf("open: %w", err)
		}
		files = []uintptr{uintptr(childFds[0]), uintptr(childFds[1]), uintptr(childFds[2])}
		attr.Setpgid = true
	}
	dir := spec.Dir
	// Under a sandbox identity the supervisor may not see into the
	// working directory (the workspace is 0700, the command uid's): the
	// fork changes into it as the command uid and fails there.
	if dir != "" && sess.srv.cred == nil {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			sess.closeFds()
			return fmt.Errorf("open: working directory %s: not a directory", dir)
		}
	}

	if sess.stdin != nil {
		sess.stdinC = make(chan []byte, 256)
	}
	s := sess.srv
	s.mu.Lock()
	if s.cur.Load() != c {
		// A newer client took over after this Open was read: nothing runs.
		s.mu.Unlock()
		sess.closeFds()
		return errors.New("open: the connection was superseded by a newer client")
	}
	pid, err := s.forkCommand(sess, path, env, dir, files, attr)
	if errors.Is(err, errLauncherDied) {
		s.mu.Unlock()
		why := sess.launcherDied()
		sess.closeFds()
		return fmt.Errorf("open: start %s: %w", spec.Argv[0], why)
	}
	if err != nil {
		s.mu.Unlock()
		sess.closeFds()
		return err
	}
	sess.pid, sess.pgid = pid, pid
	sess.startedAt = time.Now().UnixMilli()
	sess.stream, sess.conn, sess.window = stream, c, spec.Window
	s.sessions[sess.id] = sess
	s.byPID[pid] = sess
	s.streams[stream] = sess
	refill := s.launcher != "" && s.spare == nil
	refillLog := s.dir != "" && s.spareLog == nil && !s.spareLogMaking
	s.mu.Unlock()
	// For the next command, once this one had the CPU to itself for a
	// while (a spare's start is a fork and a Go runtime; a spare log's,
	// the reservation of its space).
	if refill {
		time.AfterFunc(spareRefillDelay, s.refillSpare)
	}
	if refillLog {
		time.AfterFunc(spareRefillDelay, s.refillLog)
	}

	switch err := sess.log.awaitReserved(); {
	case err == nil:
	case errors.Is(err, errReserveNoRoom):
		// The state filesystem is full (many kept sessions, or something
		// else filled it): the command runs, its log keeps what fits, and
		// what does not is counted as dropped.
	default:
		s.logf("supervisor: %s: %v; its output is kept while there is room", sess.id, err)
	}
	sess.writeMeta()
	s.sendJSON(c, FrameStarted, stream, Started{ID: sess.id, PID: pid, StartedAt: sess.startedAt})
	if sess.stdin != nil {
		go sess.stdinWriter()
	}
	for i, f := range sess.readFds {
		sess.readersWG.Add(1)
		go sess.reader(f, byte(i+1))
	}
	go sess.finish()
	return nil
}

// forkCommand starts the session's command, with s.mu held: through the
// spare launcher when one is ready, else forked through the Launcher (or
// directly without one). Its pid leads the session's process group. An
// error means that nothing ran.
func (s *Server) forkCommand(sess *session, path string, env []string, dir string, files []uintptr, attr *syscall.SysProcAttr) (int, error) {
	spec := sess.spec
	if sp := s.takeSpareLocked(); sp != nil {
		fds := files
		if spec.PTY {
			fds = files[:1] // the terminal, for 0, 1 and 2
		}
		st, err := sp.run(spareOrder{Path: path, Argv: spec.Argv, Env: env, Dir: dir, Terminal: spec.PTY}, fds)
		var refused *spareError
		switch {
		case err == nil && st.kept:
			s.spare = sp // ready for the next command; sparePID stays its
			s.spareForks++
			return st.pid, nil
		case err == nil:
			_ = sp.conn.Close()
			s.sparePID = 0 // a session's leader from now on (the caller, under s.mu)
			return st.pid, nil
		case errors.As(err, &refused):
			_ = sp.conn.Close()
			s.sparePID = 0 // it exits; the reaper collects it
			if refused.Step == "chdir" {
				return 0, fmt.Errorf("open: working directory %s: %w", dir, refused.Errno)
			}
			return 0, fmt.Errorf("open: start %s: %w", spec.Argv[0], refused)
		case errors.Is(err, errSpareUnconfirmed):
			// The command may run: it is ended, now if it carries its
			// tag, else by the next sweep of orphans (nothing claims
			// it), and not started again.
			s.dropSpareLocked(sp)
			for _, pid := range treeOf(listProcs(), 0, 0, sess.tag) {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			return 0, fmt.Errorf("open: start %s: %w", spec.Argv[0], err)
		default:
			s.dropSpareLocked(sp) // nothing ran: fork as usual
		}
	}
	exe, argv := path, spec.Argv
	var startR, startW *os.File
	if s.launcher != "" {
		exe, argv = s.launcher, append([]string{spec.Argv[0], LaunchArg, path}, spec.Argv...)
		// The start pipe (launchStartFD) tells a launcher that died
		// before its code ran from one that runs.
		var err error
		if startR, startW, err = os.Pipe(); err != nil {
			return 0, fmt.Errorf("open: %w", err)
		}
		defer startR.Close()
		files = append(files, startW.Fd())
	}
	pid, err := syscall.ForkExec(exe, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: attr})
	if startW != nil {
		_ = startW.Close()
	}
	if err == nil && startR != nil && !launcherStarted(startR) {
		// Died before it ran (nothing ran: the reaper collects it, as
		// no session claims its pid).
		return 0, errLauncherDied
	}
	if err != nil {
		if errors.Is(err, syscall.EAGAIN) {
			return 0, fmt.Errorf("open: start %s: %w (%w)", spec.Argv[0], pidsLimitErr(), err)
		}
		if s.cred != nil && dir != "" && s.launcher != "" &&
			(errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EACCES)) {
			// The launcher exists: what failed is the working directory.
			return 0, fmt.Errorf("open: working directory %s: %w", dir, err)
		}
		return 0, fmt.Errorf("open: start %s: %w", spec.Argv[0], err)
	}
	if s.launcher == "" {
		if err := setOOMScoreAdj(pid, ChildOOMScoreAdj); err != nil {
			s.logf("supervisor: %s: %v", sess.id, err)
		}
	}
	return pid, nil
}

// openPipes makes the command's stdin, stdout and stderr: pipes, or
// /dev/null for a stdin that is not kept. The session's ends are polled
// (readFds, stdin); the command's are returned, blocking as commands
// expect, for the caller to close after the fork.
func (sess *session) openPipes() (child []int, err error) {
	outR, outW, err := pipe(true)
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe(true)
	if err != nil {
		_ = outR.Close()
		_ = unix.Close(outW)
		return nil, err
	}
	setPipeSize(outR, 1<<20) // room for bulk output between reads
	var in int
	var w *os.File
	if sess.spec.KeepStdin {
		w, in, err = pipe(false)
		if err == nil {
			setPipeSize(w, 1<<20) // room for bulk input (an upload) between reads
		}
	} else {
		in, err = openFd(os.DevNull, unix.O_RDONLY, 0)
	}
	if err != nil {
		_, _ = outR.Close(), errR.Close()
		_, _ = unix.Close(outW), unix.Close(errW)
		return nil, err
	}
	sess.readFds = []*os.File{outR, errR}
	if w != nil {
		sess.stdin, sess.stdinID = w, fdIdentity(in)
	}
	return []int{in, outW, errW}, nil
}

func (sess *session) closeFds() {
	for _, f := range sess.readFds {
		_ = f.Close()
	}
	if sess.stdin != nil && sess.stdin != sess.ptmx {
		_ = sess.stdin.Close()
	}
}

func (sess *session) writeMeta() {
	if sess.dir == "" {
		return
	}
	info := sess.info()
	info.Running = true
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := sess.writeFile("meta.json", b); err != nil {
		sess.srv.logf("supervisor: meta %s: %v", sess.id, err)
	}
}

// reader pumps one output stream: into the log always, to the client when a
// stream is bound and has credit (otherwise it stops reading, so the
// command blocks on a full pipe instead of memory growing).
func (sess *session) reader(f *os.File, which byte) {
	defer sess.readersWG.Done()
	// The end of a stream is mostly its command's exit: collecting it
	// now saves the wait for SIGCHLD to come round to the reaper.
	defer sess.srv.reapExited()
	// A quiet stream reads into a small buffer; once a read fills it, the
	// stream reads straight into pooled frame buffers (no copy on the way
	// out).
	small := make([]byte, 4<<10)
	big := false
	var fb *[]byte
	defer func() {
		if fb != nil {
			sess.srv.pool.Put(fb)
		}
	}()
	idx := which - 1
	busy := false
	raw := 0 // chunks left to send uncompressed after one did not shrink
	for {
		if busy {
			// A busy, compressible stream whose pipe ran dry: let it fill a
			// little so that chunks are large (at most 200 µs of added
			// latency, only while output streams).
			time.Sleep(200 * time.Microsecond)
		}
		sess.mu.Lock()
		for sess.stream != 0 && sess.window <= 0 && !sess.closing {
			sess.cond.Wait()
		}
		if sess.closing {
			sess.mu.Unlock()
			return
		}
		size := len(small)
		if big {
			size = maxOutputChunk
		}
		lim := int64(size)
		if sess.stream != 0 && sess.window < lim {
			lim = sess.window
		}
		sess.mu.Unlock()
		var rb []byte
		if big {
			if fb == nil {
				fb = sess.srv.getFrame()
			}
			rb = (*fb)[HeaderSize+1 : HeaderSize+1+int(lim)]
		} else {
			rb = small[:lim]
		}
		n, err := f.Read(rb)
		if n > 0 {
			sess.mu.Lock()
			if lerr := sess.log.append(which, rb[:n]); lerr != nil {
				sess.srv.logf("supervisor: %s: %v", sess.id, lerr)
			}
			sess.total[idx] += int64(n)
			sess.progress++
			if sess.stream != 0 {
				sess.window -= int64(n)
				tryZ := raw == 0 && n >= minCompress
				var z bool
				if big {
					z = sess.srv.sendOutputFrame(sess.conn, sess.stream, which, fb, n, tryZ)
					fb = nil
				} else {
					z = sess.srv.sendOutput(sess.conn, sess.stream, which, rb[:n], tryZ)
				}
				if !z && tryZ {
					raw = 16 // incompressible: skip the effort for a while
				} else if raw > 0 {
					raw--
				}
			}
			sess.mu.Unlock()
			// Sleep before the next read only when the stream is busy and
			// compresses (bigger chunks compress better and make fewer
			// frames) but this read did not fill the buffer (the pipe ran
			// dry): a full read means more is waiting, and raw output
			// gains nothing from waiting.
			busy = big && n >= 32<<10 && n < size && raw == 0
			if n == size {
				big = true
			}
		}
		if err != nil {
			return
		}
	}
}

func (sess *session) leaderExited(ws unix.WaitStatus) {
	sess.mu.Lock()
	sess.leaderWS = &ws
	sess.mu.Unlock()
	close(sess.leaderDone)
}

// finish waits for the leader, then for the output to drain: readers end
// at EOF, or are cut once the output has been idle for 200 ms (a
// background child still holds the pipe), then records the exit.
func (sess *session) finish() {
	<-sess.leaderDone
	// What the command left behind ends with it.
	sess.endLeftovers()
	done := make(chan struct{})
	go func() { sess.readersWG.Wait(); close(done) }()
	t := time.NewTicker(50 * time.Millisecond)
	var last int64 = -1
	idle, busy := 0, 0
wait:
	for {
		select {
		case <-done:
			break wait
		case <-t.C:
			sess.mu.Lock()
			p, blocked := sess.progress, sess.stream != 0 && sess.window <= 0
			sess.mu.Unlock()
			if blocked {
				continue // the reader is slow, not the output endless
			}
			if p != last {
				// Still flowing: a child that outlived the leader may write
				// forever, so this wait is bounded too (2 s).
				last, idle = p, 0
				if busy++; busy < 40 {
					continue
				}
			} else {
				idle++
			}
			if idle >= 4 || busy >= 40 {
				sess.mu.Lock()
				sess.closing = true
				sess.cond.Broadcast()
				sess.mu.Unlock()
				for _, f := range sess.readFds {
					_ = f.Close()
				}
				<-done
				break wait
			}
		}
	}
	t.Stop()
	for _, f := range sess.readFds {
		_ = f.Close()
	}

	sess.mu.Lock()
	ws := *sess.leaderWS
	st := ExitStatus{EndedAt: time.Now().UnixMilli()}
	switch {
	case ws.Signaled():
		st.Code, st.Signal = -1, signalName(ws.Signal())
	default:
		st.Code = ws.ExitStatus()
	}
	sess.exit, sess.exited = st, true
	sess.inputWait = false
	sess.log.close()
	stream, conn := sess.stream, sess.conn
	if !sess.stdinShut && sess.stdinC != nil {
		sess.stdinShut = true
		close(sess.stdinC)
	}
	sess.mu.Unlock()
	// The exit and the final record are on disk before the exit is
	// reported (a daemon that finds this supervisor dead reads them back),
	// so nothing of the session is written once a client has seen it end
	// (and may remove the state directory).
	if sess.dir != "" {
		b, _ := json.Marshal(st)
		if err := sess.writeFile("exit", b); err != nil {
			sess.srv.logf("supervisor: exit %s: %v", sess.id, err)
		}
		sess.writeMetaFinal()
	}
	if stream != 0 {
		sess.srv.sendJSON(conn, FrameExit, stream, st)
		sess.srv.unbind(stream, sess)
	}
	close(sess.recorded)
	sess.srv.finished(sess)
}

func (sess *session) writeMetaFinal() {
	info := sess.info()
	b, _ := json.MarshalIndent(info, "", "  ")
	_ = sess.writeFile("meta.json", b)
}

// writeFile replaces the session's state file name with b atomically, and
// durably unless the state directory is in memory; a session kept in
// memory, or whose files were removed, keeps nothing.
func (sess *session) writeFile(name string, b []byte) error {
	sess.filesMu.Lock()
	defer sess.filesMu.Unlock()
	if sess.dir == "" || sess.filesRemoved {
		return nil
	}
	p := filepath.Join(sess.dir, name)
	if sess.srv.dirInMemory {
		return atomicfile.WriteVolatile(p, b, 0o600)
	}
	return atomicfile.Write(p, b, 0o600)
}

func (sess *session) isExited() bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.exited
}

func (sess *session) info() SessionInfo {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	in := SessionInfo{
		ID: sess.id, Argv: sess.spec.Argv, Dir: sess.spec.Dir, PTY: sess.spec.PTY, KeepStdin: sess.spec.KeepStdin,
		Meta: sess.spec.Meta, PID: sess.pid, StartedAt: sess.startedAt, Running: !sess.exited,
		InputWait: sess.inputWait, Stdout: sess.total[0], Stderr: sess.total[1],
	}
	if sess.log != nil {
		in.Dropped, in.LogCap = sess.log.dropped(), sess.log.seg
	}
	if sess.exited {
		st := sess.exit
		in.Exit = &st
	}
	return in
}

// output is the Read result: the stdout and stderr byte counts it covers
// (two big-endian int64), then the kept output of both streams.
func (sess *session) output() ([]byte, error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	agg, err := sess.log.aggregated()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 16, 16+len(agg))
	binary.BigEndian.PutUint64(out[0:8], uint64(sess.total[0]))
	binary.BigEndian.PutUint64(out[8:16], uint64(sess.total[1]))
	return append(out, agg...), nil
}

// detach unbinds the session from its stream (the client went away): its
// output goes to the log only, without credit limits.
func (sess *session) detach() {
	sess.mu.Lock()
	sess.stream, sess.conn, sess.window = 0, nil, 0
	sess.cond.Broadcast()
	sess.mu.Unlock()
}

func (sess *session) detachStream(stream uint32) {
	sess.mu.Lock()
	if sess.stream == stream {
		sess.stream, sess.conn, sess.window = 0, nil, 0
		sess.cond.Broadcast()
	}
	sess.mu.Unlock()
}

func (sess *session) grant(stream uint32, n int64) {
	sess.mu.Lock()
	if sess.stream == stream {
		sess.window += n
		sess.cond.Broadcast()
	}
	sess.mu.Unlock()
}

func (s *Server) attach(c *serverConn, stream uint32, a AttachSpec) error {
	if stream == 0 {
		return errors.New("attach: stream 0 is reserved")
	}
	if a.Window <= 0 {
		a.Window = DefaultWindow
	}
	// s.mu, then sess.mu, for the whole replay and binding: a Hello in
	// between would otherwise leave the session bound to a superseded
	// client, and output arriving between replay and binding would be
	// neither replayed nor streamed.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != c {
		return errors.New("attach: the connection was superseded by a newer client")
	}
	sess := s.sessions[a.ID]
	if sess == nil {
		return fmt.Errorf("attach: no session %q", a.ID)
	}
	if old := s.streams[stream]; old != nil && old != sess {
		return fmt.Errorf("attach: stream %d is in use", stream)
	}
	for k, v := range s.streams {
		if v == sess {
			delete(s.streams, k)
		}
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	// Started goes first and says how much of what was asked for the log
	// no longer has, so the client's offsets stay true.
	var out []struct {
		which byte
		d     []byte
	}
	skipped, err := sess.log.replay([2]int64{a.Stdout, a.Stderr}, func(which byte, d []byte) {
		out = append(out, struct {
			which byte
			d     []byte
		}{which, d})
	})
	if err != nil {
		s.logf("supervisor: replay %s: %v", sess.id, err)
	}
	s.sendJSON(c, FrameStarted, stream, Started{ID: sess.id, PID: sess.pid, StartedAt: sess.startedAt,
		SkippedStdout: skipped[0], SkippedStderr: skipped[1]})
	for _, o := range out {
		for d := o.d; len(d) > 0; {
			n := min(len(d), 64<<10)
			s.sendOutput(c, stream, o.which, d[:n], true)
			d = d[n:]
		}
	}
	if sess.exited {
		s.sendJSON(c, FrameExit, stream, sess.exit)
		return nil
	}
	s.streams[stream] = sess
	sess.stream, sess.conn, sess.window = stream, c, a.Window
	sess.cond.Broadcast()
	if sess.inputWait {
		s.sendJSON(c, FrameStatus, stream, Status{InputWait: true})
	}
	return nil
}

func (sess *session) resize(sz Size) error {
	if sess.ptmx == nil {
		return errors.New("resize: not a terminal")
	}
	if sz.Cols <= 0 || sz.Rows <= 0 || sz.Cols > 65535 || sz.Rows > 65535 {
		return fmt.Errorf("resize: bad size %dx%d", sz.Cols, sz.Rows)
	}
	if err := termsize.Set(sess.ptmx, sz.Cols, sz.Rows); err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	return nil
}

// LeftoverGrace is how long processes a command left behind get between
// SIGTERM and SIGKILL once its leader exited.
const LeftoverGrace = 500 * time.Millisecond

func (sess *session) removeFiles() {
	sess.filesMu.Lock()
	defer sess.filesMu.Unlock()
	sess.filesRemoved = true
	if sess.dir != "" && !sess.srv.recycleLog(sess) {
		_ = os.RemoveAll(sess.dir)
	}
}

// unbind forgets the stream binding of a session that has ended.
func (s *Server) unbind(stream uint32, sess *session) {
	s.mu.Lock()
	if s.streams[stream] == sess {
		delete(s.streams, stream)
	}
	s.mu.Unlock()
}

// mergeEnv applies over (KEY=VALUE entries) on base, keeping base's order
// and dropping any SANDBOXCTL_RUN (the server sets it).
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(over)+2)
	for _, list := range [][]string{base, over} {
		for _, e := range list {
			k, _, _ := strings.Cut(e, "=")
			if k == "" || k == string(envknob.RunTag) {
				continue
			}
			if i, ok := idx[k]; ok {
				out[i] = e
				continue
			}
			idx[k] = len(out)
			out = append(out, e)
		}
	}
	return out
}
