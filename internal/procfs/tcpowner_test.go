package procfs

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
)

// TestTCPSocketOwner finds this process behind a real loopback connection,
// from the other end's point of view, over IPv4 and IPv6.
func TestTCPSocketOwner(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "tcp6" {
				addr = "[::1]:0"
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Fatalf("listen %s: %v", addr, err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, _ := ln.Accept()
				accepted <- c
			}()
			client, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server := <-accepted
			if server == nil {
				t.Fatal("accept failed")
			}
			defer server.Close()
			// The server asks: who holds the socket at the other end?
			peer := server.RemoteAddr().(*net.TCPAddr).AddrPort()
			self := server.LocalAddr().(*net.TCPAddr).AddrPort()
			owner, err := TCPSocketOwner("/proc", peer, self)
			if err != nil {
				t.Fatal(err)
			}
			if owner.UID != os.Geteuid() || !slices.Contains(owner.PIDs, os.Getpid()) {
				t.Fatalf("owner of %s -> %s: %+v, want uid %d and pid %d", peer, self, owner, os.Geteuid(), os.Getpid())
			}
			// A socket that does not exist is not anybody's.
			gone := netip.AddrPortFrom(peer.Addr(), peer.Port()+1)
			if _, err := TCPSocketOwner("/proc", gone, self); err == nil {
				t.Fatalf("found an owner for %s", gone)
			}
		})
	}
}

// TestParseTCPAddr: the tables are in the byte order of a little-endian
// kernel (x86, arm64), where these tests run.
func TestParseTCPAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"0000000000000000FFFF00000100007F:0016": "127.0.0.1:22",
	} {
		got, err := parseTCPAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("parseTCPAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "zz00007F:0016", "0100007F:zzzz", "01007F:0016"} {
		if _, err := parseTCPAddr(bad); err == nil {
			t.Errorf("parseTCPAddr(%q): no error", bad)
		}
	}
}
