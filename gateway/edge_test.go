package gateway

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

func TestCORS(t *testing.T) {
	tg := newTestGateway(t, settings{cors: corsPolicy{origins: []string{"https://app.example.com"}, credentials: true, maxAge: 10 * time.Minute}})
	preflight := func(origin, method, headers string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "OPTIONS", tg.base+"/echo", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		if headers != "" {
			req.Header.Set("Access-Control-Request-Headers", headers)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := preflight("https://app.example.com", "POST", "authorization, content-type")
	got := map[string]string{}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age"} {
		got[k] = res.Header.Get(k)
	}
	want := map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example.com",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods":     "GET, POST, PUT, PATCH, DELETE",
		"Access-Control-Allow-Headers":     "Authorization, Content-Type, X-Request-Id, X-Request-Timeout-Ms",
		"Access-Control-Max-Age":           "600",
	}
	if res.StatusCode != 204 {
		t.Errorf("allowed preflight: %d", res.StatusCode)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("allowed preflight's headers (-want +got):\n%s", d)
	}
	for _, tc := range []struct{ name, origin, method, headers string }{
		{"other origin", "https://evil.example.com", "POST", ""},
		{"method", "https://app.example.com", "TRACE", ""},
		{"header", "https://app.example.com", "POST", "x-evil"},
	} {
		res := preflight(tc.origin, tc.method, tc.headers)
		if res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d, Allow-Origin %q; want 403 without it", tc.name, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	actual := func(origin string) http.Header {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.base+"/echo", nil)
		req.Header.Set("Origin", origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header
	}
	if h := actual("https://app.example.com"); h.Get("Access-Control-Allow-Origin") != "https://app.example.com" || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "X-Request-Id") || h.Get("Vary") != "Origin" {
		t.Errorf("allowed origin's headers: %v", h)
	}
	if h := actual("https://evil.example.com"); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin got Allow-Origin %q", h.Get("Access-Control-Allow-Origin"))
	}
	any := corsPolicy{origins: []string{"*"}}
	h := http.Header{}
	any.apply(h, "https://x.example")
	if h.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf(`origins ["*"] without credentials: %q, want "*"`, h.Get("Access-Control-Allow-Origin"))
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestHealth(t *testing.T) {
	tg := newTestGateway(t, settings{})
	if st, _ := get(t, tg.base+"/healthz"); st != 200 {
		t.Errorf("/healthz %d", st)
	}
	if st, body := get(t, tg.base+"/readyz"); st != 200 {
		t.Errorf("/readyz %d %s", st, body)
	}
	alone, err := runtime.New(runtime.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alone.Close() })
	lonely := newTestGatewayOn(t, nil, alone, testRoutes(), settings{})
	if st, body := get(t, lonely.base+"/readyz"); st != 503 || !strings.Contains(body, "no peer") {
		t.Errorf("/readyz of a node alone: %d %s", st, body)
	}
	if st, _ := get(t, lonely.base+"/healthz"); st != 200 {
		t.Errorf("/healthz of a node alone: %d", st)
	}
}

