package gateway

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

// benchEcho is the echo handler of the benchmarks.
func benchEcho(ctx context.Context, req runtime.Request) (any, error) { return req.Msg(), nil }

// latencies collects per-call durations for a p50 metric.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(l[len(l)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkGatewayHTTP: one keep-alive client, POST /echo with a small
// JSON body, through a gateway made by New from YAML (access log on, to
// a discarding logger) to an echo handler in the gateway's own
// node (inproc) or on another node over TCP on 127.0.0.1 (tcp). Compare
// its p50 with BenchmarkDirectTCP's for the gateway's overhead.
func BenchmarkGatewayHTTP(b *testing.B) {
	for _, mode := range []string{"inproc", "tcp"} {
		b.Run(mode, func(b *testing.B) {
			var node *runtime.Node
			if mode == "inproc" {
				node = newNode(b)
				node.Add("role:b,cmd:echo", benchEcho)
			} else {
				svc := newNode(b)
				svc.Add("role:b,cmd:echo", benchEcho)
				node = newNode(b, runtime.WithDiscovery(runtime.StaticPeers(svc.Addr())))
				ctx, cancel := context.WithTimeout(context.Background(), guard)
				defer cancel()
				if err := node.WaitFor(ctx, "role:b,cmd:echo"); err != nil {
					b.Fatal(err)
				}
			}
			cfg, err := config.Parse("bench.yaml", []byte(`
routes:
  - {name: echo, method: POST, path: /echo, pattern: "role:b,cmd:echo"}
`))
			if err != nil {
				b.Fatal(err)
			}
			g, err := New(node, cfg, WithLogger(quiet))
			if err != nil {
				b.Fatal(err)
			}
			tg := serveTestGateway(b, g, nil, nil)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			body := `{"name":"ada","n":1}`
			call := func() {
				req, _ := http.NewRequest("POST", tg.base+"/echo", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
			call()
			lat := make(latencies, 0, 1<<16)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				call()
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(start))
				}
			}
			b.StopTimer()
			lat.report(b)
		})
	}
}

