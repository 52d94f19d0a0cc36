package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/wizardmesh/wizard/gateway"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

// A gateway in front of a node that serves a pattern itself: a route
// maps GET /hello/{name} to role:greet,cmd:hello, and the path's
// variable joins the message.
func Example() {
	node, err := runtime.New(runtime.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer node.Close()
	node.Add("role:greet,cmd:hello", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"hello": req.Get("name")}, nil
	})
	cfg, err := config.Parse("gateway.yaml", []byte(`
routes:
  - {name: hello, method: GET, path: "/hello/{name}", pattern: "role:greet,cmd:hello"}
`))
	if err != nil {
		panic(err)
	}
	g, err := gateway.New(node, cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()

	for _, path := range []string{"/hello/ada", "/goodbye"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			var e struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal(body, &e)
			fmt.Println(res.StatusCode, e.Error.Code, e.Error.Message)
			continue
		}
		fmt.Println(res.StatusCode, string(body))
	}
	// Output:
	// 200 {"hello":"ada"}
	// 404 not_found no route for GET /goodbye
}