// TestReadyWaitsForTheCatalog holds the gateway's node's first call to a
// peer, the request for its catalog: the peer is connected but nothing is
// routed to it yet, and a request let in would find no service, so
// /readyz must answer 503 until the catalog loads. (It answered 200 once
// a peer was connected: the first requests of a load test against a
// gateway just ready got 503s.)
func TestReadyWaitsForTheCatalog(t *testing.T) {
	svc := newNode(t)
	if err := svc.Add("role:t,cmd:echo", func(context.Context, runtime.Request) (any, error) { return map[string]any{}, nil }); err != nil {
		t.Fatal(err)
	}
	tr, err := tcp.New(tcp.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	held := &heldCalls{Transport: tr, called: make(chan struct{}), release: make(chan struct{})}
	defer held.open()
	n, err := runtime.New(runtime.WithTransport(held), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(quiet),
		runtime.WithDiscovery(runtime.StaticPeers(svc.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	tg := newTestGatewayOn(t, nil, n, testRoutes(), settings{})
	recv(t, held.called)
	if st, body := get(t, tg.base+"/readyz"); st != 503 || !strings.Contains(body, "no peer") {
		t.Errorf("/readyz with the peer connected, its catalog not loaded: %d %s; want 503", st, body)
	}
	held.open()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := n.WaitFor(ctx, "role:t,cmd:echo"); err != nil {
		t.Fatal(err)
	}
	if st, body := get(t, tg.base+"/readyz"); st != 200 {
		t.Errorf("/readyz with the peer's catalog loaded: %d %s", st, body)
	}
}

// heldCalls is a transport whose connections hold every call until
// release is closed; called is closed when the first call waits.
type heldCalls struct {
	runtime.Transport
	called, release chan struct{}
	once, opened    sync.Once
}

func (h *heldCalls) open() { h.opened.Do(func() { close(h.release) }) }

func (h *heldCalls) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	c, err := h.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return heldConn{c, h}, nil
}

type heldConn struct {
	runtime.Conn
	h *heldCalls
}

func (c heldConn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	c.h.once.Do(func() { close(c.h.called) })
	select {
	case <-c.h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.Conn.Call(ctx, m)
}

func TestAccessLog(t *testing.T) {
	tg := newTestGateway(t, settings{})
	got := doHTTP(t, tg, statusCase{method: "GET", path: "/private", token: "good"})
	until(t, "the access record", func() bool { return len(tg.logs.find("gateway: request", "path", "/private")) == 1 })
	r := tg.logs.find("gateway: request", "path", "/private")[0]
	if r["method"] != "GET" || r["route"] != "private" || r["status"] != int64(200) || r["subject"] != "u1" || r["request_id"] != got.requestID || r["level"] != "INFO" {
		t.Errorf("access record %v", r)
	}
	if _, ok := r["duration"].(time.Duration); !ok {
		t.Errorf("duration %T", r["duration"])
	}
}

func TestReadHeaderTimeout(t *testing.T) {
	tg := newTestGateway(t, settings{readHeaderTimeout: 50 * time.Millisecond})
	c, err := net.Dial("tcp", strings.TrimPrefix(tg.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // never ends its headers
	c.SetReadDeadline(time.Now().Add(guard))
	_, err = bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the gateway kept a connection that never finished its headers")
	}
}

func listenerClosed(t *testing.T, tg *testGateway) {
	t.Helper()
	until(t, "the listener closed", func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(tg.base, "http://"))
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

func TestShutdownDrainsHTTP(t *testing.T) {
	tg := newTestGateway(t, settings{})
	res := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("GET", tg.base+"/busy?hold=true", nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			r = &http.Response{StatusCode: -1, Status: err.Error()}
		} else {
			r.Body.Close()
		}
		res <- r
	}()
	recv(t, tg.b.holdStarted)
	shut := make(chan error, 1)
	go func() { shut <- tg.Shutdown(context.Background()) }()
	listenerClosed(t, tg)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	tg.b.releaseOne <- struct{}{}
	if r := recv(t, res); r.StatusCode != 200 {
		t.Errorf("the request in flight: %d %s, want 200", r.StatusCode, r.Status)
	}
	if err := recv(t, shut); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	rec := httptest.NewRecorder()
	tg.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Errorf("/readyz after Shutdown: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	tg.ServeHTTP(rec, httptest.NewRequest("GET", "/echo", nil))
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a request after Shutdown: %d", rec.Code)
	}
}

func TestShutdownDrainsWebSocket(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "held", "method": "GET", "path": "/busy?hold=true"})
	recv(t, tg.b.holdStarted)
	shut := make(chan error, 1)
	go func() { shut <- tg.Shutdown(context.Background()) }()
	listenerClosed(t, tg)
	sendFrame(t, c, map[string]any{"type": "req", "id": "late", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); *f.ID != "late" || f.Status != 503 {
		t.Errorf("a request while draining: %+v, want 503", f)
	}
	tg.b.releaseOne <- struct{}{}
	if f := mustReadFrame(t, c); *f.ID != "held" || f.Status != 200 {
		t.Errorf("the request in flight: %+v, want its 200", f)
	}
	wantClose(t, c, closeRestart)
	if err := recv(t, shut); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestShutdownGrace(t *testing.T) {
	tg := newTestGateway(t, settings{}, WithShutdownGrace(100*time.Millisecond))
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "s", "method": "GET", "path": "/slow", "timeout_ms": 60000})
	recv(t, tg.b.slowStarted)
	shut := make(chan error, 1)
	go func() { shut <- tg.Shutdown(context.Background()) }()
	_, err := readFrame(t, c)
	for err == nil {
		_, err = readFrame(t, c)
	}
	if s := websocket.CloseStatus(err); s != closeGoingAway {
		t.Errorf("closed with %v, want 1001", err)
	}
	if err := recv(t, shut); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown past its grace: %v, want context.DeadlineExceeded", err)
	}
	if err := recv(t, tg.b.slowDone); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's ctx: %v, want canceled", err)
	}
}

// selfSigned writes a certificate and key for 127.0.0.1 into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	tg := newTestGateway(t, settings{}, WithTLSFiles(certFile, keyFile))
	base := strings.Replace(tg.base, "http://", "https://", 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := client.Get(base + "/echo?x=1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("over TLS: %d", res.StatusCode)
	}
	c := dialWS(t, strings.Replace(tg.ws, "ws://", "wss://", 1), &websocket.DialOptions{HTTPClient: client})
	sendRaw(t, c, []byte(`{}`))
	mustReadFrame(t, c)
	if err := WithTLSFiles(certFile, "").apply(&options{}); err == nil {
		t.Error("WithTLSFiles without a key: no error")
	}
}

// TestChunkedBody: a chunked body is bounded and typed like any other;
// an empty one needs no type.
func TestChunkedBody(t *testing.T) {
	tg := newTestGateway(t, settings{maxBody: 64})
	for _, tc := range []struct {
		name, body, ct string
		status         int
	}{
		{"empty, no type", "", "", 200},
		{"json", `{"a":"b"}`, "application/json", 200},
		{"no type", `{"a":"b"}`, "", 415},
		{"too large", `{"a":"` + strings.Repeat("x", 100) + `"}`, "application/json", 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() { io.WriteString(pw, tc.body); pw.Close() }()
			req, _ := http.NewRequestWithContext(t.Context(), "POST", tg.base+"/echo", pr)
			req.ContentLength = -1
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("%d, want %d", res.StatusCode, tc.status)
			}
		})
	}
}

