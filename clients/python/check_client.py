"""Drives sandboxctl_client against a live daemon (run by TestPythonClient).

Usage: python3 check_client.py AGENT (socket PATH | tcp URL TOKEN)
Prints "ok" or fails with an assertion."""

import hashlib
import io
import os
import sys
import tarfile
import threading

from sandboxctl_client import Client, SandboxctlError

agent, mode = sys.argv[1], sys.argv[2]
c = Client(socket_path=sys.argv[3]) if mode == "socket" else Client(base_url=sys.argv[3], token=sys.argv[4])

assert c.health()["ok"] is True

# Events: follow the stream while a background command runs and is killed.
seen = []


def follow():
    for ev in c.events(timeout=60):
        seen.append(ev)
        if ev.get("type") == "exit":
            return


follower = threading.Thread(target=follow, daemon=True)
follower.start()
r = c.exec("echo from-python; exit 5", agent_id=agent)
assert r["details"]["status"] == "completed", r
assert r["details"]["exitCode"] == 5, r
assert "from-python" in r["content"][0]["text"], r
bg = c.exec("sleep 30", agent_id=agent, background=True)
sid = bg["details"]["sessionId"]
listed = c.process("list", agent_id=agent)
assert sid in listed["content"][0]["text"], listed
everyone = c.sessions(agent_id=agent)["sessions"]
assert any(s["sessionId"] == sid and s["agentId"] == agent for s in everyone), everyone
killed = c.process("kill", session_id=sid, agent_id=agent)
assert "status" in killed["details"], killed
follower.join(30)
assert any(ev.get("type") == "exit" and ev.get("sessionId") == sid for ev in seen), seen
try:
    c.exec("true", agent_id=agent, host="elsewhere")
    raise AssertionError("a bad host was accepted")
except SandboxctlError as e:
    assert e.status == 400, e

# The sandbox lifecycle: create with labels and a TTL, conflict, bad
# input, filters, pause (a command is refused), resume, extend, delete.
obj = agent + "-py"
sb = c.create_sandbox(agent_id=obj, labels={"client": "python"}, ttl_seconds=600)
assert sb["id"] and sb["template"] == "default" and sb["labels"] == {"client": "python"} and sb["expiresAt"], sb
for bad, status in (({"agent_id": obj}, 409), ({"agent_id": obj + "x", "ttl_seconds": -1}, 400),
                    ({"agent_id": obj + "x", "template": "nope"}, 400)):
    try:
        c.create_sandbox(**bad)
        raise AssertionError("create %r was accepted" % bad)
    except SandboxctlError as e:
        assert e.status == status, (bad, e)
listed = c.sandboxes(labels={"client": "python"}, agent_id=obj, state="running")
assert [s["id"] for s in listed] == [sb["id"]], listed
assert c.sandboxes(labels={"client": "nobody"}) == [], "label filter"
assert c.sandbox(sb["id"][:12])["id"] == sb["id"]
assert c.pause_sandbox(sb["id"])["state"] == "paused"
try:
    c.exec("echo ran", agent_id=obj)
    raise AssertionError("a command ran in a paused sandbox")
except SandboxctlError as e:
    assert e.status == 409 and "paused" in e.message, e
assert c.resume_sandbox(sb["id"])["state"] == "running"
assert c.exec("echo ran", agent_id=obj)["content"][0]["text"].strip() == "ran"
ext = c.extend_sandbox(sb["id"], 7200)
assert ext["expiresAt"] > sb["expiresAt"], (ext, sb)
# Snapshots: a file changed after the snapshot is put back by a rollback
# (the container is made anew: a new id); a fork to another agent starts
# from the snapshot's files.
c.exec("echo before > /workspace/snap.txt", agent_id=obj)
snap = c.snapshot_sandbox(sb["id"], name="py1")
assert snap["name"] == "py1" and snap["method"] in ("subvolume", "reflink", "copy"), snap
c.exec("echo after > /workspace/snap.txt", agent_id=obj)
assert [s["name"] for s in c.snapshots(sb["id"])] == ["py1"]
sb = c.rollback_sandbox(sb["id"], "py1")
assert c.exec("cat /workspace/snap.txt", agent_id=obj)["content"][0]["text"].strip() == "before"
forked = c.fork_sandbox(sb["id"], agent_id=obj + "-fork", snapshot="py1")
assert c.exec("cat /workspace/snap.txt", agent_id=obj + "-fork")["content"][0]["text"].strip() == "before"
assert c.delete_sandbox(forked["id"], workspace=True)["workspaceRemoved"] is True
assert c.delete_snapshot(sb["id"], "py1")["name"] == "py1"
assert c.snapshots(sb["id"]) == []
assert c.delete_sandbox(sb["id"], workspace=True)["workspaceRemoved"] is True
try:
    c.sandbox(sb["id"])
    raise AssertionError("a deleted sandbox is still there")
except SandboxctlError as e:
    assert e.status == 404, e

# Streamed exec: frames in order, offsets contiguous, the exit code, and
# last the result the plain call answers.
STREAM_CMD = "echo one; sleep 0.1; echo two >&2; sleep 0.1; echo three; echo four; exit 7"
frames = list(c.exec_stream(STREAM_CMD, agent_id=agent, timeout=60))
types = [f["type"] for f in frames]
assert types[0] == "start" and frames[0].get("sessionId"), frames
assert types[-2:] == ["exit", "result"], types
nxt = 0
streamed = {"stdout": "", "stderr": ""}
for f in frames[1:-2]:
    assert f["type"] in ("stdout", "stderr", "status"), f
    if f["type"] == "status":
        continue
    assert f["offset"] == nxt, frames
    nxt = f["offset"] + len(f["data"].encode("utf-8"))
    streamed[f["type"]] += f["data"]
