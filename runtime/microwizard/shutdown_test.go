package microwizard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// TestShutdownAnswersOverload: while a node shuts down, a request on an
// open MicroWizard connection is answered retry_later_err_overload, as a
// closing MicroWizard node answers, and the running call still ends
// with its result.
func TestShutdownAnswersOverload(t *testing.T) {
	leak.Check(t)
	n := newNode(t, newTransport(t))
	release, started := make(chan struct{}), make(chan struct{}, 1)
	mustAdd(t, n, "role:go,cmd:block", func(ctx context.Context, req runtime.Request) (any, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	})
	mustAdd(t, n, "role:go,cmd:quick", func(ctx context.Context, req runtime.Request) (any, error) { return "quick", nil })
	c, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	answers := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var a map[string]any
			if json.Unmarshal(sc.Bytes(), &a) == nil {
				answers <- a
			}
		}
		close(answers)
	}()
	send := func(id, cmd string) {
		c.Write([]byte(`{"id":"` + id + `","k":"a","sync":true,"args":{"role":"go","cmd":"` + cmd + `"}}` + "\n"))
	}
	send("first", "block")
	testwait.Recv(t, started)
	shut := make(chan error, 1)
	go func() { shut <- n.Shutdown(context.Background()) }()
	i := 0
	testwait.Until(t, "a request during the shutdown is answered retry_later_err_overload", func() bool {
		i++
		send("probe"+strconv.Itoa(i), "quick")
		a, ok := <-answers
		if !ok {
			t.Fatal("the connection ended before the running call did")
		}
		if a["id"] == "first" {
			t.Fatalf("the running call answered early: %v", a)
		}
		e, _ := a["error"].(map[string]any)
		return e != nil && e["message"] == "retry_later_err_overload" // else served before the shutdown began
	})
	close(release)
	for a := range answers {
		if a["id"] == "first" {
			if a["res"] != "done" {
				t.Errorf("the running call answered %v, want res done", a)
			}
			break
		}
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