// TestContentTypes: JSON bodies are taken with application/json in any
// case and with parameters, and +json types; others are a 415.
func TestContentTypes(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                true,
		"Application/JSON":                true,
		"application/json; charset=utf-8": true,
		"application/problem+json":        true,
		"application/jsonx":               false,
		"application/json/x":              false,
		"text/plain":                      false,
		"":                                false,
	} {
		if got := checkContentType(ct) == nil; got != want {
			t.Errorf("%q taken: %v, want %v", ct, got, want)
		}
	}
}

// TestHeaderKeysCanonical: the request headers the gateway reads by
// their key in the map (header, not Header.Get) are named in canonical
// form, as net/http stores them.
func TestHeaderKeysCanonical(t *testing.T) {
	for _, k := range []string{"X-Request-Id", "Origin", "Authorization", TimeoutHeader, "Content-Type"} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}

// TestLowerCaseHeaders: headers a client writes in lower case are read
// (net/http stores them canonical): the request id is kept, the type
// taken, a bad timeout hint refused.
func TestLowerCaseHeaders(t *testing.T) {
	tg := newTestGateway(t, settings{})
	send := func(extra string) string {
		c, err := net.Dial("tcp", strings.TrimPrefix(tg.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"n":1}`
		req := "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-request-id: my-id-1\r\n" + extra +
			"content-length: " + strconv.Itoa(len(body)) + "\r\nconnection: close\r\n\r\n" + body
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(guard))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		return fmt.Sprintf("%d %s", res.StatusCode, res.Header.Get("X-Request-Id"))
	}
	if got := send(""); got != "200 my-id-1" {
		t.Errorf("lower-case headers: %s, want 200 my-id-1", got)
	}
	if got := send("x-request-timeout-ms: soon\r\n"); got != "400 my-id-1" {
		t.Errorf("a lower-case bad timeout hint: %s, want 400 my-id-1", got)
	}
}
