package rpctest

import (
	"net"
	"sync"
	"testing"
)

// Silent listens on a free port of 127.0.0.1, accepts every connection and
// never answers on it, as a node whose RPC port is open but whose server is
// stuck. It returns the listener's http URL; the test's cleanup closes the
// listener and every connection it accepted.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}
