package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// RelayArg, as the first argument of the supervisor binary, makes it the
// relay of a preview: `supervisor --relay PORT` connects to
// 127.0.0.1:PORT (then [::1]:PORT) in the sandbox's own network namespace,
// which exists even without a network, says so on stderr (RelayConnected),
// then copies its stdin to the connection and the connection to its
// stdout. Its stdin's EOF half-closes the connection; it exits 0 once the
// connection's read side ended. Run as an ordinary command of the sandbox
// (see the package doc, "Relay"), it needs no frame type, no port
// published on the Engine's host and no container network.
//
// It uses raw sockets (x/sys/unix), not package net, which with cgo on
// would link the C library's resolver and make the binary dynamic.
const RelayArg = "--relay"

// RelayConnected is the line the relay writes on stderr once its
// connection is made; before it, nothing of stdin reached the port.
const RelayConnected = "connected"

// Exit codes of the relay; its stderr carries the one-line message.
const (
	RelayExitFailed  = 1
	RelayExitRefused = 2 // nothing listens on the port
	RelayExitInvalid = 4
)

// RunRelay is the relay mode (args after RelayArg); it returns the exit
// code.
func RunRelay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "relay: want PORT")
		return RelayExitInvalid
	}
	port, err := strconv.Atoi(args[0])
	if err != nil || port < 1 || port > 65535 {
		fmt.Fprintf(stderr, "relay: invalid port %q\n", args[0])
		return RelayExitInvalid
	}
	fd, err := dialLoopback(port)
	if err != nil {
		fmt.Fprintf(stderr, "relay: connect to port %d: %v\n", port, err)
		if errors.Is(err, unix.ECONNREFUSED) {
			return RelayExitRefused
		}
		return RelayExitFailed
	}
	conn := os.NewFile(uintptr(fd), "relay")
	defer conn.Close()
	fmt.Fprintln(stderr, RelayConnected)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(conn, stdin)
		_ = unix.Shutdown(fd, unix.SHUT_WR)
	}()
	if _, err := io.Copy(stdout, conn); err != nil {
		fmt.Fprintf(stderr, "relay: %v\n", err)
		return RelayExitFailed
	}
	// The port's side ended: the relay is done, whatever stdin still holds.
	return 0
}

// dialLoopback connects a blocking TCP socket to the loopback address of
// port, IPv4 first.
func dialLoopback(port int) (int, error) {
	try := func(domain int, sa unix.Sockaddr) (int, error) {
		fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		for {
			err = unix.Connect(fd, sa)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			_ = unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
	fd, err := try(unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if err == nil {
		return fd, nil
	}
	if fd6, err6 := try(unix.AF_INET6, &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}); err6 == nil {
		return fd6, nil
	}
	return -1, err
}