assert streamed == {"stdout": "one\nthree\nfour\n", "stderr": "two\n"}, streamed
assert frames[-2]["status"] == "completed" and frames[-2]["exitCode"] == 7, frames[-2]
res = frames[-1]["result"]
plain = c.exec(STREAM_CMD, agent_id=agent)
assert sorted(res) == sorted(plain), (res, plain)
assert sorted(res["details"]) == sorted(plain["details"]), (res, plain)
for k in ("status", "exitCode", "aggregated", "cwd"):
    assert res["details"].get(k) == plain["details"].get(k), (k, res, plain)
assert res["details"]["exitCode"] == 7, res
assert res["content"] == plain["content"], (res, plain)
try:
    c.exec_stream(" ", agent_id=agent)
    raise AssertionError("an empty command was streamed")
except SandboxctlError as e:
    assert e.status == 400, e

# Follow a background session from offset 0 and from the middle.
bgs = c.exec("printf 'alpha\\n'; sleep 0.2; printf 'beta\\n'; exit 4", agent_id=agent, background=True)
bg_id = bgs["details"]["sessionId"]


def follow_all(offset):
    got = list(c.follow_session(bg_id, offset, agent_id=agent, timeout=60))
    assert got[0]["type"] == "start" and got[0]["sessionId"] == bg_id, got
    assert got[-1]["type"] == "exit" and got[-1]["exitCode"] == 4, got
    at, text = offset, ""
    for f in got[1:-1]:
        if f["type"] == "status":
            continue
        assert f["type"] == "stdout" and f["offset"] == at, got
        at += len(f["data"].encode("utf-8"))
        text += f["data"]
    return text


assert follow_all(0) == "alpha\nbeta\n"
assert follow_all(3) == "ha\nbeta\n"
try:
    c.follow_session("no-such-session", 0, agent_id=agent)
    raise AssertionError("an unknown session was followed")
except SandboxctlError as e:
    assert e.status == 404, e

# Files.
c.write_file(agent, "/workspace/py.txt", b"\x00binary\xff", mode=0o600)
assert c.read_file(agent, "/workspace/py.txt") == b"\x00binary\xff"
st = c.stat(agent, "/workspace/py.txt")
assert st["type"] == "file" and st["size"] == 8 and st["mode"] == 0o600, st
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tf:
    data = b"in a tree\n"
    info = tarfile.TarInfo("tree/sub/f.txt")
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))
c.upload_tar(agent, "/workspace", buf.getvalue())
names = [e["name"] for e in c.list_files(agent, "/workspace/tree/sub")["entries"]]
assert names == ["f.txt"], names
with tarfile.open(fileobj=io.BytesIO(c.download_tar(agent, "/workspace/tree"))) as tf:
    member = tf.extractfile("tree/sub/f.txt")
    assert member.read() == b"in a tree\n"
c.remove(agent, "/workspace/tree")
try:
    c.stat(agent, "/workspace/tree")
    raise AssertionError("removed tree still there")
except SandboxctlError as e:
    assert e.status == 404, e

# The events cursor: resuming with since=CURSOR-1 starts at that event.
ev = next(e for e in seen if e.get("type") == "exit" and e.get("sessionId") == sid)
again = c.events(since=ev["cursor"] - 1, timeout=60)
first = next(again)
again.close()
assert first["cursor"] == ev["cursor"] and first["sessionId"] == sid, (first, ev)

# Raw: random bytes exactly through stdin and back on stdout.
blob = os.urandom(1000)
raw_bg = c.exec("cat", agent_id=agent, background=True, raw=True)
raw_sid = raw_bg["details"]["sessionId"]
c.write_stdin(raw_sid, blob, eof=True, agent_id=agent)
got = b"".join(f["bytes"] for f in c.follow_session(raw_sid, agent_id=agent, raw=True, timeout=120) if f["type"] == "stdout")
assert got == blob, (len(got), len(blob))

# Raw: 100 MB of random bytes on stdout, checked against the sandbox's own
# sha256 (on stderr), offsets contiguous, no output dropped.
h, err, off, exit_frame, raw_sid = hashlib.sha256(), b"", 0, None, None
frames = c.exec_stream("head -c 100000000 /dev/urandom > /tmp/r && sha256sum /tmp/r >&2 && cat /tmp/r; rm -f /tmp/r",
                       agent_id=agent, raw=True, timeout=300)
for _ in range(2):
    for f in frames:
        t = f["type"]
        if t == "start":
            raw_sid = raw_sid or f["sessionId"]
        elif t in ("stdout", "stderr"):
            assert f["offset"] == off, (f["offset"], off)
            off += len(f["bytes"])
            if t == "stdout":
                h.update(f["bytes"])
            else:
                err += f["bytes"]
        elif t == "exit":
            exit_frame = f
            break
        assert t != "dropped", f
    if exit_frame is not None:
        break
    # The yield window ended first: follow the session on from off.
    frames = c.follow_session(raw_sid, off, agent_id=agent, raw=True, timeout=300)
assert exit_frame is not None and exit_frame.get("exitCode") == 0, exit_frame
assert err.split()[0].decode() == h.hexdigest(), (err, h.hexdigest())
assert off - len(err) == 100000000, off
print("ok")
