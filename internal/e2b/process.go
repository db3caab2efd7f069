package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/shellword"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// The envd process service: every process is a background session of the
// sandbox's scope, started with the exact-bytes output (Raw) that the
// stream hands on.

const (
	keepaliveHeader  = "Keepalive-Ping-Interval"
	defaultKeepalive = 50 * time.Second
	streamChunk      = 64 << 10
)

type ctxKey struct{}

// sandboxOf is the sandbox the envd request authenticated for.
func sandboxOf(ctx context.Context) record {
	rec, _ := ctx.Value(ctxKey{}).(record)
	return rec
}

// commandLine writes cmd and args as one shell command line that runs
// exactly them (exec: the process is the session's own, its pid the
// session's).
func commandLine(cmd string, args []string) (string, error) {
	if cmd == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	words := []string{"exec"}
	for _, w := range append([]string{cmd}, args...) {
		q, err := shellword.Quote(w)
		if err != nil {
			return "", connect.NewError(connect.CodeInvalidArgument, err)
		}
		words = append(words, q)
	}
	return strings.Join(words, " "), nil
}

// startedSession is what Exec's details say of a background start.
type startedSession struct {
	ID     string
	PID    uint32
	Status string
	Text   string
}

func parseStarted(res api.Result) startedSession {
	var st startedSession
	st.ID, st.Status, st.PID = res.Details.SessionID, res.Details.Status, pidOf(res.Details.PID)
	for _, c := range res.Content {
		st.Text += c.Text
	}
	return st
}

// pidOf reads a pid from the tools' details (0 when there is none).
func pidOf(p *int) uint32 {
	if p == nil || *p < 0 {
		return 0
	}
	return uint32(*p)
}

func (s *Server) procStart(ctx context.Context, req *connect.Request[startRequest], st *connect.ServerStream[eventResponse]) error {
	rec := sandboxOf(ctx)
	m := req.Msg
	if m.Process == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process is required"))
	}
	line, err := commandLine(m.Process.Cmd, m.Process.Args)
	if err != nil {
		return err
	}
	env := map[string]string{}
	for k, v := range rec.Envs {
		env[k] = v
	}
	for k, v := range m.Process.Envs {
		env[k] = v
	}
	p := api.ExecParams{Command: line, Env: env, Background: true, Raw: true, Host: string(vocab.HostSandbox),
		AgentID: rec.AgentID, SessionKey: rec.ID, StrictWorkdir: true}
	if m.Process.Cwd != nil {
		p.Workdir = *m.Process.Cwd
	}
	if m.PTY != nil {
		p.PTY = true
		if m.PTY.Size != nil {
			p.Cols, p.Rows = int(m.PTY.Size.Cols), int(m.PTY.Size.Rows)
		}
	}
	res, err := s.opts.Tools.Exec(ctx, p)
	if err != nil {
		return connectError(err)
	}
	started := parseStarted(res)
	switch {
	case started.Status == api.StatusDenied:
		return connect.NewError(connect.CodePermissionDenied, errors.New(started.Text))
	case started.ID == "":
		return connect.NewError(connect.CodeInternal, fmt.Errorf("the command did not start a session: %s", started.Text))
	}
	s.reg.addProc(rec.ID, started.PID, procRecord{SessionID: started.ID, Config: *m.Process, Tag: m.Tag, PTY: p.PTY})
	if !p.PTY && (m.Stdin == nil || !*m.Stdin) {
		// E2B's commands get no stdin unless asked for: EOF at once.
		if _, err := s.opts.Tools.Process(ctx, api.ProcessParams{Action: "write", SessionID: started.ID, EOF: true,
			AgentID: rec.AgentID, SessionKey: rec.ID}); err != nil {
			s.opts.Logf("e2b: closing stdin of %s: %v", started.ID, err)
		}
	}
	return s.follow(ctx, rec, started.ID, started.PID, p.PTY, true, keepaliveOf(req.Header()), st.Send)
}

func keepaliveOf(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get(keepaliveHeader)); err == nil && n > 0 && n <= 3600 {
		return time.Duration(n) * time.Second
	}
	return defaultKeepalive
}