// BenchmarkDirectTCP is the call BenchmarkGatewayHTTP/tcp makes, made
// directly by a node: the baseline of the gateway's overhead.
func BenchmarkDirectTCP(b *testing.B) {
	svc := newNode(b)
	svc.Add("role:b,cmd:echo", benchEcho)
	node := newNode(b, runtime.WithDiscovery(runtime.StaticPeers(svc.Addr())))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := node.WaitFor(ctx, "role:b,cmd:echo"); err != nil {
		b.Fatal(err)
	}
	msg := []byte(`{"name":"ada","n":1}`)
	lat := make(latencies, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := node.Act(context.Background(), "role:b,cmd:echo", msg); err != nil {
			b.Fatal(err)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	lat.report(b)
}

// BenchmarkGatewayWebSocket: one connection, one req frame at a time, to
// the echo handler over TCP.
func BenchmarkGatewayWebSocket(b *testing.B) {
	svc := newNode(b)
	svc.Add("role:b,cmd:echo", benchEcho)
	node := newNode(b, runtime.WithDiscovery(runtime.StaticPeers(svc.Addr())))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := node.WaitFor(ctx, "role:b,cmd:echo"); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse("bench.yaml", []byte(`
websocket: {path: /ws}
routes:
  - {name: echo, method: POST, path: /echo, pattern: "role:b,cmd:echo"}
`))
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(node, cfg, WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	tg := serveTestGateway(b, g, nil, nil)
	c, _, err := websocket.Dial(ctx, tg.ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	frame := []byte(`{"type":"req","id":"1","method":"POST","path":"/echo","body":{"name":"ada","n":1}}`)
	lat := make(latencies, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		_, reply, err := c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(reply, []byte(`"status":200`)) {
			b.Fatalf("reply %s", reply) // a benchmark of errors measures nothing
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	lat.report(b)
}

// BenchmarkHTTPBaseline is BenchmarkGatewayHTTP's client against a bare
// net/http handler that echoes the body: what HTTP itself costs, without
// the gateway and the mesh.
func BenchmarkHTTPBaseline(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	url := "http://" + ln.Addr().String() + "/echo"
	lat := make(latencies, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"name":"ada","n":1}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	lat.report(b)
}

// BenchmarkGatewayStream: one server stream through the gateway from a
// handler on another node over TCP, a small message per op, read by one
// client over the WebSocket (msg frames) or as Server-Sent Events.
func BenchmarkGatewayStream(b *testing.B) {
	for _, via := range []string{"websocket", "sse"} {
		b.Run(via, func(b *testing.B) {
			tg, _ := newStreamGateway(b, settings{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var next func() []byte
			switch via {
			case "websocket":
				c, _, err := websocket.Dial(ctx, tg.ws, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.CloseNow()
				if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"req","id":"s","method":"GET","path":"/s/count?n=1000000000"}`)); err != nil {
					b.Fatal(err)
				}
				next = func() []byte {
					_, m, err := c.Read(ctx)
					if err != nil {
						b.Fatal(err)
					}
					return m
				}
			case "sse":
				req, _ := http.NewRequestWithContext(ctx, "GET", tg.base+"/s/count?n=1000000000", nil)
				req.Header.Set("Accept", contentSSE)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer res.Body.Close()
				r := bufio.NewReader(res.Body)
				next = func() []byte {
					line, err := r.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					r.ReadSlice('\n') // the event's blank line
					return line
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if m := next(); !bytes.Contains(m, []byte(`"i":`)) {
					b.Fatalf("message %s", m) // a benchmark of errors measures nothing
				}
			}
		})
	}
}

// BenchmarkEventFanOut: an emitter node emits an event over TCP to the
// gateway's node, which pushes it as an event frame to N WebSocket
// clients of one user subscribed to the same pattern (one node
// subscription, N sockets); an op ends when every client has read it.
// frames/s counts the event frames the clients read.
func BenchmarkEventFanOut(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run("sockets="+strconv.Itoa(n), func(b *testing.B) {
			gw, emitter := eventMesh(b)
			tg := eventGateway(b, gw, 64, "drop_oldest")
			got := make(chan struct{}, n)
			ctx, cancel := context.WithCancel(context.Background())
			b.Cleanup(cancel)
			sub := []byte(`{"type":"sub","id":"m","route":"matches"}`)
			for range n {
				c, _, err := websocket.Dial(ctx, tg.ws+"?access_token=u1", nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.CloseNow() })
				if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
					b.Fatal(err)
				}
				if _, ack, err := c.Read(ctx); err != nil || !bytes.Contains(ack, []byte(`"ok":true`)) {
					b.Fatalf("sub answered %s, %v", ack, err)
				}
				go func() {
					for {
						if _, _, err := c.Read(ctx); err != nil {
							return
						}
						got <- struct{}{}
					}
				}()
			}
			const pat = "role:match,event:found,user:u1"
			wctx, wcancel := context.WithTimeout(ctx, guard)
			defer wcancel()
			if err := emitter.WaitForSubscribers(wctx, pat); err != nil {
				b.Fatal(err)
			}
			msg := map[string]any{"match": map[string]any{"id": "m-1", "opponent": "u9"}}
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := emitter.Emit(ctx, pat, msg); err != nil {
					b.Fatal(err)
				}
				for range n {
					<-got
				}
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "frames/s")
		})
	}
}

// BenchmarkWebSocketConnHeap: the live heap that an idle WebSocket
// connection holds (both ends: the client's are in this process too), by
// how it authenticated: no token, or an HS256 token of its own subject in
// an auth frame. Each iteration opens one connection (and authenticates
// it); connections are held in batches of 1,000, and the heap grown over
// each batch, after a collection, is divided by its connections
// (heap-B/conn); the difference of the two is what a token costs a
// connection, the verifier's cache included. ns/op is a connection's
// dial (and auth), with a batch's collections spread over it.
func BenchmarkWebSocketConnHeap(b *testing.B) {
	const batch = 1000
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hs.key"), []byte(secret+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse("bench.yaml", []byte(strings.ReplaceAll(usersYAML, "$DIR", dir)))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"none", "HS256"} {
		b.Run(mode, func(b *testing.B) {
			g, err := New(gatewayNode(b, newBackend(b)), cfg, WithLogger(quiet))
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			tg := serveTestGateway(b, g, nil, nil)
			exp := time.Now().Add(time.Hour).Unix()
			var cs []*websocket.Conn
			var grown float64
			measured := 0
			settle := func(before uint64) { // ends a batch: its heap, then its connections closed
				grown += float64(liveHeap()) - float64(before)
				measured += len(cs)
				for _, c := range cs {
					c.CloseNow()
				}
				cs = cs[:0]
			}
			before := liveHeap()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), guard)
				c, _, err := websocket.Dial(ctx, tg.ws, nil)
				if err != nil {
					cancel()
					b.Fatal(err)
				}
				cs = append(cs, c)
				if mode == "HS256" {
					token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u" + strconv.Itoa(measured+len(cs)), "iss": "test-issuer", "exp": exp}).SignedString([]byte(secret))
					if err != nil {
						cancel()
						b.Fatal(err)
					}
					if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","id":"a","token":"`+token+`"}`)); err != nil {
						cancel()
						b.Fatal(err)
					}
					if _, reply, err := c.Read(ctx); err != nil || !bytes.Contains(reply, []byte(`"ok":true`)) {
						cancel()
						b.Fatalf("auth answered %s, %v", reply, err)
					}
				}
				cancel()
				if len(cs) == batch {
					settle(before)
					before = liveHeap()
				}
			}
			if len(cs) > 0 {
				settle(before)
			}
			b.ReportMetric(grown/float64(max(measured, 1)), "heap-B/conn")
		})
	}
}
