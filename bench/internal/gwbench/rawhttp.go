package gwbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The load generator's HTTP clients: -http-client picks one for every
// contender alike.
const (
	// ClientRaw is one keep-alive HTTP/1.1 connection written and read
	// by hand: a request in one write, the answer read from a buffer, no
	// goroutine but the caller's (net/http's Transport hands every
	// request to a writer and a reader goroutine of its connection), so
	// that the load generator, which shares the machine's two cores with
	// the gateways, takes less of them.
	ClientRaw = "raw"
	// ClientNetHTTP is net/http's Client, one connection per caller.
	ClientNetHTTP = "net/http"
)

// rawHTTPCaller is [ClientRaw]: POST path with the JSON body and an
// optional bearer token over one connection, redialled after an error.
type rawHTTPCaller struct {
	addr string // host:port
	head []byte // the request up to the Content-Length value
	conn net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

func newRawHTTPCaller(rawURL, token string) (*rawHTTPCaller, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("gwbench: raw HTTP client: %q is not an http:// URL", rawURL)
	}
	head := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	return &rawHTTPCaller{addr: u.Host, head: []byte(head + "Content-Length: ")}, nil
}

func (h *rawHTTPCaller) call(ctx context.Context, n int64) error {
	body := strconv.AppendInt(append(h.body[:0], `{"name":"`+echoName+`","n":`...), n, 10)
	body = append(body, '}')
	h.body = body
	req := append(h.req[:0], h.head...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(append(req, "\r\n\r\n"...), body...)
	h.req = req
	var (
		status string
		data   []byte
		err    error
	)
	// A kept connection the server closed while it was idle (Node.js
	// closes them after 5 s: the comparison's contenders wait while the
	// others run) fails before any answer: the call goes again on a new
	// one, as net/http's Transport does when it sees the idle connection
	// close.
	for try := 0; try < 2; try++ {
		reused := h.conn != nil
		if !reused {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", h.addr)
			if err != nil {
				return err
			}
			h.conn, h.br = c, bufio.NewReaderSize(c, 4096)
		}
		dl, _ := ctx.Deadline() // zero: none
		h.conn.SetDeadline(dl)
		var keep, answered bool
		status, data, keep, answered, err = h.roundTrip(req)
		if err != nil || !keep {
			h.close()
		}
		if err == nil || answered || !reused || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	if !strings.HasPrefix(status, "200 ") {
		return fmt.Errorf("%s: %s", status, bytes.TrimSpace(data))
	}
	var m echoMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("answer %q: %w", data, err)
	}
	return m.check(n)
}

// roundTrip writes req and reads the answer: its status ("200 OK"), its
// body (Content-Length or chunked), and whether the connection stays;
// answered reports that a byte of the answer came (when err is not nil:
// whether the server had begun answering).
func (h *rawHTTPCaller) roundTrip(req []byte) (status string, body []byte, keep, answered bool, err error) {
	if _, err := h.conn.Write(req); err != nil {
		return "", nil, false, false, err
	}
	if _, err := h.br.Peek(1); err != nil {
		return "", nil, false, false, err
	}
	status, body, keep, err = h.answer()
	return status, body, keep, true, err
}

// answer reads an answer that has begun.
func (h *rawHTTPCaller) answer() (status string, body []byte, keep bool, err error) {
	line, err := h.line()
	if err != nil {
		return "", nil, false, err
	}
	proto, status, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") || len(status) < 3 {
		return "", nil, false, fmt.Errorf("gwbench: raw HTTP client: status line %q", line)
	}
	keep = proto == "HTTP/1.1"
	length, chunked := -1, false
	for {
		l, err := h.line()
		if err != nil {
			return "", nil, false, err
		}
		if l == "" {
			break
		}
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch {
		case strings.EqualFold(k, "Content-Length"):
			if length, err = strconv.Atoi(v); err != nil || length < 0 {
				return "", nil, false, fmt.Errorf("gwbench: raw HTTP client: Content-Length %q", v)
			}
		case strings.EqualFold(k, "Transfer-Encoding"):
			chunked = strings.EqualFold(v, "chunked")
		case strings.EqualFold(k, "Connection"):
			if strings.EqualFold(v, "close") {
				keep = false
			}
		}
	}
	switch {
	case chunked:
		body, err = h.chunked()
	case length >= 0:
		body = make([]byte, length)
		_, err = io.ReadFull(h.br, body)
	default:
		body, err = io.ReadAll(h.br)
		keep = false
	}
	return status, body, keep, err
}

// line reads one header line without its CRLF.
func (h *rawHTTPCaller) line() (string, error) {
	b, err := h.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("gwbench: raw HTTP client: a header line longer than 4 KiB")
		}
		return "", err
	}
	return string(bytes.TrimRight(b, "\r\n")), nil
}

// chunked reads a chunked body and its (empty) trailer.
func (h *rawHTTPCaller) chunked() ([]byte, error) {
	var body []byte
	for {
		l, err := h.line()
		if err != nil {
			return nil, err
		}
		size, _, _ := strings.Cut(l, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("gwbench: raw HTTP client: chunk size %q", l)
		}
		if n == 0 {
			for { // the trailer, up to its blank line
				if l, err := h.line(); err != nil || l == "" {
					return body, err
				}
			}
		}
		start := len(body)
		body = append(body, make([]byte, n)...)
		if _, err := io.ReadFull(h.br, body[start:]); err != nil {
			return nil, err
		}
		if l, err := h.line(); err != nil || l != "" {
			return nil, fmt.Errorf("gwbench: raw HTTP client: no CRLF after a chunk: %q %v", l, err)
		}
	}
}

func (h *rawHTTPCaller) close() {
	if h.conn != nil {
		h.conn.Close()
		h.conn, h.br = nil, nil
	}
}