// follow streams session id's output and its end as process events: the
// exact bytes for the stream that started it (raw), the session's text
// output from its first byte for a later connect (a session has one raw
// reader, which releases what it read).
func (s *Server) follow(ctx context.Context, rec record, id string, pid uint32, pty, raw bool, keepalive time.Duration, send func(*eventResponse) error) error {
	follow := s.opts.Streams.Follow
	if raw {
		follow = s.opts.Streams.FollowRaw
	}
	f, err := follow(rec.AgentID, rec.ID, id)
	if err != nil {
		return connectError(err)
	}
	defer f.Close()
	if err := send(&eventResponse{Event: processEvent{Start: &startEvent{PID: pid}}}); err != nil {
		return err
	}
	var off int64
	for {
		nctx, cancel := context.WithTimeout(ctx, keepalive)
		fr, next, done, err := f.Next(nctx, off, streamChunk)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if err := send(&eventResponse{Event: processEvent{Keepalive: &empty{}}}); err != nil {
					return err
				}
				continue
			}
			return connectError(err)
		}
		off = next
		var ev processEvent
		data := fr.Bytes
		if data == nil && fr.Data != "" {
			data = []byte(fr.Data)
		}
		switch fr.Type {
		case api.FrameStdout:
			if pty {
				ev.Data = &dataEvent{PTY: data}
			} else {
				ev.Data = &dataEvent{Stdout: data}
			}
		case api.FrameStderr:
			ev.Data = &dataEvent{Stderr: data}
		case api.FrameExit:
			ev.End = endOf(fr)
		case api.FrameError:
			return connect.NewError(connect.CodeInternal, errors.New(fr.Error))
		case api.FrameDropped:
			// Past the session's kept output (its cap): a connect
			// replays what is kept (docs/e2b.md).
			s.opts.Logf("e2b: sandbox %s process %d: %d bytes of output were no longer kept for this reader", rec.ID, pid, fr.Lost)
		}
		if ev != (processEvent{}) && (ev.Data == nil || len(data) > 0) {
			if err := send(&eventResponse{Event: ev}); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// endOf is the end event of a session's exit frame: the exit code of a
// process that exited, -1 and the signal or reason otherwise.
func endOf(fr api.StreamFrame) *endEvent {
	if fr.ExitCode != nil {
		return &endEvent{ExitCode: int32(*fr.ExitCode), Exited: true, Status: fmt.Sprintf("exit status %d", *fr.ExitCode)}
	}
	why := fr.Reason
	if fr.Signal != "" {
		why = "signal: " + fr.Signal
	}
	if why == "" {
		why = fr.Status
	}
	return &endEvent{ExitCode: -1, Status: why, Error: &why}
}

// sessionRow is one of the agent's sessions as Options.Sessions lists it.
type sessionRow struct {
	ID, SessionKey, Status, Command, Cwd string
	PID                                  uint32
	PTY                                  bool
}

func (s *Server) sessionRows(rec record) []sessionRow {
	var out []sessionRow
	for _, m := range s.opts.Sessions(rec.AgentID) {
		row := sessionRow{PID: pidOf(m.PID), ID: m.SessionID, Status: m.Status, Command: m.Command, Cwd: m.Cwd}
		if m.SessionKey != nil {
			row.SessionKey = *m.SessionKey
		}
		if m.PTY != nil {
			row.PTY = *m.PTY
		}
		if row.SessionKey == rec.ID {
			out = append(out, row)
		}
	}
	return out
}

// selectProcess finds the session of a process selector: by pid or by tag.
func (s *Server) selectProcess(rec record, sel *processSelector) (procRecord, uint32, error) {
	if sel == nil || (sel.PID == nil && sel.Tag == nil) {
		return procRecord{}, 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector (pid or tag) is required"))
	}
	for _, row := range s.sessionRows(rec) {
		p, known := s.reg.proc(rec.ID, row.PID)
		if known && p.SessionID != row.ID {
			known = false
		}
		switch {
		case sel.PID != nil && *sel.PID == row.PID && row.PID != 0:
		case sel.Tag != nil && known && p.Tag != nil && *p.Tag == *sel.Tag:
		default:
			continue
		}
		if !known {
			p = procRecord{SessionID: row.ID, Config: processConfig{Cmd: row.Command}, PTY: row.PTY}
		}
		return p, row.PID, nil
	}
	what := "tag"
	if sel.PID != nil {
		what = "pid " + strconv.FormatUint(uint64(*sel.PID), 10)
	} else {
		what += " " + *sel.Tag
	}
	return procRecord{}, 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with %s not found", what))
}

func (s *Server) procConnect(ctx context.Context, req *connect.Request[connectRequest], st *connect.ServerStream[eventResponse]) error {
	rec := sandboxOf(ctx)
	p, pid, err := s.selectProcess(rec, req.Msg.Process)
	if err != nil {
		return err
	}
	return s.follow(ctx, rec, p.SessionID, pid, p.PTY, false, keepaliveOf(req.Header()), st.Send)
}

func (s *Server) procList(ctx context.Context, _ *connect.Request[empty]) (*connect.Response[listResponse], error) {
	rec := sandboxOf(ctx)
	out := listResponse{Processes: []processInfo{}}
	for _, row := range s.sessionRows(rec) {
		if row.Status != api.StatusRunning {
			continue
		}
		info := processInfo{PID: row.PID, Config: processConfig{Cmd: row.Command}}
		if p, ok := s.reg.proc(rec.ID, row.PID); ok && p.SessionID == row.ID {
			info.Config, info.Tag = p.Config, p.Tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(&out), nil
}

// process runs one process-tool action on the selected process.
func (s *Server) process(ctx context.Context, sel *processSelector, pp api.ProcessParams) error {
	rec := sandboxOf(ctx)
	p, _, err := s.selectProcess(rec, sel)
	if err != nil {
		return err
	}
	pp.SessionID, pp.AgentID, pp.SessionKey = p.SessionID, rec.AgentID, rec.ID
	res, err := s.opts.Tools.Process(ctx, pp)
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return connectError(err)
	}
	if res.Details.Status == api.StatusFailed && pp.Action != "kill" {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New(resultText(res)))
	}
	return nil
}

func resultText(res api.Result) string {
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func (s *Server) procSendInput(ctx context.Context, req *connect.Request[sendInputRequest]) (*connect.Response[empty], error) {
	in := req.Msg.Input
	if in == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("input is required"))
	}
	data := in.Stdin
	if in.PTY != nil {
		data = in.PTY
	}
	if len(data) == 0 {
		return connect.NewResponse(&empty{}), nil
	}
	if err := s.process(ctx, req.Msg.Process, api.ProcessParams{Action: "write", Data: string(data)}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&empty{}), nil
}

