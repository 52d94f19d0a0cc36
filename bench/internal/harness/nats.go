package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	wnats "github.com/wizardmesh/wizard/runtime/nats"
	"google.golang.org/protobuf/proto"
)

// natsSubject is the subject of the NATS micro service.
const natsSubject = "bench.add"

// startBroker starts a nats-server on 127.0.0.1 (any port) in this
// process: the server process of a NATS contender holds the broker and
// the service.
func startBroker() (*natsserver.Server, error) {
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats-server: not ready in 10s")
	}
	return s, nil
}

var natsMicroContender = Contender{
	Name:  "nats-micro",
	Title: "NATS micro",
	Note: "request/reply through a nats-server (github.com/nats-io/nats-server/v2, embedded in the server process, on 127.0.0.1): a nats.go " +
		"micro service on its own broker connection answers " + natsSubject + "; the client is one nats.go connection calling " +
		"RequestWithContext; protobuf AddRequest/AddResponse as the payload. Every call crosses the broker twice",
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
		br, err := startBroker()
		if err != nil {
			return nil, err
		}
		nc, err := natsgo.Connect(br.ClientURL())
		if err != nil {
			br.Shutdown()
			return nil, err
		}
		svc, err := micro.AddService(nc, micro.Config{
			Name: "bench", Version: "1.0.0",
			Endpoint: &micro.EndpointConfig{Subject: natsSubject, Handler: micro.HandlerFunc(func(r micro.Request) {
				var in mathv1.AddRequest
				if err := proto.Unmarshal(r.Data(), &in); err != nil {
					r.Error("400", err.Error(), nil)
					return
				}
				sum, err := h(context.Background(), in.GetA(), in.GetB())
				if err != nil {
					r.Error("500", err.Error(), nil)
					return
				}
				out, _ := proto.Marshal(&mathv1.AddResponse{Sum: sum})
				r.Respond(out)
			})},
		})
		if err == nil {
			// The service's subscription is sent asynchronously: until the
			// broker has it, a request finds no responders.
			err = nc.FlushTimeout(10 * time.Second)
		}
		if err != nil {
			nc.Close()
			br.Shutdown()
			return nil, err
		}
		return &natsServer{br: br, addr: br.ClientURL(), close: func() { svc.Stop(); nc.Close() }}, nil
	},
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		nc, err := natsgo.Connect(addr)
		if err != nil {
			return nil, err
		}
		return natsClient{nc}, nil
	},
}

var wizardNATSContender = Contender{
	Name:  "wizard-nats",
	Title: "wizard NATS",
	Note: "runtime + runtime/nats through the same kind of nats-server (embedded in the server process, on 127.0.0.1): the server node " +
		"listens on a subject of its own, the calling node reaches it through runtime.StaticPeers with that subject; typed client, proto codec. " +
		"Every call crosses the broker twice, as NATS micro's do",
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
		br, err := startBroker()
		if err != nil {
			return nil, err
		}
		tr, err := wnats.New(wnats.WithURL(br.ClientURL()))
		if err != nil {
			br.Shutdown()
			return nil, err
		}
		node, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen(":0"))
		if err != nil {
			br.Shutdown()
			return nil, err
		}
		add := func(ctx context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error) {
			r, err := h(ctx, req.GetA(), req.GetB())
			if err != nil {
				return nil, err
			}
			return &mathv1.AddResponse{Sum: r}, nil
		}
		if err := node.Add(wizardPattern, runtime.NewUnaryHandler(add)); err != nil {
			node.Close()
			br.Shutdown()
			return nil, err
		}
		// The address names the broker and the node's subject:
		// "nats://127.0.0.1:P/wizard.node.<random>".
		return &natsServer{br: br, addr: br.ClientURL() + "/" + node.Addr(), close: func() { wizardServer{node}.Close() }}, nil
	},
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		url, subject, err := splitNATSAddr(addr)
		if err != nil {
			return nil, err
		}
		newTransport := func() (runtime.Transport, error) { return wnats.New(wnats.WithURL(url)) }
		return dialWizard(ctx, "wizard NATS", newTransport, []string{subject})
	},
}

type natsServer struct {
	br    *natsserver.Server
	addr  string
	close func()
}

func (s *natsServer) Addr() string { return s.addr }

func (s *natsServer) Close() error {
	s.close()
	s.br.Shutdown()
	return nil
}

type natsClient struct{ nc *natsgo.Conn }

func (c natsClient) Call(ctx context.Context, a, b float64) (float64, error) {
	data, err := proto.Marshal(&mathv1.AddRequest{A: a, B: b})
	if err != nil {
		return 0, err
	}
	m, err := c.nc.RequestWithContext(ctx, natsSubject, data)
	if err != nil {
		return 0, err
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return 0, fmt.Errorf("nats micro: %s %s", code, m.Header.Get(micro.ErrorHeader))
	}
	var out mathv1.AddResponse
	if err := proto.Unmarshal(m.Data, &out); err != nil {
		return 0, err
	}
	return out.GetSum(), nil
}

func (c natsClient) Close() error {
	c.nc.Close()
	return nil
}

// splitNATSAddr splits the wizard NATS server's address,
// "nats://host:port/subject", into the broker's URL and the subject.
func splitNATSAddr(addr string) (url, subject string, err error) {
	rest, ok := strings.CutPrefix(addr, "nats://")
	i := strings.LastIndex(rest, "/")
	if !ok || i <= 0 || i == len(rest)-1 {
		return "", "", fmt.Errorf("wizard NATS: address %q is not nats://host:port/subject", addr)
	}
	return "nats://" + rest[:i], rest[i+1:], nil
}
