// Command testupstream is the far side of the egress tests: it runs in a
// container on a network of its own and logs every byte that reaches it,
// so a test proves that a refused attempt never arrived. It serves plain
// HTTP, HTTPS (with the certificate it is given), a DNS server that maps
// the names it is given to addresses, and counts raw TCP and UDP arrivals
// on the extra ports it listens on.
//
//	testupstream -log /out/log -cert c.pem -key k.pem -names a.test=1.2.3.4,b.test=self,... -raw 5555 -udp 5555
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

var (
	logMu   sync.Mutex
	logFile *os.File
)

// mark appends one line to the log: the proof of an arrival.
func mark(format string, args ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	fmt.Fprintf(logFile, format+"\n", args...)
	_ = logFile.Sync()
}

func main() {
	logPath := flag.String("log", "/out/log", "arrival log")
	cert := flag.String("cert", "", "TLS certificate (PEM)")
	key := flag.String("key", "", "TLS key (PEM)")
	names := flag.String("names", "", "DNS answers: name=ipv4,...")
	raw := flag.String("raw", "", "TCP ports that count arrivals, comma-separated")
	udp := flag.String("udp", "", "UDP ports that count arrivals, comma-separated")
	headers := flag.Bool("headers", false, "log every request header (the credential broker's tests)")
	flag.Parse()
	var err error
	if logFile, err = os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		log.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mark("http %s %s %s %s", r.Host, r.Method, r.URL.RequestURI(), r.Proto)
		if *headers {
			for k, vs := range r.Header {
				for _, v := range vs {
					mark("header %s %s %s: %s", r.Host, r.URL.Path, k, v)
				}
			}
		}
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		if n, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64); err == nil {
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			buf := make([]byte, 256<<10)
			for n > 0 {
				k := min(n, int64(len(buf)))
				if _, err := w.Write(buf[:k]); err != nil {
					return
				}
				n -= k
			}
			return
		}
		fmt.Fprintf(w, "hello from %s %s\n", r.Host, r.URL.Path)
	})
	srv := &http.Server{Handler: h, ConnState: func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mark("conn %s", c.LocalAddr())
		}
	}}
	go serve(srv, ":80", nil)
	if *cert != "" {
		kp, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			log.Fatal(err)
		}
		tsrv := &http.Server{Handler: h, ConnState: srv.ConnState}
		go serve(tsrv, ":443", &tls.Config{Certificates: []tls.Certificate{kp}, NextProtos: []string{"http/1.1"}})
	}
	for _, p := range split(*raw) {
		ln, err := net.Listen("tcp", ":"+p)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mark("tcp %s from %s", c.LocalAddr(), c.RemoteAddr())
				go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
			}
		}()
	}
	for _, p := range split(*udp) {
		pc, err := net.ListenPacket("udp", ":"+p)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				mark("udp %s from %s %d bytes", pc.LocalAddr(), from, n)
			}
		}()
	}
	answers := map[string]string{}
	for _, kv := range split(*names) {
		k, v, _ := strings.Cut(kv, "=")
		if v == "self" {
			v = selfIP()
		}
		answers[dns.Fqdn(k)] = v
	}
	dh := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			mark("dns %s %s", q.Name, dns.TypeToString[q.Qtype])
			if ip, ok := answers[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
			}
		}
		if len(m.Answer) == 0 && len(req.Question) > 0 {
			if _, ok := answers[strings.ToLower(req.Question[0].Name)]; !ok {
				m.Rcode = dns.RcodeNameError
			}
		}
		_ = w.WriteMsg(m)
	})
	go func() { log.Fatal((&dns.Server{Addr: ":53", Net: "udp", Handler: dh}).ListenAndServe()) }()
	go func() { log.Fatal((&dns.Server{Addr: ":53", Net: "tcp", Handler: dh}).ListenAndServe()) }()
	mark("ready")
	select {}
}

func serve(srv *http.Server, addr string, tc *tls.Config) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	log.Fatal(srv.Serve(ln))
}

// selfIP is this container's first non-loopback IPv4 address.
func selfIP() string {
	as, _ := net.InterfaceAddrs()
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
