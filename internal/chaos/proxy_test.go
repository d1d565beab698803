package main

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through conn and reports whether it came back.
func roundTrip(conn net.Conn) bool {
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "ping\n"
}

// A cut closes the connections the proxy carries and refuses new ones;
// after Heal new connections go through again.
func TestProxyCutAndHeal(t *testing.T) {
	p, err := newProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c1, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if !roundTrip(c1) {
		t.Fatal("no echo through the proxy")
	}
	p.Cut()
	if roundTrip(c1) {
		t.Fatal("an established connection survived the cut")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if roundTrip(c2) {
			t.Fatal("a new connection went through while cut")
		}
		c2.Close()
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if !roundTrip(c3) {
		t.Fatal("no echo after Heal")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if roundTrip(c3) {
		t.Fatal("a connection survived Close")
	}
}
