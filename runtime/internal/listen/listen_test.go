package listen

import (
	"context"
	"errors"
	"net"
	"testing"
)

// option stands for a transport's option type: an interface, nil when
// left out.
type option interface{ apply(*Config) error }

type optionFunc Option

func (f optionFunc) apply(c *Config) error { return f(c) }

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []option
		want string
	}{
		{"none", nil, ""},
		{"valid", []option{optionFunc(MaxConns(8)), optionFunc(MaxConnsPerIP(2))}, ""},
		{"nil", []option{optionFunc(Insecure()), nil}, "wizard: tcp: option 2 of 2 is nil"},
		{"invalid", []option{optionFunc(MaxConns(-1))}, "wizard: tcp: WithMaxConns(-1): want 0 for the default (half the file-descriptor limit, at most 4096) or a positive number"},
		{"per IP above the maximum", []option{optionFunc(MaxConnsPerIP(9)), optionFunc(MaxConns(8))}, "wizard: tcp: WithMaxConnsPerIP(9): above WithMaxConns(8)"},
		{"nil TLS", []option{optionFunc(ServerTLS(nil, "what then"))}, "wizard: tcp: WithServerTLS(nil): no configuration; what then"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			err := Apply("tcp", &c, tc.opts, func(o option) error { return o.apply(&c) })
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Apply = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestShutdown: Shutdown ends the connections' contexts (their goaway),
// admits no more, and returns once the last connection has ended.
func TestShutdown(t *testing.T) {
	var c Config
	cs := NewConns("tcp", &c, nil)
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	ctx, conn, err := cs.Admit(remote, func() {}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	go func() { shut <- cs.Shutdown(context.Background()) }()
	<-cs.Stopped()
	<-ctx.Done()
	if _, _, err := cs.Admit(remote, func() {}, func() {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Admit during Shutdown = %v, want ErrClosed", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a connection open", err)
	default:
	}
	conn.End()
	if err := <-shut; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}
