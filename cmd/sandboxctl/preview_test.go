package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/shellword"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestPreviewOfAWebServerInASandbox: python's http.server in an agent's
// sandbox (no network) is fetched through the daemon's TCP listener with
// the preview's token, byte for byte; without the token, or with a wrong
// one, the answer is 401 and the server's own log shows that no request
// reached it; the container publishes no port; a closed preview is 404.
func TestPreviewOfAWebServerInASandbox(t *testing.T) {
	e, alice, _ := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", alice) })
	call := func(method, path string, hdr http.Header, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	tool := http.Header{"Authorization": {"Bearer " + filesToolToken}}

	if r := e.run(t, "exec", "--agent", alice, "--", "mkdir -p /workspace/www && head -c 300000 /dev/urandom > /workspace/www/page.bin"); r.code != 0 {
		t.Fatalf("make the page: %+v", r)
	}
	if r := e.run(t, "exec", "--agent", alice, "-d", "--", "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace/www 2>/workspace/server.log"); r.code != 0 {
		t.Fatalf("start the server: %+v", r)
	}
	code, page := call("GET", "/v1/files?agent="+alice+"&path=/workspace/www/page.bin&format=raw", tool, nil)
	if code != 200 || len(page) != 300000 {
		t.Fatalf("the page through the files API: %d, %d bytes", code, len(page))
	}
	req, _ := json.Marshal(api.OpenPreviewRequest{AgentID: alice, Port: 8000})
	code, raw := call("POST", "/v1/previews", tool, req)
	var pv api.Preview
	if err := json.Unmarshal(raw, &pv); code != http.StatusCreated || err != nil || pv.Token == "" {
		t.Fatalf("open the preview: %d %s", code, raw)
	}
	// An agent cannot publish its own port.
	if code, b := call("POST", "/v1/previews", http.Header{"Authorization": {"Bearer " + filesAliceToken}}, req); code != http.StatusForbidden {
		t.Fatalf("open with an agent token: %d %s, want 403", code, b)
	}
	withToken := http.Header{api.PreviewTokenHeader: {pv.Token}}
	// The server may still be starting: 502 until it listens.
	var body []byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body = call("GET", pv.Path+"page.bin", withToken, nil)
		if code != http.StatusBadGateway || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != 200 || !bytes.Equal(body, page) {
		t.Fatalf("through the preview: %d, %d bytes, equal %v: %.200s", code, len(body), bytes.Equal(body, page), body)
	}

	// An upgraded connection (as a WebSocket's) passes through the relay
	// both ways: a server that switches to "echo" and echoes every line.
	script, err := shellword.Quote(upgradeEchoServer)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.run(t, "exec", "--agent", alice, "-d", "--", "exec python3 -c "+script); r.code != 0 {
		t.Fatalf("start the upgrade server: %+v", r)
	}
	req, _ = json.Marshal(api.OpenPreviewRequest{AgentID: alice, Port: 8001})
	code, raw = call("POST", "/v1/previews", tool, req)
	var up api.Preview
	if err := json.Unmarshal(raw, &up); code != http.StatusCreated || err != nil {
		t.Fatalf("open the upgrade preview: %d %s", code, raw)
	}
	checkUpgradeEcho(t, base, up)

	wrong := strings.Repeat("f", len(pv.Token))
	for _, tc := range []struct {
		name, path string
		hdr        http.Header
	}{
		{"no token", pv.Path + "marker-none", nil},
		{"the daemon's tool token", pv.Path + "marker-tool", tool},
		{"a wrong token", pv.Path + "marker-wrong", http.Header{api.PreviewTokenHeader: {wrong}}},
		{"a wrong token in the URL", pv.Path + "marker-query?" + api.PreviewTokenParam + "=" + wrong, nil},
	} {
		if code, b := call("GET", tc.path, tc.hdr, nil); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", tc.name, code, b)
		}
	}
	_, serverLog := call("GET", "/v1/files?agent="+alice+"&path=/workspace/server.log&format=raw", tool, nil)
	if !bytes.Contains(serverLog, []byte("GET /page.bin")) {
		t.Fatalf("the server's log does not show the preview's request:\n%s", serverLog)
	}
	if bytes.Contains(serverLog, []byte("marker")) {
		t.Fatalf("a request without the token reached the server:\n%s", serverLog)
	}

	cli := dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	code, raw = call("GET", "/v1/sandboxes?agent="+alice, tool, nil)
	var sbs []api.Sandbox
	if err := json.Unmarshal(raw, &sbs); code != 200 || err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes: %d %s", code, raw)
	}
	insp, err := cli.ContainerInspect(t.Context(), sbs[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := insp.Container.HostConfig; len(hc.PortBindings) > 0 || hc.PublishAllPorts || string(hc.NetworkMode) != "none" {
		t.Fatalf("the sandbox publishes ports or has a network: bindings %v, all %v, network %q", hc.PortBindings, hc.PublishAllPorts, hc.NetworkMode)
	}
	if ports := insp.Container.NetworkSettings.Ports; len(ports) > 0 {
		t.Fatalf("the sandbox has ports: %v", ports)
	}

	if code, b := call("DELETE", "/v1/previews/"+pv.ID, tool, nil); code != http.StatusNoContent {
		t.Fatalf("close: %d %s", code, b)
	}
	if code, _ := call("GET", pv.Path+"page.bin", withToken, nil); code != http.StatusNotFound {
		t.Fatalf("a closed preview: %d, want 404", code)
	}

	// The command line: expose prints a URL a browser opens (the token
	// becomes a cookie), previews lists it, unexpose closes it.
	r := e.run(t, "sandbox", "expose", alice, "8000")
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(link, base+"/preview/") || !strings.Contains(link, api.PreviewTokenParam+"=") {
		t.Fatalf("sandbox expose: %+v", r)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	u, _ := url.Parse(link)
	resp, err := browser.Get(link[:len(link)-len(u.RawQuery)-1] + "page.bin?" + u.RawQuery)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, page) || strings.Contains(resp.Request.URL.String(), api.PreviewTokenParam) {
		t.Fatalf("a browser at the URL: %s, %d bytes, at %s", resp.Status, len(body), resp.Request.URL)
	}
	r = e.run(t, "sandbox", "previews")
	id := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/preview/"), "/")
	if r.code != 0 || !strings.Contains(r.stdout, id) || strings.Contains(r.stdout, u.Query().Get(api.PreviewTokenParam)) {
		t.Fatalf("sandbox previews: %+v", r)
	}
	if r = e.run(t, "sandbox", "unexpose", id); r.code != 0 {
		t.Fatalf("sandbox unexpose: %+v", r)
	}
	if r = e.run(t, "sandbox", "unexpose", id); r.code == 0 || !strings.Contains(r.stderr, "no preview") {
		t.Fatalf("sandbox unexpose of a closed preview: %+v", r)
	}
}

// upgradeEchoServer listens on 127.0.0.1:8001, answers a request with 101
// Switching Protocols to "echo" and then echoes every line it reads.
const upgradeEchoServer = `import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8001)); s.listen(4)
while True:
    c, _ = s.accept(); f = c.makefile("rwb", 0)
    while f.readline() not in (b"\r\n", b""): pass
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
    for line in f: c.sendall(b"echo " + line)
    c.close()
`

// checkUpgradeEcho opens an upgraded connection through preview pv (the
// server may still be starting: 502 until it listens) and checks that
// lines go both ways on it.
func checkUpgradeEcho(t *testing.T, base string, pv api.Preview) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET %secho HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", pv.Path, addr, api.PreviewTokenHeader, pv.Token)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			conn.Close()
			t.Fatalf("upgrade through the preview: %v", err)
		}
		if resp.StatusCode == http.StatusBadGateway && time.Now().Before(deadline) {
			conn.Close()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			conn.Close()
			t.Fatalf("upgrade through the preview: %s", resp.Status)
		}
		for _, msg := range []string{"one", "two"} {
			fmt.Fprintf(conn, "%s\n", msg)
			line, err := br.ReadString('\n')
			if err != nil || line != "echo "+msg+"\n" {
				conn.Close()
				t.Fatalf("upgraded connection: %q, %v", line, err)
			}
		}
		conn.Close()
		return
	}
}
