package gwbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
	wizard "github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// echoMsg is the message every contender echoes.
type echoMsg struct {
	Name string `json:"name"`
	N    int64  `json:"n"`
}

const echoName = "ada"

// check checks that an echo of n came back.
func (m echoMsg) check(n int64) error {
	if m.Name != echoName || m.N != n {
		return fmt.Errorf("echo of n=%d answered %+v", n, m)
	}
	return nil
}

// caller makes echo calls over one connection, one at a time.
type caller interface {
	call(ctx context.Context, n int64) error
	close()
}

// httpCaller is one HTTP/1.1 keep-alive connection: POST url with the
// JSON body, an optional bearer token.
type httpCaller struct {
	c     *http.Client
	url   string
	token string
	body  bytes.Buffer
}

func newHTTPCaller(url, token string) *httpCaller {
	t := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true, IdleConnTimeout: time.Minute}
	return &httpCaller{c: &http.Client{Transport: t}, url: url, token: token}
}

func (h *httpCaller) call(ctx context.Context, n int64) error {
	h.body.Reset()
	h.body.WriteString(`{"name":"` + echoName + `","n":` + strconv.FormatInt(n, 10) + `}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(h.body.Bytes()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	res, err := h.c.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", res.Status, bytes.TrimSpace(data))
	}
	var m echoMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("answer %q: %w", data, err)
	}
	return m.check(n)
}

func (h *httpCaller) close() { h.c.CloseIdleConnections() }

// wsCaller is one WebSocket connection to the gateway, authenticated by
// an auth frame when it has a token, sending req frames one at a time.
type wsCaller struct {
	c   *websocket.Conn
	buf bytes.Buffer
}

// wsReply is the part of a gateway frame the callers check.
type wsReply struct {
	Type   string          `json:"type"`
	ID     *string         `json:"id"`
	OK     bool            `json:"ok"`
	Status int             `json:"status"`
	Body   echoMsg         `json:"body"`
	Error  json.RawMessage `json:"error"`
}

// dialWS connects to url and, when token is set, authenticates with an
// auth frame and waits for its answer.
func dialWS(ctx context.Context, url, token string) (*wsCaller, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, url, nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	w := &wsCaller{c: c}
	if token == "" {
		return w, nil
	}
	frame, _ := json.Marshal(map[string]string{"type": "auth", "id": "auth", "token": token})
	if err := c.Write(dctx, websocket.MessageText, frame); err != nil {
		c.CloseNow()
		return nil, err
	}
	r, err := w.read(dctx)
	if err != nil {
		c.CloseNow()
		return nil, err
	}
	if r.Type != "auth" || !r.OK {
		c.CloseNow()
		return nil, fmt.Errorf("auth frame answered type %q ok %v: %s", r.Type, r.OK, r.Error)
	}
	return w, nil
}

func (w *wsCaller) read(ctx context.Context) (wsReply, error) {
	_, data, err := w.c.Read(ctx)
	if err != nil {
		return wsReply{}, err
	}
	var r wsReply
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("frame %q: %w", data, err)
	}
	return r, nil
}

func (w *wsCaller) call(ctx context.Context, n int64) error {
	id := strconv.FormatInt(n, 10)
	w.buf.Reset()
	w.buf.WriteString(`{"type":"req","id":"` + id + `","method":"POST","path":"/echo","body":{"name":"` + echoName + `","n":` + id + `}}`)
	if err := w.c.Write(ctx, websocket.MessageText, w.buf.Bytes()); err != nil {
		return err
	}
	r, err := w.read(ctx)
	if err != nil {
		return err
	}
	if r.ID == nil || *r.ID != id {
		return fmt.Errorf("reply to id %s has id %v", id, r.ID)
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("status %d: %s", r.Status, r.Error)
	}
	return r.Body.check(n)
}

func (w *wsCaller) close() { w.c.Close(websocket.StatusNormalClosure, "") }

// wizardCaller calls the echo node directly from a wizard node over TCP:
// the baseline of the gateway's overhead.
type wizardCaller struct {
	node *wizard.Node
}

func dialWizard(ctx context.Context, addr string) (*wizardCaller, error) {
	t, err := tcp.New()
	if err != nil {
		return nil, err
	}
	node, err := wizard.New(wizard.WithTransport(t), wizard.WithDiscovery(wizard.StaticPeers(addr)))
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := node.WaitFor(wctx, echoPattern); err != nil {
		node.Close()
		return nil, err
	}
	return &wizardCaller{node: node}, nil
}

func (w *wizardCaller) call(ctx context.Context, n int64) error {
	msg := []byte(`{"name":"` + echoName + `","n":` + strconv.FormatInt(n, 10) + `}`)
	res, err := w.node.Act(ctx, echoPattern, msg)
	if err != nil {
		return err
	}
	var m echoMsg
	if err := res.Decode(&m); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	return m.check(n)
}

func (w *wizardCaller) close() { w.node.Close() }