func (s *Server) procCloseStdin(ctx context.Context, req *connect.Request[closeStdinRequest]) (*connect.Response[empty], error) {
	if err := s.process(ctx, req.Msg.Process, api.ProcessParams{Action: "write", EOF: true}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&empty{}), nil
}

func (s *Server) procSendSignal(ctx context.Context, req *connect.Request[sendSignalRequest]) (*connect.Response[empty], error) {
	var name string
	switch req.Msg.Signal {
	case signalSIGKILL:
		name = "SIGKILL"
	case signalSIGTERM:
		name = "SIGTERM"
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %d is not SIGTERM or SIGKILL", req.Msg.Signal))
	}
	if err := s.process(ctx, req.Msg.Process, api.ProcessParams{Action: "kill", Signal: name}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&empty{}), nil
}

func (s *Server) procUpdate(ctx context.Context, req *connect.Request[updateRequest]) (*connect.Response[empty], error) {
	if req.Msg.PTY == nil || req.Msg.PTY.Size == nil {
		return connect.NewResponse(&empty{}), nil
	}
	cols, rows := int(req.Msg.PTY.Size.Cols), int(req.Msg.PTY.Size.Rows)
	if err := s.process(ctx, req.Msg.Process, api.ProcessParams{Action: "resize", Cols: &cols, Rows: &rows}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&empty{}), nil
}
