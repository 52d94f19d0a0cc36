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

var httpContender = Contender{
	Name:  "http",
	Title: "HTTP/1.1 JSON",
	Note: "net/http server and client, POST /add with a JSON body; HTTP/1.1 cannot multiplex, so \"one connection\" is " +
		"http.Transport{MaxConnsPerHost: 1} and callers queue for it (the two-hop and cluster scenarios use a pool of keep-alive connections instead)",
	Hops: true,
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
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
	},
	Dial: func(ctx context.Context, addr string, o DialOptions) (Client, error) {
		t := &http.Transport{
			MaxConnsPerHost:     1,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		}
		if o.Pooled {
			t.MaxConnsPerHost = 0
			t.MaxIdleConns = 1024
			t.MaxIdleConnsPerHost = 1024
		}
		return &httpClient{c: &http.Client{Transport: t}, url: "http://" + addr + "/add"}, nil
	},
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
