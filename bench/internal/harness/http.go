package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// httpBody and httpReply are the JSON of the HTTP/1.1 contender:
// POST /add {"a":1,"b":2} answers {"r":3}.
type httpBody struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type httpReply struct {
	R float64 `json:"r"`
}

// httpPoolSize is the keep-alive pool's idle limit: at least the most
// callers the comparison runs, so that no connection a caller releases is
// closed for want of room (net/http's default keeps 2 idle per host and
// would churn connections above 2 callers).
const httpPoolSize = 1024

// httpContender is HTTP/1.1 as its users run it: net/http's client with a
// keep-alive pool of the default transport's shape (no limit on
// connections per host), its idle limit raised to the callers.
var httpContender = Contender{
	Name:  "http",
	Title: "HTTP/1.1 JSON",
	Note: "net/http server and client, POST /add with a JSON body over a keep-alive pool, the shape of net/http's DefaultTransport " +
		"(no MaxConnsPerHost limit, so each concurrent caller gets a connection of its own) with MaxIdleConns and MaxIdleConnsPerHost " +
		"raised to 1,024 so that no connection is closed between calls; HTTP/1.1 cannot multiplex, so this is how its users run " +
		"concurrent calls (https://pkg.go.dev/net/http#Transport)",
	Hops:  true,
	Serve: serveHTTP,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		return &httpClient{c: &http.Client{Transport: pooledTransport()}, url: "http://" + addr + "/add"}, nil
	},
}

// pooledTransport is the headline HTTP/1.1 client's keep-alive pool, the
// shape of net/http's DefaultTransport with room for every caller's
// connection to stay idle between calls.
func pooledTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        httpPoolSize,
		MaxIdleConnsPerHost: httpPoolSize,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// httpOneConnContender is the extra row: the same server and client on
// one connection (MaxConnsPerHost: 1), so callers queue for it. It shows
// what HTTP/1.1's lack of multiplexing costs when a client does not pool.
var httpOneConnContender = Contender{
	Name:  "http-1conn",
	Title: "HTTP/1.1 JSON, one connection (extra)",
	Extra: true,
	Note: "extra row: the same server and client limited to one connection (http.Transport{MaxConnsPerHost: 1}); HTTP/1.1 cannot " +
		"multiplex, so callers queue for it: what not pooling costs",
	Serve: serveHTTP,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		t := &http.Transport{
			MaxConnsPerHost:     1,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
		}
		return &httpClient{c: &http.Client{Transport: t}, url: "http://" + addr + "/add"}, nil
	},
}

// serveHTTP serves POST /add with net/http.
func serveHTTP(listen string, h Handler, _ ServeOptions) (Server, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add", func(w http.ResponseWriter, r *http.Request) {
		var in httpBody
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := h(r.Context(), in.A, in.B)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(httpReply{out})
	})
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(l)
	return &httpServer{s: s, addr: l.Addr().String()}, nil
}

type httpServer struct {
	s    *http.Server
	addr string
}

func (s *httpServer) Addr() string { return s.addr }

func (s *httpServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.s.Shutdown(ctx)
}

type httpClient struct {
	c   *http.Client
	url string
}

func (c *httpClient) Call(ctx context.Context, a, b float64) (float64, error) {
	body, err := json.Marshal(httpBody{a, b})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("http: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	var out httpReply
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, err
	}
	return out.R, nil
}

func (c *httpClient) Close() error {
	c.c.CloseIdleConnections()
	return nil
}
