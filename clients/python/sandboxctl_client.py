"""sandboxctl_client: a client of the sandboxctl daemon's HTTP API.

A single file using only the Python standard library (3.8+): copy it next to
your code. It speaks to the daemon over its unix socket (no token) or over TCP
with a bearer token (the tool token, or an agent token that pins every call to
its agent). The API is described in api/openapi.yaml.

    from sandboxctl_client import Client
    c = Client(socket_path="~/.sandboxctl/sandboxctl.sock")
    r = c.exec("echo hi", agent_id="a1")
    print(r["content"][0]["text"], r["details"]["status"])
    c.write_file("a1", "/workspace/notes.txt", b"hello\\n")
    print(c.read_file("a1", "/workspace/notes.txt"))
    for ev in c.events():
        print(ev["type"], ev["text"])
    for f in c.exec_stream("make test", agent_id="a1"):
        print(f["type"], f.get("data", ""))    # last: f["result"] as exec() returns
    for f in c.follow_session(session_id, 0, agent_id="a1"):
        print(f["type"], f.get("offset"), f.get("data", ""))
"""

import http.client
import json
import os
import socket
import struct
import urllib.parse

__all__ = ["Client", "SandboxctlError"]


class SandboxctlError(Exception):
    """A non-2xx answer of the daemon: status is the HTTP status code."""

    def __init__(self, status, message):
        super().__init__("sandboxctl: HTTP %d: %s" % (status, message))
        self.status = status
        self.message = message


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("sandboxctl", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Client:
    """A daemon client. Give socket_path, or base_url (http[s]://host:port) and token."""

    def __init__(self, base_url=None, token=None, socket_path=None, timeout=120.0):
        if (base_url is None) == (socket_path is None):
            raise ValueError("give exactly one of base_url and socket_path")
        self._socket = os.path.expanduser(socket_path) if socket_path else None
        self._url = urllib.parse.urlsplit(base_url) if base_url else None
        if self._url and self._url.scheme not in ("http", "https"):
            raise ValueError("base_url must be http:// or https://")
        self._token = token
        self.timeout = timeout

    # --- transport

    def _conn(self, timeout):
        if self._socket:
            return _UnixConnection(self._socket, timeout)
        cls = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
        return cls(self._url.hostname, self._url.port, timeout=timeout)

    def _open(self, method, path, query=None, body=None, content_type=None, timeout=None):
        if query:
            path += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None}, doseq=True)
        headers = {}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        conn = self._conn(self.timeout if timeout is None else timeout)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        if resp.status // 100 != 2:
            data = resp.read()
            conn.close()
            try:
                msg = json.loads(data)["error"]
            except (ValueError, KeyError, TypeError):
                msg = data.decode("utf-8", "replace").strip() or resp.reason
            raise SandboxctlError(resp.status, msg)
        return conn, resp

    def _call(self, method, path, query=None, body=None, content_type=None):
        conn, resp = self._open(method, path, query, body, content_type)
        try:
            return resp.read()
        finally:
            conn.close()

    def _json(self, method, path, query=None, payload=None):
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        data = self._call(method, path, query, body)
        return json.loads(data) if data.strip() else None

    # --- tools

    def health(self):
        return self._json("GET", "/healthz")

    def exec(self, command, agent_id=None, session_key=None, **params):
        """Run a shell command (the exec tool). params: workdir, env, yieldMs,
        background, timeout, pty, elevated, host, security, ask, node."""
        p = dict(params, command=command)
        if agent_id is not None:
            p["agentId"] = agent_id
        if session_key is not None:
            p["sessionKey"] = session_key
        return self._json("POST", "/v1/tools/exec", payload=p)

    def process(self, action, session_id=None, agent_id=None, session_key=None, **params):
        """Manage background sessions (the process tool): list, poll, log, write,
        send-keys, paste, submit, kill, clear, remove, resize."""
        p = dict(params, action=action)
        for k, v in (("sessionId", session_id), ("agentId", agent_id), ("sessionKey", session_key)):
            if v is not None:
                p[k] = v
        return self._json("POST", "/v1/tools/process", payload=p)

    def exec_stream(self, command, agent_id=None, session_key=None, timeout=None, **params):
        """Run a shell command with "stream": true and yield its frames (dicts)
        as they happen: "start" (sessionId, pid), "stdout"/"stderr" (data from
        offset, an absolute byte offset in the session's output), "dropped"
        (lost bytes from offset), "status", "exit" (status, exitCode or
        signal), and last "result" whose "result" is exactly what exec()
        returns (or "error" when the stream failed after it began). Bad input
        raises SandboxctlError before any frame. Closing the generator ends
        the stream; the session goes on. Same params as exec(). With raw=True
        the "stdout"/"stderr" frames carry "bytes" (the command's exact
        bytes, not "data"), and a slow reader holds the command back instead
        of losing output."""
        p = dict(params, command=command, stream=True)
        if agent_id is not None:
            p["agentId"] = agent_id
        if session_key is not None:
            p["sessionKey"] = session_key
        body = json.dumps(p).encode("utf-8")
        opened = self._open("POST", "/v1/tools/exec", body=body, timeout=timeout)
        return self._raw_frames(opened) if p.get("raw") else self._frames(opened)

    def follow_session(self, session_id, offset=0, agent_id=None, session_key=None, timeout=None, raw=False):
        """Follow the background session session_id (of the scope agent_id,
        session_key, as for process()) from byte offset offset to its end:
        yield a "start" frame, its output frames from offset, and last its
        "exit" frame (the frames of exec_stream()). raw=True follows a
        session started with raw=True: frames carry "bytes", exactly."""
        q = {"from": offset or None, "agent": agent_id, "sessionKey": session_key, "raw": "1" if raw else None}
        path = "/v1/sessions/%s/stream" % urllib.parse.quote(session_id, safe="")
        opened = self._open("GET", path, q, timeout=timeout)
        return self._raw_frames(opened) if raw else self._frames(opened)

    def write_stdin(self, session_id, data, eof=False, agent_id=None, session_key=None):
        """Write data (bytes, exactly) to the stdin of the background session
        session_id, then close it when eof (at most 8 MiB a call)."""
        q = {"eof": "1" if eof else None, "agent": agent_id, "sessionKey": session_key}
        path = "/v1/sessions/%s/stdin" % urllib.parse.quote(session_id, safe="")
        return json.loads(self._call("POST", path, q, bytes(data), "application/octet-stream"))

    @staticmethod
    def _raw_frames(opened):
        # Binary frames (application/vnd.sandboxctl.frames): a kind byte, a
        # big-endian uint32 length and the payload; "o"/"e" payloads are a
        # big-endian int64 offset and the bytes, "j" one JSON frame.
        conn, resp = opened
        try:
            while True:
                head = resp.read(5)
                if not head:
                    return
                if len(head) < 5:
                    raise SandboxctlError(0, "stream cut inside a frame header")
                kind, n = head[0], struct.unpack(">I", head[1:])[0]
                payload = resp.read(n)
                if len(payload) < n:
                    raise SandboxctlError(0, "stream cut inside a frame")
                if kind in (0x6F, 0x65):  # "o", "e"
                    yield {"type": "stdout" if kind == 0x6F else "stderr",
                           "offset": struct.unpack(">q", payload[:8])[0], "bytes": payload[8:]}
                else:
                    yield json.loads(payload)
        finally:
            conn.close()

    def events(self, since=None, timeout=None):
        """Yield tool events (dicts) as they happen until the caller stops.
        Each has a "cursor": pass the last one seen as since to resume after
        it (a "gap" event says how many are no longer kept)."""
        q = {"since": since} if since is not None else None
        return self._frames(self._open("GET", "/v1/events", q, timeout=timeout))

    @staticmethod
    def _frames(opened):
        # One JSON value a line (NDJSON) of an opened response, until its end.
        conn, resp = opened
        try:
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def sessions(self, agent_id=None):
        """Every agent's sessions (or agent_id's), newest first; an agent token sees its own only."""
        return self._json("GET", "/v1/sessions", query={"agent": agent_id} if agent_id else None)

    # --- sandboxes (docs/sandboxes.md); an id may also be a unique id prefix or the name

    def sandboxes(self, labels=None, agent_id=None, template=None, state=None):
        """The sandboxes passing every filter given: labels {k: v} (v "" or None: has the label)."""
        q = {"agent": agent_id, "template": template, "state": state}
        if labels:
            q["label"] = [k if v in (None, "") else "%s=%s" % (k, v) for k, v in sorted(labels.items())]
        return self._json("GET", "/v1/sandboxes", query=q)

    def create_sandbox(self, agent_id=None, session_key=None, template=None, labels=None, ttl_seconds=None):
        """Create the sandbox of a scope; 409 (SandboxctlError) when it has one. Returns the sandbox."""
        payload = {k: v for k, v in {"agentId": agent_id, "sessionKey": session_key, "template": template,
                                     "labels": labels, "ttlSeconds": ttl_seconds}.items() if v is not None}
        return self._json("POST", "/v1/sandboxes", payload=payload)

    def sandbox(self, sandbox_id):
        """One sandbox with its explanation and resource use."""
        return self._json("GET", "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe=""))

    def delete_sandbox(self, sandbox_id, workspace=False):
        """Remove a sandbox; with workspace=True its workspace on the host too."""
        return self._json("DELETE", "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe=""),
                          query={"workspace": "true" if workspace else "false"})

    def pause_sandbox(self, sandbox_id):
        return self._json("POST", "/v1/sandboxes/%s/pause" % urllib.parse.quote(sandbox_id, safe=""), payload={})

    def resume_sandbox(self, sandbox_id):
        return self._json("POST", "/v1/sandboxes/%s/resume" % urllib.parse.quote(sandbox_id, safe=""), payload={})

    def extend_sandbox(self, sandbox_id, ttl_seconds):
        """Set the sandbox to expire ttl_seconds from now."""
        return self._json("POST", "/v1/sandboxes/%s/timeout" % urllib.parse.quote(sandbox_id, safe=""),
                          payload={"ttlSeconds": ttl_seconds})

    # --- snapshots (docs/snapshots.md)

    def snapshot_sandbox(self, sandbox_id, name=None):
        """Copy the sandbox's files into a snapshot (the container frozen for the copy); returns it."""
        return self._json("POST", "/v1/sandboxes/%s/snapshots" % urllib.parse.quote(sandbox_id, safe=""),
                          payload={"name": name} if name else {})

    def snapshots(self, sandbox_id):
        """The snapshots of the sandbox's scope, oldest first."""
        return self._json("GET", "/v1/sandboxes/%s/snapshots" % urllib.parse.quote(sandbox_id, safe=""))

    def delete_snapshot(self, sandbox_id, name):
        return self._json("DELETE", "/v1/sandboxes/%s/snapshots/%s" % (urllib.parse.quote(sandbox_id, safe=""),
                                                                       urllib.parse.quote(name, safe="")))

    def rollback_sandbox(self, sandbox_id, snapshot):
        """Put the sandbox back to one of its snapshots (running commands end); returns the sandbox."""
        return self._json("POST", "/v1/sandboxes/%s/rollback" % urllib.parse.quote(sandbox_id, safe=""),
                          payload={"snapshot": snapshot})

    def fork_sandbox(self, sandbox_id, agent_id=None, session_key=None, snapshot=None):
        """A new sandbox for another scope from a snapshot (none: one taken for the fork); returns it."""
        payload = {k: v for k, v in {"agentId": agent_id, "sessionKey": session_key, "snapshot": snapshot}.items()
                   if v is not None}
        return self._json("POST", "/v1/sandboxes/%s/fork" % urllib.parse.quote(sandbox_id, safe=""), payload=payload)

    def approvals(self):
        return self._json("GET", "/v1/approvals")

    # --- files (paths are absolute paths inside the agent's sandbox)

    @staticmethod
    def _fq(agent_id, path, session_key=None, **extra):
        q = {"agent": agent_id, "path": path, "session": session_key}
        q.update(extra)
        return q

    def stat(self, agent_id, path, session_key=None):
        return self._json("GET", "/v1/files/stat", self._fq(agent_id, path, session_key))

    def list_files(self, agent_id, path, session_key=None):
        return self._json("GET", "/v1/files/list", self._fq(agent_id, path, session_key))

    def read_file(self, agent_id, path, session_key=None):
        """The bytes of a regular file."""
        return self._call("GET", "/v1/files", self._fq(agent_id, path, session_key, format="raw"))

    def download_tar(self, agent_id, path, session_key=None):
        """path (a file or a tree) as tar bytes, named from its base name (docker cp)."""
        return self._call("GET", "/v1/files", self._fq(agent_id, path, session_key, format="tar"))

    def write_file(self, agent_id, path, data, mode=None, session_key=None):
        """Create or replace a file (its directory must exist); mode e.g. 0o600."""
        q = self._fq(agent_id, path, session_key, mode=None if mode is None else "%04o" % mode)
        return json.loads(self._call("PUT", "/v1/files", q, bytes(data), "application/octet-stream"))

    def upload_tar(self, agent_id, directory, tar_bytes, session_key=None):
        """Extract tar bytes into the existing directory."""
        q = self._fq(agent_id, directory, session_key)
        return json.loads(self._call("PUT", "/v1/files", q, bytes(tar_bytes), "application/x-tar"))

    def remove(self, agent_id, path, session_key=None):
        """Remove path recursively."""
        return self._json("DELETE", "/v1/files", self._fq(agent_id, path, session_key))
