package procfs

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ErrNoSocket: no TCP socket of the reading process's network namespace has
// the endpoints asked for.
var ErrNoSocket = errors.New("no such TCP socket")

// TCPOwner is who holds a TCP socket: the uid the kernel records for it and
// the processes with a descriptor of it (those whose descriptors the reader
// may see: its own uid's, or every one for root).
type TCPOwner struct {
	UID  int
	PIDs []int
}

// TCPSocketOwner finds the TCP socket whose own end is local and whose
// peer is remote (under root, "/proc" normally; root/net/tcp and tcp6) and
// the processes that hold it.
func TCPSocketOwner(root string, local, remote netip.AddrPort) (TCPOwner, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	inode, uid := "", -1
	for _, table := range []string{"tcp", "tcp6"} {
		var err error
		if inode, uid, err = findTCP(root+"/net/"+table, local, remote); err != nil {
			return TCPOwner{}, err
		}
		if inode != "" {
			break
		}
	}
	if inode == "" || inode == "0" {
		return TCPOwner{}, fmt.Errorf("%w: %s -> %s", ErrNoSocket, local, remote)
	}
	pids, err := PIDs(root)
	if err != nil {
		return TCPOwner{}, err
	}
	want := "socket:[" + inode + "]"
	owner := TCPOwner{UID: uid}
	for _, pid := range pids {
		dir := root + "/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or another uid's
		}
		for _, e := range ents {
			if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
				owner.PIDs = append(owner.PIDs, pid)
				break
			}
		}
	}
	slices.Sort(owner.PIDs)
	return owner, nil
}

// findTCP returns the inode and uid of the socket in one /proc/net/tcp*
// table ("" when it is not there).
func findTCP(path string, local, remote netip.AddrPort) (string, int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", -1, nil // no IPv6
	}
	if err != nil {
		return "", -1, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		l, err1 := parseTCPAddr(fields[1])
		r, err2 := parseTCPAddr(fields[2])
		if err1 != nil || err2 != nil || l != local || r != remote {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return "", -1, fmt.Errorf("%s: uid %q: %w", path, fields[7], err)
		}
		return fields[9], uid, nil
	}
	return "", -1, sc.Err()
}

// parseTCPAddr reads "0100007F:1F90": the address as 32-bit words in the
// kernel's byte order, then the port in hex.
func parseTCPAddr(s string) (netip.AddrPort, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad host part", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
